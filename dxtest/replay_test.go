package dxtest_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

func greetRuntime(rt *dx.Runtime, activity string) {
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		if ctx.ExecutionID() < 2 { // a continue-as-new: the replayer must replay every execution
			return "", dx.ContinueAsNew(ctx, name+"1")
		}
		return dx.Call[string](ctx, activity, name).Await(ctx)
	})
}

// The replayer passes unchanged code and catches a renamed activity, from Redis and from a file.
func TestReplayerCatchesRenamedActivity(t *testing.T) {
	env := dxtest.New(t)
	greetRuntime(env.Runtime, "Greet")
	env.OnActivity("Greet").Return("hi")
	id := env.Start("Hello", "ada", dx.WithInstanceID("hello-1"))
	if got := dxtest.Result[string](env, id); got != "hi" {
		t.Fatalf("got %q", got)
	}
	env.Replay(id) // the code that wrote it replays it

	hist, err := dxtest.ReadHistory(context.Background(), env.Provider, id)
	if err != nil {
		t.Fatal(err)
	}
	if hist[0].ExecutionID != 1 || hist[len(hist)-1].ExecutionID != 2 {
		t.Fatalf("ReadHistory did not read both executions: %d..%d", hist[0].ExecutionID, hist[len(hist)-1].ExecutionID)
	}
	path := filepath.Join(t.TempDir(), "hello.jsonl")
	if err := dxtest.WriteHistoryFile(path, hist); err != nil {
		t.Fatal(err)
	}

	same := dx.NewRuntime(nil, dx.Options{})
	greetRuntime(same, "Greet")
	dxtest.ReplayFile(t, same, path)
	dxtest.ReplayInstance(t, same, env.Provider, id)

	renamed := dx.NewRuntime(nil, dx.Options{})
	greetRuntime(renamed, "SayHello")
	err = dxtest.Replay(renamed, hist)
	var re *dx.ReplayError
	if !errors.As(err, &re) {
		t.Fatalf("renamed activity: got %v, want a *dx.ReplayError", err)
	}
	if re.Instance != id || re.ExecutionID != 2 || re.EventID != 2 ||
		re.History != `activity Greet("ada1")` || re.Code != `calls activity SayHello("ada1")` {
		t.Fatalf("got %#v", re)
	}
	msg := failure(t, func(ft *fakeT) { dxtest.ReplayFile(ft, renamed, path) })
	for _, want := range []string{path + " no longer replays", "nondeterminism at event 2", `history: activity Greet("ada1")`, `code:    calls activity SayHello("ada1")`} {
		if !strings.Contains(msg, want) {
			t.Errorf("ReplayFile message lacks %q:\n%s", want, msg)
		}
	}
}

// RequireReplayable passes the build that runs the live instances, and fails, naming the
// instance and the event, a build that reorders two calls.
func TestRequireReplayable(t *testing.T) {
	steps := func(first, second string) func(dx.Context, string) (string, error) {
		return func(ctx dx.Context, in string) (string, error) {
			for _, a := range []string{first, second} {
				if _, err := dx.Call[string](ctx, a, in).Await(ctx); err != nil {
					return "", err
				}
			}
			return dx.WaitEvent[string](ctx, "go").Await(ctx)
		}
	}
	register := func(rt *dx.Runtime, first, second string) {
		dx.Register(rt, "Order", steps(first, second))
		dx.RegisterActivity(rt, "Reserve", func(_ context.Context, s string) (string, error) { return s, nil })
		dx.RegisterActivity(rt, "Charge", func(_ context.Context, s string) (string, error) { return s, nil })
	}
	env := dxtest.New(t)
	register(env.Runtime, "Reserve", "Charge")
	id := env.Start("Order", "o", dx.WithInstanceID("order-1"))
	env.WaitForEventWait(id, "go")

	same := dx.NewRuntime(nil, dx.Options{})
	register(same, "Reserve", "Charge")
	if rep := dxtest.RequireReplayable(t, env.Provider, same); len(rep.Groups) != 1 || rep.Groups[0].Running != 1 {
		t.Fatalf("report:\n%v", rep)
	}

	reordered := dx.NewRuntime(nil, dx.Options{})
	register(reordered, "Charge", "Reserve")
	msg := failure(t, func(ft *fakeT) {
		dxtest.RequireReplayable(ft, env.Provider, reordered, dx.CheckReplayOptions{ReadsPerSecond: -1})
	})
	if !strings.Contains(msg, `nondeterminism: instance "order-1" (Running, Order 1.0.0, execution 1) at event 2`) ||
		!strings.Contains(msg, `history: activity Reserve("o")`) || !strings.Contains(msg, `code:    calls activity Charge("o")`) {
		t.Fatalf("reordered calls: %q", msg)
	}
	msg = failure(t, func(ft *fakeT) {
		dxtest.RequireReplayable(ft, env.Provider, same, dx.CheckReplayOptions{}, dx.CheckReplayOptions{})
	})
	if !strings.Contains(msg, "at most one") {
		t.Fatalf("two options: %q", msg)
	}
}
