package dx

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// sim drives turns of one instance through runTurn without a provider: each turn's delta is
// appended to the stored history, and after every turn the whole history is replayed once more to
// check that the code reproduces it exactly (no new events, no failure).
type sim struct {
	t        testing.TB
	rt       *Runtime
	instance string
	exec     uint64
	history  []provider.Event
	kv       map[string]provider.KVEntry
	last     turnOutput
	clock    time.Time
	keep     bool    // run every turn on the engine kept from the previous turn (keepEngines)
	eng      *engine // with keep: the engine kept from the previous turn
}

// keptEngines holds the names of the tests whose sims run their turns on kept engines (the
// executor cache) instead of replaying; the stored history is still replayed from scratch after
// every turn to check they agree. Per test, so that tests may run in parallel.
var keptEngines sync.Map

// keepEngines makes the sims of t and of its subtests keep their engines.
func keepEngines(t *testing.T) {
	keptEngines.Store(t.Name(), true)
	t.Cleanup(func() { keptEngines.Delete(t.Name()) })
}

// keepsEngines reports whether t or a test it runs under called keepEngines.
func keepsEngines(t testing.TB) bool {
	for name := t.Name(); ; name = name[:strings.LastIndex(name, "/")] {
		if _, ok := keptEngines.Load(name); ok {
			return true
		}
		if !strings.Contains(name, "/") {
			return false
		}
	}
}

func newSim(t testing.TB) *sim {
	rt := NewRuntime(nil, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), BlockingGuard: 2 * time.Second})
	s := &sim{t: t, rt: rt, instance: "inst", exec: 1, kv: map[string]provider.KVEntry{}, clock: time.UnixMilli(1_700_000_000_000),
		keep: keepsEngines(t)}
	rt.opts.Clock = func() time.Time { return s.clock }
	return s
}

func (s *sim) env() turnEnv { return s.rt.turnEnv() }

// turn runs one turn with msgs and stores its delta.
func (s *sim) turn(msgs ...provider.WorkItem) turnOutput {
	s.t.Helper()
	item := &provider.OrchestrationItem{Instance: s.instance, ExecutionID: s.exec, History: s.history, Messages: msgs, KVSnapshot: s.kv}
	env := s.env()
	env.keep, env.cached = s.keep, s.eng
	out := runTurn(env, item)
	if out.plan != planAck {
		s.t.Fatalf("turn plan %v, want ack", out.plan)
	}
	s.eng = out.eng
	if s.eng != nil {
		s.eng.commit()
		s.t.Cleanup(s.eng.stop)
	}
	s.last = out
	if _, ok := startOf(msgs).(provider.ContinueAsNew); ok {
		s.history = nil
		s.exec++
	}
	s.history = append(s.history, out.ack.HistoryDelta...)
	s.checkContiguous()
	s.replay()
	return out
}

func startOf(msgs []provider.WorkItem) provider.WorkItemKind {
	for _, m := range msgs {
		switch m.Kind.(type) {
		case provider.StartOrchestration, provider.ContinueAsNew:
			return m.Kind
		}
	}
	return nil
}

func (s *sim) checkContiguous() {
	s.t.Helper()
	for i, ev := range s.history {
		if ev.EventID != uint64(i+1) {
			s.t.Fatalf("event ids not contiguous: position %d has id %d\n%s", i, ev.EventID, dump(s.history))
		}
	}
}

// replay re-runs the stored history without messages: a deterministic orchestration adds nothing.
func (s *sim) replay() {
	s.t.Helper()
	if len(s.history) > 0 && s.history[len(s.history)-1].IsTerminal() {
		return
	}
	item := &provider.OrchestrationItem{Instance: s.instance, ExecutionID: s.exec, History: s.history, KVSnapshot: s.kv}
	out := runTurn(s.env(), item)
	if len(out.ack.HistoryDelta) != 0 {
		s.t.Fatalf("replay of a stored history added events:\n%s\nhistory:\n%s", dump(out.ack.HistoryDelta), dump(s.history))
	}
}

func (s *sim) start(name, input string) turnOutput {
	s.t.Helper()
	return s.turn(provider.WorkItem{Kind: provider.StartOrchestration{Instance: s.instance, Orchestration: name, Input: input, ExecutionID: 1}})
}

// types lists the event types of the stored history, with the source id of completions.
func (s *sim) types() string { return types(s.history) }

func types(evs []provider.Event) string {
	var b []string
	for _, ev := range evs {
		t := ev.EventType()
		if ev.SourceEventID != nil {
			t += fmt.Sprintf("(%d)", *ev.SourceEventID)
		}
		b = append(b, t)
	}
	return strings.Join(b, " ")
}

func dump(evs []provider.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		j, _ := json.Marshal(ev)
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *sim) scheduleID(name string, nth int) uint64 {
	s.t.Helper()
	for _, ev := range s.history {
		if k, ok := ev.Kind.(provider.ActivityScheduledEvent); ok && k.Name == name {
			if nth == 0 {
				return ev.EventID
			}
			nth--
		}
	}
	s.t.Fatalf("no ActivityScheduled %s in\n%s", name, dump(s.history))
	return 0
}

func (s *sim) completed(id uint64, result string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityCompleted{Instance: s.instance, ExecutionID: s.exec, ID: id, Result: result}}
}

func (s *sim) failedActivity(id uint64, msg string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityFailed{Instance: s.instance, ExecutionID: s.exec, ID: id, Details: appError(provider.AppActivityFailed, msg)}}
}

func (s *sim) fired(id uint64) provider.WorkItem {
	return provider.WorkItem{Kind: provider.TimerFired{Instance: s.instance, ExecutionID: s.exec, ID: id}}
}

func (s *sim) want(t testing.TB, want string) {
	t.Helper()
	if got := s.types(); got != want {
		t.Fatalf("history:\n got  %s\n want %s\n%s", got, want, dump(s.history))
	}
}

func (s *sim) output() string {
	s.t.Helper()
	for i := len(s.history) - 1; i >= 0; i-- {
		switch k := s.history[i].Kind.(type) {
		case provider.OrchestrationCompletedEvent:
			return k.Output
		case provider.OrchestrationFailedEvent:
			return "failed: " + displayMessage(k.Details)
		}
	}
	return "running"
}

func timerIDs(evs []provider.Event) []uint64 {
	var ids []uint64
	for _, ev := range evs {
		if _, ok := ev.Kind.(provider.TimerCreatedEvent); ok {
			ids = append(ids, ev.EventID)
		}
	}
	return ids
}

// TestKeptEngines runs the engine tests again with every turn on the engine kept from the previous
// turn, as the executor cache does.
func TestKeptEngines(t *testing.T) {
	keepEngines(t)
	for name, test := range map[string]func(*testing.T){
		"SelectSeveralLosers": TestSelectSeveralLosers, "SelectLoserCancelledInContinuingTurn": TestSelectLoserCancelledInContinuingTurn,
		"BranchesSelectAndJoin": TestBranchesSelectAndJoin, "DeepNesting": TestDeepNesting, "ThousandFutureJoin": TestThousandFutureJoin,
		"UnconsumedFuturesCancelledOnReturn": TestUnconsumedFuturesCancelledOnReturn, "ExplicitCancel": TestExplicitCancel,
		"CancelInstanceTerminalBookkeeping": TestCancelInstanceTerminalBookkeeping, "CompletionForWrongKindAborts": TestCompletionForWrongKindAborts,
		"PanicFailsOrchestration": TestPanicFailsOrchestration, "QueueMessagesCarriedAcrossContinueAsNew": TestQueueMessagesCarriedAcrossContinueAsNew,
		"ExternalEventBeforeSubscriptionNotDelivered": TestExternalEventBeforeSubscriptionNotDelivered, "CustomStatusAndKV": TestCustomStatusAndKV,
		"RetryWithTimeoutHistory": TestRetryWithTimeoutHistory, "NoGoroutinesLeftBehind": TestNoGoroutinesLeftBehind,
		"WaitAgainAfterLostRace": TestWaitAgainAfterLostRace,
	} {
		t.Run(name, test)
	}
	t.Run("SimsKeep", func(t *testing.T) {
		if !newSim(t).keep {
			t.Fatal("a sim under TestKeptEngines does not keep its engines")
		}
	})
}

// TestSimsReplayByDefault: only the tests under TestKeptEngines keep engines, whatever runs
// beside them.
func TestSimsReplayByDefault(t *testing.T) {
	t.Parallel()
	if newSim(t).keep {
		t.Fatal("a sim outside TestKeptEngines keeps its engines")
	}
}

func TestSelectSeveralLosers(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Race", func(ctx Context, _ Raw) (string, error) {
		a := Call[string](ctx, "A", 1)
		b := Call[string](ctx, "B", 2)
		w := WaitEvent[string](ctx, "go")
		q := Dequeue[string](ctx, "inbox")
		tm := ctx.Timer(time.Minute)
		switch Select(ctx, a, b, w, q, tm) {
		case tm:
			return "timer", nil
		case a:
			return a.Await(ctx)
		}
		return "other", nil
	})
	s.start("Race", "null")
	s.want(t, "OrchestrationStarted ActivityScheduled ActivityScheduled ExternalSubscribed ExternalSubscribedPersistent TimerCreated")
	s.turn(s.fired(6))
	// Every loser is cancelled, grouped by kind as duroxide records them: activities, event waits,
	// dequeues; a losing timer leaves nothing. Then the completion.
	s.want(t, "OrchestrationStarted ActivityScheduled ActivityScheduled ExternalSubscribed ExternalSubscribedPersistent TimerCreated "+
		"TimerFired(6) ActivityCancelRequested(2) ActivityCancelRequested(3) ExternalSubscribedCancelled(4) "+
		"ExternalSubscribedPersistentCancelled(5) OrchestrationCompleted")
	if got := s.output(); got != `"timer"` {
		t.Fatalf("output %s", got)
	}
	for _, ev := range s.history[7:11] {
		if dropReason(ev.Kind) != reasonDropped {
			t.Fatalf("reason %q", dropReason(ev.Kind))
		}
	}
	ids := s.last.ack.CancelledActivities
	if len(ids) != 2 || ids[0].ActivityID != 2 || ids[1].ActivityID != 3 {
		t.Fatalf("cancelled activities %+v", ids)
	}
}

func TestSelectLoserCancelledInContinuingTurn(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Timeout", func(ctx Context, _ Raw) (string, error) {
		a := Call[string](ctx, "Slow", "x")
		if Select(ctx, a, ctx.Timer(time.Second)) != a {
			// the loser is cancelled now; go on with more work in the same turn
			return Call[string](ctx, "Fallback", "y").Await(ctx)
		}
		return a.Await(ctx)
	})
	s.start("Timeout", "null")
	s.turn(s.fired(3))
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated TimerFired(3) ActivityScheduled ActivityCancelRequested(2)")
	if len(s.last.ack.CancelledActivities) != 1 || len(s.last.ack.WorkerItems) != 1 {
		t.Fatalf("ack %+v", s.last.ack)
	}
	// The cancelled activity's late completion is recorded and ignored.
	s.turn(s.completed(2, `"late"`))
	s.turn(s.completed(5, `"fallback"`))
	if got := s.output(); got != `"fallback"` {
		t.Fatalf("output %s\n%s", got, s.types())
	}
}

func TestBranchesSelectAndJoin(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Branches", func(ctx Context, _ Raw) (string, error) {
		two := func(name string) Future[string] {
			return Go(ctx, func(ctx Context) (string, error) {
				x, err := Call[string](ctx, name, 1).Await(ctx)
				if err != nil {
					return "", err
				}
				y, err := Call[string](ctx, name, 2).Await(ctx)
				return x + y, err
			})
		}
		a, b := two("A"), two("B")
		winner := Select(ctx, a, b)
		v, err := winner.(Future[string]).Await(ctx)
		if err != nil {
			return "", err
		}
		c, d := two("C"), two("D")
		vs, err := All(ctx, c, d)
		if err != nil {
			return "", err
		}
		return v + "|" + vs[0] + vs[1], nil
	})
	s.start("Branches", "null")
	s.want(t, "OrchestrationStarted ActivityScheduled ActivityScheduled")
	a1, b1 := s.scheduleID("A", 0), s.scheduleID("B", 0)
	s.turn(s.completed(b1, `"b1"`))
	b2 := s.scheduleID("B", 1)
	s.turn(s.completed(a1, `"a1"`)) // A's branch goes on too
	a2 := s.scheduleID("A", 1)
	s.turn(s.completed(b2, `"b2"`)) // B wins: A's branch and its pending activity are cancelled
	if !strings.Contains(s.types(), fmt.Sprintf("ActivityCancelRequested(%d)", a2)) {
		t.Fatalf("branch A's activity not cancelled:\n%s", s.types())
	}
	c1, d1 := s.scheduleID("C", 0), s.scheduleID("D", 0)
	s.turn(s.completed(d1, `"d1"`), s.completed(c1, `"c1"`))
	c2, d2 := s.scheduleID("C", 1), s.scheduleID("D", 1)
	s.turn(s.completed(c2, `"c2"`), s.completed(d2, `"d2"`))
	if got := s.output(); got != `"b1b2|c1c2d1d2"` {
		t.Fatalf("output %s\n%s", got, s.types())
	}
}

func TestDeepNesting(t *testing.T) {
	s := newSim(t)
	var nest func(ctx Context, depth int) (int, error)
	nest = func(ctx Context, depth int) (int, error) {
		if depth == 0 {
			return Call[int](ctx, "Leaf", 1).Await(ctx)
		}
		l := Go(ctx, func(ctx Context) (int, error) { return nest(ctx, depth-1) })
		r := Go(ctx, func(ctx Context) (int, error) { return nest(ctx, depth-1) })
		vs, err := All(ctx, l, r)
		if err != nil {
			return 0, err
		}
		return vs[0] + vs[1], nil
	}
	Register(s.rt, "Deep", func(ctx Context, depth int) (int, error) { return nest(ctx, depth) })
	s.start("Deep", "6") // 64 leaves
	var msgs []provider.WorkItem
	for _, ev := range s.history {
		if _, ok := ev.Kind.(provider.ActivityScheduledEvent); ok {
			msgs = append(msgs, s.completed(ev.EventID, "1"))
		}
	}
	if len(msgs) != 64 {
		t.Fatalf("%d leaves scheduled", len(msgs))
	}
	s.turn(msgs...)
	if got := s.output(); got != "64" {
		t.Fatalf("output %s", got)
	}
}

func TestThousandFutureJoin(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Fan", func(ctx Context, n int) (int, error) {
		fs := make([]Future[int], n)
		for i := range fs {
			fs[i] = Call[int](ctx, "Work", i)
		}
		vs, err := All(ctx, fs...)
		sum := 0
		for _, v := range vs {
			sum += v
		}
		return sum, err
	})
	s.start("Fan", "1000")
	var msgs []provider.WorkItem
	for i, ev := range s.history[1:] {
		msgs = append(msgs, s.completed(ev.EventID, fmt.Sprint(i)))
	}
	// completions arrive in reverse order, in two turns
	for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
		msgs[i], msgs[j] = msgs[j], msgs[i]
	}
	s.turn(msgs[:500]...)
	if s.output() != "running" {
		t.Fatal("finished early")
	}
	s.turn(msgs[500:]...)
	if got := s.output(); got != "499500" {
		t.Fatalf("output %s", got)
	}
}

func TestUnconsumedFuturesCancelledOnReturn(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Forget", func(ctx Context, _ Raw) (string, error) {
		Call[string](ctx, "FireAndForget", 1) // never awaited
		WaitEvent[string](ctx, "never")
		ctx.Timer(time.Hour)
		return Call[string](ctx, "Main", 2).Await(ctx)
	})
	s.start("Forget", "null")
	s.turn(s.completed(5, `"done"`))
	s.want(t, "OrchestrationStarted ActivityScheduled ExternalSubscribed TimerCreated ActivityScheduled "+
		"ActivityCompleted(5) ActivityCancelRequested(2) ExternalSubscribedCancelled(3) OrchestrationCompleted")
}

func TestExplicitCancel(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Cancel", func(ctx Context, _ Raw) (string, error) {
		a := Call[string](ctx, "A", 1)
		b := CallSub[string](ctx, "Child", 2)
		ctx.Timer(time.Second).Await(ctx)
		a.Cancel()
		b.Cancel()
		if _, err := a.Await(ctx); err != ErrCanceled {
			return "", fmt.Errorf("await after cancel: %v", err)
		}
		return "ok", nil
	})
	s.start("Cancel", "null")
	s.turn(s.fired(4))
	s.want(t, "OrchestrationStarted ActivityScheduled SubOrchestrationScheduled TimerCreated TimerFired(4) "+
		"ActivityCancelRequested(2) SubOrchestrationCancelRequested(3) OrchestrationCompleted")
	var cancels []string
	for _, w := range s.last.ack.OrchestratorItems {
		if c, ok := w.Kind.(provider.CancelInstance); ok {
			cancels = append(cancels, c.Instance+": "+c.Reason)
		}
	}
	if len(cancels) != 1 || cancels[0] != "inst::sub::3: parent dropped sub-orchestration future" {
		t.Fatalf("cancel items %v", cancels)
	}
}

func TestCancelInstanceTerminalBookkeeping(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Busy", func(ctx Context, _ Raw) (string, error) {
		a := Call[string](ctx, "A", 1)
		WaitEvent[string](ctx, "approve")
		CallSub[string](ctx, "Child", 1, WithInstanceID("kid"))
		return a.Await(ctx)
	})
	s.start("Busy", "null")
	s.turn(provider.WorkItem{Kind: provider.CancelInstance{Instance: s.instance, Reason: "by user"}})
	// subscriptions cancelled before the terminal event, in-flight activities after it
	s.want(t, "OrchestrationStarted ActivityScheduled ExternalSubscribed SubOrchestrationScheduled "+
		"OrchestrationCancelRequested ExternalSubscribedCancelled(3) OrchestrationFailed ActivityCancelRequested(2)")
	if got := s.output(); got != "failed: canceled: by user" {
		t.Fatalf("output %s", got)
	}
	last := s.history[len(s.history)-1].Kind.(provider.ActivityCancelRequestedEvent)
	if last.Reason != "orchestration_terminal_failed" {
		t.Fatalf("reason %q", last.Reason)
	}
	found := false
	for _, w := range s.last.ack.OrchestratorItems {
		if c, ok := w.Kind.(provider.CancelInstance); ok && c.Instance == "kid" && c.Reason == "parent canceled" {
			found = true
		}
	}
	if !found {
		t.Fatalf("child not cancelled: %+v", s.last.ack.OrchestratorItems)
	}
}

func TestNondeterminismDetected(t *testing.T) {
	cases := map[string]func(ctx Context, first bool){
		"activity name": func(ctx Context, first bool) {
			name := map[bool]string{true: "A", false: "B"}[first]
			Call[string](ctx, name, 1).Await(ctx)
		},
		"activity input": func(ctx Context, first bool) {
			Call[string](ctx, "A", first).Await(ctx)
		},
		"session": func(ctx Context, first bool) {
			opts := []CallOption{}
			if first {
				opts = append(opts, OnSession("s"))
			}
			Call[string](ctx, "A", 1, opts...).Await(ctx)
		},
		"tag": func(ctx Context, first bool) {
			opts := []CallOption{}
			if !first {
				opts = append(opts, WithTag("gpu"))
			}
			Call[string](ctx, "A", 1, opts...).Await(ctx)
		},
		"kind": func(ctx Context, first bool) {
			if first {
				Call[string](ctx, "A", 1).Await(ctx)
			} else {
				ctx.Timer(time.Second).Await(ctx)
			}
		},
		"removed": func(ctx Context, first bool) {
			if first {
				Call[string](ctx, "A", 1).Await(ctx)
			} else {
				WaitEvent[string](ctx, "x").Await(ctx)
			}
		},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t)
			first := true
			Register(s.rt, "Drift", func(ctx Context, _ Raw) (string, error) {
				body(ctx, first)
				return "done", nil
			})
			s.start("Drift", "null")
			first = false
			item := &provider.OrchestrationItem{Instance: s.instance, ExecutionID: 1, History: s.history,
				Messages: []provider.WorkItem{s.completed(2, `"x"`)}}
			out := runTurn(s.env(), item)
			last := out.ack.HistoryDelta[len(out.ack.HistoryDelta)-1]
			f, ok := last.Kind.(provider.OrchestrationFailedEvent)
			if !ok {
				t.Fatalf("not failed: %s", types(out.ack.HistoryDelta))
			}
			c, ok := f.Details.Kind.(provider.ConfigurationError)
			if !ok || c.Kind != "Nondeterminism" || c.Message == nil || !strings.Contains(*c.Message, "event 2") {
				t.Fatalf("details %+v", f.Details)
			}
			t.Log(*c.Message)
		})
	}
}

func TestCompletionForWrongKindAborts(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "T", func(ctx Context, _ Raw) (string, error) {
		return "", ctx.Sleep(time.Second)
	})
	s.start("T", "null")
	s.turn(s.completed(2, `"x"`)) // an activity completion for a timer
	if got := s.output(); !strings.HasPrefix(got, "failed: nondeterministic: ") {
		t.Fatalf("output %s", got)
	}
}

func TestPanicFailsOrchestration(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "P", func(ctx Context, _ Raw) (string, error) {
		Call[string](ctx, "A", 1).Await(ctx)
		panic("boom")
	})
	s.start("P", "null")
	out := s.turn(s.completed(2, `"x"`))
	f := s.history[len(s.history)-1].Kind.(provider.OrchestrationFailedEvent)
	a := f.Details.Kind.(provider.ApplicationError)
	if a.Kind.Name != provider.AppPanicked || a.Message != "boom" {
		t.Fatalf("details %+v", f.Details)
	}
	if !strings.Contains(string(out.outcome.panic), "engine_test.go") {
		t.Fatalf("no stack for the log")
	}
}

func TestBlockingCodeFailsWithinGuard(t *testing.T) {
	before := StuckGoroutines()
	s := newSim(t)
	s.rt.opts.BlockingGuard = 100 * time.Millisecond
	block := make(chan struct{})
	defer close(block)
	Register(s.rt, "Blocks", func(ctx Context, _ Raw) (string, error) {
		<-block // forbidden: a native channel
		return "", nil
	})
	s.start("Blocks", "null")
	got := s.output()
	if !strings.Contains(got, "did not yield within 100ms") {
		t.Fatalf("output %s", got)
	}
	if StuckGoroutines() != before+1 {
		t.Fatalf("stuck goroutines %d, want %d", StuckGoroutines(), before+1)
	}
}

func TestBadInputFails(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Typed", func(ctx Context, in struct{ N int }) (int, error) { return in.N, nil })
	s.start("Typed", `"not an object"`)
	if got := s.output(); !strings.Contains(got, "input does not decode") {
		t.Fatalf("output %s", got)
	}
}

func TestQueueMessagesCarriedAcrossContinueAsNew(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Loop", func(ctx Context, n int) (int, error) {
		if _, err := Dequeue[string](ctx, "q").Await(ctx); err != nil {
			return 0, err
		}
		if n < 1 {
			return 0, ContinueAsNew(ctx, n+1)
		}
		return n, nil
	})
	s.start("Loop", "0")
	msg := func(d string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.QueueMessage{Instance: s.instance, Name: "q", Data: d}}
	}
	s.turn(msg(`"a"`), msg(`"b"`), msg(`"c"`))
	s.want(t, "OrchestrationStarted ExternalSubscribedPersistent ExternalEventPersistent ExternalEventPersistent ExternalEventPersistent OrchestrationContinuedAsNew")
	var can provider.ContinueAsNew
	for _, w := range s.last.ack.OrchestratorItems {
		if c, ok := w.Kind.(provider.ContinueAsNew); ok {
			can = c
		}
	}
	if len(can.CarryForwardEvents) != 2 || can.CarryForwardEvents[0].Data != `"b"` {
		t.Fatalf("carried %+v", can.CarryForwardEvents)
	}
	s.turn(provider.WorkItem{Kind: can})
	s.want(t, "OrchestrationStarted ExternalEventPersistent ExternalEventPersistent ExternalSubscribedPersistent OrchestrationCompleted")
	if s.exec != 2 || s.output() != "1" {
		t.Fatalf("exec %d output %s", s.exec, s.output())
	}
}

func TestExternalEventBeforeSubscriptionNotDelivered(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Wait", func(ctx Context, _ Raw) (string, error) {
		Call[string](ctx, "A", 1).Await(ctx)
		return WaitEvent[string](ctx, "go").Await(ctx)
	})
	s.start("Wait", "null")
	raise := provider.WorkItem{Kind: provider.ExternalRaised{Instance: s.instance, Name: "go", Data: `"early"`}}
	s.turn(raise, s.completed(2, `"x"`))
	s.want(t, "OrchestrationStarted ActivityScheduled ExternalEvent ActivityCompleted(2) ExternalSubscribed")
	s.turn(provider.WorkItem{Kind: provider.ExternalRaised{Instance: s.instance, Name: "go", Data: `"late"`}})
	if got := s.output(); got != `"late"` {
		t.Fatalf("output %s", got)
	}
}

// A wait that lost a race stops holding an arrival slot from the next turn on (its
// ExternalSubscribedCancelled applies), so a new wait of the same name gets the next event. A kept
// engine (the executor cache) never replays the breadcrumbs it recorded itself and once kept
// counting them: the second wait hung. (Within the turn that drops it, the wait still counts: an
// event in the same batch as the timer goes to it, and the new wait gets that event the next time
// the code runs; audit_events_test.go's same-batch case checks that against duroxide's history.)
func TestWaitAgainAfterLostRace(t *testing.T) {
	wait := func(ctx Context, _ Raw) (string, error) {
		w := WaitEvent[string](ctx, "x")
		first := "timeout"
		if Select(ctx, w, ctx.Timer(time.Minute)) == Awaitable(w) {
			first, _ = w.Await(ctx)
		}
		second, err := WaitEvent[string](ctx, "x").Await(ctx)
		return first + "," + second, err
	}
	raise := func(s *sim, data string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.ExternalRaised{Instance: s.instance, Name: "x", Data: data}}
	}
	t.Run("later event", func(t *testing.T) {
		s := newSim(t)
		Register(s.rt, "W", wait)
		s.start("W", "null")
		s.turn(s.fired(3))
		s.want(t, "OrchestrationStarted ExternalSubscribed TimerCreated TimerFired(3) ExternalSubscribed ExternalSubscribedCancelled(2)")
		s.turn(raise(s, `"v"`))
		if got := s.output(); got != `"timeout,v"` {
			t.Fatalf("output %s\n%s", got, dump(s.history))
		}
	})
}

// Queue messages that arrived before their dequeues are taken in the turn's quiescence loop, one
// dequeue per round; like duroxide, code that still emits new actions after 100 rounds fails the
// orchestration (Infrastructure, operation quiescence_loop) instead of spinning.
func TestQuiescenceLimit(t *testing.T) {
	for _, n := range []int{98, 99} {
		s := newSim(t)
		Register(s.rt, "Drain", func(ctx Context, _ Raw) (int, error) {
			for i := 0; ; i++ {
				if _, err := Dequeue[int](ctx, "q").Await(ctx); err != nil {
					return i, err
				}
			}
		})
		msgs := []provider.WorkItem{{Kind: provider.StartOrchestration{Instance: s.instance, Orchestration: "Drain", Input: "null", ExecutionID: 1}}}
		for i := range n {
			msgs = append(msgs, provider.WorkItem{Kind: provider.QueueMessage{Instance: s.instance, Name: "q", Data: fmt.Sprint(i)}})
		}
		s.turn(msgs...)
		last := s.history[len(s.history)-1]
		f, failed := last.Kind.(provider.OrchestrationFailedEvent)
		if n == 98 {
			// The first dequeue is bound before the loop; round k takes message k and emits the
			// next dequeue, round n+1 finds nothing: 99 rounds. With 99 messages it takes 100.
			if failed {
				t.Fatalf("%d messages: failed: %s", n, displayMessage(f.Details))
			}
			continue
		}
		infra, ok := f.Details.Kind.(provider.InfrastructureError)
		if !failed || !ok || infra.Operation != "quiescence_loop" {
			t.Fatalf("%d messages: want an Infrastructure quiescence_loop failure, got %s\n%s", n, last.EventType(), dump(s.history[len(s.history)-1:]))
		}
	}
}

func TestIsReplayingAndLogger(t *testing.T) {
	s := newSim(t)
	var seen []bool
	Register(s.rt, "R", func(ctx Context, _ Raw) (string, error) {
		seen = append(seen, ctx.IsReplaying())
		Call[string](ctx, "A", 1).Await(ctx)
		seen = append(seen, ctx.IsReplaying())
		return "", nil
	})
	s.start("R", "null")
	seen = nil
	s.turn(s.completed(2, `"x"`))
	if fmt.Sprint(seen) != "[true false]" {
		t.Fatalf("is replaying %v", seen)
	}
}

func TestNoGoroutinesLeftBehind(t *testing.T) {
	before := runtime.NumGoroutine()
	s := newSim(t)
	Register(s.rt, "Leaky", func(ctx Context, _ Raw) (string, error) {
		for i := range 10 {
			Go(ctx, func(ctx Context) (int, error) { return Call[int](ctx, "A", i).Await(ctx) })
		}
		b := Go(ctx, func(ctx Context) (int, error) {
			defer func() { Call[int](ctx, "InDefer", 0) }() // ignored while unwinding
			return Call[int](ctx, "B", 0).Await(ctx)
		})
		Select(ctx, b, ctx.Timer(time.Second))
		return "", nil
	})
	s.start("Leaky", "null")
	s.turn(s.fired(timerIDs(s.history)[0]))
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines left behind", n-before)
	}
	if strings.Contains(s.types(), "InDefer") {
		t.Fatal("an unwinding branch scheduled work")
	}
}

func TestCustomStatusAndKV(t *testing.T) {
	s := newSim(t)
	s.kv["old"] = provider.KVEntry{Value: "1", LastUpdatedAtMs: 10}
	s.kv["keep"] = provider.KVEntry{Value: "2", LastUpdatedAtMs: 5000}
	Register(s.rt, "KV", func(ctx Context, _ Raw) (string, error) {
		ctx.SetCustomStatus("a")
		ctx.SetKV("new", "x")
		n := ctx.PruneKV(time.UnixMilli(1000))
		Call[string](ctx, "A", 1).Await(ctx)
		st, _ := ctx.CustomStatus()
		return fmt.Sprintf("%d %s %v", n, st, ctx.KVKeys()), nil
	})
	s.start("KV", "null")
	s.turn(s.completed(5, `"x"`))
	s.want(t, "OrchestrationStarted CustomStatusUpdated KeyValueSet KeyValueCleared ActivityScheduled ActivityCompleted(5) OrchestrationCompleted")
	if got := s.output(); got != `"1 a [keep new]"` {
		t.Fatalf("output %s", got)
	}
}

func TestRetryWithTimeoutHistory(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Retry", func(ctx Context, _ Raw) (string, error) {
		return Call[string](ctx, "Flaky", 1, WithRetry(RetryPolicy{MaxAttempts: 3, Timeout: time.Minute})).Await(ctx)
	})
	s.start("Retry", "null")
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated")
	s.turn(s.failedActivity(2, "no"))
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated ActivityFailed(2) TimerCreated")
	s.turn(s.fired(5))
	s.turn(s.fired(8)) // the attempt times out: its activity is cancelled, no further attempt
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated ActivityFailed(2) TimerCreated TimerFired(5) "+
		"ActivityScheduled TimerCreated TimerFired(8) ActivityCancelRequested(7) OrchestrationFailed")
	if got := s.output(); got != "failed: timeout: activity timed out" {
		t.Fatalf("output %s", got)
	}
}

func TestAwaitOutsideOrchestration(t *testing.T) {
	s := newSim(t)
	var leaked Future[string]
	Register(s.rt, "L", func(ctx Context, _ Raw) (string, error) {
		leaked = Call[string](ctx, "A", 1)
		return "", nil
	})
	s.start("L", "null")
	if _, err := leaked.Await(&octx{}); err == nil {
		t.Fatal("await outside the orchestration succeeded")
	}
}

// BenchmarkReplay10k replays a 10,000-event history (5,000 activities awaited one by one).
func BenchmarkReplay10k(b *testing.B) {
	s := newSim(b)
	const n = 5000
	Register(s.rt, "Long", func(ctx Context, _ Raw) (int, error) {
		sum := 0
		for i := range n {
			v, err := Call[int](ctx, "A", i).Await(ctx)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	hist := []provider.Event{{EventID: 1, InstanceID: "inst", ExecutionID: 1, DuroxideVersion: DuroxideVersion,
		Kind: provider.OrchestrationStartedEvent{Name: "Long", Version: "1.0.0", Input: "null"}}}
	for i := range n {
		id := uint64(len(hist) + 1)
		in := fmt.Sprint(i)
		hist = append(hist, provider.Event{EventID: id, InstanceID: "inst", ExecutionID: 1, DuroxideVersion: DuroxideVersion,
			Kind: provider.ActivityScheduledEvent{Name: "A", Input: in}})
		hist = append(hist, provider.Event{EventID: id + 1, SourceEventID: &id, InstanceID: "inst", ExecutionID: 1,
			DuroxideVersion: DuroxideVersion, Kind: provider.ActivityCompletedEvent{Result: "1"}})
	}
	hist = hist[:len(hist)-1] // the last activity is still running: the turn replays everything
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		out := runTurn(s.env(), &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, History: hist})
		if len(out.ack.HistoryDelta) != 0 {
			b.Fatalf("replay added %d events", len(out.ack.HistoryDelta))
		}
	}
	b.ReportMetric(float64(len(hist)), "events")
}

var _ = context.Background

func TestPayloadsNotHTMLEscaped(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Esc", func(ctx Context, in string) (string, error) {
		return Call[string](ctx, "A", in+" & <b>").Await(ctx)
	})
	s.start("Esc", `"a<b"`)
	got := s.history[1].Kind.(provider.ActivityScheduledEvent).Input
	if got != `"a<b & <b>"` {
		t.Fatalf("activity input %s", got)
	}
}

func TestKeptEngineRunsOnlyNewEvents(t *testing.T) {
	s := newSim(t)
	starts := 0
	Register(s.rt, "Seq", func(ctx Context, _ Raw) (int, error) {
		starts++
		sum := 0
		for i := range 3 {
			v, err := Call[int](ctx, "A", i).Await(ctx)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	env := s.env()
	env.keep = true
	item := &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, Messages: []provider.WorkItem{{Kind: provider.StartOrchestration{
		Instance: "inst", Orchestration: "Seq", Input: "null", ExecutionID: 1}}}}
	var history []provider.Event
	for turn := 0; ; turn++ {
		item.History = history
		out := runTurn(env, item)
		history = append(history, out.ack.HistoryDelta...)
		if out.terminal {
			break
		}
		if out.eng == nil {
			t.Fatal("a continuing turn did not hand its engine back")
		}
		out.eng.commit()
		env.cached = out.eng
		last := history[len(history)-1]
		item.Messages = []provider.WorkItem{s.completed(last.EventID, fmt.Sprint(turn+1))}
	}
	if starts != 1 {
		t.Fatalf("the function started %d times; a kept engine must not replay", starts)
	}
	if got := types(history); got != "OrchestrationStarted ActivityScheduled ActivityCompleted(2) ActivityScheduled ActivityCompleted(4) ActivityScheduled ActivityCompleted(6) OrchestrationCompleted" {
		t.Fatal(got)
	}
	// A kept engine whose history is not the fetched one is dropped and the turn replays.
	stale := newSim(t)
	Register(stale.rt, "Seq", func(ctx Context, _ Raw) (int, error) { return Call[int](ctx, "A", 0).Await(ctx) })
	env2 := stale.env()
	env2.keep = true
	item2 := &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, Messages: item.Messages[:0:0]}
	item2.Messages = []provider.WorkItem{{Kind: provider.StartOrchestration{Instance: "inst", Orchestration: "Seq", Input: "null", ExecutionID: 1}}}
	first := runTurn(env2, item2)
	first.eng.commit()
	env2.cached = first.eng
	moved := append(slices.Clone(first.ack.HistoryDelta), provider.Event{EventID: 3, SourceEventID: ptr(uint64(2)),
		InstanceID: "inst", ExecutionID: 1, Kind: provider.ActivityCompletedEvent{Result: "5"}})
	out := runTurn(env2, &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, History: moved})
	if !out.terminal || out.ack.HistoryDelta[0].Kind.(provider.OrchestrationCompletedEvent).Output != "5" {
		t.Fatalf("stale engine: %s", types(out.ack.HistoryDelta))
	}
}

func ptr[T any](v T) *T { return &v }

// BenchmarkHelloTurns runs the two turns of a hello orchestration (start, then the activity's
// completion), replaying as duroxide does (the executor cache off).
func BenchmarkHelloTurns(b *testing.B) {
	s := newSim(b)
	Register(s.rt, "Hello", func(ctx Context, name string) (string, error) {
		return Call[string](ctx, "Greet", name).Await(ctx)
	})
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "inst", Orchestration: "Hello", Input: `"world"`, ExecutionID: 1}}
	b.ReportAllocs()
	for range b.N {
		out := runTurn(s.env(), &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, Messages: []provider.WorkItem{start}})
		h := out.ack.HistoryDelta
		done := s.completed(h[1].EventID, `"Hello, world!"`)
		out = runTurn(s.env(), &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, History: h, Messages: []provider.WorkItem{done}})
		if !out.terminal {
			b.Fatal("not finished")
		}
	}
}

func TestRuntimeLimitsFailTheOrchestration(t *testing.T) {
	cases := map[string]struct {
		body func(ctx Context)
		want string
	}{
		"custom status": {func(ctx Context) { ctx.SetCustomStatus(strings.Repeat("s", maxCustomStatusBytes+1)) }, "Custom status size"},
		"kv value":      {func(ctx Context) { ctx.SetKV("k", strings.Repeat("v", maxKVValueBytes+1)) }, "KV value for key 'k'"},
		"kv keys": {func(ctx Context) {
			for i := range maxKVKeys + 1 {
				ctx.SetKV(fmt.Sprint(i), "v")
			}
		}, "KV key count (151) exceeds limit (150)"},
		"tag": {func(ctx Context) { Call[string](ctx, "A", 1, WithTag(strings.Repeat("t", maxTagNameBytes+1))) }, "tag size"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t)
			Register(s.rt, "L", func(ctx Context, _ Raw) (string, error) {
				c.body(ctx)
				return "", ctx.Sleep(time.Second)
			})
			s.start("L", "null")
			if got := s.output(); !strings.Contains(got, c.want) {
				t.Fatalf("output %s", got)
			}
			if len(s.last.ack.WorkerItems)+len(s.last.ack.OrchestratorItems) != 0 {
				t.Fatalf("a failed turn dispatched work: %+v", s.last.ack)
			}
		})
	}
}

// BenchmarkKeptTurn measures one turn of a kept instance (the executor cache: only the new
// completion is applied) at a history of about 10 and about 1,000 events; the cost should not grow
// with the history.
func BenchmarkKeptTurn(b *testing.B) {
	for _, size := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", size), func(b *testing.B) {
			s := newSim(b)
			Register(s.rt, "Loop", func(ctx Context, _ Raw) (int, error) {
				for i := 0; ; i++ {
					if _, err := Call[int](ctx, "A", i).Await(ctx); err != nil {
						return 0, err
					}
				}
			})
			env := s.env()
			env.keep = true
			var eng *engine
			var history []provider.Event
			// build runs turns until the history holds about size events (not timed).
			build := func() {
				if eng != nil {
					eng.stop()
				}
				env.cached = nil
				item := &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, Messages: []provider.WorkItem{{Kind: provider.StartOrchestration{
					Instance: "inst", Orchestration: "Loop", Input: "null", ExecutionID: 1}}}}
				out := runTurn(env, item)
				history = out.ack.HistoryDelta
				eng = out.eng
				eng.commit()
				for len(history) < size {
					env.cached = eng
					last := history[len(history)-1]
					out := runTurn(env, &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, History: eng.history,
						Messages: []provider.WorkItem{s.completed(last.EventID, "1")}})
					eng = out.eng
					eng.commit()
					history = eng.history
				}
			}
			build()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%100 == 99 { // keep the history near its size
					b.StopTimer()
					build()
					b.StartTimer()
				}
				env.cached = eng
				last := eng.history[len(eng.history)-1]
				out := runTurn(env, &provider.OrchestrationItem{Instance: "inst", ExecutionID: 1, History: eng.history,
					Messages: []provider.WorkItem{s.completed(last.EventID, "1")}})
				eng = out.eng
				eng.commit()
			}
			b.StopTimer()
			eng.stop()
		})
	}
}

// The unregistered-handler backoff doubles per attempt up to 64x its base, as duroxide's, and
// never beyond UnregisteredBackoffMax.
func TestUnregisteredBackoff(t *testing.T) {
	rt := NewRuntime(nil, Options{UnregisteredBackoff: time.Second, UnregisteredBackoffMax: time.Hour})
	for attempt, want := range map[uint32]time.Duration{1: time.Second, 2: 2 * time.Second, 7: 64 * time.Second, 30: 64 * time.Second} {
		if got := rt.unregisteredDelay(attempt); got != want {
			t.Errorf("attempt %d: %v, want %v", attempt, got, want)
		}
	}
	rt = NewRuntime(nil, Options{UnregisteredBackoff: time.Second, UnregisteredBackoffMax: 10 * time.Second})
	if got := rt.unregisteredDelay(7); got != 10*time.Second {
		t.Errorf("capped: %v, want 10s", got)
	}
}
