package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// timer: a durable timer (Context.Timer, Sleep). Recorded as TimerCreated with its fire time; sent
// as TimerFired to the orchestrator queue, visible at that time, in a turn that goes on; completed
// by TimerFired. Timers match a replay by position only (a replay takes the recorded fire time). A
// cancelled timer records nothing: it simply never completes anything.
type timer struct {
	actionBase
	noKindRecords
	fireAtMs uint64
}

func (t *timer) event() provider.EventKind { return provider.TimerCreatedEvent{FireAtMs: t.fireAtMs} }

func (t *timer) replays(k provider.EventKind) bool {
	c, ok := k.(provider.TimerCreatedEvent)
	if ok {
		t.fireAtMs = c.FireAtMs
	}
	return ok
}

func (t *timer) describe() string { return describeCode(provider.Event{Kind: t.event()}) }

func (t *timer) send(e *engine, r turnResult, out *ackItems) {
	if r == turnContinue {
		out.orch = append(out.orch, provider.WorkItem{Kind: provider.TimerFired{Instance: e.instance, ExecutionID: e.executionID,
			ID: t.scheduleID, FireAtMs: t.fireAtMs}})
	}
}

func (timer) what() string { return "timers" }

func (timer) owns(a action) bool { _, ok := a.(*timer); return ok }

func (timer) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	switch ev.Kind.(type) {
	case provider.TimerCreatedEvent:
		return true, false, e.replaySchedule(ev, false)
	case provider.TimerFiredEvent:
		poll, d := e.deliver(ev, timer{}, "", nil)
		return true, poll, d
	}
	return false, false, nil
}

func (timer) label(k provider.EventKind) string {
	if _, ok := k.(provider.TimerCreatedEvent); ok {
		return "timer"
	}
	return ""
}

func (timer) completion(m provider.WorkItemKind) (completion, bool) {
	if k, ok := m.(provider.TimerFired); ok {
		return completion{event: provider.TimerFiredEvent{FireAtMs: k.FireAtMs}, exec: k.ExecutionID, id: k.ID,
			label: "timer", answers: []string{"TimerFired"}}, true
	}
	return completion{}, false
}
