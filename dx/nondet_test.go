package dx_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// recordingHandler keeps the runtime's warnings and errors, with their attributes.
type recordingHandler struct {
	mu    *sync.Mutex
	recs  *[]string
	attrs []slog.Attr
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{mu: &sync.Mutex{}, recs: new([]string)}
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *recordingHandler) WithGroup(string) slog.Handler                { return h }
func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{mu: h.mu, recs: h.recs, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, b.String())
	return nil
}

// find returns the first record containing every part.
func (h *recordingHandler) find(parts ...string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
next:
	for _, r := range *h.recs {
		for _, p := range parts {
			if !strings.Contains(r, p) {
				continue next
			}
		}
		return r
	}
	return ""
}

// slowWork takes 100 ms of real time; lateOrOnTime reads time.Now around it to choose a branch,
// which a replay (that finds slowWork done at once) never reproduces.
const slowWork = 100 * time.Millisecond

func registerLateOrOnTime(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Work", func(ctx context.Context, _ string) (string, error) {
		timer := time.NewTimer(slowWork) // the activity's work, not a wait in the test
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		return "done", nil
	})
	dx.RegisterActivity(rt, "Late", func(context.Context, string) (string, error) { return "late", nil })
	dx.RegisterActivity(rt, "OnTime", func(context.Context, string) (string, error) { return "on time", nil })
	dx.Register(rt, "LateOrOnTime", func(ctx dx.Context, _ string) (string, error) {
		began := time.Now()
		if _, err := dx.Call[string](ctx, "Work", "").Await(ctx); err != nil {
			return "", err
		}
		if time.Since(began) >= slowWork {
			return dx.Call[string](ctx, "Late", "").Await(ctx)
		}
		return dx.Call[string](ctx, "OnTime", "").Await(ctx)
	})
}

func eventTypes(h []provider.Event) string {
	var s []string
	for _, ev := range h {
		s = append(s, ev.EventType())
	}
	return strings.Join(s, " ")
}

// The executor cache hides nondeterministic code: by default a kept instance completes. With
// ReplayCheckRate 1 every turn is compared with a fresh replay: under the default policy the
// instance fails with a nondeterminism error; under HoldOnNondeterminism nothing is written, the
// turn is held, and its next try (a fresh replay, the cache dropped) goes on as a restart would.
func TestReplayCheckRateCatchesCachedNondeterminism(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts func(*dx.Options)
		want func(t *testing.T, st dx.Status, h []provider.Event, m *countingMetrics, logs *recordingHandler)
	}{
		{"default: the cache hides it", func(*dx.Options) {}, func(t *testing.T, st dx.Status, h []provider.Event, m *countingMetrics, _ *recordingHandler) {
			if st.State != dx.StateCompleted || st.Output != `"late"` || m.get(dx.MetricReplayChecks+"/ok") != 0 {
				t.Fatalf("state %s output %s checks %d: want completed late, unchecked", st.State, st.Output, m.get(dx.MetricReplayChecks+"/ok"))
			}
		}},
		{"checked: fails", func(o *dx.Options) { o.ReplayCheckRate = 1 }, func(t *testing.T, st dx.Status, h []provider.Event, m *countingMetrics, logs *recordingHandler) {
			if st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "this turn calls activity Late(\"\"), but a replay of the same history calls activity OnTime(\"\")") {
				t.Fatalf("state %s err %v: want a nondeterminism failure naming both sides", st.State, st.Err)
			}
			if m.get(dx.MetricNondeterminism+"/failed") != 1 || m.get(dx.MetricReplayChecks+"/mismatch") != 1 || m.get(dx.MetricReplayChecks+"/ok") == 0 {
				t.Fatalf("metrics %v", m.n)
			}
			if logs.find("ERROR dx: nondeterminism", "event=4", "turn=calls activity Late", "replay=calls activity OnTime") == "" {
				t.Fatalf("no error log naming the event and both sides")
			}
		}},
		{"checked: held, then goes on as a replay does", func(o *dx.Options) {
			o.ReplayCheckRate, o.OnNondeterminism, o.HoldRetryDelay = 1, dx.HoldOnNondeterminism, 10*time.Millisecond
		}, func(t *testing.T, st dx.Status, h []provider.Event, m *countingMetrics, logs *recordingHandler) {
			if st.State != dx.StateCompleted || st.Output != `"on time"` {
				t.Fatalf("state %s output %s err %v: want completed on time", st.State, st.Output, st.Err)
			}
			if got := eventTypes(h); got != "OrchestrationStarted ActivityScheduled ActivityCompleted ActivityScheduled ActivityCompleted OrchestrationCompleted" {
				t.Fatalf("history %s", got)
			}
			if m.get(dx.MetricNondeterminism+"/held") != 1 || m.get(dx.MetricNondeterminism+"/failed") != 0 {
				t.Fatalf("metrics %v", m.n)
			}
			if logs.find("WARN dx: nondeterminism: the instance is held", "instance=late-1", "event=4", "turn=calls activity Late", "replay=calls activity OnTime") == "" {
				t.Fatalf("no warning naming the instance, the event and both sides")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t)
			m, logs := &countingMetrics{}, newRecordingHandler()
			o := testOptions()
			// One dispatcher: with two, one may fetch a turn before the other put the instance
			// back in the cache, and replay it (the race that hid the trap "4 runs in 5").
			o.Metrics, o.Logger, o.OrchestrationConcurrency = m, slog.New(logs), 1
			tc.opts(&o)
			rt := dx.NewRuntime(p, o)
			registerLateOrOnTime(rt)
			startRuntime(t, rt)
			c := dx.NewClient(p)
			if _, err := c.Start(waitCtx(t), "LateOrOnTime", "", dx.WithInstanceID("late-1")); err != nil {
				t.Fatal(err)
			}
			st := waitStatus(t, c, "late-1")
			h, err := c.History(waitCtx(t), "late-1", 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, st, h, m, logs)
		})
	}
}

// deployment is an Order instance, started by good code and waiting for "shipped", and a way to
// run a runtime of good ("Reserve") or bad ("Hold": the history has Reserve there) code on it.
type deployment struct {
	t      *testing.T
	p      provider.Provider
	c      *dx.Client
	before string // the event types when the good code left it
}

func newDeployment(t *testing.T) *deployment {
	d := &deployment{t: t, p: newProvider(t)}
	d.c = dx.NewClient(d.p)
	good := d.run(testOptions(), "Reserve")
	if _, err := d.c.Start(waitCtx(t), "Order", "o1", dx.WithInstanceID("order-1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the instance to wait for shipped", func() bool { return strings.HasSuffix(d.events(), "ExternalSubscribed") })
	if err := good.Shutdown(waitCtx(t)); err != nil {
		t.Fatal(err)
	}
	d.before = d.events()
	return d
}

func (d *deployment) run(o dx.Options, first string) *dx.Runtime {
	rt := dx.NewRuntime(d.p, o)
	for _, a := range []string{"Reserve", "Hold", "Ship"} {
		dx.RegisterActivity(rt, a, func(_ context.Context, in string) (string, error) { return a + ":" + in, nil })
	}
	dx.Register(rt, "Order", func(ctx dx.Context, in string) (string, error) {
		r, err := dx.Call[string](ctx, first, in).Await(ctx)
		if err != nil {
			return "", err
		}
		if _, err := dx.WaitEvent[string](ctx, "shipped").Await(ctx); err != nil {
			return "", err
		}
		s, err := dx.Call[string](ctx, "Ship", in).Await(ctx)
		return r + " " + s, err
	})
	if err := rt.Start(context.Background()); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	return rt
}

func (d *deployment) events() string {
	h, err := d.c.History(waitCtx(d.t), "order-1", 0)
	if err != nil {
		d.t.Fatal(err)
	}
	return eventTypes(h)
}

// A bad deploy under HoldOnNondeterminism: code that no longer replays an instance's history
// holds the instance (nothing written, never poison however often it is tried); rolling back to
// the code that wrote the history resumes it, with a clean history.
func TestHoldOnNondeterminismResumesAfterRollback(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	ctx := waitCtx(t)
	m, logs := &countingMetrics{}, newRecordingHandler()
	o := testOptions()
	o.Metrics, o.Logger, o.OnNondeterminism, o.HoldRetryDelay, o.MaxAttempts = m, slog.New(logs), dx.HoldOnNondeterminism, 10*time.Millisecond, 2
	bad := d.run(o, "Hold")
	if err := d.c.RaiseEvent(ctx, "order-1", "shipped", "yes"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "five holds (more than MaxAttempts)", func() bool { return m.get(dx.MetricNondeterminism+"/held") >= 5 })
	if err := bad.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := d.c.Status(ctx, "order-1")
	if err != nil || st.State != dx.StateRunning || d.events() != d.before {
		t.Fatalf("held instance: state %s (%v), history %s, want Running and unchanged: %s", st.State, err, d.events(), d.before)
	}
	// Operators see the hold and why (provider.Holder).
	if want := `nondeterminism at event 2: history activity Reserve("o1"); code calls activity Hold("o1")`; st.Held != want {
		t.Fatalf("held instance's Held = %q, want %q", st.Held, want)
	}
	if m.get(dx.MetricNondeterminism+"/failed") != 0 || m.get(dx.MetricPoison) != 0 {
		t.Fatalf("metrics %v", m.n)
	}
	if logs.find("WARN dx: nondeterminism: the instance is held", "instance=order-1", "event=2",
		`history=activity Reserve("o1")`, `code=calls activity Hold("o1")`) == "" {
		t.Fatalf("no warning naming the instance, the event and both sides")
	}

	// Rolling back resumes it.
	d.run(testOptions(), "Reserve")
	st = waitStatus(t, d.c, "order-1")
	if st.State != dx.StateCompleted || st.Output != `"Reserve:o1 Ship:o1"` || st.Held != "" {
		t.Fatalf("after the rollback: state %s output %s err %v held %q", st.State, st.Output, st.Err, st.Held)
	}
	if got, want := d.events(), d.before+" ExternalEvent ActivityScheduled ActivityCompleted OrchestrationCompleted"; got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
}

// By default the same bad deploy fails the instance for good, as duroxide does, and says so.
func TestNondeterminismFailsByDefault(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	m, logs := &countingMetrics{}, newRecordingHandler()
	o := testOptions()
	o.Metrics, o.Logger = m, slog.New(logs)
	d.run(o, "Hold")
	if err := d.c.RaiseEvent(waitCtx(t), "order-1", "shipped", "yes"); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, d.c, "order-1")
	if st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "nondetermin") || !strings.HasSuffix(d.events(), "OrchestrationFailed") {
		t.Fatalf("state %s err %v history %s: want a nondeterminism failure", st.State, st.Err, d.events())
	}
	if m.get(dx.MetricNondeterminism+"/failed") != 1 || m.get(dx.MetricNondeterminism+"/held") != 0 {
		t.Fatalf("metrics %v", m.n)
	}
	if logs.find("ERROR dx: nondeterminism: the orchestration fails", "instance=order-1", "event=2", `code=calls activity Hold("o1")`) == "" {
		t.Fatalf("no error log naming the instance, the event and both sides")
	}
}

func TestReplayCheckOptionsRefused(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]dx.Options{
		"ReplayCheckRate above 1": {ReplayCheckRate: 1.5},
		"ReplayCheckRate NaN":     {ReplayCheckRate: math.NaN()},
		"OnNondeterminism":        {OnNondeterminism: 7},
		"HoldRetryDelay":          {HoldRetryDelay: -time.Second},
	} {
		o.Logger = quietLogger
		rt := dx.NewRuntime(newProvider(t), o)
		if err := rt.Start(context.Background()); !errors.Is(err, dx.ErrInvalidInput) {
			_ = rt.Shutdown(context.Background())
			t.Errorf("%s: Start returned %v, want ErrInvalidInput", name, err)
		}
	}
}
