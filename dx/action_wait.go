package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// eventWait: a wait for an external event (WaitEvent). Recorded as ExternalSubscribed; sends
// nothing; completed by an ExternalEvent of its name (Client.RaiseEvent's ExternalRaised): the Nth
// active wait for a name gets the Nth arrival of that name, and an event is delivered only to a wait
// that exists at that point of the history (one raised earlier is dropped, as in duroxide, and
// noted in lost for a warning). The code's cancellation is recorded as ExternalSubscribedCancelled
// (dropped_future); a wait still open when the execution ends gets one with reason
// orchestration_terminal, before the terminal event.
type eventWait struct {
	actionBase
	noKindRecords
	name string
}

// waitState is the engine's state of event waits: subscriptions per name in binding order,
// arrivals per name, subscriptions with a cancellation record, and this turn's new events that no
// wait received (by name, logged after the ack).
type waitState struct {
	subs      map[string][]*eventWait
	arrivals  map[string][]string
	cancelled map[uint64]bool
	lost      []string
}

func newWaitState() waitState {
	return waitState{subs: map[string][]*eventWait{}, arrivals: map[string][]string{}, cancelled: map[uint64]bool{}}
}

func (w *eventWait) event() provider.EventKind { return provider.ExternalSubscribedEvent{Name: w.name} }

func (w *eventWait) replays(k provider.EventKind) bool {
	s, ok := k.(provider.ExternalSubscribedEvent)
	return ok && w.name == s.Name
}

func (w *eventWait) describe() string { return describeCode(provider.Event{Kind: w.event()}) }

func (w *eventWait) bound(e *engine) { e.waits.subs[w.name] = append(e.waits.subs[w.name], w) }

// arrival returns the event for a bound wait: the Nth active wait of a name gets the Nth arrival.
func (w *eventWait) arrival(e *engine) (string, bool) {
	s := &e.waits
	if w.scheduleID == 0 || s.cancelled[w.scheduleID] {
		return "", false
	}
	idx := 0
	for _, o := range s.subs[w.name] {
		if o == w {
			break
		}
		if !s.cancelled[o.scheduleID] {
			idx++
		}
	}
	if arr := s.arrivals[w.name]; idx < len(arr) {
		return arr[idx], true
	}
	return "", false
}

// pendingSlot reports whether a wait for name is waiting for an arrival.
func (s *waitState) pendingSlot(name string) bool {
	active := 0
	for _, w := range s.subs[name] {
		if !s.cancelled[w.scheduleID] {
			active++
		}
	}
	return active > len(s.arrivals[name])
}

// commit marks the waits the code dropped this turn, once the turn is stored: from the next turn
// on they stop holding an arrival slot. A replay marks them where it applies the record, which a
// kept engine never does for the records it made itself. Not earlier: within the turn that drops
// it, duroxide still counts it (an event in the same batch goes to it).
func (s *waitState) commit(delta []provider.Event) {
	for i := range delta {
		if _, ok := delta[i].Kind.(provider.ExternalSubscribedCancelledEvent); ok && delta[i].SourceEventID != nil {
			s.cancelled[*delta[i].SourceEventID] = true
		}
	}
}

func (eventWait) what() string { return "event waits" }

func (eventWait) owns(a action) bool { _, ok := a.(*eventWait); return ok }

func (eventWait) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch k := ev.Kind.(type) {
	case provider.ExternalSubscribedEvent:
		return true, false, e.replaySchedule(ev, false)
	case provider.ExternalSubscribedCancelledEvent:
		if ev.SourceEventID != nil {
			e.waits.cancelled[*ev.SourceEventID] = true
		}
		return true, false, nil
	case provider.ExternalEventEvent:
		// Delivered only to a wait that exists at this point of the history; an event raised
		// before the code waited stays in history but is never delivered (duroxide). A new one is
		// noted, so that the runtime warns about it once its turn is stored.
		if e.waits.pendingSlot(k.Name) {
			e.waits.arrivals[k.Name] = append(e.waits.arrivals[k.Name], k.Data)
			return true, true, nil
		}
		if !e.replaying {
			e.waits.lost = append(e.waits.lost, k.Name)
		}
		return true, false, nil
	}
	return false, false, nil
}

func (eventWait) completion(m provider.WorkItemKind) (completion, bool) {
	if k, ok := m.(provider.ExternalRaised); ok {
		return completion{event: provider.ExternalEventEvent{Name: k.Name, Data: k.Data}}, true
	}
	return completion{}, false
}

func (eventWait) cancelRecord(reason string) provider.EventKind {
	return provider.ExternalSubscribedCancelledEvent{Reason: reason}
}

func (eventWait) recorded(k provider.EventKind) (string, bool) {
	c, ok := k.(provider.ExternalSubscribedCancelledEvent)
	return c.Reason, ok
}

// end cancels the waits still open when the execution ends, before the terminal event.
func (eventWait) end(e *engine, _ turnResult, before bool, _ *ackItems) {
	if !before {
		return
	}
	for _, id := range openWaits(e.allEvents()) {
		src := id
		e.record(e.newEvent(&src, provider.ExternalSubscribedCancelledEvent{Reason: "orchestration_terminal"}))
	}
}

// openWaits are the waits of events that no arrival answered and nothing cancelled, as duroxide
// computes them from the history alone: an arrival answers the oldest wait of its name pending at
// its point of the history.
func openWaits(events []provider.Event) []uint64 {
	closed := map[uint64]bool{}
	pending := map[string][]uint64{}
	for _, ev := range events {
		switch k := ev.Kind.(type) {
		case provider.ExternalSubscribedEvent:
			pending[k.Name] = append(pending[k.Name], ev.EventID)
		case provider.ExternalEventEvent:
			if q := pending[k.Name]; len(q) > 0 {
				closed[q[0]] = true
				pending[k.Name] = q[1:]
			}
		case provider.ExternalSubscribedCancelledEvent:
			if src := ev.SourceEventID; src != nil {
				closed[*src] = true
				for n, q := range pending {
					for i, id := range q {
						if id == *src {
							pending[n] = append(q[:i:i], q[i+1:]...)
							break
						}
					}
				}
			}
		}
	}
	var open []uint64
	for _, ev := range events {
		if _, ok := ev.Kind.(provider.ExternalSubscribedEvent); ok && !closed[ev.EventID] {
			open = append(open, ev.EventID)
		}
	}
	return open
}
