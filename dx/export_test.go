package dx

// AckQueueLen is how many activity acks wait for the one in flight (ackbatch.go).
func AckQueueLen(rt *Runtime) int {
	rt.acks.mu.Lock()
	defer rt.acks.mu.Unlock()
	return len(rt.acks.queue)
}
