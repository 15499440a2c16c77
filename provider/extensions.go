package provider

// StatusWatcher is an optional extension of Provider (duroxide's contract has no blocking status
// wait): it tells waiting clients when an instance's status may have changed, so that they need not
// poll. A provider implements it when it can push such changes cheaply, for example from the ack
// that finishes an instance. Clients must keep a slow polling fallback: a watch may miss a change
// (a dropped connection), it only makes waiting faster and cheaper.
type StatusWatcher interface {
	// WatchStatus returns a channel that receives a value after the instance finishes (Completed
	// or Failed) or its custom status changes, and a function that ends the watch. Wake-ups may
	// be spurious or merged; the channel is never closed. Many watches share the provider's
	// resources (one connection per process, not one per watch).
	WatchStatus(instance string) (changes <-chan struct{}, stop func())
}
