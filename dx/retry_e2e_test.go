package dx_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

// An activity that returns dx.Permanent runs once under a RetryPolicy of 3 attempts, and the
// orchestration sees errors.Is(err, dx.ErrPermanent).
func TestPermanentActivityErrorNotRetried(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	var runs atomic.Int32
	dx.RegisterActivity(rt, "Charge", func(ctx context.Context, card string) (string, error) {
		runs.Add(1)
		return "", dx.Permanent(errors.New("card declined"))
	})
	dx.Register(rt, "Pay", func(ctx dx.Context, card string) (string, error) {
		_, err := dx.Call[string](ctx, "Charge", card, dx.WithRetry(dx.RetryPolicy{MaxAttempts: 3, Backoff: dx.FixedBackoff(0)})).Await(ctx)
		if errors.Is(err, dx.ErrPermanent) {
			return "declined", nil
		}
		return "", err
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id, err := c.Start(waitCtx(t), "Pay", "4242")
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(waitCtx(t), id)
	if err != nil || st.Output != `"declined"` {
		t.Fatalf("state %s output %s err %v (%v)", st.State, st.Output, st.Err, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the activity ran %d times, want 1", n)
	}
}

// recordKeys is a slog handler that keeps every record's message and attribute keys (those
// added with With included).
type recordKeys struct {
	mu    *sync.Mutex
	recs  *[]map[string]any
	attrs []slog.Attr
}

func (h recordKeys) Enabled(context.Context, slog.Level) bool { return true }
func (h recordKeys) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.Any()
	}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	*h.recs = append(*h.recs, m)
	h.mu.Unlock()
	return nil
}
func (h recordKeys) WithAttrs(as []slog.Attr) slog.Handler {
	return recordKeys{h.mu, h.recs, append(append([]slog.Attr{}, h.attrs...), as...)}
}
func (h recordKeys) WithGroup(string) slog.Handler { return h }

// The logs name the provider's delivery count "delivery" and a RetryPolicy's attempt
// "retry_attempt"; no record says just "attempt".
func TestRetryLogKeys(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var recs []map[string]any
	h := recordKeys{mu: &sync.Mutex{}, recs: &recs}
	opts := testOptions()
	opts.Logger = slog.New(h)
	rt := dx.NewRuntime(p, opts)
	var runs atomic.Int32
	dx.RegisterActivity(rt, "Flaky", func(ctx context.Context, _ string) (string, error) {
		if runs.Add(1) == 1 {
			return "", errors.New("flaky")
		}
		return "ok", nil
	})
	dx.Register(rt, "R", func(ctx dx.Context, _ string) (string, error) {
		return dx.Call[string](ctx, "Flaky", "x", dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2, Backoff: dx.FixedBackoff(0)})).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	id, err := c.Start(waitCtx(t), "R", "")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(waitCtx(t), id); err != nil || st.Output != `"ok"` {
		t.Fatalf("state %s output %s err %v (%v)", st.State, st.Output, st.Err, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var delivery, retryAttempt bool
	for _, r := range recs {
		if _, ok := r["attempt"]; ok {
			t.Errorf("record %q has the ambiguous key \"attempt\": %v", r["msg"], r)
		}
		if r["msg"] == "dx: activity failed" {
			_, delivery = r["delivery"]
		}
		if r["msg"] == "activity attempt failed, retrying" {
			retryAttempt = r["retry_attempt"] == int64(1)
		}
	}
	if !delivery || !retryAttempt {
		t.Fatalf("want the worker's failure record with \"delivery\" (%v) and the retry record with retry_attempt=1 (%v)", delivery, retryAttempt)
	}
}
