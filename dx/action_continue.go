package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// continueAsNew: the end of the execution and the start of the next one (ContinueAsNew). It records
// no schedule event and matches no history position; the first one the code emits decides the
// turn (see engine.finalize), which then records OrchestrationContinuedAsNew and sends the instance a
// ContinueAsNew work item carrying the queue messages no dequeue took (at most maxCarryForward)
// and the last custom status (ending).
type continueAsNew struct {
	actionBase
	noKindRecords
	input   string
	version *string
}

func (c *continueAsNew) event() provider.EventKind { return nil }

// newWork: the first continue-as-new of the turn is the one that counts; none is new work.
func (c *continueAsNew) newWork(e *engine, _ uint64) bool {
	if e.continueAs == nil {
		e.continueAs = c
	}
	return false
}

func (c *continueAsNew) replays(provider.EventKind) bool { return false }
func (c *continueAsNew) describe() string                { return "continues as new" }

func (continueAsNew) what() string { return "continue-as-new" }

func (continueAsNew) owns(a action) bool { _, ok := a.(*continueAsNew); return ok }

func (continueAsNew) apply(*engine, *provider.Event) (bool, bool, *provider.ErrorDetails) {
	return false, false, nil
}

const maxCarryForward = 100

// ending returns the terminal event and the work item of a turn that continues as new; called
// before anything of the execution's end is recorded (the carried messages are counted on the
// history as the code left it).
func (c *continueAsNew) ending(e *engine) (provider.EventKind, provider.WorkItem) {
	carry := carried(e.allEvents())
	if len(carry) > maxCarryForward {
		e.log().Warn("dropping queue messages beyond the carry-forward limit", "dropped", len(carry)-maxCarryForward, "limit", maxCarryForward)
		carry = carry[:maxCarryForward]
	}
	return provider.OrchestrationContinuedAsNewEvent{Input: c.input},
		provider.WorkItem{Kind: provider.ContinueAsNew{Instance: e.instance, Orchestration: e.name,
			Input: c.input, Version: c.version, ParentInstance: e.parentInstance, ParentID: e.parentID,
			ParentExecutionID: e.startedParentExecution(), CarryForwardEvents: carry, InitialCustomStatus: e.lastCustomStatus()}}
}
