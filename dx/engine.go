package dx

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The replay engine: one orchestration turn, exactly as duroxide's ReplayEngine runs it.
//
// A turn runs the orchestration function from the start against the working history (what is stored
// plus the completions of this turn). Durable operations emit actions at call time, in call order.
// The engine walks the history: before each event it polls the code if something was delivered since
// the last poll; a schedule event must match the oldest emitted action (else nondeterminism), a
// completion event delivers its result. Actions left over after the walk are new work: they become
// history events with the next event ids, in emission order. See turn.go for what surrounds a turn
// (start event, completions, terminal bookkeeping, work items).

// actionKind is the kind of an emitted action.
type actionKind int

const (
	actActivity actionKind = iota
	actTimer
	actWait
	actDequeue
	actSubOrch
	actDetached
	actCustomStatus
	actKVSet
	actKVClear
	actKVClearAll
	actContinueAsNew
)

// action is one durable operation emitted by orchestration code.
type action struct {
	kind      actionKind
	name      string
	input     string
	sessionID *string
	tag       *string
	instance  string  // sub-orchestration or detached instance; "" = automatic sub-orchestration id
	version   *string // sub-orchestration, detached or continue-as-new version
	fireAtMs  uint64
	status    *string // custom status (nil = reset)
	key       string
	value     string
	updatedMs uint64

	fut        *future // the future that receives the completion; nil for positional-only actions
	scheduleID uint64  // event id of the matching schedule event, once bound
}

// engine runs one turn of one execution.
type engine struct {
	instance    string
	executionID uint64
	name        string
	version     string
	input       string
	clock       func() time.Time
	guard       time.Duration
	guardTimer  *time.Timer
	logBase     *slog.Logger // the runtime's logger
	logger      *slog.Logger // logBase with the instance's attributes, built on first use
	userLog     *slog.Logger

	history   []provider.Event // working history: persisted then this turn's completions
	persisted int              // events of history that were stored before this turn

	// coroutines in creation order; running is the one executing now (nil: the engine itself)
	cos     []*coroutine
	running *coroutine

	replaying bool
	emitted   []*action // emitted and not yet matched, oldest first
	actions   []*action // every action of this turn, in emission order
	nextID    uint64    // next event id for new events
	delta     []provider.Event
	pending   []*action // new actions this turn (become work items)

	bySchedule map[uint64]*future

	// external events: subscriptions per name in binding order, arrivals per name
	extSubs      map[string][]*action
	extArrivals  map[string][]string
	extCancelled map[uint64]bool // subscriptions with a cancellation breadcrumb in history
	lostEvents   []string        // this turn's new external events no wait received, by name (logged after the ack)
	// queue (dequeue_event): subscriptions in binding order, arrivals per name
	queueSubs      []*action
	queueArrivals  map[string][]string
	queueCancelled map[uint64]bool
	queueResolved  map[uint64]bool

	customStatus *string
	kv           map[string]string
	kvUpdated    map[string]uint64
	kvBase       map[string]bool // keys of earlier executions (the fetch's KV snapshot): limit checks

	idx *historyIndex // built on first use, then kept current by record

	cancels  []*future // futures cancelled by code this turn, in cancellation order
	mismatch *mismatch // the schedule the code no longer reproduced, when that failed the turn
	dropped  []*action // activities and sub-orchestrations whose cancellation is new this turn

	parentInstance *string
	parentID       *uint64
	kept           bool   // resumed from the previous turn: nothing of this turn is a replay
	tag            string // the execution's tag (provider.LiteFetcher), when the provider gives one

	out        *coroutine // the orchestration function's coroutine
	abortErr   *provider.ErrorDetails
	teardown   bool // the turn is over: durable operations are ignored
	continueAs *action
}

// turnResult is what a turn decided.
type turnResult int

const (
	turnContinue turnResult = iota
	turnCompleted
	turnFailed
	turnContinuedAsNew
	turnCancelled
)

type outcome struct {
	mismatch *mismatch // for a nondeterminism failure found by matching
	// nondet: the failure is the code no longer reproducing its history (a schedule, completion
	// or cancellation that does not match), which OnNondeterminism may hold instead of failing.
	nondet  bool
	result  turnResult
	output  string
	details provider.ErrorDetails
	reason  string // cancel reason
	can     *action
	panic   []byte // stack of a panic, for the log
}

// mismatch is a schedule the code no longer reproduces: the event, what history records there and
// what the code does instead (kept for Replay's report).
type mismatch struct {
	eventID       uint64
	history, code string
}

// mismatchAt records that the code does code where history has schedule event ev, and returns
// the nondeterminism error that fails the orchestration.
func (e *engine) mismatchAt(ev *provider.Event, code string) *provider.ErrorDetails {
	e.mismatch = &mismatch{ev.EventID, describeEvent(ev), code}
	return nondeterminism("event %d: history has %s but the code now %s", ev.EventID, e.mismatch.history, code)
}

func nondeterminism(format string, args ...any) *provider.ErrorDetails {
	msg := fmt.Sprintf(format, args...)
	return &provider.ErrorDetails{Kind: provider.ConfigurationError{Kind: "Nondeterminism", Message: &msg}}
}

// historyIndex answers what a turn asks about the execution's events without scanning them: which
// events name each schedule (completions, cancellations), what each schedule event schedules, and
// whether a cancellation of the instance was requested. Kept current by record, it makes a turn of
// a kept engine cost O(its new events), not O(history).
type historyIndex struct {
	bySource     map[uint64][]string // source event id -> types of the events naming it
	kinds        map[uint64]string   // schedule event id -> "activity", "timer", "sub-orchestration"
	cancelled    bool                // an OrchestrationCancelRequested is in the history
	cancelReason string
}

func (x *historyIndex) add(ev *provider.Event) {
	if ev.SourceEventID != nil {
		x.bySource[*ev.SourceEventID] = append(x.bySource[*ev.SourceEventID], ev.EventType())
	}
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		x.kinds[ev.EventID] = "activity"
	case provider.TimerCreatedEvent:
		x.kinds[ev.EventID] = "timer"
	case provider.SubOrchestrationScheduledEvent:
		x.kinds[ev.EventID] = "sub-orchestration"
	case provider.OrchestrationCancelRequestedEvent:
		if !x.cancelled {
			x.cancelled, x.cancelReason = true, k.Reason
		}
	}
}

// named reports whether an event of one of types names source.
func (x *historyIndex) named(source uint64, types ...string) bool {
	for _, t := range x.bySource[source] {
		if slices.Contains(types, t) {
			return true
		}
	}
	return false
}

// index returns the history index, building it on first use.
func (e *engine) index() *historyIndex {
	if e.idx == nil {
		e.idx = &historyIndex{bySource: map[uint64][]string{}, kinds: map[uint64]string{}}
		for _, ev := range e.allEvents() {
			e.idx.add(&ev)
		}
	}
	return e.idx
}

// record appends a new event of this turn.
func (e *engine) record(ev provider.Event) {
	e.delta = append(e.delta, ev)
	if e.idx != nil {
		e.idx.add(&e.delta[len(e.delta)-1])
	}
}

// log returns the engine's logger with the instance's attributes.
func (e *engine) log() *slog.Logger {
	if e.logger == nil {
		e.logger = e.logBase.With("instance", e.instance, "execution", e.executionID, "orchestration", e.name, "version", e.version)
	}
	return e.logger
}

func (e *engine) newEvent(source *uint64, kind provider.EventKind) provider.Event {
	id := e.nextID
	e.nextID++
	return provider.Event{EventID: id, SourceEventID: source, InstanceID: e.instance, ExecutionID: e.executionID,
		TimestampMs: uint64(e.clock().UnixMilli()), DuroxideVersion: DuroxideVersion, Kind: kind}
}

// emit records an action of the running code. During teardown (a branch unwinding, the turn over)
// nothing is recorded.
func (e *engine) emit(a *action) {
	if e.teardown {
		return
	}
	e.emitted = append(e.emitted, a)
	e.actions = append(e.actions, a)
}

// run executes a turn from scratch: the orchestration function replays the whole history. The
// engine's goroutines stay parked afterwards: the caller keeps the engine for the instance's next
// turn (resume) or ends them with stop.
func (e *engine) run(fn func(Context, string) (string, error)) outcome {
	if e.abortErr != nil {
		return outcome{result: turnFailed, details: *e.abortErr}
	}
	for _, ev := range e.history {
		if ev.IsTerminal() {
			return outcome{result: turnContinue}
		}
	}
	if len(e.history) == 0 {
		return outcome{result: turnFailed, details: *nondeterminism("corrupted history: empty")}
	}
	started, ok := e.history[0].Kind.(provider.OrchestrationStartedEvent)
	if !ok {
		return outcome{result: turnFailed, details: *nondeterminism("corrupted history: the first event is %s, not OrchestrationStarted", e.history[0].EventType())}
	}
	e.customStatus = started.InitialCustomStatus
	e.replaying = e.persisted > 0

	main := e.newCoroutine(nil)
	e.out = main
	ctx := &octx{eng: e, co: main}
	input := e.input
	main.start(func(co *coroutine) {
		out, err := fn(ctx, input)
		co.output, co.err = out, err
	})
	if o, stop := e.walk(e.history, e.persisted, true); stop {
		return o
	}
	return e.settle()
}

// resume executes a turn of an engine kept from the instance's previous turn: its code is parked
// where that turn left it, so only this turn's new events (already in e.delta) are applied.
func (e *engine) resume() outcome {
	if e.abortErr != nil {
		return outcome{result: turnFailed, details: *e.abortErr}
	}
	e.replaying = false
	if o, stop := e.walk(slices.Clone(e.delta), 0, false); stop {
		return o
	}
	return e.settle()
}

// walk applies events in order, polling the code before an event whenever something was delivered
// since the last poll (and, when pollFirst, before the first one), and once more at the end. Events
// before index persisted are a replay. stop reports an outcome that ends the turn at once.
func (e *engine) walk(events []provider.Event, persisted int, pollFirst bool) (o outcome, stop bool) {
	mustPoll := pollFirst
	for i := range events {
		if i >= persisted {
			e.replaying = false
		}
		if mustPoll {
			if o, stop := e.poll(); stop {
				return o, true
			}
			mustPoll = false
			if e.out.done {
				// The function returned: the rest of the history is not applied (duroxide).
				e.replaying = false
				return outcome{}, false
			}
		}
		if d := e.apply(&events[i], &mustPoll); d != nil {
			return outcome{result: turnFailed, details: *d, mismatch: e.mismatch, nondet: true}, true
		}
	}
	e.replaying = false
	if mustPoll {
		if o, stop := e.poll(); stop {
			return o, true
		}
	}
	return outcome{}, false
}

// settle turns what the code emitted into new events, lets subscriptions satisfied at once go on,
// and decides the outcome.
func (e *engine) settle() outcome {
	main := e.out
	// Dequeues the code cancelled stop taking messages before new subscriptions are bound.
	for _, f := range e.cancels {
		if f.act != nil && f.act.kind == actDequeue && f.act.scheduleID != 0 {
			e.queueCancelled[f.act.scheduleID] = true
		}
	}
	e.convert()
	// Quiescence, as duroxide's run_quiescence_loop: while the turn converts new actions, one of
	// them may be satisfied at once (a dequeue of a message that arrived earlier), which lets the
	// code go on and emit more. Only then: code that a turn without new actions made runnable (a
	// dropped wait's slot freed for another) would go on in a way that a replay of the stored
	// history does not reproduce. Code that never settles fails the orchestration, as in duroxide.
	for n := 1; !main.done && len(e.pending) > 0; n++ {
		before := len(e.pending)
		if o, stop := e.poll(); stop {
			return o
		}
		e.convert()
		if n == maxQuiescence {
			return outcome{result: turnFailed, details: provider.ErrorDetails{Kind: provider.InfrastructureError{
				Operation: "quiescence_loop",
				Message:   fmt.Sprintf("the code kept emitting new actions for %d polls without waiting (unbounded dequeues?)", maxQuiescence),
			}}}
		}
		if len(e.pending) == before {
			break
		}
	}
	return e.finalize()
}

const maxQuiescence = 100

// poll runs coroutines, in creation order, until none can make progress. It reports stop when the
// turn must end at once (a panic, or code that blocked outside the engine).
func (e *engine) poll() (outcome, bool) {
	for {
		progressed := false
		for i := 0; i < len(e.cos); i++ {
			co := e.cos[i]
			if !co.runnable() {
				continue
			}
			mode := resumeRun
			if co.cancelled {
				mode = resumeExit
			}
			if err := co.run(mode); err != nil {
				return e.fail(provider.AppOrchestrationFailed, err.Error()), true
			}
			progressed = true
			if co.done {
				if co.panicked {
					o := e.fail(provider.AppPanicked, co.err.Error())
					o.panic = co.stack
					return o, true
				}
				e.finish(co)
			}
		}
		if !progressed {
			return outcome{}, false
		}
	}
}

func (e *engine) fail(kind, msg string) outcome {
	return outcome{result: turnFailed, details: appError(kind, msg)}
}

// finish completes a branch's future once its coroutine returned.
func (e *engine) finish(co *coroutine) {
	if co.fut == nil || co.fut.done || co.killed {
		return
	}
	co.fut.done = true
	co.fut.value, co.fut.err = co.branchValue, co.err
}

// stop ends every goroutine of the turn: parked coroutines are told to exit and unwind.
func (e *engine) stop() {
	e.teardown = true
	for _, co := range e.cos {
		if co.gone || co.done {
			continue
		}
		if !co.started {
			co.done = true
			continue
		}
		_ = co.run(resumeExit)
	}
	if e.guardTimer != nil {
		e.guardTimer.Stop()
	}
}

func (e *engine) newCoroutine(parent *coroutine) *coroutine {
	co := &coroutine{eng: e, id: len(e.cos), parent: parent}
	e.cos = append(e.cos, co)
	return co
}

// apply applies one history event. It returns the error that fails the orchestration, if any.
func (e *engine) apply(ev *provider.Event, mustPoll *bool) *provider.ErrorDetails {
	switch k := ev.Kind.(type) {
	case provider.OrchestrationStartedEvent:
	case provider.CustomStatusUpdatedEvent, provider.KeyValueSetEvent, provider.KeyValueClearedEvent, provider.KeyValuesClearedEvent:
		// Positional: consume the action the code emitted for it. Custom status matches by kind
		// only, KV by key and value. A missing action is tolerated, as duroxide does.
		if len(e.emitted) == 0 {
			return nil
		}
		a := e.emitted[0]
		e.emitted = e.emitted[1:]
		if d := e.match(a, ev); d != nil {
			return d
		}
	case provider.ActivityScheduledEvent, provider.TimerCreatedEvent, provider.ExternalSubscribedEvent,
		provider.QueueSubscribedEvent, provider.SubOrchestrationScheduledEvent, provider.OrchestrationChainedEvent:
		if len(e.emitted) == 0 {
			return e.mismatchAt(ev, "schedules nothing there")
		}
		a := e.emitted[0]
		e.emitted = e.emitted[1:]
		if d := e.match(a, ev); d != nil {
			return d
		}
		e.bind(a, ev.EventID)
		if sub, ok := k.(provider.SubOrchestrationScheduledEvent); ok {
			a.instance = sub.Instance
		}
		if _, ok := k.(provider.QueueSubscribedEvent); ok {
			*mustPoll = true
		}
	case provider.ActivityCompletedEvent:
		return e.deliver(ev, actActivity, k.Result, nil, mustPoll)
	case provider.ActivityFailedEvent:
		return e.deliver(ev, actActivity, "", &k.Details, mustPoll)
	case provider.TimerFiredEvent:
		return e.deliver(ev, actTimer, "", nil, mustPoll)
	case provider.SubOrchestrationCompletedEvent:
		return e.deliver(ev, actSubOrch, k.Result, nil, mustPoll)
	case provider.SubOrchestrationFailedEvent:
		return e.deliver(ev, actSubOrch, "", &k.Details, mustPoll)
	case provider.ExternalSubscribedCancelledEvent:
		if ev.SourceEventID != nil {
			e.extCancelled[*ev.SourceEventID] = true
		}
	case provider.QueueSubscriptionCancelledEvent:
		if ev.SourceEventID != nil {
			e.queueCancelled[*ev.SourceEventID] = true
		}
	case provider.ExternalEventEvent:
		// Delivered only to a subscription that exists at this point of the history; an event
		// raised before the code subscribed stays in history but is never delivered (duroxide).
		// A new one is noted, so that the runtime warns about it once its turn is stored.
		if e.pendingExtSlot(k.Name) {
			e.extArrivals[k.Name] = append(e.extArrivals[k.Name], k.Data)
			*mustPoll = true
		} else if !e.replaying {
			e.lostEvents = append(e.lostEvents, k.Name)
		}
	case provider.QueueEventDeliveredEvent:
		e.queueArrivals[k.Name] = append(e.queueArrivals[k.Name], k.Data)
		*mustPoll = true
	}
	return nil
}

// deliver hands a completion to the future bound to its schedule event.
func (e *engine) deliver(ev *provider.Event, want actionKind, result string, details *provider.ErrorDetails, mustPoll *bool) *provider.ErrorDetails {
	if ev.SourceEventID == nil {
		return nil
	}
	f := e.bySchedule[*ev.SourceEventID]
	if f == nil || f.done {
		return nondeterminism("event %d: %s completes schedule %d, which the code has not scheduled (or already completed)",
			ev.EventID, ev.EventType(), *ev.SourceEventID)
	}
	if f.act.kind != want {
		return nondeterminism("event %d: %s completes schedule %d, but the code scheduled %s there",
			ev.EventID, ev.EventType(), *ev.SourceEventID, describeAction(f.act))
	}
	if !f.done {
		f.done = true
		f.result = result
		if details != nil {
			f.err = &Error{Details: *details}
		}
	}
	*mustPoll = true
	return nil
}

func (e *engine) bind(a *action, id uint64) {
	a.scheduleID = id
	if a.fut != nil {
		e.bySchedule[id] = a.fut
	}
	switch a.kind {
	case actWait:
		e.extSubs[a.name] = append(e.extSubs[a.name], a)
	case actDequeue:
		e.queueSubs = append(e.queueSubs, a)
	}
}

// pendingExtSlot reports whether a subscription for name is waiting for an arrival.
func (e *engine) pendingExtSlot(name string) bool {
	active := 0
	for _, a := range e.extSubs[name] {
		if !e.extCancelled[a.scheduleID] {
			active++
		}
	}
	return active > len(e.extArrivals[name])
}

// extEvent returns the arrival for a bound external subscription: the Nth active subscription of a
// name gets the Nth arrival of that name.
func (e *engine) extEvent(a *action) (string, bool) {
	if a.scheduleID == 0 || e.extCancelled[a.scheduleID] {
		return "", false
	}
	idx := 0
	for _, s := range e.extSubs[a.name] {
		if s == a {
			break
		}
		if !e.extCancelled[s.scheduleID] {
			idx++
		}
	}
	arr := e.extArrivals[a.name]
	if idx < len(arr) {
		return arr[idx], true
	}
	return "", false
}

// queueMessage returns the message for a bound queue subscription: strict FIFO over the active
// subscriptions of the queue, whatever order the code waits in.
func (e *engine) queueMessage(a *action) (string, bool) {
	if a.scheduleID == 0 || e.queueCancelled[a.scheduleID] || e.queueResolved[a.scheduleID] {
		return "", false
	}
	idx := 0
	for _, s := range e.queueSubs {
		if s == a {
			break
		}
		if s.name == a.name && !e.queueCancelled[s.scheduleID] {
			idx++
		}
	}
	arr := e.queueArrivals[a.name]
	if idx < len(arr) {
		e.queueResolved[a.scheduleID] = true
		return arr[idx], true
	}
	return "", false
}

// convert turns the actions nothing in history matched into new events and pending work.
func (e *engine) convert() {
	for _, a := range e.emitted {
		if a.kind == actContinueAsNew {
			if e.continueAs == nil {
				e.continueAs = a
			}
			continue
		}
		id := e.nextID
		if a.kind == actSubOrch && a.instance == "" {
			a.instance = fmt.Sprintf("%s%d", subOrchAutoPrefix, id)
		}
		ev := e.newEvent(nil, actionEvent(a))
		e.bind(a, id)
		e.record(ev)
		e.pending = append(e.pending, a)
	}
	e.emitted = e.emitted[:0]
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

func actionEvent(a *action) provider.EventKind {
	switch a.kind {
	case actActivity:
		return provider.ActivityScheduledEvent{Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}
	case actTimer:
		return provider.TimerCreatedEvent{FireAtMs: a.fireAtMs}
	case actWait:
		return provider.ExternalSubscribedEvent{Name: a.name}
	case actDequeue:
		return provider.QueueSubscribedEvent{Name: a.name}
	case actSubOrch:
		return provider.SubOrchestrationScheduledEvent{Name: a.name, Instance: a.instance, Input: a.input}
	case actDetached:
		return provider.OrchestrationChainedEvent{Name: a.name, Instance: a.instance, Input: a.input}
	case actCustomStatus:
		return provider.CustomStatusUpdatedEvent{Status: a.status}
	case actKVSet:
		return provider.KeyValueSetEvent{Key: a.key, Value: a.value, LastUpdatedAtMs: a.updatedMs}
	case actKVClear:
		return provider.KeyValueClearedEvent{Key: a.key}
	case actKVClearAll:
		return provider.KeyValuesClearedEvent{}
	}
	panic(fmt.Sprintf("dx: action kind %d has no event", a.kind))
}

// match compares an emitted action with the schedule event history recorded at its position.
func (e *engine) match(a *action, ev *provider.Event) *provider.ErrorDetails {
	ok := false
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		ok = a.kind == actActivity && a.name == k.Name && a.input == k.Input &&
			eqPtr(a.sessionID, k.SessionID) && eqPtr(a.tag, k.Tag)
	case provider.TimerCreatedEvent:
		ok = a.kind == actTimer // timers match by position only
		if ok {
			a.fireAtMs = k.FireAtMs
		}
	case provider.ExternalSubscribedEvent:
		ok = a.kind == actWait && a.name == k.Name
	case provider.QueueSubscribedEvent:
		ok = a.kind == actDequeue && a.name == k.Name
	case provider.SubOrchestrationScheduledEvent:
		ok = a.kind == actSubOrch && a.name == k.Name && a.input == k.Input
	case provider.OrchestrationChainedEvent:
		ok = a.kind == actDetached && a.name == k.Name && a.instance == k.Instance && a.input == k.Input
	case provider.CustomStatusUpdatedEvent:
		ok = a.kind == actCustomStatus
	case provider.KeyValueSetEvent:
		ok = a.kind == actKVSet && a.key == k.Key && a.value == k.Value
	case provider.KeyValueClearedEvent:
		ok = a.kind == actKVClear && a.key == k.Key
	case provider.KeyValuesClearedEvent:
		ok = a.kind == actKVClearAll
	}
	if ok {
		return nil
	}
	return e.mismatchAt(ev, describeAction(a))
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// finalize applies duroxide's outcome precedence: cancel > continue-as-new > the function's return
// > continue; records the cancellations the code made (dropped futures) for the last two.
func (e *engine) finalize() outcome {
	if x := e.index(); x.cancelled {
		return outcome{result: turnCancelled, reason: x.cancelReason}
	}
	if e.continueAs != nil {
		return outcome{result: turnContinuedAsNew, can: e.continueAs}
	}
	main := e.out
	if main.done {
		// Returning drops every future the code never consumed, as in duroxide (Rust drops
		// them when the function returns).
		for _, f := range e.allFutures() {
			if !f.consumed && !f.cancelled {
				e.cancel(f)
			}
		}
	}
	if d := e.recordCancellations(); d != nil {
		return outcome{result: turnFailed, details: *d, nondet: true}
	}
	if main.done {
		if main.err != nil {
			if _, ok := main.err.(*continueAsNewError); ok {
				// ContinueAsNew's error without its action: it came from another context.
				return e.fail(provider.AppOrchestrationFailed, "dx.ContinueAsNew's result was returned, but the continue-as-new was not requested by this orchestration")
			}
			return e.fail(provider.AppOrchestrationFailed, main.err.Error())
		}
		return outcome{result: turnCompleted, output: main.output}
	}
	return outcome{result: turnContinue}
}

// allEvents is the execution's history as it stands: what was stored, then this turn's events.
func (e *engine) allEvents() []provider.Event {
	return append(e.history[:e.persisted:e.persisted], e.delta...)
}

func (e *engine) allFutures() []*future {
	var fs []*future
	for _, a := range e.actions {
		if a.fut != nil {
			fs = append(fs, a.fut)
		}
	}
	for _, co := range e.cos {
		if co.fut != nil {
			fs = append(fs, co.fut)
		}
	}
	return fs
}

// recordCancellations checks the code's cancellations against those recorded in the persisted
// history (each recorded dropped future must be dropped again) and records new ones as breadcrumbs:
// activities, then sub-orchestrations, then event waits, then dequeues, each by schedule id.
func (e *engine) recordCancellations() *provider.ErrorDetails {
	type group struct {
		kind    actionKind
		label   string
		isEvent func(provider.EventKind) bool
		mk      func() provider.EventKind
	}
	groups := []group{
		{actActivity, "activities", func(k provider.EventKind) bool { _, ok := k.(provider.ActivityCancelRequestedEvent); return ok },
			func() provider.EventKind { return provider.ActivityCancelRequestedEvent{Reason: reasonDropped} }},
		{actSubOrch, "sub-orchestrations", func(k provider.EventKind) bool {
			_, ok := k.(provider.SubOrchestrationCancelRequestedEvent)
			return ok
		}, func() provider.EventKind { return provider.SubOrchestrationCancelRequestedEvent{Reason: reasonDropped} }},
		{actWait, "event waits", func(k provider.EventKind) bool {
			_, ok := k.(provider.ExternalSubscribedCancelledEvent)
			return ok
		}, func() provider.EventKind { return provider.ExternalSubscribedCancelledEvent{Reason: reasonDropped} }},
		{actDequeue, "dequeues", func(k provider.EventKind) bool {
			_, ok := k.(provider.QueueSubscriptionCancelledEvent)
			return ok
		}, func() provider.EventKind { return provider.QueueSubscriptionCancelledEvent{Reason: reasonDropped} }},
	}
	for _, g := range groups {
		var ids []uint64
		for _, f := range e.cancels {
			if f.act != nil && f.act.kind == g.kind && f.act.scheduleID != 0 {
				ids = append(ids, f.act.scheduleID)
			}
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		// Reconcile with the persisted record: every dropped future it holds must be dropped again
		// (a kept engine replays nothing, so there is nothing to reconcile).
		recorded := map[uint64]bool{}
		for _, ev := range e.history[:e.persisted] {
			if e.kept {
				break
			}
			if g.isEvent(ev.Kind) && ev.SourceEventID != nil && dropReason(ev.Kind) == reasonDropped {
				recorded[*ev.SourceEventID] = true
			}
		}
		for id := range recorded {
			if !slices.Contains(ids, id) && e.persistedSchedule(id) {
				return nondeterminism("history records that the code cancelled the future of event %d (%s), but the code no longer cancels it", id, g.label)
			}
		}
		x := e.index()
		for _, id := range ids {
			if x.named(id, g.mk().EventType()) {
				continue
			}
			src := id
			e.record(e.newEvent(&src, g.mk()))
			if g.kind == actActivity || g.kind == actSubOrch {
				e.dropped = append(e.dropped, e.bySchedule[id].act)
			}
		}
	}
	return nil
}

const reasonDropped = "dropped_future"

func dropReason(k provider.EventKind) string {
	switch c := k.(type) {
	case provider.ActivityCancelRequestedEvent:
		return c.Reason
	case provider.SubOrchestrationCancelRequestedEvent:
		return c.Reason
	case provider.ExternalSubscribedCancelledEvent:
		return c.Reason
	case provider.QueueSubscriptionCancelledEvent:
		return c.Reason
	}
	return ""
}

func (e *engine) persistedSchedule(id uint64) bool {
	for _, ev := range e.history[:e.persisted] {
		if ev.EventID == id {
			return true
		}
	}
	return false
}

// cancel marks a future cancelled by code. A branch's cancellation cancels everything the branch
// started and stops its goroutine at its next wait.
func (e *engine) cancel(f *future) {
	if f.cancelled || f.consumed {
		return
	}
	f.cancelled = true
	if f.act != nil {
		e.cancels = append(e.cancels, f)
		return
	}
	if co := f.branch; co != nil {
		co.cancelled = true
		for _, g := range e.allFutures() {
			if g != f && g.owner != nil && g.owner.within(co) {
				e.cancel(g)
			}
		}
	}
}

// within reports whether co is b or a branch started (transitively) by b.
func (co *coroutine) within(b *coroutine) bool {
	for c := co; c != nil; c = c.parent {
		if c == b {
			return true
		}
	}
	return false
}

var errStaleContext = errors.New("dx: a Context was used outside its turn (kept after the turn, or used from another " +
	"goroutine or by a branch other than the one it was given to): orchestration code must use the Context dx passes it, " +
	"on the goroutine dx runs it on")

var errNotInOrchestration = errors.New("dx: a future was awaited outside the orchestration that created it " +
	"(from another goroutine, or after its turn ended); orchestration code must stay on the goroutine dx runs it on")
