package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// dequeue: a read of the instance's persistent queue (Dequeue). Recorded as QueueSubscribed; sends
// nothing; completed by a QueueEventDelivered of its queue (Client.EnqueueEvent's QueueMessage):
// strict FIFO over the active dequeues of a queue, whatever order the code waits in. Messages that
// arrive before anyone dequeues are kept, and continue-as-new carries those no dequeue took
// (carried). The code's cancellation is recorded as QueueSubscriptionCancelled (dropped_future)
// and stops it taking messages from that turn on; a dequeue still open when the execution ends gets
// one with reason orchestration_terminal, before the terminal event.
type dequeue struct {
	actionBase
	noKindRecords
	name string
}

// queueState is the engine's state of dequeues: subscriptions in binding order, arrivals per queue,
// subscriptions cancelled, and those that took their message.
type queueState struct {
	subs      []*dequeue
	arrivals  map[string][]string
	cancelled map[uint64]bool
	resolved  map[uint64]bool
}

func newQueueState() queueState {
	return queueState{arrivals: map[string][]string{}, cancelled: map[uint64]bool{}, resolved: map[uint64]bool{}}
}

func (q *dequeue) event() provider.EventKind { return provider.QueueSubscribedEvent{Name: q.name} }

func (q *dequeue) replays(k provider.EventKind) bool {
	s, ok := k.(provider.QueueSubscribedEvent)
	return ok && q.name == s.Name
}

func (q *dequeue) describe() string { return describeCode(provider.Event{Kind: q.event()}) }

func (q *dequeue) bound(e *engine) { e.queue.subs = append(e.queue.subs, q) }

// withdrawn: a dequeue the code cancelled stops taking messages before the turn's new dequeues are
// bound.
func (q *dequeue) withdrawn(e *engine) {
	if q.scheduleID != 0 {
		e.queue.cancelled[q.scheduleID] = true
	}
}

// arrival returns the message for a bound dequeue: strict FIFO over the active dequeues of the
// queue.
func (q *dequeue) arrival(e *engine) (string, bool) {
	s := &e.queue
	if q.scheduleID == 0 || s.cancelled[q.scheduleID] || s.resolved[q.scheduleID] {
		return "", false
	}
	idx := 0
	for _, o := range s.subs {
		if o == q {
			break
		}
		if o.name == q.name && !s.cancelled[o.scheduleID] {
			idx++
		}
	}
	if arr := s.arrivals[q.name]; idx < len(arr) {
		s.resolved[q.scheduleID] = true
		return arr[idx], true
	}
	return "", false
}

func (dequeue) what() string { return "dequeues" }

func (dequeue) owns(a action) bool { _, ok := a.(*dequeue); return ok }

func (dequeue) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch k := ev.Kind.(type) {
	case provider.QueueSubscribedEvent:
		// A replayed dequeue may take a message that arrived earlier: poll.
		return true, true, e.replaySchedule(ev, false)
	case provider.QueueSubscriptionCancelledEvent:
		if ev.SourceEventID != nil {
			e.queue.cancelled[*ev.SourceEventID] = true
		}
		return true, false, nil
	case provider.QueueEventDeliveredEvent:
		e.queue.arrivals[k.Name] = append(e.queue.arrivals[k.Name], k.Data)
		return true, true, nil
	}
	return false, false, nil
}

func (dequeue) completion(m provider.WorkItemKind) (completion, bool) {
	if k, ok := m.(provider.QueueMessage); ok {
		return completion{event: provider.QueueEventDeliveredEvent{Name: k.Name, Data: k.Data}}, true
	}
	return completion{}, false
}

func (dequeue) cancelRecord(reason string) provider.EventKind {
	return provider.QueueSubscriptionCancelledEvent{Reason: reason}
}

func (dequeue) recorded(k provider.EventKind) (string, bool) {
	c, ok := k.(provider.QueueSubscriptionCancelledEvent)
	return c.Reason, ok
}

// end cancels the dequeues still open when the execution ends, before the terminal event.
func (dequeue) end(e *engine, _ turnResult, before bool, _ *ackItems) {
	if !before {
		return
	}
	for _, id := range openDequeues(e.allEvents()) {
		src := id
		e.record(e.newEvent(&src, provider.QueueSubscriptionCancelledEvent{Reason: "orchestration_terminal"}))
	}
}

// openDequeues are the dequeues of events not cancelled and beyond the messages of their queue
// (per queue, the oldest active dequeues take the messages).
func openDequeues(events []provider.Event) []uint64 {
	cancelled := map[uint64]bool{}
	arrivals := map[string]int{}
	for _, ev := range events {
		switch k := ev.Kind.(type) {
		case provider.QueueSubscriptionCancelledEvent:
			if ev.SourceEventID != nil {
				cancelled[*ev.SourceEventID] = true
			}
		case provider.QueueEventDeliveredEvent:
			arrivals[k.Name]++
		}
	}
	var open []uint64
	taken := map[string]int{}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueSubscribedEvent); ok && !cancelled[ev.EventID] {
			if taken[k.Name] < arrivals[k.Name] {
				taken[k.Name]++
			} else {
				open = append(open, ev.EventID)
			}
		}
	}
	return open
}

// carried are the queue messages no active dequeue took, in arrival order: continue-as-new carries
// them to the next execution.
func carried(events []provider.Event) []provider.CarriedEvent {
	cancelled := map[uint64]bool{}
	active := map[string]int{}
	for _, ev := range events {
		if _, ok := ev.Kind.(provider.QueueSubscriptionCancelledEvent); ok && ev.SourceEventID != nil {
			cancelled[*ev.SourceEventID] = true
		}
	}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueSubscribedEvent); ok && !cancelled[ev.EventID] {
			active[k.Name]++
		}
	}
	var out []provider.CarriedEvent
	consumed := map[string]int{}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueEventDeliveredEvent); ok {
			if consumed[k.Name] < active[k.Name] {
				consumed[k.Name]++
			} else {
				out = append(out, provider.CarriedEvent(k))
			}
		}
	}
	return out
}
