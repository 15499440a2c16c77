package dx_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Tests run on DXREDIS_TEST_ADDR when set, else on a fresh embedded miniredis per provider.

var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

func testLogger() *slog.Logger {
	if os.Getenv("DX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return quietLogger
}

// newProvider returns a provider on a fresh namespace; its keys are removed when the test ends.
func newProvider(t testing.TB) *redisprovider.Provider {
	t.Helper()
	ctx := context.Background()
	ns := "dx-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	opts := redisprovider.Options{Namespace: ns, Logger: quietLogger}
	opts.Partitions, _ = strconv.Atoi(os.Getenv("DXREDIS_TEST_PARTITIONS")) // make test-partitions
	real := os.Getenv("DXREDIS_TEST_ADDR")
	if real != "" {
		opts.Addr = real
	} else {
		opts.Addr = miniredis.RunT(t).Addr()
	}
	p, err := redisprovider.New(ctx, opts)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	t.Cleanup(func() {
		checkFsck(t, p)
		if real != "" {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = redisprovider.DropNamespace(cctx, p.Client(), ns)
		}
		_ = p.Close()
	})
	return p
}

// checkFsck fails t when the provider's namespace breaks a storage invariant
// (redisprovider.Provider.Fsck): every test ends with a clean keyspace, whatever faults it
// injected. A failed test is not checked again.
func checkFsck(t testing.TB, p *redisprovider.Provider) {
	t.Helper()
	if t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := p.Fsck(ctx)
	if err != nil {
		t.Errorf("fsck: %v", err)
		return
	}
	for _, v := range rep.Violations {
		t.Errorf("fsck: %s %q: %s", v.Code, v.Subject, v.Detail)
	}
}

// testOptions are fast-polling runtime options for tests.
func testOptions() dx.Options {
	return dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond,
		Logger: testLogger(), UnregisteredBackoff: 50 * time.Millisecond}
}

// startRuntime starts rt and shuts it down when the test ends.
func startRuntime(t testing.TB, rt *dx.Runtime) {
	t.Helper()
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
}

// waitIdle waits until p's namespace is idle (redisprovider.Provider.Idle: no orchestration turn
// or activity running or ready) and no delayed item comes due within the next half second: the
// messages a finished instance leaves behind (a cancelled child's reply, a late timer) have
// landed and nothing more happens on its own soon. A check that nothing happened calls it first.
func waitIdle(ctx context.Context, t *testing.T, p *redisprovider.Provider) {
	t.Helper()
	waitFor(t, "the namespace to be idle", func() bool {
		st, err := p.Idle(ctx)
		if err != nil {
			t.Fatalf("idle: %v", err)
		}
		return st.Idle && (st.NextDue.IsZero() || time.Until(st.NextDue) > 500*time.Millisecond)
	})
}

// mustStart starts an orchestration and returns its instance id; an error fails t.
func mustStart(t testing.TB, c *dx.Client, ctx context.Context, name string, input any, opts ...dx.StartOption) string {
	t.Helper()
	id, err := c.Start(ctx, name, input, opts...)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return id
}

// recv waits for ch to deliver or close, failing t after 20 s.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}

func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), raceSlowdown*20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
