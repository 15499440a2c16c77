package dx_test

// Hostile and mistaken input to the public API: each test would fail without the guard it names
// (found by an audit: "bad input gets a clear, typed error and changes nothing; no panic reaches a
// caller; no goroutine outlives its owner").

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// hostileRuntime registers Hello (calls Greet), WaitEv (waits for the event named by its input).
func hostileRuntime(t *testing.T, o dx.Options) (*dx.Runtime, *dx.Client, *redisprovider.Provider) {
	t.Helper()
	p := newProvider(t)
	rt := dx.NewRuntime(p, o)
	dx.RegisterActivity(rt, "Greet", func(ctx context.Context, s string) (string, error) { return "hi " + s, nil })
	dx.Register(rt, "Hello", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Greet", s).Await(ctx)
	})
	dx.Register(rt, "WaitEv", func(ctx dx.Context, name string) (string, error) {
		return dx.WaitEvent[string](ctx, name).Await(ctx)
	})
	return rt, dx.NewClient(p), p
}

func hostileWait(t *testing.T, c *dx.Client, id string, d time.Duration) (dx.Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return c.Wait(ctx, id)
}

// A Context used outside its turn (stashed, then called from another goroutine while the instance
// is parked) is refused: before, the Call and the KV write were recorded at the next turn, the
// activity ran, and once the executor cache was dropped the instance failed as nondeterministic.
func TestHostileStaleContextRefused(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var stale dx.Context
	parked := make(chan struct{}, 1)
	reg := func(rt *dx.Runtime) {
		dx.RegisterActivity(rt, "Greet", func(ctx context.Context, s string) (string, error) { return "hi " + s, nil })
		dx.Register(rt, "Holder", func(ctx dx.Context, s string) (string, error) {
			if _, err := dx.WaitEvent[string](ctx, "go").Await(ctx); err != nil {
				return "", err
			}
			if !ctx.IsReplaying() {
				stale = ctx
				select {
				case parked <- struct{}{}:
				default:
				}
			}
			return dx.WaitEvent[string](ctx, "go2").Await(ctx)
		})
	}
	rt := dx.NewRuntime(p, testOptions())
	reg(rt)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	if _, err := c.Start(ctx, "Holder", "", dx.WithInstanceID("holder")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the holder waits for go", func() bool { h, _ := c.History(ctx, "holder", 0); return len(h) >= 2 })
	if err := c.RaiseEvent(ctx, "holder", "go", "1"); err != nil {
		t.Fatal(err)
	}
	recv(t, parked, "the holder to park")
	waitIdle(ctx, t, p)                           // the turn that stashed the context is acknowledged
	f := dx.Call[string](stale, "Greet", "stray") // off the orchestration's goroutine, outside its turn
	stale.SetKV("stray", "yes")
	if _, err := f.Await(stale); err == nil {
		t.Error("Await of the stray future succeeded")
	}
	if err := c.EnqueueEvent(ctx, "holder", "poke", 1); err != nil { // gives the instance a turn
		t.Fatal(err)
	}
	waitIdle(ctx, t, p) // that turn ran
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	if err := rt.Shutdown(sctx); err != nil { // drops the executor cache
		t.Fatal(err)
	}
	cancel()
	rt2 := dx.NewRuntime(p, testOptions())
	reg(rt2)
	startRuntime(t, rt2)
	if err := c.RaiseEvent(ctx, "holder", "go2", "2"); err != nil {
		t.Fatal(err)
	}
	st, err := hostileWait(t, c, "holder", 5*time.Second)
	kv, _ := c.KVAll(ctx, "holder")
	if st.State != dx.StateCompleted || kv["stray"] != "" {
		t.Errorf("Call/SetKV on a stale Context were accepted and recorded: state=%s err=%v (wait %v), kv=%v; "+
			"they should be refused like Await (errNotInOrchestration) and change nothing", st.State, st.Err, err, kv)
	}
}

// Negative durations in dx.Options: Start refuses them (before, it started, and every fetch then
// failed forever, or the session loop spun at 1 ms).
func TestHostileNegativeOptionsRefused(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]dx.Options{
		"OrchestrationLockTimeout": {OrchestrationLockTimeout: -time.Second},
		"WorkerLockTimeout":        {WorkerLockTimeout: -time.Second},
		"PollTimeout":              {PollTimeout: -time.Second},
		"SessionLockTimeout":       {SessionLockTimeout: -time.Second},
	} {
		o.Logger = quietLogger
		rt, _, _ := hostileRuntime(t, o)
		if err := rt.Start(context.Background()); !errors.Is(err, dx.ErrInvalidInput) {
			_ = rt.Shutdown(context.Background())
			t.Errorf("negative %s: Start returned %v, want ErrInvalidInput", name, err)
		}
	}
}

// Non-UTF-8 instance ids and names are refused up front (before, JSON turned the bad bytes into
// U+FFFD inside work items while the store's keys kept them: the instance stayed Running, or the
// orchestration became poison).
func TestHostileNonUTF8Refused(t *testing.T) {
	t.Parallel()
	rt, c, p := hostileRuntime(t, testOptions())
	if err := dx.Register(rt, "b\xffd", func(ctx dx.Context, s string) (string, error) { return s, nil }); !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("Register with a non-UTF-8 name: %v, want ErrInvalidInput", err)
	}
	ctx := waitCtx(t)
	if _, err := c.Start(ctx, "Hello", "x", dx.WithInstanceID("a\xffb")); !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("Start with instance id \"a\\xffb\": %v, want ErrInvalidInput", err)
	}
	if _, err := c.Start(ctx, "b\xffd", "x"); !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("Start of orchestration \"b\\xffd\": %v, want ErrInvalidInput", err)
	}
	if err := c.RaiseEvent(ctx, "ok", "e\xff", "x"); !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("RaiseEvent with event name \"e\\xff\": %v, want ErrInvalidInput", err)
	}
	if ids, _ := p.ListInstances(ctx); len(ids) != 0 {
		t.Errorf("instances after the refused calls: %v", ids)
	}
}

// Join/Select with a future of another instance are refused like Await (before, they read the other
// engine's state from this goroutine and hung forever).
func TestHostileForeignFutureInJoinSelect(t *testing.T) {
	t.Parallel()
	rt, c, _ := hostileRuntime(t, testOptions())
	var foreign atomic.Pointer[dx.Future[string]]
	dx.Register(rt, "Holder", func(ctx dx.Context, s string) (string, error) {
		f := dx.WaitEvent[string](ctx, "go")
		foreign.Store(&f)
		return f.Await(ctx)
	})
	dx.Register(rt, "UseForeign", func(ctx dx.Context, mode string) (string, error) {
		own := ctx.Timer(10 * time.Millisecond)
		if mode == "join" {
			return "", dx.Join(ctx, own, *foreign.Load())
		}
		dx.Select(ctx, ctx.Timer(time.Hour), *foreign.Load())
		return "", nil
	})
	startRuntime(t, rt)
	ctx := waitCtx(t)
	mustStart(t, c, ctx, "Holder", "", dx.WithInstanceID("holder"))
	waitFor(t, "the holder's future", func() bool { return foreign.Load() != nil })
	for _, mode := range []string{"join", "select"} {
		if _, err := c.Start(ctx, "UseForeign", mode, dx.WithInstanceID("use-"+mode)); err != nil {
			t.Fatal(err)
		}
		if st, err := hostileWait(t, c, "use-"+mode, 3*time.Second); err != nil {
			t.Errorf("%s with another instance's future: no error, instance stuck %s (%v)", mode, st.State, err)
		}
	}
	mustStart(t, c, ctx, "Hello", "x", dx.WithInstanceID("after"))
	if st, err := hostileWait(t, c, "after", 3*time.Second); err != nil {
		t.Errorf("afterwards an unrelated Hello does not run either (state %s, %v): the dispatchers are hung", st.State, err)
	}
}

// runtime.Goexit in orchestration code (t.FailNow, a helper that calls it) fails the instance
// (before, it completed with an empty, non-JSON output).
func TestHostileGoexitFails(t *testing.T) {
	t.Parallel()
	rt, c, _ := hostileRuntime(t, testOptions())
	dx.Register(rt, "Exit", func(ctx dx.Context, s string) (string, error) { runtime.Goexit(); return "", nil })
	startRuntime(t, rt)
	mustStart(t, c, waitCtx(t), "Exit", "", dx.WithInstanceID("exit"))
	st, err := hostileWait(t, c, "exit", 5*time.Second)
	if st.State == dx.StateCompleted {
		t.Errorf("runtime.Goexit in orchestration code: Completed with output %q (%v); want Failed", st.Output, err)
	}
}

// Ending Start's ctx stops the runtime like a deadline-expired Shutdown: the executor cache's
// parked orchestration goroutines end and Start may be called again (before, they stayed alive and
// Start returned ErrRunning).
func TestHostileStartCtxEndStops(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Run("run", func(t *testing.T) {
		rt, c, _ := hostileRuntime(t, testOptions())
		sctx, cancel := context.WithCancel(context.Background())
		if err := rt.Start(sctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Start(waitCtx(t), "WaitEv", "never", dx.WithInstanceID("parked")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the instance to wait", func() bool { h, _ := c.History(waitCtx(t), "parked", 0); return len(h) >= 2 })
		cancel()
		deadline := time.Now().Add(10 * time.Second)
		for err := rt.Start(context.Background()); err != nil; err = rt.Start(context.Background()) {
			if !errors.Is(err, dx.ErrRunning) || time.Now().After(deadline) {
				t.Fatalf("Start after Start's ctx ended: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if err := rt.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
	})
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > base; i++ {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > base {
		t.Errorf("%d goroutines left over after Start's ctx ended, a restart and a Shutdown", n-base)
	}
}

// Errors are typed: dx.ErrNotFound matches the provider's not-found errors (before, nothing
// returned it), dx's own validation errors match dx.ErrInvalidInput, and ListInstances refuses an
// unknown state (before, an empty list).
func TestHostileTypedErrors(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	if _, err := c.Info(ctx, "nope"); !errors.Is(err, dx.ErrNotFound) {
		t.Errorf("Info(unknown): errors.Is(err, dx.ErrNotFound) is false: %v", err)
	}
	if _, err := c.Delete(ctx, "nope", true); !errors.Is(err, dx.ErrNotFound) {
		t.Errorf("Delete(unknown): errors.Is(err, dx.ErrNotFound) is false: %v", err)
	}
	if _, err := c.Start(ctx, "", 1); err == nil || !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("Start(empty name): untyped error %v", err)
	}
	if _, err := c.Start(ctx, "H", make(chan int)); err == nil || !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("Start(unencodable input): untyped error %v", err)
	}
	if ids, err := c.ListInstances(ctx, dx.State("Bogus")); !errors.Is(err, dx.ErrInvalidInput) {
		t.Errorf("ListInstances(\"Bogus\") = %v, nil; want an invalid-input error", ids)
	}
}

// An empty tag or session id fails the call's future with ErrInvalidInput (duroxide accepts them;
// this store cannot route them): before, an empty tag made the store refuse the whole turn's ack.
func TestHostileEmptyTagRefused(t *testing.T) {
	t.Parallel()
	rt, c, _ := hostileRuntime(t, testOptions())
	dx.Register(rt, "Tagged", func(ctx dx.Context, _ string) (string, error) {
		_, errTag := dx.Call[string](ctx, "Greet", "x", dx.WithTag("")).Await(ctx)
		_, errSession := dx.Call[string](ctx, "Greet", "x", dx.OnSession("")).Await(ctx)
		if errors.Is(errTag, dx.ErrInvalidInput) && errors.Is(errSession, dx.ErrInvalidInput) {
			return "refused", nil
		}
		return "", fmt.Errorf("tag: %v, session: %v", errTag, errSession)
	})
	startRuntime(t, rt)
	id, err := c.Start(waitCtx(t), "Tagged", "")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := hostileWait(t, c, id, 5*time.Second); err != nil || st.Output != `"refused"` {
		t.Fatalf("state %s output %s err %v (%v)", st.State, st.Output, st.Err, err)
	}
}

// A nil context is refused with an error (ErrInvalidInput), not a panic, by the client, the
// runtime's Start and the provider; Shutdown(nil) waits like a context without deadline.
func TestHostileNilContext(t *testing.T) {
	t.Parallel()
	rt, c, _ := hostileRuntime(t, testOptions())
	var nilCtx context.Context
	calls := map[string]func() error{
		"Start":       func() error { _, err := c.Start(nilCtx, "Hello", "x"); return err },
		"StartWithID": func() error { _, err := c.Start(nilCtx, "Hello", "x", dx.WithInstanceID("n")); return err },
		"RaiseEvent":  func() error { return c.RaiseEvent(nilCtx, "n", "e", 1) },
		"Cancel":      func() error { return c.Cancel(nilCtx, "n", "r") },
		"Status":      func() error { _, err := c.Status(nilCtx, "n"); return err },
		"Wait":        func() error { _, err := c.Wait(nilCtx, "n"); return err },
		"KV":          func() error { _, _, err := c.KV(nilCtx, "n", "k"); return err },
		"List":        func() error { _, err := c.ListInstances(nilCtx, ""); return err },
		"Runtime":     func() error { return rt.Start(nilCtx) },
		"Provider": func() error {
			_, err := redisprovider.New(nilCtx, redisprovider.Options{Addr: "127.0.0.1:1"})
			return err
		},
	}
	for name, call := range calls {
		var err error
		if p := func() (p any) { defer func() { p = recover() }(); err = call(); return nil }(); p != nil {
			t.Errorf("%s(nil ctx) panicked: %v", name, p)
		} else if !errors.Is(err, dx.ErrInvalidInput) {
			t.Errorf("%s(nil ctx) = %v, want ErrInvalidInput", name, err)
		}
	}
	if err := rt.Shutdown(nilCtx); err != nil {
		t.Errorf("Shutdown(nil ctx) = %v", err)
	}
}
