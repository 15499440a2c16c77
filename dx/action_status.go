package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// customStatus: a change of the instance's custom status (SetCustomStatus, ResetCustomStatus).
// Recorded as CustomStatusUpdated (nil status: reset); sends nothing (the ack's history carries
// it); positional: a replay matches it by kind only and tolerates code that no longer sets it
// (duroxide). Continue-as-new carries the last status to the next execution.
type customStatus struct {
	actionBase
	noKindRecords
	status *string
}

func (s *customStatus) event() provider.EventKind {
	return provider.CustomStatusUpdatedEvent{Status: s.status}
}

func (s *customStatus) replays(k provider.EventKind) bool {
	_, ok := k.(provider.CustomStatusUpdatedEvent)
	return ok
}

func (s *customStatus) describe() string { return describeCode(provider.Event{Kind: s.event()}) }

func (customStatus) what() string { return "custom status updates" }

func (customStatus) owns(a action) bool { _, ok := a.(*customStatus); return ok }

func (customStatus) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	if _, ok := ev.Kind.(provider.CustomStatusUpdatedEvent); ok {
		return true, false, e.replaySchedule(ev, true)
	}
	return false, false, nil
}

// lastCustomStatus is the custom status at the end of the execution, carried to the next one.
func (e *engine) lastCustomStatus() *string {
	var s *string
	for _, ev := range e.allEvents() {
		switch k := ev.Kind.(type) {
		case provider.OrchestrationStartedEvent:
			if k.InitialCustomStatus != nil {
				s = k.InitialCustomStatus
			}
		case provider.CustomStatusUpdatedEvent:
			s = k.Status
		}
	}
	return s
}
