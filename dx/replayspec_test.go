package dx

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// duroxide's replay-engine tests (tests/replay_engine/*.rs in duroxide 0.1.30), ported one Go
// subtest per Rust test, named after it. Like the Rust tests they drive one engine turn directly:
// a hand-made history (all of it persisted unless a test says otherwise), the batch's messages
// turned into events (prepCompletions, duroxide's prep_completions), then the orchestration
// function, without the dispatcher's terminal bookkeeping. What the Rust tests read from the
// ReplayEngine maps onto ours as follows:
//
//	TurnResult                       engine outcome (result, output, details, reason, can)
//	history_delta()                  e.delta (events new this turn, terminal event not included)
//	pending_actions()                e.pending (plus e.continueAs for a ContinueAsNew action)
//	cancelled_activity_ids()         activities in e.dropped (the ack's cancelled-activity list)
//	cancelled_sub_orchestration_ids  sub-orchestrations in e.dropped (their recorded instance ids)
//	final_history()                  e.allEvents()
//
// Rust's drop(future) becomes Future.Cancel(); a Rust future bound to `_x` and never awaited is a
// Go future never consumed, which is cancelled when the function returns. Nondeterminism messages
// are ours (plain English with the event id), so only their kind is compared, plus the event id or
// the words that identify the check where the Rust test asserts on the message.

const rsInstance = "test-instance"

// rsEngine is one ReplayEngine of a Rust test: a history, what of it was persisted, a KV snapshot.
type rsEngine struct {
	t         *testing.T
	e         *engine
	base      int // len(history): e.delta[base-persisted:] is what duroxide's history_delta holds
	persisted int
	ran       bool
	o         outcome
}

// newRS is create_engine(history); persisted >= 0 is with_persisted_history_len.
func newRS(t *testing.T, history []provider.Event, persisted ...int) *rsEngine {
	t.Helper()
	p := len(history)
	if len(persisted) > 0 {
		p = persisted[0]
	}
	clock := time.UnixMilli(1_700_000_000_000)
	env := turnEnv{clock: func() time.Time { return clock }, guard: 2 * time.Second, logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e := newEngine(env, rsInstance, 1, "TestOrch", "1.0.0", "test-input", history)
	e.persisted = p
	e.delta = slices.Clone(history[p:]) // events of the working history not persisted yet
	r := &rsEngine{t: t, e: e, base: len(history), persisted: p}
	t.Cleanup(e.stop)
	return r
}

// snapshot is with_kv_snapshot.
func (r *rsEngine) snapshot(kv map[string]string) *rsEngine {
	for k, v := range kv {
		r.e.kv[k] = v
		r.e.kvUpdated[k] = 100
	}
	return r
}

// prep is prep_completions.
func (r *rsEngine) prep(msgs ...provider.WorkItem) { r.e.prepCompletions(msgs) }

// exec is execute: the working history is the baseline plus what prep added.
func (r *rsEngine) exec(fn func(Context, string) (string, error)) outcome {
	r.t.Helper()
	if r.ran {
		r.t.Fatal("rsEngine: exec twice")
	}
	r.ran = true
	e := r.e
	e.history = append(e.history[:len(e.history):len(e.history)], e.delta[len(e.history)-e.persisted:]...)
	r.o = e.run(fn)
	return r.o
}

// delta is history_delta.
func (r *rsEngine) delta() []provider.Event { return r.e.delta[r.base-r.persisted:] }

func (r *rsEngine) pending() []action { return r.e.pending }

// The kinds of action, for pendingOf and the like.
var (
	actActivity = activity{}.owns
	actTimer    = timer{}.owns
	actWait     = eventWait{}.owns
	actSubOrch  = subOrch{}.owns
)

// actionName is the name an action calls or waits for ("" for the kinds without one).
func actionName(a action) string {
	switch a := a.(type) {
	case *activity:
		return a.name
	case *subOrch:
		return a.name
	case *eventWait:
		return a.name
	}
	return ""
}

func (r *rsEngine) cancelledActivities() []uint64 {
	var ids []uint64
	for _, a := range r.e.dropped {
		if actActivity(a) {
			ids = append(ids, a.base().scheduleID)
		}
	}
	return ids
}

func (r *rsEngine) cancelledSubOrchs() []string {
	var ids []string
	for _, a := range r.e.dropped {
		if actSubOrch(a) {
			ids = append(ids, a.(*subOrch).instance)
		}
	}
	return ids
}

func (r *rsEngine) pendingOf(kind func(action) bool, name string) int {
	n := 0
	for _, a := range r.e.pending {
		if kind(a) && (name == "" || actionName(a) == name) {
			n++
		}
	}
	return n
}

// deltaOf counts the delta's events of type typ ("ActivityScheduled", ...).
func (r *rsEngine) deltaOf(typ string) []provider.Event {
	var out []provider.Event
	for _, ev := range r.delta() {
		if ev.EventType() == typ {
			out = append(out, ev)
		}
	}
	return out
}

// Outcome assertions (assert_continue, assert_completed, ...).

func (r *rsEngine) describe() string {
	return fmt.Sprintf("outcome %+v\ndelta:\n%s", r.o, dump(r.delta()))
}

func (r *rsEngine) wantContinue() {
	r.t.Helper()
	if r.o.result != turnContinue {
		r.t.Fatalf("want Continue, got %s", r.describe())
	}
}

func (r *rsEngine) wantCompleted(out string) {
	r.t.Helper()
	if r.o.result != turnCompleted || r.o.output != out {
		r.t.Fatalf("want Completed(%.80q), got %s", out, r.describe())
	}
}

func (r *rsEngine) wantFailed() provider.ErrorDetails {
	r.t.Helper()
	if r.o.result != turnFailed {
		r.t.Fatalf("want Failed, got %s", r.describe())
	}
	return r.o.details
}

func (r *rsEngine) wantFailedWith(substr string) {
	r.t.Helper()
	d := r.wantFailed()
	if msg := displayMessage(d); !strings.Contains(msg, substr) {
		r.t.Fatalf("failure message %q does not contain %q", msg, substr)
	}
}

func (r *rsEngine) wantNondeterminism() {
	r.t.Helper()
	d := r.wantFailed()
	if c, ok := d.Kind.(provider.ConfigurationError); !ok || c.Kind != "Nondeterminism" {
		r.t.Fatalf("want Configuration{Nondeterminism}, got %s", r.describe())
	}
}

func (r *rsEngine) wantAppError(kind string) {
	r.t.Helper()
	d := r.wantFailed()
	if a, ok := d.Kind.(provider.ApplicationError); !ok || a.Kind.Name != kind {
		r.t.Fatalf("want Application{%s}, got %s", kind, r.describe())
	}
}

func (r *rsEngine) wantContinueAsNew(input string) {
	r.t.Helper()
	if r.o.result != turnContinuedAsNew || r.o.can == nil || r.o.can.input != input {
		r.t.Fatalf("want ContinueAsNew(%q), got %s", input, r.describe())
	}
}

func (r *rsEngine) wantCancelled(reason string) {
	r.t.Helper()
	if r.o.result != turnCancelled || r.o.reason != reason {
		r.t.Fatalf("want Cancelled(%q), got %s", reason, r.describe())
	}
}

// Event builders (helpers.rs).

func rsEv(id uint64, src *uint64, k provider.EventKind) provider.Event {
	return provider.Event{EventID: id, SourceEventID: src, InstanceID: rsInstance, ExecutionID: 1,
		TimestampMs: 1_700_000_000_000, DuroxideVersion: DuroxideVersion, Kind: k}
}

func rsStarted(id uint64) provider.Event {
	return rsEv(id, nil, provider.OrchestrationStartedEvent{Name: "TestOrch", Version: "1.0.0", Input: "test-input"})
}

func rsActSched(id uint64, name, input string) provider.Event {
	return rsEv(id, nil, provider.ActivityScheduledEvent{Name: name, Input: input})
}

func rsActTagged(id uint64, name, input string, tag *string) provider.Event {
	return rsEv(id, nil, provider.ActivityScheduledEvent{Name: name, Input: input, Tag: tag})
}

func rsActDone(id, src uint64, result string) provider.Event {
	return rsEv(id, &src, provider.ActivityCompletedEvent{Result: result})
}

func rsActFailed(id, src uint64, msg string) provider.Event {
	return rsEv(id, &src, provider.ActivityFailedEvent{Details: appError(provider.AppActivityFailed, msg)})
}

func rsTimer(id, fireAt uint64) provider.Event {
	return rsEv(id, nil, provider.TimerCreatedEvent{FireAtMs: fireAt})
}

func rsFired(id, src, fireAt uint64) provider.Event {
	return rsEv(id, &src, provider.TimerFiredEvent{FireAtMs: fireAt})
}

func rsSubscribed(id uint64, name string) provider.Event {
	return rsEv(id, nil, provider.ExternalSubscribedEvent{Name: name})
}

func rsExternal(id uint64, name, data string) provider.Event {
	return rsEv(id, nil, provider.ExternalEventEvent{Name: name, Data: data})
}

func rsSubSched(id uint64, name, instance, input string) provider.Event {
	return rsEv(id, nil, provider.SubOrchestrationScheduledEvent{Name: name, Instance: instance, Input: input})
}

func rsSubDone(id, src uint64, result string) provider.Event {
	return rsEv(id, &src, provider.SubOrchestrationCompletedEvent{Result: result})
}

func rsSubFailed(id, src uint64, msg string) provider.Event {
	return rsEv(id, &src, provider.SubOrchestrationFailedEvent{Details: appError(provider.AppOrchestrationFailed, msg)})
}

func rsOrchCompleted(id uint64, out string) provider.Event {
	return rsEv(id, nil, provider.OrchestrationCompletedEvent{Output: out})
}

func rsOrchFailed(id uint64, msg string) provider.Event {
	return rsEv(id, nil, provider.OrchestrationFailedEvent{Details: appError(provider.AppOrchestrationFailed, msg)})
}

func rsOrchCAN(id uint64, input string) provider.Event {
	return rsEv(id, nil, provider.OrchestrationContinuedAsNewEvent{Input: input})
}

func rsCancelRequested(id uint64, reason string) provider.Event {
	return rsEv(id, nil, provider.OrchestrationCancelRequestedEvent{Reason: reason})
}

func rsActCancel(id, src uint64, reason string) provider.Event {
	return rsEv(id, &src, provider.ActivityCancelRequestedEvent{Reason: reason})
}

func rsSubCancel(id, src uint64, reason string) provider.Event {
	return rsEv(id, &src, provider.SubOrchestrationCancelRequestedEvent{Reason: reason})
}

func rsChained(id uint64, name, instance, input string) provider.Event {
	return rsEv(id, nil, provider.OrchestrationChainedEvent{Name: name, Instance: instance, Input: input})
}

func rsKVSet(id uint64, key, value string, ts uint64) provider.Event {
	return rsEv(id, nil, provider.KeyValueSetEvent{Key: key, Value: value, LastUpdatedAtMs: ts})
}

func rsKVCleared(id uint64, key string) provider.Event {
	return rsEv(id, nil, provider.KeyValueClearedEvent{Key: key})
}

func rsKVAllCleared(id uint64) provider.Event { return rsEv(id, nil, provider.KeyValuesClearedEvent{}) }

// Message builders (helpers.rs).

func rsMsgActDone(id uint64, result string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityCompleted{Instance: rsInstance, ExecutionID: 1, ID: id, Result: result}}
}

func rsMsgActFailedWith(id uint64, d provider.ErrorDetails) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityFailed{Instance: rsInstance, ExecutionID: 1, ID: id, Details: d}}
}

func rsMsgActFailed(id uint64, msg string) provider.WorkItem {
	return rsMsgActFailedWith(id, appError(provider.AppActivityFailed, msg))
}

func rsMsgFired(id, fireAt uint64) provider.WorkItem {
	return provider.WorkItem{Kind: provider.TimerFired{Instance: rsInstance, ExecutionID: 1, ID: id, FireAtMs: fireAt}}
}

func rsMsgRaised(name, data string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ExternalRaised{Instance: rsInstance, Name: name, Data: data}}
}

func rsMsgSubDone(parentID uint64, result string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.SubOrchCompleted{ParentInstance: rsInstance, ParentExecutionID: 1, ParentID: parentID, Result: result}}
}

func rsMsgSubFailedWith(parentID uint64, d provider.ErrorDetails) provider.WorkItem {
	return provider.WorkItem{Kind: provider.SubOrchFailed{ParentInstance: rsInstance, ParentExecutionID: 1, ParentID: parentID, Details: d}}
}

func rsMsgCancel(reason string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.CancelInstance{Instance: rsInstance, Reason: reason}}
}

// Handlers (helpers.rs). Inputs and results are raw text, as duroxide's string handlers see them.

type rsHandler = func(Context, string) (string, error)

func rsImmediateOK(out string) rsHandler {
	return func(Context, string) (string, error) { return out, nil }
}

func rsImmediateErr(msg string) rsHandler {
	return func(Context, string) (string, error) { return "", errors.New(msg) }
}

func rsCall(ctx Context, name, input string, opts ...CallOption) Future[Raw] {
	return Call[Raw](ctx, name, Raw(input), opts...)
}

func rsSingleActivity(name, input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r, err := rsCall(ctx, name, input).Await(ctx)
		return string(r), err
	}
}

func rsSingleTimer(d time.Duration) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		if err := ctx.Sleep(d); err != nil {
			return "", err
		}
		return "timer_done", nil
	}
}

func rsWaitExternal(name string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r, err := WaitEvent[Raw](ctx, name).Await(ctx)
		return string(r), err
	}
}

func rsSubOrch(name, input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r, err := CallSub[Raw](ctx, name, Raw(input)).Await(ctx)
		return string(r), err
	}
}

func rsContinueAsNew(input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		return "", ContinueAsNew(ctx, Raw(input))
	}
}

func rsSubOrchThenContinueAsNew(sub, subInput, input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		CallSub[Raw](ctx, sub, Raw(subInput)).Cancel() // drop(...)
		return "", ContinueAsNew(ctx, Raw(input))
	}
}

func rsDetachedThenActivity(orch, instance, orchInput, name, input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		if err := ctx.StartOrchestration(orch, instance, Raw(orchInput)); err != nil {
			return "", err
		}
		r, err := rsCall(ctx, name, input).Await(ctx)
		return string(r), err
	}
}

type rsPair struct{ name, input string }

func rsMultiScheduleNoAwait(acts ...rsPair) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		for _, a := range acts {
			rsCall(ctx, a.name, a.input).Cancel() // drop(...)
		}
		return "done", nil
	}
}

func rsTwoActivities(first, second rsPair) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r1, err := rsCall(ctx, first.name, first.input).Await(ctx)
		if err != nil {
			return "", err
		}
		r2, err := rsCall(ctx, second.name, second.input).Await(ctx)
		if err != nil {
			return "", err
		}
		return string(r1) + "," + string(r2), nil
	}
}

func rsTwoTimers(first, second time.Duration) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		if err := ctx.Sleep(first); err != nil {
			return "", err
		}
		if err := ctx.Sleep(second); err != nil {
			return "", err
		}
		return "done", nil
	}
}

func rsSubOrchThenActivity(sub, subInput, name, input string) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r1, err := CallSub[Raw](ctx, sub, Raw(subInput)).Await(ctx)
		if err != nil {
			return "", err
		}
		r2, err := rsCall(ctx, name, input).Await(ctx)
		if err != nil {
			return "", err
		}
		return string(r1) + "," + string(r2), nil
	}
}

func rsActivityThenTimer(name, input string, d time.Duration) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		r, err := rsCall(ctx, name, input).Await(ctx)
		if err != nil {
			return "", err
		}
		if err := ctx.Sleep(d); err != nil {
			return "", err
		}
		return string(r), nil
	}
}

// rsSelect2 is helpers.rs' Select2Handler: activity against timer.
func rsSelect2(name, input string, d time.Duration) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		act := rsCall(ctx, name, input)
		timer := ctx.Timer(d)
		switch Select(ctx, act, timer) {
		case act:
			r, err := act.Await(ctx)
			if err != nil {
				return "", fmt.Errorf("activity_err:%w", err)
			}
			return "activity:" + string(r), nil
		default:
			return "timeout", nil
		}
	}
}

func rsJoinActivities(acts ...rsPair) rsHandler {
	return func(ctx Context, _ string) (string, error) {
		var futs []Future[Raw]
		for _, a := range acts {
			futs = append(futs, rsCall(ctx, a.name, a.input))
		}
		rs, err := All(ctx, futs...)
		if err != nil {
			return "", err
		}
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = string(r)
		}
		return strings.Join(out, ","), nil
	}
}

func rsPanic(msg string) rsHandler {
	return func(Context, string) (string, error) { panic(msg) }
}

// fresh_execution.rs
func TestReplaySpecFreshExecution(t *testing.T) {
	t.Run("immediate_return_ok", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsImmediateOK("success"))
		r.wantCompleted("success")
		if len(r.pending()) != 0 || len(r.delta()) != 0 {
			t.Fatalf("want no pending actions and no delta, got %s", r.describe())
		}
	})
	t.Run("immediate_return_err", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsImmediateErr("failure"))
		r.wantFailed()
		if len(r.pending()) != 0 {
			t.Fatal("want no pending actions")
		}
	})
	t.Run("schedule_activity_pending", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleActivity("Greet", "Alice"))
		r.wantContinue()
		if len(r.pending()) != 1 || r.pendingOf(actActivity, "Greet") != 1 || len(r.delta()) != 1 || len(r.deltaOf("ActivityScheduled")) != 1 {
			t.Fatalf("want one pending Greet and one ActivityScheduled, got %s", r.describe())
		}
	})
	t.Run("schedule_timer_pending", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleTimer(60 * time.Second))
		r.wantContinue()
		if len(r.pending()) != 1 || r.pendingOf(actTimer, "") != 1 || len(r.delta()) != 1 || len(r.deltaOf("TimerCreated")) != 1 {
			t.Fatalf("want one pending timer and one TimerCreated, got %s", r.describe())
		}
	})
	t.Run("schedule_external_pending", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsWaitExternal("Approval"))
		r.wantContinue()
		if len(r.pending()) != 1 || r.pendingOf(actWait, "Approval") != 1 || len(r.delta()) != 1 || len(r.deltaOf("ExternalSubscribed")) != 1 {
			t.Fatalf("want one pending wait and one ExternalSubscribed, got %s", r.describe())
		}
	})
	t.Run("schedule_sub_orch_pending", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSubOrch("ChildOrch", "child-input"))
		r.wantContinue()
		if len(r.pending()) != 1 || r.pendingOf(actSubOrch, "ChildOrch") != 1 {
			t.Fatalf("want one pending ChildOrch, got %s", r.describe())
		}
	})
	t.Run("continue_as_new", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsContinueAsNew("new-input"))
		r.wantContinueAsNew("new-input")
	})
	// Ours keeps the ContinueAsNew action out of the pending list (it has no schedule event and is
	// carried in the outcome), so "has_continue_as_new_action" reads the outcome's action.
	t.Run("sub_orch_then_continue_as_new", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSubOrchThenContinueAsNew("ChildOrch", "child-input", "new-input"))
		r.wantContinueAsNew("new-input")
		if r.pendingOf(actSubOrch, "ChildOrch") != 1 || r.e.continueAs == nil || r.e.continueAs.input != "new-input" {
			t.Fatalf("want the sub-orchestration pending and the continue-as-new action, got %s", r.describe())
		}
	})
	t.Run("multiple_schedules_no_await", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsMultiScheduleNoAwait(rsPair{"A", "a"}, rsPair{"B", "b"}, rsPair{"C", "c"}))
		r.wantCompleted("done")
		if len(r.pending()) != 3 || len(r.deltaOf("ActivityScheduled")) != 3 || len(r.deltaOf("ActivityCancelRequested")) != 3 {
			t.Fatalf("want 3 pending, 3 ActivityScheduled, 3 ActivityCancelRequested, got %s", r.describe())
		}
	})
}

// action_to_event.rs
func TestReplaySpecActionToEvent(t *testing.T) {
	sessionActivity := func(name, input, session string) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			r, err := rsCall(ctx, name, input, OnSession(session)).Await(ctx)
			return string(r), err
		}
	}
	tagged := func(name, input, tag string) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			r, err := rsCall(ctx, name, input, WithTag(tag)).Await(ctx)
			return string(r), err
		}
	}
	onlyScheduled := func(t *testing.T, r *rsEngine) provider.ActivityScheduledEvent {
		t.Helper()
		evs := r.deltaOf("ActivityScheduled")
		if len(evs) != 1 {
			t.Fatalf("want exactly one ActivityScheduled in the delta, got %s", r.describe())
		}
		return evs[0].Kind.(provider.ActivityScheduledEvent)
	}
	t.Run("schedule_activity_creates_activity_scheduled_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleActivity("MyActivity", "my-input"))
		r.wantContinue()
		if k := onlyScheduled(t, r); k.Name != "MyActivity" || k.Input != "my-input" {
			t.Fatalf("got %+v", k)
		}
	})
	t.Run("schedule_activity_on_session_creates_activity_scheduled_event_with_session_id", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(sessionActivity("MyActivity", "my-input", "sess-1"))
		r.wantContinue()
		if k := onlyScheduled(t, r); k.Name != "MyActivity" || k.Input != "my-input" || k.SessionID == nil || *k.SessionID != "sess-1" {
			t.Fatalf("got %+v", k)
		}
	})
	t.Run("schedule_activity_on_session_session_id_mismatch_causes_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "MyActivity", "my-input")})
		r.exec(sessionActivity("MyActivity", "my-input", "sess-1"))
		r.wantNondeterminism()
	})
	t.Run("schedule_timer_creates_timer_created_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleTimer(10 * time.Second))
		r.wantContinue()
		evs := r.deltaOf("TimerCreated")
		if len(evs) != 1 || evs[0].Kind.(provider.TimerCreatedEvent).FireAtMs == 0 {
			t.Fatalf("want one TimerCreated with fire_at_ms set, got %s", r.describe())
		}
	})
	t.Run("schedule_wait_creates_external_subscribed_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsWaitExternal("MyEvent"))
		r.wantContinue()
		evs := r.deltaOf("ExternalSubscribed")
		if len(evs) != 1 || evs[0].Kind.(provider.ExternalSubscribedEvent).Name != "MyEvent" {
			t.Fatalf("want one ExternalSubscribed MyEvent, got %s", r.describe())
		}
	})
	t.Run("schedule_sub_orchestration_creates_sub_orchestration_scheduled_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			CallSub[Raw](ctx, "ChildOrch", Raw("child-input")).Cancel() // drop(...)
			return "scheduled", nil
		})
		r.wantCompleted("scheduled")
		evs := r.deltaOf("SubOrchestrationScheduled")
		if len(evs) != 1 {
			t.Fatalf("want one SubOrchestrationScheduled, got %s", r.describe())
		}
		if k := evs[0].Kind.(provider.SubOrchestrationScheduledEvent); k.Name != "ChildOrch" || k.Input != "child-input" {
			t.Fatalf("got %+v", k)
		}
	})
	t.Run("schedule_orchestration_creates_orchestration_chained_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			return "scheduled", ctx.StartOrchestration("DetachedChild", "child-instance", Raw("child-input"))
		})
		r.wantCompleted("scheduled")
		evs := r.deltaOf("OrchestrationChained")
		if len(evs) != 1 {
			t.Fatalf("want one OrchestrationChained, got %s", r.describe())
		}
		want := provider.OrchestrationChainedEvent{Name: "DetachedChild", Instance: "child-instance", Input: "child-input"}
		if k := evs[0].Kind.(provider.OrchestrationChainedEvent); k != want {
			t.Fatalf("got %+v", k)
		}
	})
	t.Run("multiple_action_types_create_corresponding_events", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsMultiScheduleNoAwait(rsPair{"Task1", "input1"}, rsPair{"Task2", "input2"}))
		r.wantCompleted("done")
		if len(r.deltaOf("ActivityScheduled")) != 2 {
			t.Fatalf("want two ActivityScheduled, got %s", r.describe())
		}
	})
	t.Run("detached_orchestration_then_activity_replays_correctly", func(t *testing.T) {
		h := rsDetachedThenActivity("DetachedChild", "child-1", "child-input", "MyActivity", "activity-input")
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(h)
		r.wantContinue()
		replay := append([]provider.Event{rsStarted(1)}, r.delta()...)
		r2 := newRS(t, replay)
		var id uint64
		for _, ev := range r2.e.allEvents() {
			if _, ok := ev.Kind.(provider.ActivityScheduledEvent); ok {
				id = ev.EventID
			}
		}
		if id == 0 {
			t.Fatalf("no ActivityScheduled in %s", dump(replay))
		}
		r2.prep(rsMsgActDone(id, "activity-result"))
		r2.exec(h)
		r2.wantCompleted("activity-result")
	})
	t.Run("with_tag_sets_tag_on_emitted_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(tagged("GpuWork", "data", "gpu"))
		r.wantContinue()
		if k := onlyScheduled(t, r); k.Name != "GpuWork" || k.Tag == nil || *k.Tag != "gpu" {
			t.Fatalf("got %+v", k)
		}
	})
	t.Run("no_with_tag_leaves_none", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleActivity("PlainWork", "data"))
		r.wantContinue()
		if k := onlyScheduled(t, r); k.Tag != nil {
			t.Fatalf("got tag %q", *k.Tag)
		}
	})
	t.Run("tag_mismatch_on_replay_causes_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "GpuWork", "data")})
		r.exec(tagged("GpuWork", "data", "gpu"))
		r.wantNondeterminism()
	})
	t.Run("tag_value_change_on_replay_causes_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActTagged(2, "Render", "data", ptr("gpu"))})
		r.exec(tagged("Render", "data", "cpu"))
		r.wantNondeterminism()
	})
	t.Run("tag_removal_on_replay_causes_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActTagged(2, "Render", "data", ptr("gpu"))})
		r.exec(rsSingleActivity("Render", "data"))
		r.wantNondeterminism()
	})
}

// cancellation.rs
func TestReplaySpecCancellation(t *testing.T) {
	t.Run("cancel_via_message", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgCancel("user requested"))
		r.exec(rsImmediateOK("success"))
		r.wantCancelled("user requested")
	})
	t.Run("cancel_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsCancelRequested(2, "admin cancelled")})
		r.exec(rsImmediateOK("success"))
		r.wantCancelled("admin cancelled")
	})
	t.Run("cancel_precedence_over_completion", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgCancel("cancelled"))
		r.exec(rsImmediateOK("would have completed"))
		r.wantCancelled("cancelled")
	})
	t.Run("cancel_with_pending_activity", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgCancel("cancelled"))
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCancelled("cancelled")
	})
	t.Run("cancel_duplicate_filtered", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsCancelRequested(2, "first cancel")})
		r.prep(rsMsgCancel("second cancel"))
		if len(r.delta()) != 0 {
			t.Fatalf("duplicate cancel not filtered:\n%s", dump(r.delta()))
		}
	})
}

// completion_messages.rs: prep_completions alone.
func TestReplaySpecCompletionMessages(t *testing.T) {
	one := func(t *testing.T, r *rsEngine) provider.EventKind {
		t.Helper()
		if len(r.delta()) != 1 {
			t.Fatalf("want one event in the delta, got:\n%s", dump(r.delta()))
		}
		return r.delta()[0].Kind
	}
	t.Run("activity_completed_message", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgActDone(2, "result"))
		if k, ok := one(t, r).(provider.ActivityCompletedEvent); !ok || k.Result != "result" {
			t.Fatalf("got %#v", k)
		}
	})
	t.Run("timer_fired_message", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsTimer(2, 1000)})
		r.prep(rsMsgFired(2, 1000))
		if _, ok := one(t, r).(provider.TimerFiredEvent); !ok {
			t.Fatal("want TimerFired")
		}
	})
	t.Run("external_raised_message", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "MyEvent")})
		r.prep(rsMsgRaised("MyEvent", "event-data"))
		if k, ok := one(t, r).(provider.ExternalEventEvent); !ok || k.Name != "MyEvent" || k.Data != "event-data" {
			t.Fatalf("got %#v", k)
		}
	})
	t.Run("sub_orch_completed_message", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "Child", "sub::2", "input")})
		r.prep(rsMsgSubDone(2, "child-result"))
		if k, ok := one(t, r).(provider.SubOrchestrationCompletedEvent); !ok || k.Result != "child-result" {
			t.Fatalf("got %#v", k)
		}
	})
	t.Run("duplicate_completion_filtered", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "result")})
		r.prep(rsMsgActDone(2, "result"))
		if len(r.delta()) != 0 {
			t.Fatalf("duplicate not filtered:\n%s", dump(r.delta()))
		}
	})
	t.Run("duplicate_in_same_batch", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgActDone(2, "first-result"), rsMsgActDone(2, "second-result"))
		if k, ok := one(t, r).(provider.ActivityCompletedEvent); !ok || k.Result != "first-result" {
			t.Fatalf("got %#v", k)
		}
	})
	t.Run("wrong_execution_filtered", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(provider.WorkItem{Kind: provider.ActivityCompleted{Instance: rsInstance, ExecutionID: 999, ID: 2, Result: "result"}})
		if len(r.delta()) != 0 {
			t.Fatalf("wrong execution not filtered:\n%s", dump(r.delta()))
		}
	})
	t.Run("external_without_subscription", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgRaised("UnknownEvent", "data"))
		one(t, r)
	})
	t.Run("multiple_completions_batch", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A", "a"), rsActSched(3, "B", "b")})
		r.prep(rsMsgActDone(2, "result-a"), rsMsgActDone(3, "result-b"))
		if len(r.delta()) != 2 {
			t.Fatalf("want both completions, got:\n%s", dump(r.delta()))
		}
	})
	t.Run("duplicate_external_events_in_batch_are_kept", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "Evt")})
		r.prep(rsMsgRaised("Evt", "same-data"), rsMsgRaised("Evt", "same-data"))
		if len(r.delta()) != 2 {
			t.Fatalf("want both external events, got:\n%s", dump(r.delta()))
		}
	})
	t.Run("duplicate_external_event_in_history_is_kept", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "Evt"), rsExternal(3, "Evt", "same-data")})
		r.prep(rsMsgRaised("Evt", "same-data"))
		one(t, r)
	})
}

// composition.rs
func TestReplaySpecComposition(t *testing.T) {
	t.Run("select2_activity_wins", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsActDone(4, 2, "activity-result")})
		r.exec(rsSelect2("Task", "input", 60*time.Second))
		r.wantCompleted("activity:activity-result")
	})
	t.Run("select2_timer_wins", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000)})
		r.exec(rsSelect2("Task", "input", 60*time.Second))
		r.wantCompleted("timeout")
	})
	t.Run("select2_both_pending", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000)})
		r.exec(rsSelect2("Task", "input", 60*time.Second))
		r.wantContinue()
	})
	t.Run("join_all_complete", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A", "a"), rsActSched(3, "B", "b"), rsActDone(4, 2, "result-a"), rsActDone(5, 3, "result-b")})
		r.exec(rsJoinActivities(rsPair{"A", "a"}, rsPair{"B", "b"}))
		r.wantCompleted("result-a,result-b")
	})
	t.Run("join_partial_complete", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A", "a"), rsActSched(3, "B", "b"), rsActDone(4, 2, "result-a")})
		r.exec(rsJoinActivities(rsPair{"A", "a"}, rsPair{"B", "b"}))
		r.wantContinue()
	})
	t.Run("join_fresh_schedule", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsJoinActivities(rsPair{"A", "a"}, rsPair{"B", "b"}, rsPair{"C", "c"}))
		r.wantContinue()
		if len(r.pending()) != 3 {
			t.Fatalf("want 3 pending, got %s", r.describe())
		}
	})
	t.Run("join_one_fails", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A", "a"), rsActSched(3, "B", "b"), rsActDone(4, 2, "result-a"), rsActFailed(5, 3, "B failed")})
		r.exec(rsJoinActivities(rsPair{"A", "a"}, rsPair{"B", "b"}))
		r.wantFailed()
	})
	t.Run("join_large_completed_sub_orchestration_fan_in_reaches_terminal", func(t *testing.T) {
		const n = 1024
		hist := []provider.Event{rsStarted(1)}
		for i := range n {
			hist = append(hist, rsSubSched(uint64(i+2), "Child", fmt.Sprintf("child-%d", i), strconv.Itoa(i)))
		}
		for i := range n {
			hist = append(hist, rsSubDone(uint64(n+i+2), uint64(i+2), strconv.Itoa(i)))
		}
		r := newRS(t, hist)
		r.exec(func(ctx Context, _ string) (string, error) {
			var futs []Future[Raw]
			for i := range n {
				futs = append(futs, CallSub[Raw](ctx, "Child", Raw(strconv.Itoa(i)), WithInstanceID(fmt.Sprintf("child-%d", i))))
			}
			rs, err := All(ctx, futs...)
			if err != nil {
				return "", err
			}
			for i, v := range rs {
				if string(v) != strconv.Itoa(i) {
					return "", fmt.Errorf("result at index %d was %s", i, v)
				}
			}
			return strconv.Itoa(len(rs)), nil
		})
		r.wantCompleted(strconv.Itoa(n))
		if len(r.pending()) != 0 {
			t.Fatalf("fully replayed fan-in emitted %d new actions", len(r.pending()))
		}
	})
}

// edge_cases.rs
func TestReplaySpecEdgeCases(t *testing.T) {
	t.Run("zero_delay_timer", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleTimer(0))
		r.wantContinue()
		if r.pendingOf(actTimer, "") != 1 {
			t.Fatalf("want a pending timer, got %s", r.describe())
		}
	})
	t.Run("empty_activity_input", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", ""), rsActDone(3, 2, "result")})
		r.exec(rsSingleActivity("Task", ""))
		r.wantCompleted("result")
	})
	t.Run("large_result_string", func(t *testing.T) {
		large := strings.Repeat("x", 1_000_000)
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, large)})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCompleted(large)
	})
	t.Run("handler_invoked_once", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		count := 0
		r.exec(func(Context, string) (string, error) { count++; return "done", nil })
		r.wantCompleted("done")
		if count != 1 {
			t.Fatalf("handler invoked %d times", count)
		}
	})
	t.Run("handler_invoked_once_during_replay", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "result")})
		count := 0
		r.exec(func(ctx Context, in string) (string, error) {
			count++
			return rsSingleActivity("Task", "input")(ctx, in)
		})
		r.wantCompleted("result")
		if count != 1 {
			t.Fatalf("handler invoked %d times", count)
		}
	})
	t.Run("empty_external_event_data", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "Event"), rsExternal(3, "Event", "")})
		r.exec(rsWaitExternal("Event"))
		r.wantCompleted("")
	})
	t.Run("multiple_external_events_same_name", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "Event"), rsExternal(3, "Event", "first-data"), rsExternal(4, "Event", "second-data")})
		r.exec(rsWaitExternal("Event"))
		r.wantCompleted("first-data")
	})
	// Ours has no made_progress(): progress is a delta that is not empty after prep_completions.
	t.Run("made_progress_after_completion", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		if len(r.delta()) != 0 {
			t.Fatal("progress before any completion")
		}
		r.prep(rsMsgActDone(2, "result"))
		if len(r.delta()) == 0 {
			t.Fatal("no progress after a completion")
		}
	})
	t.Run("final_history_combines_baseline_and_delta", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantContinue()
		if got := types(r.e.allEvents()); got != "OrchestrationStarted ActivityScheduled" {
			t.Fatalf("final history %s", got)
		}
	})
}

// event_allocation.rs
func TestReplaySpecEventAllocation(t *testing.T) {
	ids := func(evs []provider.Event) []uint64 {
		var out []uint64
		for _, ev := range evs {
			out = append(out, ev.EventID)
		}
		return out
	}
	t.Run("sequential_allocation", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsMultiScheduleNoAwait(rsPair{"A", "a"}, rsPair{"B", "b"}, rsPair{"C", "c"}))
		r.wantCompleted("done")
		if got := ids(r.deltaOf("ActivityScheduled")); !slices.Equal(got, []uint64{2, 3, 4}) {
			t.Fatalf("scheduled ids %v", got)
		}
		all := ids(r.delta())
		for i, id := range all {
			if id != uint64(i+2) {
				t.Fatalf("delta ids %v, want sequential from 2", all)
			}
		}
	})
	t.Run("allocation_after_replay", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "First", "input"), rsActDone(3, 2, "result")})
		r.exec(rsTwoActivities(rsPair{"First", "input"}, rsPair{"Second", "input2"}))
		r.wantContinue()
		if got := ids(r.delta()); !slices.Equal(got, []uint64{4}) {
			t.Fatalf("delta ids %v, want [4]", got)
		}
	})
	t.Run("allocation_with_gaps", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(5, "Task", "input")})
		r.prep(rsMsgActDone(5, "result"))
		r.exec(rsTwoActivities(rsPair{"Task", "input"}, rsPair{"Next", "next"}))
		r.wantContinue()
		if got := ids(r.delta()); !slices.Contains(got, 6) || !slices.Contains(got, 7) {
			t.Fatalf("delta ids %v, want 6 (completion) and 7 (new schedule)", got)
		}
	})
	t.Run("pending_actions_have_correct_event_id", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantContinue()
		if p := r.pending(); len(p) != 1 || !actActivity(p[0]) || p[0].base().scheduleID != 2 {
			t.Fatalf("want one activity action bound to event 2, got %s", r.describe())
		}
	})
}

// failure_handling.rs
func TestReplaySpecFailureHandling(t *testing.T) {
	kindOf := func(d provider.ErrorDetails) string { return fmt.Sprintf("%T", d.Kind) }
	t.Run("application_error_propagates", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgActFailed(2, "business rule violated"))
		r.exec(rsSingleActivity("Task", "input"))
		if _, ok := r.wantFailed().Kind.(provider.ApplicationError); !ok {
			t.Fatalf("want Application, got %s", kindOf(r.o.details))
		}
	})
	t.Run("infrastructure_error_aborts", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgActFailedWith(2, provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "activity", Message: "database connection lost"}}))
		r.exec(rsSingleActivity("Task", "input"))
		if _, ok := r.wantFailed().Kind.(provider.InfrastructureError); !ok {
			t.Fatalf("want Infrastructure, got %s", kindOf(r.o.details))
		}
	})
	t.Run("configuration_error_aborts", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		msg := "activity not registered"
		r.prep(rsMsgActFailedWith(2, provider.ErrorDetails{Kind: provider.ConfigurationError{Kind: "Nondeterminism", Message: &msg}}))
		r.exec(rsSingleActivity("Task", "input"))
		if _, ok := r.wantFailed().Kind.(provider.ConfigurationError); !ok {
			t.Fatalf("want Configuration, got %s", kindOf(r.o.details))
		}
	})
	t.Run("sub_orch_infra_error_aborts_parent", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "Child", "sub::2", "input")})
		r.prep(rsMsgSubFailedWith(2, provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "child", Message: "child infra failure"}}))
		r.exec(rsSubOrch("Child", "input"))
		if _, ok := r.wantFailed().Kind.(provider.InfrastructureError); !ok {
			t.Fatalf("want Infrastructure, got %s", kindOf(r.o.details))
		}
	})
	t.Run("sub_orch_app_error_propagates", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "Child", "sub::2", "input")})
		r.prep(rsMsgSubFailedWith(2, appError(provider.AppOrchestrationFailed, "child business error")))
		r.exec(rsSubOrch("Child", "input"))
		r.wantAppError(provider.AppOrchestrationFailed)
	})
}

// panic_handling.rs
func TestReplaySpecPanicHandling(t *testing.T) {
	t.Run("panic_string", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsPanic("oops something went wrong"))
		r.wantAppError(provider.AppPanicked)
		r.wantFailedWith("oops something went wrong")
	})
	t.Run("panic_other", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(Context, string) (string, error) { panic(42) })
		r.wantAppError(provider.AppPanicked)
		r.wantFailedWith("42")
	})
	t.Run("panic_during_await", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "result")})
		r.exec(func(ctx Context, _ string) (string, error) {
			_, _ = rsCall(ctx, "Task", "input").Await(ctx)
			panic("panic after activity")
		})
		r.wantAppError(provider.AppPanicked)
		r.wantFailedWith("panic after activity")
	})
}

// partial_completion.rs
func TestReplaySpecPartialCompletion(t *testing.T) {
	for _, c := range []struct {
		name string
		hist []provider.Event
		h    rsHandler
	}{
		{"activity_scheduled_no_completion", []provider.Event{rsStarted(1), rsActSched(2, "Greet", "Alice")}, rsSingleActivity("Greet", "Alice")},
		{"timer_created_no_fire", []provider.Event{rsStarted(1), rsTimer(2, 1000)}, rsSingleTimer(60 * time.Second)},
		{"external_subscribed_no_event", []provider.Event{rsStarted(1), rsSubscribed(2, "Approval")}, rsWaitExternal("Approval")},
		{"sub_orch_scheduled_no_completion", []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "child-input")}, rsSubOrch("ChildOrch", "child-input")},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRS(t, c.hist)
			r.exec(c.h)
			r.wantContinue()
			if len(r.pending()) != 0 {
				t.Fatalf("want no new actions, got %s", r.describe())
			}
		})
	}
}

// replay_with_completions.rs
func TestReplaySpecReplayWithCompletions(t *testing.T) {
	t.Run("activity_completed_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Greet", "Alice"), rsActDone(3, 2, "Hello, Alice!")})
		r.exec(rsSingleActivity("Greet", "Alice"))
		r.wantCompleted("Hello, Alice!")
		if len(r.pending()) != 0 {
			t.Fatal("want no new actions")
		}
	})
	t.Run("activity_failed_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Greet", "Alice"), rsActFailed(3, 2, "service unavailable")})
		r.exec(rsSingleActivity("Greet", "Alice"))
		r.wantFailed()
	})
	t.Run("timer_fired_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsTimer(2, 1000), rsFired(3, 2, 1000)})
		r.exec(rsSingleTimer(60 * time.Second))
		r.wantCompleted("timer_done")
	})
	t.Run("external_received_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "Approval"), rsExternal(3, "Approval", "approved-data")})
		r.exec(rsWaitExternal("Approval"))
		r.wantCompleted("approved-data")
	})
	t.Run("sub_orch_completed_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "child-input"), rsSubDone(3, 2, "child-result")})
		r.exec(rsSubOrch("ChildOrch", "child-input"))
		r.wantCompleted("child-result")
	})
}

// history_corruption.rs
func TestReplaySpecHistoryCorruption(t *testing.T) {
	t.Run("empty_history", func(t *testing.T) {
		r := newRS(t, nil)
		r.exec(rsImmediateOK("done"))
		r.wantNondeterminism()
		r.wantFailedWith("empty")
	})
	t.Run("missing_started_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsActSched(1, "Task", "input")})
		r.exec(rsImmediateOK("done"))
		r.wantFailedWith("OrchestrationStarted")
	})
	t.Run("started_not_first", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsActSched(1, "Task", "input"), rsStarted(2)})
		r.exec(rsImmediateOK("done"))
		r.wantFailedWith("OrchestrationStarted")
	})
	t.Run("event_id_zero", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(0)})
		r.exec(rsImmediateOK("done"))
		r.wantCompleted("done")
	})
	t.Run("event_id_gap", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(100, "Task", "input"), rsActDone(200, 100, "result")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCompleted("result")
	})
	t.Run("non_monotonic_event_ids", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(5, "Task", "input"), rsActDone(3, 5, "result")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCompleted("result")
	})
	t.Run("completion_source_not_found", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.prep(rsMsgActDone(99, "result"))
		r.exec(rsSingleActivity("Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("completion_source_wrong_type", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsTimer(2, 1000)})
		r.prep(rsMsgActDone(2, "result"))
		r.exec(rsSingleTimer(60 * time.Second))
		r.wantNondeterminism()
	})
	t.Run("multiple_completions_same_source_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "first-result")})
		r.prep(rsMsgActDone(2, "second-result"))
		if len(r.delta()) != 0 {
			t.Fatalf("duplicate not filtered:\n%s", dump(r.delta()))
		}
	})
	for _, name := range []string{"completion_for_different_execution", "completion_wrong_execution"} {
		t.Run(name, func(t *testing.T) {
			r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
			r.prep(provider.WorkItem{Kind: provider.ActivityCompleted{Instance: rsInstance, ExecutionID: 999, ID: 2, Result: "result"}})
			if len(r.delta()) != 0 {
				t.Fatalf("stale execution not filtered:\n%s", dump(r.delta()))
			}
		})
	}
	for _, c := range []struct {
		name string
		hist []provider.Event
	}{
		{"terminal_completed", []provider.Event{rsStarted(1), rsOrchCompleted(2, "done")}},
		{"terminal_failed", []provider.Event{rsStarted(1), rsOrchFailed(2, "error")}},
		{"terminal_continued_as_new", []provider.Event{rsStarted(1), rsOrchCAN(2, "new input")}},
		{"multiple_terminal_events", []provider.Event{rsStarted(1), rsOrchCompleted(2, "first"), rsOrchFailed(3, "second")}},
		{"events_after_terminal", []provider.Event{rsStarted(1), rsOrchCompleted(2, "done"), rsActSched(3, "Task", "input")}},
		{"cancel_after_completed", []provider.Event{rsStarted(1), rsOrchCompleted(2, "done"), rsCancelRequested(3, "too late")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRS(t, c.hist)
			r.exec(rsImmediateOK("new result"))
			r.wantContinue()
		})
	}
	t.Run("empty_activity_name", func(t *testing.T) {
		// API difference: dx.Call refuses an empty activity name before scheduling anything (the
		// future fails at once, so the code returns that error on its first poll), where duroxide
		// schedules an activity named "" and this history replays to Completed("result"). No
		// activity can be registered under "" in dx, so such a history cannot arise from dx code.
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "", "input"), rsActDone(3, 2, "result")})
		r.exec(rsSingleActivity("", "input"))
		r.wantAppError(provider.AppOrchestrationFailed)
		r.wantFailedWith("needs an activity name")
	})
	t.Run("unicode_in_names", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Grüß Gott 🎉", "日本語入力"), rsActDone(3, 2, "emoji result 👍")})
		r.exec(rsSingleActivity("Grüß Gott 🎉", "日本語入力"))
		r.wantCompleted("emoji result 👍")
	})
	t.Run("very_long_strings", func(t *testing.T) {
		name, input, result := strings.Repeat("x", 10000), strings.Repeat("y", 10000), strings.Repeat("z", 10000)
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, name, input), rsActDone(3, 2, result)})
		r.exec(rsSingleActivity(name, input))
		r.wantCompleted(result)
	})
	t.Run("special_characters", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Name\nWith\tSpecial", "Input\r\nCRLF"), rsActDone(3, 2, "Result\x00WithNull")})
		r.exec(rsSingleActivity("Name\nWith\tSpecial", "Input\r\nCRLF"))
		r.wantCompleted("Result\x00WithNull")
	})
	t.Run("timer_fired_before_created", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsFired(2, 3, 1000), rsTimer(3, 1000)})
		r.exec(rsSingleTimer(60 * time.Second))
		r.wantNondeterminism()
	})
	t.Run("activity_completed_before_scheduled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActDone(2, 3, "result"), rsActSched(3, "Task", "input")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("orphan_completion_no_schedule", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgActDone(99, "orphan"))
		r.exec(rsImmediateOK("done"))
		r.wantNondeterminism()
	})
	t.Run("orphan_timer_fired", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgFired(99, 1000))
		r.exec(rsImmediateOK("done"))
		r.wantNondeterminism()
	})
	t.Run("orphan_external_event", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgRaised("UnknownEvent", "data"))
		if len(r.delta()) != 1 {
			t.Fatalf("want the external event materialised, got:\n%s", dump(r.delta()))
		}
		r.exec(rsImmediateOK("done"))
		r.wantCompleted("done")
	})
	t.Run("orphan_sub_orch_completed", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.prep(rsMsgSubDone(99, "result"))
		r.exec(rsImmediateOK("done"))
		r.wantNondeterminism()
	})
	t.Run("duplicate_activity_schedule_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A", "input"), rsActSched(3, "A", "input")})
		r.exec(rsSingleActivity("A", "input"))
		r.wantNondeterminism()
	})
	t.Run("duplicate_timer_schedule_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsTimer(2, 1000), rsTimer(3, 1000)})
		r.exec(rsSingleTimer(60 * time.Second))
		r.wantNondeterminism()
	})
	t.Run("duplicate_external_subscription_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubscribed(2, "E"), rsSubscribed(3, "E")})
		r.exec(rsWaitExternal("E"))
		r.wantNondeterminism()
	})
}

// is_replaying.rs
func TestReplaySpecIsReplaying(t *testing.T) {
	atStart := func(got *bool) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			*got = ctx.IsReplaying()
			return "done", nil
		}
	}
	t.Run("fresh_execution_not_replaying", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)}, 1)
		var got bool
		r.exec(atStart(&got))
		if !got {
			t.Fatal("with persisted_len=1, is_replaying starts true")
		}
	})
	t.Run("replay_is_replaying", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "result")}, 3)
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCompleted("result")
	})
	t.Run("transitions_after_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "First", "input"), rsActDone(3, 2, "result")}, 3)
		var after *bool
		r.exec(func(ctx Context, _ string) (string, error) {
			if _, err := rsCall(ctx, "First", "input").Await(ctx); err != nil {
				return "", err
			}
			after = ptr(ctx.IsReplaying())
			return "done", nil
		})
		r.wantCompleted("done")
		if after == nil || *after {
			t.Fatalf("is_replaying after the whole history was consumed: %v", after)
		}
	})
	t.Run("fresh_start_with_zero_persisted", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)}, 0)
		got := true
		r.exec(atStart(&got))
		r.wantCompleted("done")
		if got {
			t.Fatal("zero persisted history means not replaying")
		}
	})
}

// nondeterminism.rs. Where the Rust test checks the message, ours is checked for the event id it
// names (duroxide's wording is not reproduced).
func TestReplaySpecNondeterminism(t *testing.T) {
	for _, c := range []struct {
		name string
		hist []provider.Event
		msgs []provider.WorkItem
		h    rsHandler
		msg  string
	}{
		{name: "schedule_mismatch_activity_vs_timer", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")}, h: rsSingleTimer(60 * time.Second)},
		{name: "schedule_mismatch_timer_vs_activity", hist: []provider.Event{rsStarted(1), rsTimer(2, 1000)}, h: rsSingleActivity("Task", "input")},
		{name: "schedule_mismatch_wrong_activity_name", hist: []provider.Event{rsStarted(1), rsActSched(2, "ActivityA", "input")}, h: rsSingleActivity("ActivityB", "input")},
		{name: "schedule_mismatch_wrong_input", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input-x")}, h: rsSingleActivity("Task", "input-y")},
		{name: "schedule_mismatch_wrong_external_name", hist: []provider.Event{rsStarted(1), rsSubscribed(2, "EventX")}, h: rsWaitExternal("EventY")},
		{name: "completion_without_schedule", hist: []provider.Event{rsStarted(1)}, msgs: []provider.WorkItem{rsMsgActDone(999, "result")}, h: rsImmediateOK("done"), msg: "event 999"},
		{name: "completion_kind_mismatch", hist: []provider.Event{rsStarted(1), rsTimer(2, 1000)}, msgs: []provider.WorkItem{rsMsgActDone(2, "result")}, h: rsSingleTimer(60 * time.Second), msg: "event 2"},
		{name: "timer_completion_for_activity_schedule", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")}, msgs: []provider.WorkItem{rsMsgFired(2, 1000)}, h: rsSingleActivity("Task", "input"), msg: "event 2"},
		{name: "sub_orch_completion_for_activity_schedule", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")}, msgs: []provider.WorkItem{rsMsgSubDone(2, "result")}, h: rsSingleActivity("Task", "input"), msg: "event 2"},
		{name: "sub_orch_completion_for_timer_schedule", hist: []provider.Event{rsStarted(1), rsTimer(2, 1000)}, msgs: []provider.WorkItem{rsMsgSubDone(2, "result")}, h: rsSingleTimer(60 * time.Second), msg: "event 2"},
		{name: "timer_completion_for_sub_orch_schedule", hist: []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "child-inst", "input")}, msgs: []provider.WorkItem{rsMsgFired(2, 1000)}, h: rsSubOrch("ChildOrch", "input"), msg: "event 2"},
		{name: "orchestration_chained_no_matching_action", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsChained(3, "ChildOrch", "child-inst", "input")}, h: rsSingleActivity("Task", "input"), msg: "event 3"},
		{name: "orchestration_chained_name_mismatch", hist: []provider.Event{rsStarted(1), rsChained(2, "ChildA", "child-inst", "input"), rsActSched(3, "Task", "work")}, h: rsDetachedThenActivity("ChildB", "child-inst", "input", "Task", "work"), msg: "event 2"},
		{name: "activity_completed_for_timer_in_history", hist: []provider.Event{rsStarted(1), rsTimer(2, 1000), rsActDone(3, 2, "wrong")}, h: rsSingleTimer(60 * time.Second), msg: "event 3"},
		{name: "timer_completion_for_closed_schedule", hist: []provider.Event{rsStarted(1), rsTimer(2, 1000), rsFired(3, 2, 1000), rsTimer(4, 2000), rsFired(5, 2, 1000)}, h: rsTwoTimers(time.Second, 2*time.Second), msg: "event 5"},
		{name: "sub_orch_completion_for_closed_schedule", hist: []provider.Event{rsStarted(1), rsSubSched(2, "Child", "child-inst", "input"), rsSubDone(3, 2, "first"), rsActSched(4, "Pending", "work"), rsSubDone(5, 2, "second")}, h: rsSubOrchThenActivity("Child", "input", "Pending", "work"), msg: "event 5"},
		{name: "activity_completion_for_closed_schedule", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "first"), rsActSched(4, "Pending", "work"), rsActDone(5, 2, "second")}, h: rsTwoActivities(rsPair{"Task", "input"}, rsPair{"Pending", "work"}), msg: "event 5"},
		{name: "activity_failed_for_closed_schedule", hist: []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "first"), rsActSched(4, "Pending", "work"), rsActFailed(5, 2, "duplicate error")}, h: rsTwoActivities(rsPair{"Task", "input"}, rsPair{"Pending", "work"}), msg: "event 5"},
		{name: "sub_orch_failed_for_closed_schedule", hist: []provider.Event{rsStarted(1), rsSubSched(2, "Child", "child-inst", "input"), rsSubDone(3, 2, "first"), rsActSched(4, "Pending", "work"), rsSubFailed(5, 2, "duplicate error")}, h: rsSubOrchThenActivity("Child", "input", "Pending", "work"), msg: "event 5"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRS(t, c.hist)
			r.prep(c.msgs...)
			r.exec(c.h)
			r.wantNondeterminism()
			if c.msg != "" {
				r.wantFailedWith(c.msg)
			}
		})
	}
	t.Run("history_schedule_no_emitted_action", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input")})
		r.exec(rsImmediateOK("done"))
		r.wantCompleted("done")
	})
}

// sequential_progress.rs
func TestReplaySpecSequentialProgress(t *testing.T) {
	t.Run("two_activities_first_done", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A1", "input1"), rsActDone(3, 2, "result1")})
		r.exec(rsTwoActivities(rsPair{"A1", "input1"}, rsPair{"A2", "input2"}))
		r.wantContinue()
		if len(r.pending()) != 1 || r.pendingOf(actActivity, "A2") != 1 {
			t.Fatalf("want A2 pending, got %s", r.describe())
		}
	})
	t.Run("two_activities_both_done", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "A1", "input1"), rsActDone(3, 2, "result1"), rsActSched(4, "A2", "input2"), rsActDone(5, 4, "result2")})
		r.exec(rsTwoActivities(rsPair{"A1", "input1"}, rsPair{"A2", "input2"}))
		r.wantCompleted("result1,result2")
	})
	t.Run("identical_activities_both_done_routes_correctly", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "same"), rsActDone(3, 2, "R1"), rsActSched(4, "Task", "same"), rsActDone(5, 4, "R2")})
		r.exec(rsTwoActivities(rsPair{"Task", "same"}, rsPair{"Task", "same"}))
		r.wantCompleted("R1,R2")
	})
	t.Run("identical_activities_routes_correctly_across_restart_boundary", func(t *testing.T) {
		h := func(ctx Context, _ string) (string, error) {
			r1, err := rsCall(ctx, "Task", "same").Await(ctx)
			if err != nil {
				return "", err
			}
			if err := ctx.Sleep(60 * time.Second); err != nil {
				return "", err
			}
			r2, err := rsCall(ctx, "Task", "same").Await(ctx)
			if err != nil {
				return "", err
			}
			return string(r1) + "," + string(r2), nil
		}
		scheduled := func(t *testing.T, r *rsEngine, kind func(action) bool) uint64 {
			t.Helper()
			for _, a := range r.pending() {
				if kind(a) {
					return a.base().scheduleID
				}
			}
			t.Fatalf("no pending action of that kind: %s", r.describe())
			return 0
		}
		persisted := []provider.Event{rsStarted(1)}
		r1 := newRS(t, persisted)
		r1.exec(h)
		r1.wantContinue()
		if r1.pendingOf(actActivity, "Task") != 1 || r1.pendingOf(actTimer, "") != 0 {
			t.Fatalf("turn 1: want Task pending and no timer, got %s", r1.describe())
		}
		persisted = append(persisted, r1.delta()...)
		persisted = append(persisted, rsActDone(3, scheduled(t, r1, actActivity), "R1"))

		r2 := newRS(t, slices.Clone(persisted))
		r2.exec(h)
		r2.wantContinue()
		if r2.pendingOf(actTimer, "") != 1 || r2.pendingOf(actActivity, "Task") != 0 {
			t.Fatalf("turn 2: want the timer pending and no activity, got %s", r2.describe())
		}
		persisted = append(persisted, r2.delta()...)
		persisted = append(persisted, rsFired(5, scheduled(t, r2, actTimer), 0))

		r3 := newRS(t, slices.Clone(persisted))
		r3.exec(h)
		r3.wantContinue()
		if r3.pendingOf(actActivity, "Task") != 1 || r3.pendingOf(actTimer, "") != 0 {
			t.Fatalf("turn 3: want the second Task pending and no timer, got %s", r3.describe())
		}
		persisted = append(persisted, r3.delta()...)
		persisted = append(persisted, rsActDone(7, scheduled(t, r3, actActivity), "R2"))

		r4 := newRS(t, persisted)
		r4.exec(h)
		r4.wantCompleted("R1,R2")
	})
	t.Run("activity_then_timer", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "done")})
		r.exec(rsActivityThenTimer("Task", "input", 60*time.Second))
		r.wantContinue()
		if r.pendingOf(actTimer, "") != 1 {
			t.Fatalf("want a pending timer, got %s", r.describe())
		}
	})
	t.Run("timer_then_activity", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsTimer(2, 1000), rsFired(3, 2, 1000)})
		r.exec(func(ctx Context, _ string) (string, error) {
			if err := ctx.Sleep(60 * time.Second); err != nil {
				return "", err
			}
			v, err := rsCall(ctx, "Task", "input").Await(ctx)
			return string(v), err
		})
		r.wantContinue()
		if r.pendingOf(actActivity, "Task") != 1 {
			t.Fatalf("want Task pending, got %s", r.describe())
		}
	})
	t.Run("many_sequential_activities", func(t *testing.T) {
		hist := []provider.Event{rsStarted(1)}
		id := uint64(2)
		var want []string
		for i := range 10 {
			hist = append(hist, rsActSched(id, fmt.Sprintf("Act%d", i), fmt.Sprintf("input%d", i)), rsActDone(id+1, id, fmt.Sprintf("result%d", i)))
			id += 2
			want = append(want, fmt.Sprintf("result%d", i))
		}
		r := newRS(t, hist)
		r.exec(func(ctx Context, _ string) (string, error) {
			var out []string
			for i := range 10 {
				v, err := rsCall(ctx, fmt.Sprintf("Act%d", i), fmt.Sprintf("input%d", i)).Await(ctx)
				if err != nil {
					return "", err
				}
				out = append(out, string(v))
			}
			return strings.Join(out, ","), nil
		})
		r.wantCompleted(strings.Join(want, ","))
	})
}

// sub_orchestration.rs
func TestReplaySpecSubOrchestration(t *testing.T) {
	t.Run("auto_instance_id", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(rsSubOrch("Child", "child-input"))
		r.wantContinue()
		if p := r.pending(); len(p) != 1 || !actSubOrch(p[0]) || p[0].(*subOrch).instance != fmt.Sprintf("sub::%d", p[0].base().scheduleID) {
			t.Fatalf("want one sub-orchestration with instance sub::<event id>, got %s", r.describe())
		}
	})
	t.Run("replay_uses_history_instance", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "Child", "sub::2", "child-input"), rsSubDone(3, 2, "child-result")})
		r.exec(rsSubOrch("Child", "child-input"))
		r.wantCompleted("child-result")
	})
	t.Run("explicit_instance_preserved", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			v, err := CallSub[Raw](ctx, "Child", Raw("child-input"), WithInstanceID("my-custom-instance")).Await(ctx)
			return string(v), err
		})
		r.wantContinue()
		if p := r.pending(); len(p) != 1 || !actSubOrch(p[0]) || p[0].(*subOrch).instance != "my-custom-instance" {
			t.Fatalf("want the explicit instance, got %s", r.describe())
		}
	})
	t.Run("multiple_sub_orchs_unique_ids", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			CallSub[Raw](ctx, "Child1", Raw("input1")).Cancel() // drop(...)
			CallSub[Raw](ctx, "Child2", Raw("input2")).Cancel()
			return "done", nil
		})
		r.wantCompleted("done")
		var ids []string
		for _, a := range r.pending() {
			if actSubOrch(a) {
				ids = append(ids, a.(*subOrch).instance)
			}
		}
		if len(r.pending()) != 2 || len(ids) != 2 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], subOrchAutoPrefix) || !strings.HasPrefix(ids[1], subOrchAutoPrefix) {
			t.Fatalf("want two distinct automatic ids, got %v", ids)
		}
	})
}

// unobserved_futures.rs: Rust's drop(future) is Future.Cancel(); a future bound to `_x` and never
// awaited is left unconsumed (cancelled when the function returns).
func TestReplaySpecUnobservedFutures(t *testing.T) {
	// Select2TimerWinsHandler / Select2ActivityWinsHandler.
	select2 := func(name, input string, d time.Duration) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			act := rsCall(ctx, name, input)
			timer := ctx.Timer(d)
			if Select(ctx, act, timer) == act {
				r, err := act.Await(ctx)
				return "activity_won:" + string(r), err
			}
			return "timer_won", nil
		}
	}
	// SubOrchSelectLoserHandler.
	subSelect := func(name, input string, d time.Duration) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			sub := CallSub[Raw](ctx, name, Raw(input))
			timer := ctx.Timer(d)
			if Select(ctx, sub, timer) == sub {
				r, err := sub.Await(ctx)
				return string(r), err
			}
			return "timer_won_sub_orch_cancelled", nil
		}
	}
	// ScheduleActivityAndTimerThenAwaitActivityHandler: the timer is held, not dropped.
	actAndTimerAwaitAct := func(name, input string, d time.Duration) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			act := rsCall(ctx, name, input)
			_ = ctx.Timer(d)
			r, err := act.Await(ctx)
			return "activity_awaited:" + string(r), err
		}
	}
	// Select2TimerWinsThenDropNewActivityHandler.
	select2ThenDrop := func(name, input string, d time.Duration, extra, extraInput string) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			act := rsCall(ctx, name, input)
			timer := ctx.Timer(d)
			Select(ctx, act, timer)
			rsCall(ctx, extra, extraInput).Cancel()
			return "timer_won_plus_extra_drop", nil
		}
	}
	hasCancelEvent := func(r *rsEngine, typ string, src uint64) bool {
		for _, ev := range r.deltaOf(typ) {
			if dropReason(ev.Kind) == reasonDropped && ev.SourceEventID != nil && *ev.SourceEventID == src {
				return true
			}
		}
		return false
	}
	countDropped := func(r *rsEngine, typ string) []provider.Event {
		var out []provider.Event
		for _, ev := range r.deltaOf(typ) {
			if dropReason(ev.Kind) == reasonDropped {
				out = append(out, ev)
			}
		}
		return out
	}

	t.Run("select2_timer_wins_activity_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "LongTask", "input"), rsTimer(3, 1000)})
		r.prep(rsMsgFired(3, 1000))
		r.exec(select2("LongTask", "input", time.Millisecond))
		r.wantCompleted("timer_won")
		if !slices.Contains(r.cancelledActivities(), 2) {
			t.Fatalf("activity 2 not cancelled: %v", r.cancelledActivities())
		}
	})
	t.Run("select2_activity_wins_timer_not_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "FastTask", "input"), rsTimer(3, 5000)})
		r.prep(rsMsgActDone(2, "done"))
		r.exec(select2("FastTask", "input", 5*time.Millisecond))
		r.wantCompleted("activity_won:done")
		if c := r.cancelledActivities(); len(c) != 0 {
			t.Fatalf("cancelled %v", c)
		}
	})
	t.Run("select3_two_activities_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task1", "input1"), rsActSched(3, "Task2", "input2"), rsTimer(4, 1000)})
		r.prep(rsMsgFired(4, 1000))
		r.exec(func(ctx Context, _ string) (string, error) {
			a1, a2 := rsCall(ctx, "Task1", "input1"), rsCall(ctx, "Task2", "input2")
			timer := ctx.Timer(time.Millisecond)
			switch Select(ctx, a1, a2, timer) {
			case a1:
				v, err := a1.Await(ctx)
				return string(v), err
			case a2:
				v, err := a2.Await(ctx)
				return string(v), err
			}
			return "timer_won", nil
		})
		r.wantCompleted("timer_won")
		if c := r.cancelledActivities(); !slices.Contains(c, 2) || !slices.Contains(c, 3) {
			t.Fatalf("cancelled %v, want 2 and 3", c)
		}
	})
	t.Run("completed_future_not_in_cancelled_list", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActDone(3, 2, "result")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantCompleted("result")
		if c := r.cancelledActivities(); len(c) != 0 {
			t.Fatalf("cancelled %v", c)
		}
	})
	t.Run("explicit_drop_activity_gets_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			rsCall(ctx, "DroppedTask", "input").Cancel()
			return "completed_after_dropping_activity", nil
		})
		r.wantCompleted("completed_after_dropping_activity")
		if len(r.deltaOf("ActivityScheduled")) != 1 || !slices.Contains(r.cancelledActivities(), 2) || !hasCancelEvent(r, "ActivityCancelRequested", 2) {
			t.Fatalf("want DroppedTask scheduled at 2, cancelled, with a dropped_future breadcrumb: %s", r.describe())
		}
	})
	t.Run("explicit_drop_timer_no_cancel_needed", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.Timer(60 * time.Second).Cancel()
			return "timer_dropped", nil
		})
		r.wantCompleted("timer_dropped")
		if c := r.cancelledActivities(); len(c) != 0 {
			t.Fatalf("cancelled %v", c)
		}
	})
	t.Run("explicit_drop_external_wait", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			WaitEvent[Raw](ctx, "MyEvent").Cancel()
			return "wait_dropped", nil
		})
		r.wantCompleted("wait_dropped")
		if c := r.cancelledActivities(); len(c) != 0 {
			t.Fatalf("cancelled %v", c)
		}
	})
	t.Run("multiple_dropped_activities_all_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			_ = rsCall(ctx, "Task1", "input1")
			_ = rsCall(ctx, "Task2", "input2")
			_ = ctx.Timer(10 * time.Second)
			return "all_dropped", nil
		})
		r.wantCompleted("all_dropped")
		if c := r.cancelledActivities(); !slices.Contains(c, 2) || !slices.Contains(c, 3) || slices.Contains(c, 4) {
			t.Fatalf("cancelled %v, want 2 and 3 (not the timer 4)", c)
		}
	})
	t.Run("sub_orch_drop_after_schedule_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(func(ctx Context, _ string) (string, error) {
			CallSub[Raw](ctx, "ChildOrch", Raw("child_input")).Cancel()
			return "sub_orch_dropped", nil
		})
		r.wantCompleted("sub_orch_dropped")
		if len(r.cancelledSubOrchs()) == 0 || !hasCancelEvent(r, "SubOrchestrationCancelRequested", 2) {
			t.Fatalf("want the child cancelled with a dropped_future breadcrumb: %s", r.describe())
		}
	})
	t.Run("sub_orch_select_loser_child_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "child_input"), rsTimer(3, 1000)})
		r.prep(rsMsgFired(3, 1000))
		r.exec(subSelect("ChildOrch", "child_input", time.Millisecond))
		r.wantCompleted("timer_won_sub_orch_cancelled")
		if !slices.Contains(r.cancelledSubOrchs(), "sub::2") {
			t.Fatalf("cancelled children %v", r.cancelledSubOrchs())
		}
	})
	t.Run("replay_select_loser_same_cancellation", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000)})
		r.exec(select2("Task", "input", time.Millisecond))
		r.wantCompleted("timer_won")
		if !slices.Contains(r.cancelledActivities(), 2) {
			t.Fatalf("cancelled %v", r.cancelledActivities())
		}
	})
	t.Run("completed_sub_orch_not_cancelled", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "input"), rsSubDone(3, 2, "child_result")})
		r.exec(rsSubOrch("ChildOrch", "input"))
		r.wantCompleted("child_result")
		if c := r.cancelledSubOrchs(); len(c) != 0 {
			t.Fatalf("cancelled %v", c)
		}
	})
	t.Run("explicit_drop_then_await_captures_cancellation", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "DroppedTask", "input"), rsTimer(3, 100)})
		r.exec(func(ctx Context, _ string) (string, error) {
			rsCall(ctx, "DroppedTask", "input").Cancel()
			if err := ctx.Sleep(100 * time.Millisecond); err != nil {
				return "", err
			}
			return "done_after_drop", nil
		})
		r.wantContinue()
		if !slices.Contains(r.cancelledActivities(), 2) {
			t.Fatalf("cancelled %v", r.cancelledActivities())
		}
	})
	t.Run("replay_tolerates_completion_after_cancel_request", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000),
			rsActCancel(5, 2, reasonDropped), rsActDone(6, 2, "late_result")})
		r.exec(select2("Task", "input", time.Second))
		r.wantCompleted("timer_won")
	})
	t.Run("replay_fails_when_cancellation_decisions_differ", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsActCancel(3, 2, reasonDropped), rsActDone(4, 2, "done")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("cross_turn_activity_cancellation_emits_both_signals", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000)}, 3)
		r.prep(rsMsgFired(3, 1000))
		r.exec(select2("Task", "input", time.Millisecond))
		r.wantCompleted("timer_won")
		evs := countDropped(r, "ActivityCancelRequested")
		if !slices.Contains(r.cancelledActivities(), 2) || len(evs) != 1 || *evs[0].SourceEventID != 2 {
			t.Fatalf("want activity 2 cancelled with exactly one breadcrumb: %s", r.describe())
		}
	})
	t.Run("cross_turn_sub_orch_cancellation_emits_both_signals", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "input"), rsTimer(3, 1000)}, 3)
		r.prep(rsMsgFired(3, 1000))
		r.exec(subSelect("ChildOrch", "input", time.Millisecond))
		r.wantCompleted("timer_won_sub_orch_cancelled")
		evs := countDropped(r, "SubOrchestrationCancelRequested")
		if !slices.Contains(r.cancelledSubOrchs(), "sub::2") || len(evs) != 1 || *evs[0].SourceEventID != 2 {
			t.Fatalf("want child sub::2 cancelled with exactly one breadcrumb: %s", r.describe())
		}
	})
	t.Run("replay_does_not_reemit_activity_cancellation_side_channel_when_already_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000), rsActCancel(5, 2, reasonDropped)}, 5)
		r.exec(select2("Task", "input", time.Second))
		r.wantCompleted("timer_won")
		if len(r.cancelledActivities()) != 0 || len(countDropped(r, "ActivityCancelRequested")) != 0 {
			t.Fatalf("cancellation re-emitted: %v %s", r.cancelledActivities(), r.describe())
		}
	})
	t.Run("replay_does_not_reemit_sub_orch_cancellation_side_channel_when_already_in_history", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000), rsSubCancel(5, 2, reasonDropped)}, 5)
		r.exec(subSelect("ChildOrch", "input", time.Second))
		r.wantCompleted("timer_won_sub_orch_cancelled")
		if len(r.cancelledSubOrchs()) != 0 || len(countDropped(r, "SubOrchestrationCancelRequested")) != 0 {
			t.Fatalf("cancellation re-emitted: %v %s", r.cancelledSubOrchs(), r.describe())
		}
	})
	t.Run("replay_allows_new_cancellations_in_current_turn_even_when_prior_cancellations_exist", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000), rsActCancel(5, 2, reasonDropped)}, 5)
		r.exec(select2ThenDrop("Task", "input", time.Second, "Extra", "x"))
		r.wantCompleted("timer_won_plus_extra_drop")
		if c := r.cancelledActivities(); slices.Contains(c, 2) || !slices.Contains(c, 6) {
			t.Fatalf("cancelled %v, want 6 and not 2", c)
		}
	})
	t.Run("replay_fails_if_persisted_dropped_future_cancel_is_no_longer_emitted_by_code", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000), rsActCancel(5, 2, reasonDropped)}, 5)
		r.exec(actAndTimerAwaitAct("Task", "input", time.Second))
		r.wantNondeterminism()
		r.wantFailedWith("(activities)")
	})
	t.Run("duplicate_activity_cancel_requested_is_benign", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsActSched(2, "Task", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000),
			rsActCancel(5, 2, reasonDropped), rsActCancel(6, 2, "orchestration_terminal_failed")})
		r.exec(select2("Task", "input", time.Second))
		r.wantCompleted("timer_won")
	})
	t.Run("duplicate_sub_orch_cancel_requested_is_benign", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsSubSched(2, "ChildOrch", "sub::2", "input"), rsTimer(3, 1000), rsFired(4, 3, 1000),
			rsSubCancel(5, 2, reasonDropped), rsSubCancel(6, 2, "orchestration_terminal_failed")})
		r.exec(subSelect("ChildOrch", "input", time.Second))
		r.wantCompleted("timer_won_sub_orch_cancelled")
	})
}

// kv.rs
func TestReplaySpecKV(t *testing.T) {
	get := func(ctx Context, key, def string) string {
		if v, ok := ctx.KV(key); ok {
			return v
		}
		return def
	}
	setKV := func(key, value string) rsHandler {
		return func(ctx Context, _ string) (string, error) { ctx.SetKV(key, value); return "done", nil }
	}
	setThenGet := func(key, value string) rsHandler {
		return func(ctx Context, _ string) (string, error) { ctx.SetKV(key, value); return get(ctx, key, ""), nil }
	}
	setKVThenActivity := func(key, value, name, input string) rsHandler {
		return func(ctx Context, _ string) (string, error) {
			ctx.SetKV(key, value)
			v, err := rsCall(ctx, name, input).Await(ctx)
			return string(v), err
		}
	}
	allKVOps := func(ctx Context, _ string) (string, error) {
		ctx.SetKV("X", "Y")
		ctx.ClearKV("Z")
		ctx.ClearAllKV()
		ctx.SetKV("A", "1")
		return get(ctx, "A", ""), nil
	}
	setClearSet := func(ctx Context, _ string) (string, error) {
		ctx.SetKV("A", "1")
		ctx.ClearAllKV()
		ctx.SetKV("B", "2")
		return fmt.Sprintf("A=%s,B=%s", get(ctx, "A", "none"), get(ctx, "B", "none")), nil
	}
	setThenClearSingle := func(ctx Context, _ string) (string, error) {
		ctx.SetKV("A", "1")
		ctx.SetKV("B", "2")
		ctx.ClearKV("A")
		return fmt.Sprintf("A=%s,B=%s", get(ctx, "A", "none"), get(ctx, "B", "none")), nil
	}
	noop := func(ctx Context) error { _, err := rsCall(ctx, "Noop", "").Await(ctx); return err }
	kvEvents := func(r *rsEngine) []provider.Event {
		var out []provider.Event
		for _, ev := range r.delta() {
			switch ev.Kind.(type) {
			case provider.KeyValueSetEvent, provider.KeyValueClearedEvent, provider.KeyValuesClearedEvent:
				out = append(out, ev)
			}
		}
		return out
	}

	t.Run("action_to_event_kv_variants", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(allKVOps)
		r.wantCompleted("1")
		evs := kvEvents(r)
		if len(evs) != 4 {
			t.Fatalf("want 4 KV events, got %s", r.describe())
		}
		for _, ev := range evs {
			if ev.SourceEventID != nil {
				t.Fatalf("KV event with a source id: %+v", ev)
			}
		}
	})
	t.Run("replay_set_value_reconstructs_state", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0)})
		r.exec(setThenGet("A", "1"))
		r.wantCompleted("1")
	})
	t.Run("replay_multiple_sets_last_wins", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0), rsKVSet(3, "A", "2", 0)})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.SetKV("A", "1")
			ctx.SetKV("A", "2")
			return get(ctx, "A", ""), nil
		})
		r.wantCompleted("2")
	})
	t.Run("replay_clear_then_set", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0), rsKVAllCleared(3), rsKVSet(4, "B", "2", 0)})
		r.exec(setClearSet)
		r.wantCompleted("A=none,B=2")
	})
	t.Run("replay_clear_single_key", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0), rsKVSet(3, "B", "2", 0), rsKVCleared(4, "A")})
		r.exec(setThenClearSingle)
		r.wantCompleted("A=none,B=2")
	})
	t.Run("replay_set_value_matches_action", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0)})
		r.exec(setKV("A", "1"))
		r.wantCompleted("done")
	})
	t.Run("replay_set_value_mismatch_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 0), rsActSched(3, "Task", "input"), rsActDone(4, 3, "result")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("replay_clear_all_values_matches_action", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVAllCleared(2)})
		r.exec(func(ctx Context, _ string) (string, error) { ctx.ClearAllKV(); return "cleared", nil })
		r.wantCompleted("cleared")
	})
	t.Run("replay_clear_value_matches_action", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVCleared(2, "A")})
		r.exec(func(ctx Context, _ string) (string, error) { ctx.ClearKV("A"); return "cleared", nil })
		r.wantCompleted("cleared")
	})
	t.Run("replay_clear_value_mismatch_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVCleared(2, "A"), rsActSched(3, "Task", "input"), rsActDone(4, 3, "result")})
		r.exec(rsSingleActivity("Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("replay_kv_interleaved_with_activities", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "progress", "started", 0), rsActSched(3, "DoWork", "work-input"), rsActDone(4, 3, "work-result")})
		r.exec(setKVThenActivity("progress", "started", "DoWork", "work-input"))
		r.wantCompleted("work-result")
	})
	t.Run("replay_kv_no_token_binding", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "k", "v", 0)})
		r.exec(setKV("k", "v"))
		r.wantCompleted("done")
	})
	t.Run("new_kv_events_after_replay", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(allKVOps)
		r.wantCompleted("1")
		if len(kvEvents(r)) < 3 {
			t.Fatalf("want the KV events in the delta, got %s", r.describe())
		}
	})
	t.Run("kv_state_seeded_from_snapshot", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)}).snapshot(map[string]string{"X": "from_prev_exec"})
		r.exec(func(ctx Context, _ string) (string, error) { return get(ctx, "X", "missing"), nil })
		r.wantCompleted("from_prev_exec")
	})
	t.Run("kv_state_snapshot_overridden_by_code", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)}).snapshot(map[string]string{"X": "old"})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.SetKV("X", "new")
			return get(ctx, "X", "missing"), nil
		})
		r.wantCompleted("new")
	})
	t.Run("kv_get_value_same_turn", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)})
		r.exec(setThenGet("mykey", "myval"))
		r.wantCompleted("myval")
	})
	t.Run("kv_get_value_previous_turn", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "progress", "step_1", 100), rsActSched(3, "Work", "input"), rsActDone(4, 3, "result")})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.SetKV("progress", "step_1")
			if _, err := rsCall(ctx, "Work", "input").Await(ctx); err != nil {
				return "", err
			}
			return get(ctx, "progress", "missing"), nil
		})
		r.wantCompleted("step_1")
	})
	t.Run("kv_get_value_previous_execution", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1)}).snapshot(map[string]string{"status": "from_exec_1", "config": "old_config"})
		r.exec(func(ctx Context, _ string) (string, error) {
			return fmt.Sprintf("status=%s,config=%s,absent=%s", get(ctx, "status", "missing"), get(ctx, "config", "missing"), get(ctx, "nonexistent", "missing")), nil
		})
		r.wantCompleted("status=from_exec_1,config=old_config,absent=missing")
	})
	t.Run("kv_set_key_mismatch_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "B", "1", 0), rsActSched(3, "Task", "input"), rsActDone(4, 3, "result")})
		r.exec(setKVThenActivity("A", "1", "Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("kv_set_value_mismatch_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "old", 0), rsActSched(3, "Task", "input"), rsActDone(4, 3, "result")})
		r.exec(setKVThenActivity("A", "new", "Task", "input"))
		r.wantNondeterminism()
	})
	t.Run("kv_clear_key_mismatch_nondeterminism", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVCleared(2, "B"), rsActSched(3, "Task", "input"), rsActDone(4, 3, "result")})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.ClearKV("A")
			v, err := rsCall(ctx, "Task", "input").Await(ctx)
			return string(v), err
		})
		r.wantNondeterminism()
	})
	t.Run("kv_set_timestamp_mismatch_ok", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "A", "1", 999)})
		r.exec(setKV("A", "1"))
		r.wantCompleted("done")
	})
	t.Run("kv_read_modify_write_across_turns_replay", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "counter", "1", 100), rsActSched(3, "Noop", ""), rsActDone(4, 3, "ok"),
			rsActSched(5, "Noop", ""), rsActDone(6, 5, "ok")}).snapshot(map[string]string{"counter": "1"})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.SetKV("counter", "1")
			if err := noop(ctx); err != nil {
				return "", err
			}
			if v := get(ctx, "counter", "missing"); v != "1" {
				return "", fmt.Errorf("counter %q after the first activity", v)
			}
			if err := noop(ctx); err != nil {
				return "", err
			}
			n, err := strconv.Atoi(get(ctx, "counter", "missing"))
			if err != nil {
				return "", err
			}
			ctx.SetKV("counter", strconv.Itoa(n+1))
			return strconv.Itoa(n + 1), nil
		})
		r.wantCompleted("2")
	})
	t.Run("kv_read_modify_write_every_turn_snapshot_poisons_replay", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1),
			rsKVSet(2, "counter", "1", 100), rsActSched(3, "Noop", ""), rsActDone(4, 3, "ok"),
			rsKVSet(5, "counter", "2", 200), rsActSched(6, "Noop", ""), rsActDone(7, 6, "ok"),
			rsKVSet(8, "counter", "3", 300), rsActSched(9, "Noop", ""), rsActDone(10, 9, "ok")})
		r.exec(func(ctx Context, _ string) (string, error) {
			for range 4 {
				n, err := strconv.Atoi(get(ctx, "counter", "0"))
				if err != nil {
					return "", err
				}
				ctx.SetKV("counter", strconv.Itoa(n+1))
				if err := noop(ctx); err != nil {
					return "", err
				}
			}
			return get(ctx, "counter", "0"), nil
		})
		r.wantContinue()
	})
	t.Run("kv_read_modify_write_with_can_snapshot", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVSet(2, "counter", "6", 100), rsActSched(3, "Noop", ""), rsActDone(4, 3, "ok")}).
			snapshot(map[string]string{"counter": "5"})
		r.exec(func(ctx Context, _ string) (string, error) {
			n, err := strconv.Atoi(get(ctx, "counter", "0"))
			if err != nil {
				return "", err
			}
			ctx.SetKV("counter", strconv.Itoa(n+1))
			if err := noop(ctx); err != nil {
				return "", err
			}
			n, err = strconv.Atoi(get(ctx, "counter", "0"))
			if err != nil {
				return "", err
			}
			ctx.SetKV("counter", strconv.Itoa(n+1))
			return strconv.Itoa(n + 1), nil
		})
		r.wantCompleted("7")
	})
	t.Run("kv_clear_all_then_set_replay", func(t *testing.T) {
		// The Rust history gives KeyValuesCleared event id 1, like OrchestrationStarted; kept as is.
		r := newRS(t, []provider.Event{rsStarted(1), rsKVAllCleared(1), rsKVSet(2, "x", "new", 100), rsActSched(3, "Noop", ""), rsActDone(4, 3, "ok")}).
			snapshot(map[string]string{"old": "stale"})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.ClearAllKV()
			ctx.SetKV("x", "new")
			if err := noop(ctx); err != nil {
				return "", err
			}
			return fmt.Sprintf("x=%s,old=%s", get(ctx, "x", "missing"), get(ctx, "old", "gone")), nil
		})
		r.wantCompleted("x=new,old=gone")
	})
	t.Run("kv_clear_single_snapshot_key_then_rmw", func(t *testing.T) {
		r := newRS(t, []provider.Event{rsStarted(1), rsKVCleared(2, "session"), rsKVSet(3, "counter", "4", 100), rsActSched(4, "Noop", ""), rsActDone(5, 4, "ok")}).
			snapshot(map[string]string{"session": "abc", "counter": "3"})
		r.exec(func(ctx Context, _ string) (string, error) {
			ctx.ClearKV("session")
			n, err := strconv.Atoi(get(ctx, "counter", "0"))
			if err != nil {
				return "", err
			}
			ctx.SetKV("counter", strconv.Itoa(n+1))
			if err := noop(ctx); err != nil {
				return "", err
			}
			return fmt.Sprintf("session=%s,counter=%s", get(ctx, "session", "gone"), get(ctx, "counter", "missing")), nil
		})
		r.wantCompleted("session=gone,counter=4")
	})
}
