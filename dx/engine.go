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
// history events with the next event ids, in emission order. What each kind of action does is in its
// file (action.go); matching history and code is in matching.go; turn.go is what surrounds a turn
// (the start event, the fetched messages) and ack.go builds what its ack commits.

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
	emitted   []action // emitted and not yet matched, oldest first
	actions   []action // every action of this turn, in emission order
	nextID    uint64   // next event id for new events
	delta     []provider.Event
	pending   []action // new actions this turn (become work items)

	bySchedule map[uint64]*future

	waits waitState  // event waits (action_wait.go)
	queue queueState // dequeues (action_dequeue.go)

	customStatus *string
	kv           map[string]string
	kvUpdated    map[string]uint64
	kvBase       map[string]bool // keys of earlier executions (the fetch's KV snapshot): limit checks

	idx *historyIndex // built on first use, then kept current by record

	cancels  []*future // futures cancelled by code this turn, in cancellation order
	mismatch *mismatch // the schedule the code no longer reproduced, when that failed the turn
	dropped  []action  // actions whose cancellation by the code is recorded this turn

	parentInstance *string
	parentID       *uint64
	kept           bool   // resumed from the previous turn: nothing of this turn is a replay
	tag            string // the execution's tag (provider.LiteFetcher), when the provider gives one

	out        *coroutine // the orchestration function's coroutine
	abortErr   *provider.ErrorDetails
	teardown   bool // the turn is over: durable operations are ignored
	continueAs *continueAsNew
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
	can     *continueAsNew
	panic   []byte // stack of a panic, for the log
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
func (e *engine) emit(a action) {
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

// settle turns what the code emitted into new events, lets subscriptions satisfied at once go on,
// and decides the outcome.
func (e *engine) settle() outcome {
	main := e.out
	for _, f := range e.cancels {
		f.act.withdrawn(e)
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
		if f := a.base().fut; f != nil {
			fs = append(fs, f)
		}
	}
	for _, co := range e.cos {
		if co.fut != nil {
			fs = append(fs, co.fut)
		}
	}
	return fs
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
