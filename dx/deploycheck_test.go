package dx_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// A build's Flow orchestration, written as its steps: each variant below changes one.
type flowStep func(ctx dx.Context) error

func doAct(name, input string) flowStep {
	return func(ctx dx.Context) error { _, err := dx.Call[string](ctx, name, input).Await(ctx); return err }
}

func doSleep(d time.Duration) flowStep { return func(ctx dx.Context) error { return ctx.Sleep(d) } }

func doSub(name, input string) flowStep {
	return func(ctx dx.Context) error { _, err := dx.CallSub[string](ctx, name, input).Await(ctx); return err }
}

func doWait(name string) flowStep {
	return func(ctx dx.Context) error { _, err := dx.WaitEvent[string](ctx, name).Await(ctx); return err }
}

func flowOf(steps ...flowStep) func(dx.Context, string) (string, error) {
	return func(ctx dx.Context, _ string) (string, error) {
		for _, s := range steps {
			if err := s(ctx); err != nil {
				return "", err
			}
		}
		return "done", nil
	}
}

// The deployed build. Flow's events: 1 started, 2-3 A, 4-5 B, 6-7 timer, 8-9 Child, 10 the wait.
var deployedFlow = []flowStep{doAct("A", "x"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")}

// build registers a build: Flow as given (at version), and everything else unchanged unless
// left out by name.
// Hang waits for hang to close (nil: forever).
func buildFlow(rt *dx.Runtime, version string, flow func(dx.Context, string) (string, error), hang <-chan struct{}, without ...string) {
	in := func(name string) bool {
		for _, w := range without {
			if w == name {
				return false
			}
		}
		return true
	}
	for _, a := range []string{"A", "B", "C", "A2"} {
		dx.RegisterActivity(rt, a, func(_ context.Context, s string) (string, error) { return a + s, nil })
	}
	if in("Hang") {
		dx.RegisterActivity(rt, "Hang", func(ctx context.Context, _ string) (string, error) { <-hang; return "", nil })
	}
	dx.Register(rt, "Child", func(ctx dx.Context, s string) (string, error) { return s, nil })
	dx.Register(rt, "Waiter", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Hang", s).Await(ctx)
	})
	if flow != nil {
		dx.RegisterVersion(rt, "Flow", version, flow)
	}
}

// deployed runs the deployed build and leaves, on p: Flow instances f-1, f-2 waiting for "go",
// f-3 completed, their Child instances completed, and Waiter w-1 running its activity Hang.
func deployed(t *testing.T) provider.Provider {
	t.Helper()
	p := newProvider(t)
	ctx := waitCtx(t)
	rt := dx.NewRuntime(p, testOptions())
	hang := make(chan struct{})
	buildFlow(rt, "1.0.0", flowOf(deployedFlow...), hang)
	startRuntime(t, rt)
	t.Cleanup(func() { close(hang) }) // before the shutdown
	c := dx.NewClient(p)
	for _, id := range []string{"f-1", "f-2", "f-3"} {
		mustStart(t, c, ctx, "Flow", "in", dx.WithInstanceID(id))
		waitFor(t, id+" to wait for go", func() bool {
			return historyHas(t, p, id, func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ExternalSubscribedEvent); return ok })
		})
	}
	if err := c.RaiseEvent(ctx, "f-3", "go", "now"); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(ctx, "f-3"); err != nil || st.State != dx.StateCompleted {
		t.Fatalf("f-3: %v %v", st.State, err)
	}
	mustStart(t, c, ctx, "Waiter", "w", dx.WithInstanceID("w-1"))
	waitFor(t, "w-1 to schedule Hang", func() bool {
		return historyHas(t, p, "w-1", func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ActivityScheduledEvent); return ok })
	})
	return p
}

// Each kind of breaking change is reported for every instance it breaks, at the right event with
// both sides; compatible changes report clean.
func TestCheckReplayFindsEachBreakingChange(t *testing.T) {
	t.Parallel()
	p := deployed(t)
	type want struct {
		kind          dx.BreakKind
		event         uint64
		history, code string
	}
	for _, tc := range []struct {
		name    string
		version string
		flow    []flowStep
		without []string
		running want            // f-1 and f-2 (and f-3 too, unless finished is set)
		finish  *want           // f-3, when it differs from running
		others  map[string]want // other instances
	}{
		{name: "reordered calls", flow: []flowStep{doAct("B", "y"), doAct("A", "x"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 2, `activity A("x")`, `calls activity B("y")`}},
		{name: "added activity", flow: []flowStep{doAct("A", "x"), doAct("C", "z"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 4, `activity B("y")`, `calls activity C("z")`}},
		{name: "removed activity", flow: []flowStep{doAct("A", "x"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 4, `activity B("y")`, `creates a timer`}},
		{name: "changed activity name", flow: []flowStep{doAct("A2", "x"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 2, `activity A("x")`, `calls activity A2("x")`}},
		{name: "changed activity input", flow: []flowStep{doAct("A", "X"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 2, `activity A("x")`, `calls activity A("X")`}},
		{name: "removed timer", flow: []flowStep{doAct("A", "x"), doAct("B", "y"), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 6, `a timer`, `calls sub-orchestration Child("c")`}},
		{name: "added timer", flow: []flowStep{doSleep(time.Hour), doAct("A", "x"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 2, `activity A("x")`, `creates a timer`}},
		{name: "changed sub-orchestration input", flow: []flowStep{doAct("A", "x"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Child", "d"), doWait("go")},
			running: want{dx.BreakNondeterminism, 8, `sub-orchestration Child("c")`, `calls sub-orchestration Child("d")`}},
		{name: "changed sub-orchestration name", flow: []flowStep{doAct("A", "x"), doAct("B", "y"), doSleep(time.Millisecond), doSub("Flow", "c"), doWait("go")},
			running: want{dx.BreakNondeterminism, 8, `sub-orchestration Child("c")`, `calls sub-orchestration Flow("c")`}},
		{name: "removed registration: only a new version", version: "2.0.0", flow: deployedFlow,
			running: want{kind: dx.BreakNotRegistered}, finish: &want{}},
		{name: "removed registration: no Flow at all", flow: nil,
			running: want{kind: dx.BreakNotRegistered}, finish: &want{}},
		{name: "removed activity registration", flow: deployedFlow, without: []string{"Hang"}, running: want{}, finish: &want{},
			others: map[string]want{"w-1": {dx.BreakActivityNotRegistered, 2, `activity Hang("w"), not finished`, `activity "Hang" is not registered`}}},
		{name: "compatible: changed timer duration", flow: []flowStep{doAct("A", "x"), doAct("B", "y"), doSleep(time.Hour), doSub("Child", "c"), doWait("go")},
			running: want{}},
		{name: "compatible: new code after the wait", flow: append(append([]flowStep{}, deployedFlow...), doAct("C", "later")),
			running: want{}},
		{name: "compatible: changed activity body", flow: deployedFlow, running: want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
			var flow func(dx.Context, string) (string, error)
			if tc.flow != nil {
				flow = flowOf(tc.flow...)
			}
			buildFlow(rt, cmpOr(tc.version, "1.0.0"), flow, nil, tc.without...)
			rep, err := dx.CheckReplay(waitCtx(t), p, rt, dx.CheckReplayOptions{ReadsPerSecond: -1})
			if err != nil {
				t.Fatal(err)
			}
			wants := map[string]want{"f-1": tc.running, "f-2": tc.running, "f-3": tc.running}
			if tc.finish != nil {
				wants["f-3"] = *tc.finish
			}
			for id, w := range tc.others {
				wants[id] = w
			}
			got := map[string]dx.ReplayBreak{}
			for _, b := range rep.Breaks {
				got[b.Instance] = b
			}
			for id, w := range wants {
				b, broke := got[id]
				if w.kind == "" {
					if broke {
						t.Errorf("%s: want clean, got %v", id, b)
					}
					continue
				}
				if !broke {
					t.Errorf("%s: want a break (%s at %d), got none; report:\n%v", id, w.kind, w.event, rep)
					continue
				}
				if b.Kind != w.kind || b.EventID != w.event || !strings.Contains(b.History, w.history) || !strings.Contains(b.Code, w.code) {
					t.Errorf("%s: got %s at %d (history %q, code %q), want %s at %d (%q, %q)", id, b.Kind, b.EventID, b.History, b.Code, w.kind, w.event, w.history, w.code)
				}
				wantStatus := provider.StatusRunning
				if id == "f-3" {
					wantStatus = provider.StatusCompleted
				}
				if b.Status != wantStatus || b.ExecutionID != 1 {
					t.Errorf("%s: status %s execution %d", id, b.Status, b.ExecutionID)
				}
			}
			for id, b := range got {
				if _, ok := wants[id]; !ok {
					t.Errorf("unexpected break %v", b)
				}
			}
			if rep.OK() != (len(got) == 0) || !strings.Contains(rep.String(), "ORCHESTRATION") {
				t.Errorf("OK %v with %d breaks; report:\n%v", rep.OK(), len(got), rep)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// A new version next to the old one is the safe way to change Flow: the running instances keep
// replaying 1.0.0, and the report counts each version apart.
func TestCheckReplayNewVersionIsClean(t *testing.T) {
	t.Parallel()
	p := deployed(t)
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	buildFlow(rt, "1.0.0", flowOf(deployedFlow...), nil)
	dx.RegisterVersion(rt, "Flow", "2.0.0", flowOf(doAct("B", "y"), doAct("A", "x"), doWait("go")))
	rep, err := dx.CheckReplay(waitCtx(t), p, rt, dx.CheckReplayOptions{ReadsPerSecond: -1})
	if err != nil || !rep.OK() {
		t.Fatalf("err %v, report:\n%v", err, rep)
	}
	want := []dx.CheckReplayGroup{
		{Orchestration: "Child", Version: "1.0.0", Registered: true, Finished: 3, Clean: 3},
		{Orchestration: "Flow", Version: "1.0.0", Registered: true, Running: 2, Finished: 1, Clean: 3},
		{Orchestration: "Waiter", Version: "1.0.0", Registered: true, Running: 1, Clean: 1},
	}
	if fmt.Sprint(rep.Groups) != fmt.Sprint(want) {
		t.Fatalf("groups\n got %+v\nwant %+v", rep.Groups, want)
	}
	if rep.Truncated || rep.Gone != 0 || rep.Reads == 0 {
		t.Fatalf("truncated %v gone %d reads %d", rep.Truncated, rep.Gone, rep.Reads)
	}
	// The options bound what is read.
	rep, err = dx.CheckReplay(waitCtx(t), p, rt, dx.CheckReplayOptions{ReadsPerSecond: -1, MaxRunning: 1, RecentFinished: -1})
	if err != nil || !rep.Truncated || len(rep.Groups) != 1 || rep.Groups[0].Running != 1 {
		t.Fatalf("MaxRunning 1: err %v, report:\n%v", err, rep)
	}
}

func TestCheckReplayRefusesBadInput(t *testing.T) {
	t.Parallel()
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	p := newProvider(t)
	for name, call := range map[string]func() error{
		"nil provider": func() error {
			_, err := dx.CheckReplay(context.Background(), nil, rt, dx.CheckReplayOptions{})
			return err
		},
		"nil context": func() error {
			var nilCtx context.Context
			_, err := dx.CheckReplay(nilCtx, p, rt, dx.CheckReplayOptions{})
			return err
		},
		"nil runtime": func() error {
			_, err := dx.CheckReplay(context.Background(), p, nil, dx.CheckReplayOptions{})
			return err
		},
		"NaN budget": func() error {
			_, err := dx.CheckReplay(context.Background(), p, rt, dx.CheckReplayOptions{ReadsPerSecond: math.NaN()})
			return err
		},
		"negative scan": func() error {
			_, err := dx.CheckReplay(context.Background(), p, rt, dx.CheckReplayOptions{FinishedScan: -1})
			return err
		},
	} {
		if err := call(); !errors.Is(err, dx.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
}
