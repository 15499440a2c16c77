package dx

import (
	"log/slog"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// What surrounds the replay engine in one orchestration turn, as duroxide's orchestration dispatcher
// does it: pick the handler and the execution, record the start event, turn the fetched messages into
// history events, run the engine, then add the terminal bookkeeping, compute the work items and the
// execution metadata that the ack commits atomically.

// turnPlan is what a fetched item asks of the dispatcher.
type turnPlan int

const (
	planAck     turnPlan = iota // ack the computed changes
	planAbandon                 // no handler for this orchestration or version: abandon with backoff
)

type turnOutput struct {
	eng      *engine // the engine, kept for the instance's next turn (see turnEnv.keep)
	plan     turnPlan
	ack      provider.OrchestrationAck
	outcome  outcome
	name     string
	version  string
	exec     uint64
	terminal bool
	// lostEvents are the turn's new external events that no wait received (dropped, as in
	// duroxide), by name.
	lostEvents []string
	// unstarted are the detached starts the turn recorded but does not send: it continued as new
	// or was cancelled (duroxide's trap, logged after the ack).
	unstarted []*detached
	check     *nondetReport // what a replay check found (check.go)
}

// turnEnv is what a turn needs from the runtime.
type turnEnv struct {
	cached *engine // the engine kept from the instance's previous turn, if any
	keep   bool    // hand the engine back for the next turn instead of ending its goroutines
	reg    *registry
	clock  func() time.Time
	guard  time.Duration
	logger *slog.Logger
	// failWith, when set, fails the turn with these details once the code has run (a replay check
	// found the code nondeterministic: see check.go).
	failWith *provider.ErrorDetails
}

// runTurn computes the ack for a fetched orchestration item.
func runTurn(env turnEnv, item *provider.OrchestrationItem) turnOutput {
	instance := item.Instance
	// Split the batch: at most one start (StartOrchestration or ContinueAsNew), the rest completions.
	var start provider.WorkItemKind
	var completions []provider.WorkItem
	for _, m := range item.Messages {
		switch k := m.Kind.(type) {
		case provider.StartOrchestration, provider.ContinueAsNew:
			if start == nil {
				start = k
			}
		case provider.ActivityExecute:
		default:
			completions = append(completions, m)
		}
	}
	history := item.History
	if c := env.cached; c != nil {
		if _, restart := start.(provider.ContinueAsNew); !restart && c.holds(item) {
			// A kept engine is never finished: its turn needs no look at the history.
			return c.continueTurn(env, completions)
		}
		c.stop() // stale: the history moved on elsewhere, or a new execution starts
		env.cached = nil
	}
	var terminal, continued bool
	for _, ev := range history {
		switch ev.Kind.(type) {
		case provider.OrchestrationCompletedEvent, provider.OrchestrationFailedEvent:
			terminal = true
		case provider.OrchestrationContinuedAsNewEvent:
			continued = true
		}
	}
	_, isCAN := start.(provider.ContinueAsNew)
	if terminal || continued && !isCAN {
		// A finished execution: drop the messages, change nothing.
		return turnOutput{plan: planAck, ack: provider.OrchestrationAck{ExecutionID: item.ExecutionID}, terminal: true}
	}

	var name, input string
	var version *string
	var parentInstance *string
	var parentID, parentExec *uint64
	var carry []provider.CarriedEvent
	var initialStatus *string
	execID := item.ExecutionID
	if _, ok := start.(provider.StartOrchestration); ok && len(history) > 0 {
		start = nil // a second start of a running instance: the running execution goes on
	}
	switch s := start.(type) {
	case provider.StartOrchestration:
		name, input, version = s.Orchestration, s.Input, s.Version
		parentInstance, parentID, parentExec = s.ParentInstance, s.ParentID, s.ParentExecutionID
	case provider.ContinueAsNew:
		name, input, version = s.Orchestration, s.Input, s.Version
		parentInstance, parentID, parentExec = s.ParentInstance, s.ParentID, s.ParentExecutionID
		carry, initialStatus = s.CarryForwardEvents, s.InitialCustomStatus
		execID = item.ExecutionID + 1
		history = nil
		// Carried queue messages are delivered first, before this batch's messages.
		carried := make([]provider.WorkItem, 0, len(carry)+len(completions))
		for _, c := range carry {
			carried = append(carried, provider.WorkItem{Kind: provider.QueueMessage{Instance: instance, Name: c.Name, Data: c.Data}})
		}
		completions = append(carried, completions...)
	default:
		if len(history) == 0 {
			// Messages for an instance that never started: nothing to run them against.
			return turnOutput{plan: planAck, ack: provider.OrchestrationAck{ExecutionID: item.ExecutionID}, terminal: true}
		}
		st, ok := history[0].Kind.(provider.OrchestrationStartedEvent)
		if !ok {
			return turnOutput{plan: planAck, ack: failAck(env, instance, item.ExecutionID, history,
				*nondeterminism("corrupted history: the first event is %s, not OrchestrationStarted", history[0].EventType())), terminal: true}
		}
		name, input, version = st.Name, st.Input, &st.Version
		parentInstance, parentID, parentExec = st.ParentInstance, st.ParentID, st.ParentExecutionID
	}

	handler, ok := env.reg.resolve(name, version)
	if !ok {
		return turnOutput{plan: planAbandon, name: name, version: deref(version)}
	}
	resolved := handler.version.String()
	e := newEngine(env, instance, execID, name, resolved, input, history)
	e.parentInstance, e.parentID = parentInstance, parentID
	e.tag = item.ExecutionTag
	for k, v := range item.KVSnapshot {
		e.kv[k] = v.Value
		e.kvUpdated[k] = v.LastUpdatedAtMs
		e.kvBase[k] = true
	}
	if len(history) == 0 {
		e.history = []provider.Event{e.newEvent(nil, provider.OrchestrationStartedEvent{
			Name: name, Version: resolved, Input: input, ParentInstance: parentInstance, ParentID: parentID,
			ParentExecutionID: parentExec, CarryForwardEvents: carry, InitialCustomStatus: initialStatus,
		})}
		e.record(e.history[0])
	}
	e.prepCompletions(completions)
	e.history = append(e.history[:len(e.history):len(e.history)], e.delta[len(e.history)-e.persisted:]...)

	o := e.run(handler.fn)
	if env.failWith != nil {
		o = outcome{result: turnFailed, details: *env.failWith, nondet: true}
	}
	return e.output(env, o)
}

// holds reports whether the kept engine is exactly at the fetched item's history: same instance,
// execution and events (ids, kinds and timestamps), so a stale engine, or one of an instance deleted
// and re-created under the same id, is never resumed.
func (e *engine) holds(item *provider.OrchestrationItem) bool {
	if e.instance != item.Instance || e.executionID != item.ExecutionID || len(e.history) != len(item.History) || e.out.done {
		return false
	}
	if len(e.history) > 0 && &e.history[0] == &item.History[0] {
		return true // the engine's own history, handed back by a lite fetch (see loadHistory)
	}
	for i := range e.history {
		a, b := &e.history[i], &item.History[i]
		if a.EventID != b.EventID || a.TimestampMs != b.TimestampMs || a.EventType() != b.EventType() {
			return false
		}
	}
	return true
}

// holdsLite is holds for an item fetched without its history (provider.LiteFetcher): the kept
// engine must have read or begun the execution under the item's tag and hold exactly its events.
func (e *engine) holdsLite(item *provider.OrchestrationItem) bool {
	return e.tag != "" && e.tag == item.ExecutionTag && e.instance == item.Instance &&
		e.executionID == item.ExecutionID && len(e.history) == item.HistoryLen && !e.out.done
}

// continueTurn runs a turn on a kept engine: only the new messages are applied.
func (e *engine) continueTurn(env turnEnv, completions []provider.WorkItem) turnOutput {
	e.persisted = len(e.history)
	e.delta, e.pending, e.cancels, e.dropped = nil, nil, nil, nil
	e.abortErr, e.continueAs = nil, nil
	e.waits.lost = nil
	e.kept = true
	e.clock = env.clock
	e.prepCompletions(completions)
	return e.output(env, e.resume())
}

// commit records that the turn's ack succeeded: its events are now part of the stored history.
func (e *engine) commit() {
	e.waits.commit(e.delta)
	e.history = append(e.history[:e.persisted], e.delta...) // amortized O(delta): reuses capacity
	e.persisted = len(e.history)
	e.delta = nil
}

// newEngine returns an engine for a turn of an execution whose stored history is history.
func newEngine(env turnEnv, instance string, exec uint64, name, version, input string, history []provider.Event) *engine {
	e := &engine{
		instance: instance, executionID: exec, name: name, version: version, input: input,
		clock: env.clock, guard: env.guard, logBase: env.logger, persisted: len(history), history: history, nextID: 1,
		bySchedule: map[uint64]*future{}, waits: newWaitState(), queue: newQueueState(),
		kv: map[string]string{}, kvUpdated: map[string]uint64{}, kvBase: map[string]bool{},
	}
	if n := len(history); n > 0 {
		e.nextID = history[n-1].EventID + 1
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
