package dx

import (
	"fmt"

	"github.com/duroxide-go/dxredis/provider"
)

// subOrch: a sub-orchestration (CallSub, Orchestration.CallSub). Recorded as
// SubOrchestrationScheduled with the child's instance id as recorded ("sub::<event id>" unless the
// code gave one); sent as StartOrchestration with the parent link in a turn that goes on; completed
// by SubOrchestrationCompleted or SubOrchestrationFailed (the child's SubOrchCompleted/SubOrchFailed).
// A replay compares name and input and takes the recorded instance id. The code's cancellation is
// recorded as SubOrchestrationCancelRequested (dropped_future) and sends the child a CancelInstance;
// a cancelled parent cancels the children still running; a parent that completes, fails or continues
// as new leaves them running (duroxide).
type subOrch struct {
	actionBase
	name, input string
	instance    string  // as recorded; "" until a new one gets its automatic id
	version     *string // the child's version (nil: latest registered)
}

func (s *subOrch) event() provider.EventKind {
	return provider.SubOrchestrationScheduledEvent{Name: s.name, Instance: s.instance, Input: s.input}
}

func (s *subOrch) newWork(_ *engine, id uint64) bool {
	if s.instance == "" {
		s.instance = fmt.Sprintf("%s%d", subOrchAutoPrefix, id)
	}
	return true
}

func (s *subOrch) replays(k provider.EventKind) bool {
	c, ok := k.(provider.SubOrchestrationScheduledEvent)
	if ok = ok && s.name == c.Name && s.input == c.Input; ok {
		s.instance = c.Instance
	}
	return ok
}

func (s *subOrch) describe() string { return describeCode(provider.Event{Kind: s.event()}) }

func (s *subOrch) send(e *engine, r turnResult, out *ackItems) {
	if r != turnContinue {
		return
	}
	pi, pid, pex := e.instance, s.scheduleID, e.executionID
	out.orch = append(out.orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: childInstanceID(e.instance, s.instance),
		Orchestration: s.name, Input: s.input, Version: s.version, ParentInstance: &pi, ParentID: &pid,
		ParentExecutionID: &pex, ExecutionID: 1}})
}

func (s *subOrch) dropped(e *engine, out *ackItems) {
	out.dropCancels = append(out.dropCancels, provider.WorkItem{Kind: provider.CancelInstance{
		Instance: childInstanceID(e.instance, s.instance), Reason: "parent dropped sub-orchestration future"}})
}

func (subOrch) what() string { return "sub-orchestrations" }

func (subOrch) owns(a action) bool { _, ok := a.(*subOrch); return ok }

func (subOrch) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch k := ev.Kind.(type) {
	case provider.SubOrchestrationScheduledEvent:
		return true, false, e.replaySchedule(ev, false)
	case provider.SubOrchestrationCompletedEvent:
		poll, d := e.deliver(ev, subOrch{}, k.Result, nil)
		return true, poll, d
	case provider.SubOrchestrationFailedEvent:
		poll, d := e.deliver(ev, subOrch{}, "", &k.Details)
		return true, poll, d
	case provider.SubOrchestrationCancelRequestedEvent:
		return true, false, nil
	}
	return false, false, nil
}

func (subOrch) label(k provider.EventKind) string {
	if _, ok := k.(provider.SubOrchestrationScheduledEvent); ok {
		return "sub-orchestration"
	}
	return ""
}

var childAnswers = []string{"SubOrchestrationCompleted", "SubOrchestrationFailed"}

func (subOrch) completion(m provider.WorkItemKind) (completion, bool) {
	switch k := m.(type) {
	case provider.SubOrchCompleted:
		return completion{event: provider.SubOrchestrationCompletedEvent{Result: k.Result}, exec: k.ParentExecutionID, id: k.ParentID,
			label: "sub-orchestration", answers: childAnswers}, true
	case provider.SubOrchFailed:
		return completion{event: provider.SubOrchestrationFailedEvent{Details: k.Details}, exec: k.ParentExecutionID, id: k.ParentID,
			label: "sub-orchestration", answers: childAnswers, failure: &k.Details}, true
	}
	return completion{}, false
}

func (subOrch) cancelRecord(reason string) provider.EventKind {
	return provider.SubOrchestrationCancelRequestedEvent{Reason: reason}
}

func (subOrch) recorded(k provider.EventKind) (string, bool) {
	c, ok := k.(provider.SubOrchestrationCancelRequestedEvent)
	return c.Reason, ok
}

// end cancels the children still running when the execution is cancelled.
func (subOrch) end(e *engine, r turnResult, before bool, out *ackItems) {
	if before || r != turnCancelled {
		return
	}
	for _, child := range openChildren(e.allEvents()) {
		out.orch = append(out.orch, provider.WorkItem{Kind: provider.CancelInstance{Instance: childInstanceID(e.instance, child), Reason: "parent canceled"}})
	}
}

// openChildren are the recorded instance ids of the children nothing answered or cancelled yet.
func openChildren(events []provider.Event) []string {
	closed := map[uint64]bool{}
	for _, ev := range events {
		switch ev.Kind.(type) {
		case provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent, provider.SubOrchestrationCancelRequestedEvent:
			if ev.SourceEventID != nil {
				closed[*ev.SourceEventID] = true
			}
		}
	}
	var open []string
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.SubOrchestrationScheduledEvent); ok && !closed[ev.EventID] {
			open = append(open, k.Instance)
		}
	}
	return open
}

const subOrchAutoPrefix = "sub::"

// childInstanceID is the real instance id of a sub-orchestration recorded as instance: automatic
// ids ("sub::N") are prefixed with the parent's id, explicit ids are used as given.
func childInstanceID(parent, recorded string) string {
	if len(recorded) >= len(subOrchAutoPrefix) && recorded[:len(subOrchAutoPrefix)] == subOrchAutoPrefix {
		return parent + "::" + recorded
	}
	return recorded
}
