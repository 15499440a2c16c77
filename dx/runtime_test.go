package dx_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

func TestHelloEndToEnd(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.RegisterActivity(rt, "Greet", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		return dx.Call[string](ctx, "Greet", name).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := c.Start(ctx, "Hello", "world", dx.WithInstanceID("hello"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := dx.Result[string](ctx, c, id)
	if err != nil || out != "Hello, world!" {
		t.Fatalf("got %q, %v", out, err)
	}
	if _, err := c.Start(ctx, "Hello", "again", dx.WithInstanceID("hello")); !errors.Is(err, dx.ErrInstanceExists) {
		t.Fatalf("second start with the same id: %v", err)
	}
}

// waitStatus waits for an instance to finish.
func waitStatus(t *testing.T, c *dx.Client, id string) dx.Status {
	t.Helper()
	st, err := c.Wait(waitCtx(t), id)
	if err != nil {
		t.Fatalf("wait %s: %v (last state %s)", id, err, st.State)
	}
	return st
}

func TestShutdownDrainsInflightActivity(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	started := make(chan struct{})
	var runs atomic.Int32
	dx.RegisterActivity(rt, "Slow", func(ctx context.Context, _ dx.Raw) (string, error) {
		runs.Add(1)
		close(started)
		time.Sleep(300 * time.Millisecond) // work that takes a while: Shutdown must wait for it
		return "done", nil
	})
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.Call[string](ctx, "Slow", nil).Await(ctx)
	})
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := mustStart(t, c, ctx, "O", nil)
	recv(t, started, "the activity to start")
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	// The activity finished and was acknowledged; a new runtime only has the final turn left.
	rt2 := dx.NewRuntime(p, testOptions())
	dx.Register(rt2, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.Call[string](ctx, "Slow", nil).Await(ctx)
	})
	startRuntime(t, rt2)
	if st := waitStatus(t, c, id); st.State != dx.StateCompleted || st.Output != `"done"` || runs.Load() != 1 {
		t.Fatalf("state %s output %s runs %d", st.State, st.Output, runs.Load())
	}
}

func TestShutdownDeadlineAbandonsForAnotherNode(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.WorkerLockTimeout = time.Minute // only an abandon can hand it over quickly
	opts.ActivityCancellationGracePeriod = time.Second
	var runs atomic.Int32
	register := func(rt *dx.Runtime, block bool) {
		dx.RegisterActivity(rt, "Stuck", func(ctx context.Context, _ dx.Raw) (string, error) {
			runs.Add(1)
			if block {
				<-ctx.Done() // honours cancellation
				return "", context.Cause(ctx)
			}
			return "second node", nil
		})
		dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
			return dx.Call[string](ctx, "Stuck", nil).Await(ctx)
		})
	}
	rt := dx.NewRuntime(p, opts)
	register(rt, true)
	ctx := waitCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	id := mustStart(t, c, ctx, "O", nil)
	waitFor(t, "the activity to run", func() bool { return runs.Load() > 0 })
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := rt.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown: %v", err)
	}
	rt2 := dx.NewRuntime(p, opts)
	register(rt2, false)
	startRuntime(t, rt2)
	began := time.Now()
	st := waitStatus(t, c, id)
	if st.State != dx.StateCompleted || st.Output != `"second node"` {
		t.Fatalf("state %s output %s err %v", st.State, st.Output, st.Err)
	}
	if time.Since(began) > 10*time.Second {
		t.Fatalf("took %s: the abandoned activity waited for its lock", time.Since(began))
	}
}

func TestActivityLockRenewedWhileRunning(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.WorkerLockTimeout = time.Second // renewed every 500 ms: a loaded machine may delay a renewal a little
	opts.WorkerConcurrency = 2
	var runs atomic.Int32
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Long", func(ctx context.Context, _ dx.Raw) (string, error) {
		runs.Add(1)
		select {
		case <-time.After(3 * time.Second): // three lock timeouts
			return "ok", nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.Call[string](ctx, "Long", nil).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "O", nil)
	if st := waitStatus(t, c, id); st.State != dx.StateCompleted || runs.Load() != 1 {
		t.Fatalf("state %s runs %d err %v", st.State, runs.Load(), st.Err)
	}
}

func TestSelectLoserActivityIsCancelled(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.WorkerLockTimeout = time.Second // a stolen lock is noticed at the next renewal
	rt := dx.NewRuntime(p, opts)
	cancelled := make(chan error, 1)
	dx.RegisterActivity(rt, "Forever", func(ctx context.Context, _ dx.Raw) (string, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return "too late", nil
	})
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		act := dx.Call[string](ctx, "Forever", nil)
		if dx.Select(ctx, act, ctx.Timer(300*time.Millisecond)) == act {
			return "activity", nil
		}
		return "timer", nil
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "O", nil)
	if st := waitStatus(t, c, id); st.Output != `"timer"` {
		t.Fatalf("output %s", st.Output)
	}
	select {
	case err := <-cancelled:
		t.Logf("activity cancelled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the losing activity was not cancelled")
	}
}

func TestActivityPanicFailsActivity(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.RegisterActivity(rt, "Boom", func(ctx context.Context, _ dx.Raw) (string, error) { panic("kaboom") })
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		_, err := dx.Call[string](ctx, "Boom", nil).Await(ctx)
		var de *dx.Error
		if errors.As(err, &de) {
			a := de.Details.Kind.(provider.ApplicationError)
			return a.Kind.Name + ": " + a.Message, nil
		}
		return "", err
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "O", nil)
	// As in duroxide: an ordinary activity failure, worded like its task join error.
	if st := waitStatus(t, c, id); st.Output != `"ActivityFailed: task 2 panicked with message \"kaboom\""` {
		t.Fatalf("output %s err %v", st.Output, st.Err)
	}
}

func TestMixedDeploymentHandlerOnOneNode(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.UnregisteredBackoffMax = 100 * time.Millisecond
	opts.MaxAttempts = 1000
	old := dx.NewRuntime(p, opts) // knows neither the orchestration nor the activity
	startRuntime(t, old)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "New", nil)
	// The old node takes it first and abandons it with backoff.
	waitFor(t, "an abandon with backoff", func() bool {
		st, err := p.GetQueueStats(waitCtx(t))
		return err == nil && st.Orchestrator.Delayed > 0
	})
	next := dx.NewRuntime(p, opts)
	dx.RegisterActivity(next, "A", func(context.Context, dx.Raw) (int, error) { return 7, nil })
	dx.Register(next, "New", func(ctx dx.Context, _ dx.Raw) (int, error) { return dx.Call[int](ctx, "A", nil).Await(ctx) })
	startRuntime(t, next)
	if st := waitStatus(t, c, id); st.Output != "7" {
		t.Fatalf("state %s output %s err %v", st.State, st.Output, st.Err)
	}
}

func TestUnregisteredOrchestrationBecomesPoison(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.MaxAttempts = 3
	opts.UnregisteredBackoff = 10 * time.Millisecond
	rt := dx.NewRuntime(p, opts)
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "Missing", nil)
	st := waitStatus(t, c, id)
	if st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "poison") {
		t.Fatalf("state %s err %v", st.State, st.Err)
	}
	if _, ok := st.Err.Details.Kind.(provider.PoisonError); !ok {
		t.Fatalf("details %+v", st.Err.Details)
	}
}

func TestCancelInstanceCascades(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.WorkerLockTimeout = time.Second // a stolen lock is noticed at the next renewal
	rt := dx.NewRuntime(p, opts)
	activityStarted, activityCancelled := make(chan struct{}, 1), make(chan struct{}, 1)
	dx.RegisterActivity(rt, "Forever", func(ctx context.Context, _ dx.Raw) (string, error) {
		activityStarted <- struct{}{}
		<-ctx.Done()
		activityCancelled <- struct{}{}
		return "", ctx.Err()
	})
	dx.Register(rt, "Child", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.WaitEvent[string](ctx, "never").Await(ctx)
	})
	dx.Register(rt, "Parent", func(ctx dx.Context, _ dx.Raw) (string, error) {
		a := dx.Call[string](ctx, "Forever", nil)
		ch := dx.CallSub[string](ctx, "Child", nil, dx.WithInstanceID("the-child"))
		return "", dx.Join(ctx, a, ch)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id := mustStart(t, c, ctx, "Parent", nil)
	waitFor(t, "the child to run", func() bool { st, _ := c.Status(ctx, "the-child"); return st.State == dx.StateRunning })
	// The activity must be running before the cancel (a cancel that comes first removes it unrun).
	recv(t, activityStarted, "the activity to start")
	if err := c.Cancel(ctx, id, "stop it"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, c, id)
	if st.State != dx.StateFailed || !errors.Is(st.Err, dx.ErrCanceled) || st.Err.Error() != "canceled: stop it" {
		t.Fatalf("parent %s %v", st.State, st.Err)
	}
	child := waitStatus(t, c, "the-child")
	if child.State != dx.StateFailed || child.Err.Error() != "canceled: parent canceled" {
		t.Fatalf("child %s %v", child.State, child.Err)
	}
	select {
	case <-activityCancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the running activity was not cancelled")
	}
}

// dxGoroutines returns the stacks of goroutines running dx code (other than tests), by goroutine
// header line.
func dxGoroutines() map[string]string {
	buf := make([]byte, 1<<20)
	out := map[string]string{}
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "duroxide-go/dxredis/dx.") && !strings.Contains(g, "testing.tRunner") {
			id, _, _ := strings.Cut(g, " [")
			out[id] = g
		}
	}
	return out
}

func TestNoGoroutinesOutliveShutdown(t *testing.T) {
	before := dxGoroutines() // left by earlier tests on purpose (the blocking guard's)
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.RegisterActivity(rt, "A", func(context.Context, int) (int, error) { return 1, nil })
	dx.Register(rt, "O", func(ctx dx.Context, n int) (int, error) {
		fs := make([]dx.Future[int], n)
		for i := range fs {
			fs[i] = dx.Go(ctx, func(ctx dx.Context) (int, error) { return dx.Call[int](ctx, "A", i).Await(ctx) })
		}
		vs, err := dx.All(ctx, fs...)
		return len(vs), err
	})
	ctx := waitCtx(t)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	id := mustStart(t, c, ctx, "O", 20)
	if st := waitStatus(t, c, id); st.Output != "20" {
		t.Fatalf("output %s", st.Output)
	}
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// Shutdown returned: nothing of dx may still run (the provider's connections are not ours).
	for id, g := range dxGoroutines() {
		if _, old := before[id]; !old {
			t.Errorf("a dx goroutine outlived Shutdown:\n%s", g)
		}
	}
}

func TestActivityInputThatDoesNotDecodeFailsOnce(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	var runs atomic.Int32
	dx.RegisterActivity(rt, "Typed", func(ctx context.Context, in struct{ N int }) (int, error) {
		runs.Add(1)
		return in.N, nil
	})
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		_, err := dx.Call[int](ctx, "Typed", "not an object").Await(ctx)
		return "", err
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "O", nil)
	st := waitStatus(t, c, id)
	if st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "input does not decode") || runs.Load() != 0 {
		t.Fatalf("state %s err %v runs %d", st.State, st.Err, runs.Load())
	}
}

func TestSessionCapPerRuntime(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	opts := testOptions()
	opts.MaxSessionsPerRuntime = 1
	opts.WorkerConcurrency = 4
	rt := dx.NewRuntime(p, opts)
	var active, peak atomic.Int32
	var running sync.Map // session -> activities running
	dx.RegisterActivity(rt, "Work", func(ctx context.Context, session string) (string, error) {
		if n, _ := running.LoadOrStore(session, new(atomic.Int32)); n.(*atomic.Int32).Add(1) == 1 {
			if a := active.Add(1); a > peak.Load() {
				peak.Store(a)
			}
		}
		time.Sleep(30 * time.Millisecond) // work that takes a while, so that sessions would overlap
		if n, _ := running.Load(session); n.(*atomic.Int32).Add(-1) == 0 {
			active.Add(-1)
		}
		return session, nil
	})
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (int, error) {
		var fs []dx.Future[string]
		for _, s := range []string{"s1", "s2", "s3"} {
			for range 3 {
				fs = append(fs, dx.Call[string](ctx, "Work", s, dx.OnSession(s)))
			}
		}
		vs, err := dx.All(ctx, fs...)
		return len(vs), err
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id := mustStart(t, c, waitCtx(t), "O", nil)
	if st := waitStatus(t, c, id); st.Output != "9" {
		t.Fatalf("state %s output %s err %v", st.State, st.Output, st.Err)
	}
	if peak.Load() != 1 {
		t.Fatalf("%d sessions ran at once, cap 1", peak.Load())
	}
}

// TestPayloadsOverTheStoreLimit: a result the store refuses fails the activity, and a turn the
// store refuses fails the orchestration with an Infrastructure error; neither runs forever.
func TestPayloadsOverTheStoreLimit(t *testing.T) {
	t.Parallel()
	ctx := waitCtx(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: miniredis.RunT(t).Addr(), Namespace: "limits",
		MaxPayloadBytes: 2000, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rt := dx.NewRuntime(p, testOptions())
	big := strings.Repeat("x", 5000)
	dx.RegisterActivity(rt, "Big", func(context.Context, dx.Raw) (string, error) { return big, nil })
	dx.Register(rt, "BigResult", func(ctx dx.Context, _ dx.Raw) (string, error) {
		_, err := dx.Call[string](ctx, "Big", nil).Await(ctx)
		return "", err
	})
	dx.Register(rt, "BigStatus", func(ctx dx.Context, _ dx.Raw) (string, error) {
		ctx.SetCustomStatus(big)
		return "", ctx.Sleep(time.Millisecond)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	a := mustStart(t, c, ctx, "BigResult", nil)
	b := mustStart(t, c, ctx, "BigStatus", nil)
	if st := waitStatus(t, c, a); st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "refused by the store") {
		t.Fatalf("big result: %s %v", st.State, st.Err)
	}
	st := waitStatus(t, c, b)
	if st.State != dx.StateFailed {
		t.Fatalf("big status: %s", st.State)
	}
	if _, ok := st.Err.Details.Kind.(provider.InfrastructureError); !ok {
		t.Fatalf("big status: details %+v", st.Err.Details)
	}
}
