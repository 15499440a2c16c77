package dx_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// Two clients starting one id at once: exactly one starts it, the other gets ErrInstanceExists
// (the provider's StartIfAbsentEnqueuer makes the check and the enqueue one step). No runtime
// runs, so every start stays queued: only the queued start tells the second one apart.
func TestStartSameIDConcurrently(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	a, b := dx.NewClient(p), dx.NewClient(p)
	ctx := waitCtx(t)
	for round := range 50 {
		id := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []*dx.Client{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = c.Start(ctx, "Hello", "x", dx.WithInstanceID(id))
			}()
		}
		wg.Wait()
		ok, exists := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, dx.ErrInstanceExists):
				exists++
			default:
				t.Fatalf("round %d: start: %v", round, err)
			}
		}
		if ok != 1 || exists != 1 {
			t.Fatalf("round %d: %d starts succeeded and %d got ErrInstanceExists (%v), want 1 and 1", round, ok, exists, errs)
		}
	}
}

// Start of a running or completed instance fails with ErrInstanceExists (naming the id); once the
// instance is deleted the id starts again.
func TestStartExistingAndDeleted(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.Register(rt, "Waits", func(ctx dx.Context, _ string) (string, error) {
		ctx.SetCustomStatus("waiting")
		return dx.WaitEvent[string](ctx, "go").Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	if _, err := c.Start(ctx, "Waits", "", dx.WithInstanceID("w")); err != nil {
		t.Fatal(err)
	}
	running := func() { // its first turn was acknowledged: it waits for "go"
		t.Helper()
		if st, err := c.WaitForStatusChange(ctx, "w", 0); err != nil || st.State != dx.StateRunning {
			t.Fatalf("waiting for the instance to run: %+v, %v", st, err)
		}
	}
	running()
	_, err := c.Start(ctx, "Waits", "", dx.WithInstanceID("w"))
	if !errors.Is(err, dx.ErrInstanceExists) || !strings.Contains(err.Error(), `"w"`) {
		t.Fatalf("start of a running instance: %v, want ErrInstanceExists naming it", err)
	}
	if err := c.RaiseEvent(ctx, "w", "go", "done"); err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[string](ctx, c, "w"); err != nil || out != "done" {
		t.Fatalf("result: %q, %v", out, err)
	}
	if _, err := c.Start(ctx, "Waits", "", dx.WithInstanceID("w")); !errors.Is(err, dx.ErrInstanceExists) {
		t.Fatalf("start of a completed instance: %v, want ErrInstanceExists", err)
	}
	if _, err := c.Delete(ctx, "w", false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Start(ctx, "Waits", "", dx.WithInstanceID("w")); err != nil {
		t.Fatalf("start after delete: %v", err)
	}
	running()
	if err := c.RaiseEvent(ctx, "w", "go", "again"); err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[string](ctx, c, "w"); err != nil || out != "again" {
		t.Fatalf("result after the restart: %q, %v", out, err)
	}
}

// plainProvider hides the provider's optional extensions (StartIfAbsentEnqueuer among them).
type plainProvider struct{ provider.Provider }

// Without StartIfAbsentEnqueuer, Start checks and then enqueues: an existing instance is refused,
// but two starts of an id before its first turn both return nil (the first one enqueued runs).
func TestStartWithoutStartIfAbsent(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	c := dx.NewClient(plainProvider{p})
	ctx := waitCtx(t)
	for range 2 {
		if _, err := c.Start(ctx, "Hello", "x", dx.WithInstanceID("plain")); err != nil {
			t.Fatalf("start with a start queued, without the extension: %v", err)
		}
	}
}
