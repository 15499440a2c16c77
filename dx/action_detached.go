package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// detached: a start of an independent orchestration (Context.StartOrchestration, StartDetached).
// Recorded as OrchestrationChained; sent as StartOrchestration (no parent link) when its turn goes
// on, completes or fails (duroxide's enqueue_detached_from_pending); nothing completes it and it
// cannot be cancelled. A replay compares name, instance and input.
//
// Duroxide's trap, reproduced: a detached start made in a turn that continues as new, or that the
// instance's cancellation ends, is recorded but never started. It is noted in unstarted, and the
// runtime warns about it once the turn is stored.
type detached struct {
	actionBase
	noKindRecords
	name, instance, input string
	version               *string
}

func (d *detached) event() provider.EventKind {
	return provider.OrchestrationChainedEvent{Name: d.name, Instance: d.instance, Input: d.input}
}

func (d *detached) replays(k provider.EventKind) bool {
	c, ok := k.(provider.OrchestrationChainedEvent)
	return ok && d.name == c.Name && d.instance == c.Instance && d.input == c.Input
}

func (d *detached) describe() string { return describeCode(provider.Event{Kind: d.event()}) }

func (d *detached) send(_ *engine, r turnResult, out *ackItems) {
	switch r {
	case turnContinue, turnCompleted, turnFailed:
		out.orch = append(out.orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: d.instance,
			Orchestration: d.name, Input: d.input, Version: d.version, ExecutionID: 1}})
	default:
		out.unstarted = append(out.unstarted, d)
	}
}

func (detached) what() string { return "detached starts" }

func (detached) owns(a action) bool { _, ok := a.(*detached); return ok }

func (detached) apply(e *engine, ev *provider.Event) (bool, bool, *provider.ErrorDetails) {
	if _, ok := ev.Kind.(provider.OrchestrationChainedEvent); ok {
		return true, false, e.replaySchedule(ev, false)
	}
	return false, false, nil
}
