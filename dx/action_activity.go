package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// activity: a call of an activity (Call, Activity.Call, and the builtins NewGUID, UtcNow,
// KVFromInstance). Recorded as ActivityScheduled; sent as ActivityExecute to the workers in a turn
// that goes on (a turn that ends the execution sends no new work); completed by ActivityCompleted
// or ActivityFailed (the worker's messages of the same names). The code's cancellation is recorded
// as ActivityCancelRequested (dropped_future) and steals the activity's lock (the ack's cancelled
// activities); when the execution ends, activities still in flight are cancelled the same way,
// recorded after the terminal event.
type activity struct {
	actionBase
	name, input    string
	sessionID, tag *string
}

func (a *activity) event() provider.EventKind {
	return provider.ActivityScheduledEvent{Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}
}

func (a *activity) replays(k provider.EventKind) bool {
	s, ok := k.(provider.ActivityScheduledEvent)
	return ok && a.name == s.Name && a.input == s.Input && eqPtr(a.sessionID, s.SessionID) && eqPtr(a.tag, s.Tag)
}

func (a *activity) describe() string { return describeCode(provider.Event{Kind: a.event()}) }

func (a *activity) send(e *engine, r turnResult, out *ackItems) {
	if r == turnContinue {
		out.worker = append(out.worker, provider.WorkItem{Kind: provider.ActivityExecute{Instance: e.instance, ExecutionID: e.executionID,
			ID: a.scheduleID, Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}})
	}
}

func (a *activity) dropped(e *engine, out *ackItems) {
	out.cancelled = append(out.cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: a.scheduleID})
}

func (activity) what() string { return "activities" }

func (activity) owns(a action) bool { _, ok := a.(*activity); return ok }

func (activity) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		return true, false, e.replaySchedule(ev, false)
	case provider.ActivityCompletedEvent:
		poll, d := e.deliver(ev, activity{}, k.Result, nil)
		return true, poll, d
	case provider.ActivityFailedEvent:
		poll, d := e.deliver(ev, activity{}, "", &k.Details)
		return true, poll, d
	case provider.ActivityCancelRequestedEvent:
		return true, false, nil
	}
	return false, false, nil
}

func (activity) label(k provider.EventKind) string {
	if _, ok := k.(provider.ActivityScheduledEvent); ok {
		return "activity"
	}
	return ""
}

var activityAnswers = []string{"ActivityCompleted", "ActivityFailed"}

func (activity) completion(m provider.WorkItemKind) (completion, bool) {
	switch k := m.(type) {
	case provider.ActivityCompleted:
		return completion{event: provider.ActivityCompletedEvent{Result: k.Result}, exec: k.ExecutionID, id: k.ID,
			label: "activity", answers: activityAnswers}, true
	case provider.ActivityFailed:
		return completion{event: provider.ActivityFailedEvent{Details: k.Details}, exec: k.ExecutionID, id: k.ID,
			label: "activity", answers: activityAnswers, failure: &k.Details}, true
	}
	return completion{}, false
}

func (activity) cancelRecord(reason string) provider.EventKind {
	return provider.ActivityCancelRequestedEvent{Reason: reason}
}

func (activity) recorded(k provider.EventKind) (string, bool) {
	c, ok := k.(provider.ActivityCancelRequestedEvent)
	return c.Reason, ok
}

// end cancels the activities still in flight when the execution ends, recorded after the terminal
// event with the reason naming how it ended.
func (activity) end(e *engine, r turnResult, before bool, out *ackItems) {
	if before {
		return
	}
	reason := "orchestration_terminal_failed"
	switch r {
	case turnCompleted:
		reason = "orchestration_terminal_completed"
	case turnContinuedAsNew:
		reason = "orchestration_terminal_continued_as_new"
	}
	for _, id := range openActivities(e.allEvents()) {
		src := id
		e.record(e.newEvent(&src, provider.ActivityCancelRequestedEvent{Reason: reason}))
		out.cancelled = append(out.cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: id})
	}
}

// openActivities are the activities of events nothing answered or cancelled yet.
func openActivities(events []provider.Event) []uint64 {
	closed := map[uint64]bool{}
	for _, ev := range events {
		switch ev.Kind.(type) {
		case provider.ActivityCompletedEvent, provider.ActivityFailedEvent, provider.ActivityCancelRequestedEvent:
			if ev.SourceEventID != nil {
				closed[*ev.SourceEventID] = true
			}
		}
	}
	var open []uint64
	for _, ev := range events {
		if _, ok := ev.Kind.(provider.ActivityScheduledEvent); ok && !closed[ev.EventID] {
			open = append(open, ev.EventID)
		}
	}
	return open
}
