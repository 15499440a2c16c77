package dx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// deadProgram registers "Charge" calling the activity "Pay" twice; with pay, "Pay" is registered
// (the fixed build), else it is missing (the bad deploy: every delivery is abandoned, then poison).
func deadProgram(rt *dx.Runtime, pay bool) {
	if pay {
		dx.RegisterActivity(rt, "Pay", func(_ context.Context, n int) (int, error) { return n * 2, nil })
	}
	dx.Register(rt, "Charge", func(ctx dx.Context, n int) (int, error) {
		a, err := dx.Call[int](ctx, "Pay", n).Await(ctx)
		if err != nil {
			return 0, err
		}
		b, err := dx.Call[int](ctx, "Pay", a).Await(ctx)
		return b, err
	})
}

// deadChildRuntime is the "dead" children's runtime: the fixed build, whose Pay takes 10 s (it is
// killed while it runs).
func deadChildRuntime(p *redisprovider.Provider) *dx.Runtime {
	rt := dx.NewRuntime(p, dx.Options{WorkerLockTimeout: time.Second, PollTimeout: 200 * time.Millisecond,
		MinPollInterval: 5 * time.Millisecond, Logger: quietLogger, MaxAttempts: 2, OnPoison: dx.HoldPoison})
	dx.RegisterActivity(rt, "Pay", func(ctx context.Context, n int) (int, error) {
		select {
		case <-time.After(10 * time.Second):
		case <-ctx.Done():
		}
		return n * 2, nil
	})
	deadProgram(rt, false)
	return rt
}

func deadRuntime(t *testing.T, p *redisprovider.Provider, pay bool) *dx.Runtime {
	return deadRuntimeCache(t, p, pay, 0)
}

// deadRuntimeCache is deadRuntime with Options.ExecutorCacheSize cache (negative: off).
func deadRuntimeCache(t *testing.T, p *redisprovider.Provider, pay bool, cache int) *dx.Runtime {
	opts := testOptions()
	opts.MaxAttempts, opts.OnPoison, opts.ExecutorCacheSize = 2, dx.HoldPoison, cache
	rt := dx.NewRuntime(p, opts)
	deadProgram(rt, pay)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rt
}

func stopRuntime(t *testing.T, rt *dx.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

func waitDead(t *testing.T, p *redisprovider.Provider, n int) []redisprovider.DeadLetter {
	t.Helper()
	var ds []redisprovider.DeadLetter
	waitFor(t, fmt.Sprintf("%d dead letters", n), func() bool {
		var err error
		ds, err = p.ListDeadLetters(context.Background(), 100)
		return err == nil && len(ds) == n
	})
	return ds
}

// TestDeadLettersRedrive: a build without the activity's handler parks every instance's activity
// (HoldPoison) instead of failing it; the instances keep running with nothing written; the fixed
// build runs the redriven activities and each instance completes with the history a correct build
// writes.
func TestDeadLettersRedrive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		cache int
	}{{"cache on", 0}, {"cache off", -1}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testDeadLettersRedrive(t, c.cache)
		})
	}
}

func testDeadLettersRedrive(t *testing.T, cache int) {
	p := newProvider(t)
	ctx := context.Background()
	bad := deadRuntimeCache(t, p, false, cache)
	c := dx.NewClient(p)
	var ids []string
	for i := range 3 {
		ids = append(ids, mustStart(t, c, ctx, "Charge", i+1, dx.WithInstanceID(fmt.Sprintf("charge-%d", i))))
	}
	ds := waitDead(t, p, 3)
	stopRuntime(t, bad)
	checkFsck(t, p) // dead letters keep the keyspace's invariants
	for _, d := range ds {
		if d.Name != "Pay" || d.Attempts != 3 || !strings.HasPrefix(d.Instance, "charge-") {
			t.Fatalf("dead letter %+v", d)
		}
		if _, ok := d.Failure.Kind.(provider.PoisonError); !ok {
			t.Fatalf("dead letter failure %+v, want a poison error", d.Failure)
		}
		if got, err := p.GetDeadLetter(ctx, d.ID); err != nil || got.Instance != d.Instance {
			t.Fatalf("GetDeadLetter(%s): %+v %v", d.ID, got, err)
		}
	}
	for _, id := range ids {
		st, err := c.Status(ctx, id)
		if err != nil || st.State != dx.StateRunning || !strings.Contains(st.Held, "parked as a dead letter") {
			t.Fatalf("%s while parked: %+v %v", id, st, err)
		}
		h, _ := p.Read(ctx, id)
		for _, e := range h {
			if e.EventType() == "ActivityFailed" {
				t.Fatalf("%s: a parked activity wrote %s", id, e.EventType())
			}
		}
	}
	// The fixed build, then redrive.
	good := deadRuntimeCache(t, p, true, cache)
	defer stopRuntime(t, good)
	for _, d := range ds {
		if err := p.RedriveDeadLetter(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.RedriveDeadLetter(ctx, ds[0].ID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("a second redrive: %v, want ErrNotFound", err)
	}
	waitAll(t, c, ids, 30*time.Second)
	for i, id := range ids {
		st, err := c.Status(ctx, id)
		if err != nil || st.State != dx.StateCompleted || st.Output != fmt.Sprint((i+1)*4) || st.Held != "" {
			t.Fatalf("%s after the redrive: %+v %v", id, st, err)
		}
		var types []string
		h, _ := p.Read(ctx, id)
		for _, e := range h {
			types = append(types, e.EventType())
		}
		want := "OrchestrationStarted ActivityScheduled ActivityCompleted ActivityScheduled ActivityCompleted OrchestrationCompleted"
		if strings.Join(types, " ") != want {
			t.Fatalf("%s history %v, want a correct build's: %s", id, types, want)
		}
	}
	if ds, err := p.ListDeadLetters(ctx, 10); err != nil || len(ds) != 0 {
		t.Fatalf("dead letters left: %+v %v", ds, err)
	}
}

// TestDeadLettersDiscard: discarding applies the default rule: the activity fails with the poison
// error it was parked with, and the orchestration sees that failure.
func TestDeadLettersDiscard(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := context.Background()
	bad := deadRuntime(t, p, false)
	defer stopRuntime(t, bad)
	c := dx.NewClient(p)
	id := mustStart(t, c, ctx, "Charge", 1, dx.WithInstanceID("charge-discard"))
	ds := waitDead(t, p, 1)
	if err := p.DiscardDeadLetter(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	waitAll(t, c, []string{id}, 30*time.Second)
	st, err := c.Status(ctx, id)
	if err != nil || st.State != dx.StateFailed || st.Err == nil || !strings.Contains(st.Err.Error(), "poison: activity Pay#") {
		t.Fatalf("after the discard: %+v %v", st, err)
	}
	if err := p.DiscardDeadLetter(ctx, ds[0].ID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("a second discard: %v, want ErrNotFound", err)
	}
	if _, err := p.GetDeadLetter(ctx, "nope"); !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("a bad id: %v", err)
	}
}

// TestDeadLetterRedriveSurvivesAKilledRuntime: the runtime running a redriven activity is
// SIGKILLed; the activity's lock expires, another runtime runs it, and the instance completes with
// a correct build's history (each activity answered once).
func TestDeadLetterRedriveSurvivesAKilledRuntime(t *testing.T) {
	t.Parallel()
	addr, ns, p := faultBackend(t)
	ctx := context.Background()
	bad := deadRuntime(t, p, false)
	c := dx.NewClient(p)
	id := mustStart(t, c, ctx, "Charge", 5, dx.WithInstanceID("charge-killed"))
	ds := waitDead(t, p, 1)
	stopRuntime(t, bad)
	victim := startChildOf(t, "dead", addr, ns)
	if err := p.RedriveDeadLetter(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	waitLockedWork(t, p) // the child runs the redriven activity
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	good := deadRuntime(t, p, true)
	defer stopRuntime(t, good)
	waitAll(t, c, []string{id}, 30*time.Second)
	checkExactlyOnce(t, p, []string{id}, func(int) string { return "20" })
	if ds, err := p.ListDeadLetters(ctx, 10); err != nil || len(ds) != 0 {
		t.Fatalf("dead letters left: %+v %v", ds, err)
	}
}

// TestDeadLetterHeldOrchestration: a build without the orchestration holds its start past
// MaxAttempts (HoldPoison) instead of failing it: nothing is written, Status says why, dxctl
// dead lists it; redriven once the fixed build runs, it completes.
func TestDeadLetterHeldOrchestration(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := context.Background()
	opts := testOptions()
	opts.MaxAttempts, opts.OnPoison, opts.HoldRetryDelay = 2, dx.HoldPoison, 100*time.Millisecond
	bad := dx.NewRuntime(p, opts) // registers nothing
	if err := bad.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	id := mustStart(t, c, ctx, "Charge", 3, dx.WithInstanceID("charge-held"))
	ds := waitDead(t, p, 1)
	if d := ds[0]; !d.Orchestration || d.Instance != id || !strings.HasPrefix(d.Reason, "poison: orchestration item delivered 3 times (max 2)") {
		t.Fatalf("dead letter %+v", d)
	}
	if st, err := c.Status(ctx, id); err != nil || !strings.HasPrefix(st.Held, "poison: orchestration") {
		t.Fatalf("status while held: %+v %v", st, err)
	}
	if err := p.DiscardDeadLetter(ctx, ds[0].ID); !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("discarding a held orchestration: %v", err)
	}
	stopRuntime(t, bad)
	_, since, err := p.HeldReason(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	good := dx.NewRuntime(p, opts)
	deadProgram(good, true)
	if err := good.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopRuntime(t, good)
	// The fixed build has taken the instance and held it again (its deliveries count) until the redrive.
	waitFor(t, "the fixed build to hold the instance again", func() bool {
		_, s, err := p.HeldReason(ctx, id)
		return err == nil && s.After(since)
	})
	if st, err := c.Status(ctx, id); err != nil || st.Held == "" {
		t.Fatalf("status before the redrive: %+v %v", st, err)
	}
	if err := p.RedriveDeadLetter(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	waitAll(t, c, []string{id}, 30*time.Second)
	if st, err := c.Status(ctx, id); err != nil || st.State != dx.StateCompleted || st.Output != "12" || st.Held != "" {
		t.Fatalf("after the redrive: %+v %v", st, err)
	}
	if ds, err := p.ListDeadLetters(ctx, 10); err != nil || len(ds) != 0 {
		t.Fatalf("dead letters left: %+v %v", ds, err)
	}
}
