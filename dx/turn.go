package dx

import (
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

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
	check      *nondetReport // what a replay check found (check.go)
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

// output builds the turn's ack. The engine is handed to the caller (to keep for the instance's next
// turn) only when env.keep asks for it and the execution goes on; otherwise its goroutines end here.
func (e *engine) output(env turnEnv, o outcome) turnOutput {
	out := turnOutput{plan: planAck, name: e.name, version: e.version, exec: e.executionID}
	out.ack = e.ackFor(o, e.name, e.version, e.parentInstance, e.parentID)
	if msg := e.limitViolation(); msg != "" {
		e.log().Error("dx: orchestration exceeds a runtime limit; failing it", "error", msg)
		continuing := o.result == turnContinue
		o = e.fail(provider.AppOrchestrationFailed, msg)
		e.failForLimit(&out.ack, o.details, continuing)
	}
	out.outcome = o
	out.terminal = o.result != turnContinue
	out.lostEvents = e.lostEvents
	if env.keep && !out.terminal {
		out.eng = e
	} else {
		e.stop()
	}
	return out
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
	e.lostEvents = nil
	e.kept = true
	e.clock = env.clock
	e.prepCompletions(completions)
	return e.output(env, e.resume())
}

// commit records that the turn's ack succeeded: its events are now part of the stored history.
func (e *engine) commit() {
	// A wait the code dropped this turn stops holding an arrival slot from the next turn on: a
	// replay marks it where it applies the breadcrumb (apply), which a kept engine never does for
	// the breadcrumbs it recorded itself. Not earlier: within the turn that drops it, duroxide
	// still counts it (an event in the same batch goes to it).
	for i := range e.delta {
		if _, ok := e.delta[i].Kind.(provider.ExternalSubscribedCancelledEvent); ok && e.delta[i].SourceEventID != nil {
			e.extCancelled[*e.delta[i].SourceEventID] = true
		}
	}
	e.history = append(e.history[:e.persisted], e.delta...) // amortized O(delta): reuses capacity
	e.persisted = len(e.history)
	e.delta = nil
}

// newEngine returns an engine for a turn of an execution whose stored history is history.
func newEngine(env turnEnv, instance string, exec uint64, name, version, input string, history []provider.Event) *engine {
	e := &engine{
		instance: instance, executionID: exec, name: name, version: version, input: input,
		clock: env.clock, guard: env.guard, logBase: env.logger, persisted: len(history), history: history, nextID: 1,
		bySchedule: map[uint64]*future{}, extSubs: map[string][]*action{}, extArrivals: map[string][]string{},
		extCancelled: map[uint64]bool{}, queueArrivals: map[string][]string{}, queueCancelled: map[uint64]bool{},
		queueResolved: map[uint64]bool{}, kv: map[string]string{}, kvUpdated: map[string]uint64{}, kvBase: map[string]bool{},
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

// prepCompletions turns the batch's messages into history events, in message order, as duroxide's
// prep_completions does: drops messages for another execution and duplicates, checks that each
// completion answers a schedule of its kind, records system failures of activities and children
// and lets them abort the turn.
func (e *engine) prepCompletions(msgs []provider.WorkItem) {
	x := e.index()
	seen := x.named
	scheduleKind := func(id uint64) string { return x.kinds[id] }
	check := func(id uint64, want string) bool {
		got := scheduleKind(id)
		if got == want {
			return true
		}
		if got == "" {
			e.abort(nondeterminism("a %s completion arrived for event %d, which is not a schedule in this execution", want, id))
		} else {
			e.abort(nondeterminism("a %s completion arrived for event %d, which schedules a %s", want, id, got))
		}
		return false
	}
	activityAnswers := []string{"ActivityCompleted", "ActivityFailed"}
	childAnswers := []string{"SubOrchestrationCompleted", "SubOrchestrationFailed"}
	for _, m := range msgs {
		var ev provider.EventKind
		var src *uint64
		// A completion answers schedule id of kind in execution exec; dup lists what already
		// answers it (a duplicate is dropped); a failure that is not Application aborts the turn.
		var exec, id uint64
		var kind string
		var dup []string
		var failure *provider.ErrorDetails
		switch k := m.Kind.(type) {
		case provider.ActivityCompleted:
			exec, id, kind, dup = k.ExecutionID, k.ID, "activity", activityAnswers
			ev = provider.ActivityCompletedEvent{Result: k.Result}
		case provider.ActivityFailed:
			exec, id, kind, dup, failure = k.ExecutionID, k.ID, "activity", activityAnswers, &k.Details
			ev = provider.ActivityFailedEvent{Details: k.Details}
		case provider.TimerFired:
			exec, id, kind, dup = k.ExecutionID, k.ID, "timer", []string{"TimerFired"}
			ev = provider.TimerFiredEvent{FireAtMs: k.FireAtMs}
		case provider.SubOrchCompleted:
			exec, id, kind, dup = k.ParentExecutionID, k.ParentID, "sub-orchestration", childAnswers
			ev = provider.SubOrchestrationCompletedEvent{Result: k.Result}
		case provider.SubOrchFailed:
			exec, id, kind, dup, failure = k.ParentExecutionID, k.ParentID, "sub-orchestration", childAnswers, &k.Details
			ev = provider.SubOrchestrationFailedEvent{Details: k.Details}
		case provider.ExternalRaised:
			ev = provider.ExternalEventEvent{Name: k.Name, Data: k.Data}
		case provider.QueueMessage:
			ev = provider.QueueEventDeliveredEvent{Name: k.Name, Data: k.Data}
		case provider.CancelInstance:
			if x.cancelled {
				continue
			}
			ev = provider.OrchestrationCancelRequestedEvent{Reason: k.Reason}
		default:
			continue
		}
		if kind != "" {
			if exec != e.executionID || seen(id, dup...) || !check(id, kind) {
				continue
			}
			if failure != nil {
				if _, app := failure.Kind.(provider.ApplicationError); !app {
					e.abort(failure)
				}
			}
			src = &id
		}
		e.record(e.newEvent(src, ev))
	}
}

func (e *engine) abort(d *provider.ErrorDetails) {
	if e.abortErr == nil {
		e.abortErr = d
	}
}

// ackFor adds the terminal bookkeeping to the turn's delta and builds the ack: work items, cancelled
// activities and the execution metadata.
func (e *engine) ackFor(o outcome, name, version string, parentInstance *string, parentID *uint64) provider.OrchestrationAck {
	ack := provider.OrchestrationAck{ExecutionID: e.executionID}
	var work, orch []provider.WorkItem
	var cancelled []provider.ScheduledActivityIdentifier

	// Side effects of futures the code cancelled: steal the activities' locks, cancel the children.
	for _, a := range e.dropped {
		if a.kind == actActivity {
			cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: a.scheduleID})
		}
	}
	var dropCancels []provider.WorkItem
	for _, a := range e.dropped {
		if a.kind == actSubOrch {
			dropCancels = append(dropCancels, provider.WorkItem{Kind: provider.CancelInstance{
				Instance: childInstanceID(e.instance, a.instance), Reason: "parent dropped sub-orchestration future"}})
		}
	}
	detached := func() {
		for _, a := range e.pending {
			if a.kind == actDetached {
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: a.instance,
					Orchestration: a.name, Input: a.input, Version: a.version, ExecutionID: 1}})
			}
		}
	}
	toParent := func(ok bool, output string, d provider.ErrorDetails) {
		if parentInstance == nil || parentID == nil {
			return
		}
		// The parent's current execution: a parent only waits on children of its running execution.
		pexec := e.parentExecution()
		if ok {
			orch = append(orch, provider.WorkItem{Kind: provider.SubOrchCompleted{ParentInstance: *parentInstance,
				ParentExecutionID: pexec, ParentID: *parentID, Result: output}})
		} else {
			orch = append(orch, provider.WorkItem{Kind: provider.SubOrchFailed{ParentInstance: *parentInstance,
				ParentExecutionID: pexec, ParentID: *parentID, Details: d}})
		}
	}

	// What is still open when the execution ends; its own breadcrumbs change none of it.
	var open outstandingSchedules
	if o.result != turnContinue {
		open = e.outstanding()
	}
	var status, output string
	switch o.result {
	case turnContinue:
		for _, a := range e.pending {
			switch a.kind {
			case actActivity:
				work = append(work, provider.WorkItem{Kind: provider.ActivityExecute{Instance: e.instance, ExecutionID: e.executionID,
					ID: a.scheduleID, Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}})
			case actTimer:
				orch = append(orch, provider.WorkItem{Kind: provider.TimerFired{Instance: e.instance, ExecutionID: e.executionID,
					ID: a.scheduleID, FireAtMs: a.fireAtMs}})
			case actSubOrch:
				pi, pid, pex := e.instance, a.scheduleID, e.executionID
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: childInstanceID(e.instance, a.instance),
					Orchestration: a.name, Input: a.input, Version: a.version, ParentInstance: &pi, ParentID: &pid,
					ParentExecutionID: &pex, ExecutionID: 1}})
			case actDetached:
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: a.instance,
					Orchestration: a.name, Input: a.input, Version: a.version, ExecutionID: 1}})
			}
		}
	case turnCompleted:
		detached()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationCompletedEvent{Output: o.output}))
		toParent(true, o.output, provider.ErrorDetails{})
		status, output = provider.StatusCompleted, o.output
	case turnFailed:
		detached()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationFailedEvent{Details: o.details}))
		toParent(false, "", o.details)
		status, output = provider.StatusFailed, displayMessage(o.details)
	case turnContinuedAsNew:
		carry := e.unmatchedQueueMessages()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationContinuedAsNewEvent{Input: o.can.input}))
		if len(carry) > maxCarryForward {
			e.log().Warn("dropping queue messages beyond the carry-forward limit", "dropped", len(carry)-maxCarryForward, "limit", maxCarryForward)
			carry = carry[:maxCarryForward]
		}
		orch = append(orch, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: e.instance, Orchestration: name,
			Input: o.can.input, Version: o.can.version, ParentInstance: parentInstance, ParentID: parentID,
			ParentExecutionID: e.startedParentExecution(), CarryForwardEvents: carry, InitialCustomStatus: e.lastCustomStatus()}})
		status, output = provider.StatusContinuedAsNew, o.can.input
	case turnCancelled:
		d := provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppCancelled, Reason: o.reason}}}
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationFailedEvent{Details: d}))
		for _, child := range open.subOrchs {
			orch = append(orch, provider.WorkItem{Kind: provider.CancelInstance{Instance: childInstanceID(e.instance, child), Reason: "parent canceled"}})
		}
		toParent(false, "", d)
		status, output = provider.StatusFailed, displayMessage(d)
	}
	orch = append(orch, dropCancels...)

	// In-flight activities of a finished execution are cancelled, recorded after the terminal event.
	if status != "" {
		reason := map[string]string{provider.StatusCompleted: "orchestration_terminal_completed",
			provider.StatusFailed: "orchestration_terminal_failed", provider.StatusContinuedAsNew: "orchestration_terminal_continued_as_new"}[status]
		for _, id := range open.activities {
			src := id
			e.record(e.newEvent(&src, provider.ActivityCancelRequestedEvent{Reason: reason}))
			cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: id})
		}
	}

	ack.HistoryDelta = e.delta
	ack.WorkerItems = work
	ack.OrchestratorItems = orch
	ack.CancelledActivities = dedupeCancelled(cancelled)
	ack.Metadata = e.metadata(name, version, status, output, parentInstance)
	return ack
}

const maxCarryForward = 100

// duroxide's runtime limits (runtime/limits.rs), checked before each ack: a turn that exceeds one
// fails the orchestration.
const (
	maxCustomStatusBytes = 256 << 10
	maxTagNameBytes      = 256
	maxKVValueBytes      = 64 << 10
	maxKVKeys            = 150
)

// failForLimit turns the ack of a turn that exceeds a runtime limit into duroxide's limit failure:
// the turn's events stay as they are (a terminal event included) and an OrchestrationFailed
// follows them; then, as for any failed execution, its in-flight activities are cancelled
// (recorded last, reason orchestration_terminal_failed); no other work item goes out (a parent is
// not told, as in duroxide); the status is Failed.
func (e *engine) failForLimit(ack *provider.OrchestrationAck, d provider.ErrorDetails, continuing bool) {
	var inflight []uint64
	if continuing {
		inflight = e.outstanding().activities
	}
	at := len(e.delta)
	for at > 0 { // a finished turn's cancellations: recorded again below, after the failure
		k, ok := e.delta[at-1].Kind.(provider.ActivityCancelRequestedEvent)
		if !ok || !strings.HasPrefix(k.Reason, "orchestration_terminal_") {
			break
		}
		at--
		inflight = append([]uint64{*e.delta[at].SourceEventID}, inflight...)
	}
	if at < len(e.delta) {
		e.nextID = e.delta[at].EventID
		e.delta = e.delta[:at]
	}
	e.delta = append(e.delta, e.newEvent(nil, provider.OrchestrationFailedEvent{Details: d}))
	var cancelled []provider.ScheduledActivityIdentifier
	for _, id := range inflight {
		src := id
		e.delta = append(e.delta, e.newEvent(&src, provider.ActivityCancelRequestedEvent{Reason: "orchestration_terminal_failed"}))
		cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: id})
	}
	msg := displayMessage(d)
	ack.HistoryDelta = e.delta
	ack.WorkerItems, ack.OrchestratorItems, ack.CancelledActivities = nil, nil, cancelled
	ack.Metadata.Status, ack.Metadata.Output = provider.StatusFailed, &msg
}

// limitViolation describes the first runtime limit this turn exceeds, or returns "" (duroxide's
// validate_limits: the last custom status set, tags and KV values written this turn, and the keys
// of earlier executions with this turn's writes applied).
func (e *engine) limitViolation() string {
	for i := len(e.delta) - 1; i >= 0; i-- {
		if k, ok := e.delta[i].Kind.(provider.CustomStatusUpdatedEvent); ok && k.Status != nil {
			if len(*k.Status) > maxCustomStatusBytes {
				return fmt.Sprintf("Custom status size (%d bytes) exceeds limit (%d bytes)", len(*k.Status), maxCustomStatusBytes)
			}
			break
		}
	}
	for _, ev := range e.delta {
		switch k := ev.Kind.(type) {
		case provider.ActivityScheduledEvent:
			if k.Tag != nil && len(*k.Tag) > maxTagNameBytes {
				return fmt.Sprintf("Activity '%s' tag size (%d bytes) exceeds limit (%d bytes)", k.Name, len(*k.Tag), maxTagNameBytes)
			}
		case provider.KeyValueSetEvent:
			if len(k.Value) > maxKVValueBytes {
				return fmt.Sprintf("KV value for key '%s' (%d bytes) exceeds limit (%d bytes)", k.Key, len(k.Value), maxKVValueBytes)
			}
		}
	}
	var keys map[string]bool // copied only in a turn that writes KV: most turns do not
	write := func() map[string]bool {
		if keys == nil {
			keys = maps.Clone(e.kvBase)
		}
		return keys
	}
	for _, ev := range e.delta {
		switch k := ev.Kind.(type) {
		case provider.KeyValueSetEvent:
			write()[k.Key] = true
		case provider.KeyValueClearedEvent:
			delete(write(), k.Key)
		case provider.KeyValuesClearedEvent:
			clear(write())
		}
	}
	if len(keys) > maxKVKeys {
		return fmt.Sprintf("KV key count (%d) exceeds limit (%d)", len(keys), maxKVKeys)
	}
	return ""
}

func dedupeCancelled(in []provider.ScheduledActivityIdentifier) []provider.ScheduledActivityIdentifier {
	seen := map[uint64]bool{}
	out := in[:0]
	for _, c := range in {
		if !seen[c.ActivityID] {
			seen[c.ActivityID] = true
			out = append(out, c)
		}
	}
	return out
}

func (e *engine) metadata(name, version, status, output string, parentInstance *string) provider.ExecutionMetadata {
	md := provider.ExecutionMetadata{Status: status}
	if status != "" {
		o := output
		md.Output = &o
	}
	for _, ev := range e.delta {
		if st, ok := ev.Kind.(provider.OrchestrationStartedEvent); ok {
			md.OrchestrationName, md.OrchestrationVersion = name, version
			if st.ParentInstance != nil {
				md.ParentInstanceID = *st.ParentInstance
			}
			md.PinnedDuroxideVersion = semver.MustParse(ev.DuroxideVersion)
		}
	}
	_ = parentInstance
	return md
}

// parentExecution is the execution of the parent that started this child.
func (e *engine) parentExecution() uint64 {
	if p := e.startedParentExecution(); p != nil {
		return *p
	}
	return 1
}

func (e *engine) startedParentExecution() *uint64 {
	if len(e.history) > 0 {
		if st, ok := e.history[0].Kind.(provider.OrchestrationStartedEvent); ok {
			return st.ParentExecutionID
		}
	}
	return nil
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

// outstandingSchedules are the schedules of the execution nothing answered or cancelled yet.
type outstandingSchedules struct {
	activities []uint64
	subOrchs   []string // recorded child instance ids
	waits      []uint64
	queues     []uint64
}

func (e *engine) outstanding() outstandingSchedules {
	var o outstandingSchedules
	events := e.allEvents()
	resolved := map[uint64]bool{}
	cancelled := map[uint64]bool{}
	pendingWaits := map[string][]uint64{}
	arrivals := map[string]int{}
	for _, ev := range events {
		src := ev.SourceEventID
		switch k := ev.Kind.(type) {
		case provider.ActivityCompletedEvent, provider.ActivityFailedEvent, provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent:
			resolved[*src] = true
		case provider.ActivityCancelRequestedEvent, provider.SubOrchestrationCancelRequestedEvent, provider.QueueSubscriptionCancelledEvent:
			if src != nil {
				cancelled[*src] = true
			}
		case provider.ExternalSubscribedEvent:
			pendingWaits[k.Name] = append(pendingWaits[k.Name], ev.EventID)
		case provider.ExternalEventEvent:
			if q := pendingWaits[k.Name]; len(q) > 0 {
				resolved[q[0]] = true
				pendingWaits[k.Name] = q[1:]
			}
		case provider.ExternalSubscribedCancelledEvent:
			if src != nil {
				cancelled[*src] = true
				for n, q := range pendingWaits {
					for i, id := range q {
						if id == *src {
							pendingWaits[n] = append(q[:i:i], q[i+1:]...)
							break
						}
					}
				}
			}
		case provider.QueueEventDeliveredEvent:
			arrivals[k.Name]++
		}
	}
	consumed := map[string]int{}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueSubscribedEvent); ok && !cancelled[ev.EventID] {
			if consumed[k.Name] < arrivals[k.Name] {
				consumed[k.Name]++
				resolved[ev.EventID] = true
			}
		}
	}
	for _, ev := range events {
		open := !resolved[ev.EventID] && !cancelled[ev.EventID]
		if !open {
			continue
		}
		switch k := ev.Kind.(type) {
		case provider.ActivityScheduledEvent:
			o.activities = append(o.activities, ev.EventID)
		case provider.SubOrchestrationScheduledEvent:
			o.subOrchs = append(o.subOrchs, k.Instance)
		case provider.ExternalSubscribedEvent:
			o.waits = append(o.waits, ev.EventID)
		case provider.QueueSubscribedEvent:
			o.queues = append(o.queues, ev.EventID)
		}
	}
	return o
}

// terminalBreadcrumbs cancels the subscriptions still open (o) when the execution ends.
func (e *engine) terminalBreadcrumbs(o outstandingSchedules) {
	for _, id := range o.waits {
		src := id
		e.record(e.newEvent(&src, provider.ExternalSubscribedCancelledEvent{Reason: "orchestration_terminal"}))
	}
	for _, id := range o.queues {
		src := id
		e.record(e.newEvent(&src, provider.QueueSubscriptionCancelledEvent{Reason: "orchestration_terminal"}))
	}
}

// unmatchedQueueMessages are the queue messages no active subscription consumed, in arrival order:
// continue-as-new carries them to the next execution.
func (e *engine) unmatchedQueueMessages() []provider.CarriedEvent {
	events := e.allEvents()
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

// failAck is the ack that fails an execution with details, for histories the engine cannot run.
func failAck(env turnEnv, instance string, exec uint64, history []provider.Event, d provider.ErrorDetails) provider.OrchestrationAck {
	next := uint64(1)
	if n := len(history); n > 0 {
		next = history[n-1].EventID + 1
	}
	ev := provider.Event{EventID: next, InstanceID: instance, ExecutionID: exec, TimestampMs: uint64(env.clock().UnixMilli()),
		DuroxideVersion: DuroxideVersion, Kind: provider.OrchestrationFailedEvent{Details: d}}
	msg := displayMessage(d)
	return provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: []provider.Event{ev},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Output: &msg}}
}
