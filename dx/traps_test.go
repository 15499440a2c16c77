package dx_test

// The runtime's silent traps, made loud (DESIGN.md D5 for early events): an external event raised
// before the orchestration waits for it, an unregistered name, and misuse of the API. Each test
// fails without the change it names.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/testwait"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// logCapture is a logger whose records (text format, attributes included) a test can read.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(b)
}

func (c *logCapture) logger() *slog.Logger { return slog.New(slog.NewTextHandler(c, nil)) }

// lines returns the records that contain every one of subs.
func (c *logCapture) lines(subs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range strings.Split(c.buf.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// countingMetrics sums counters by name and Result label.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]int64
}

func (m *countingMetrics) Count(name string, n int64, l dx.Labels) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int64{}
	}
	m.n[name] += n
	if l.Result != "" {
		m.n[name+"/"+l.Result] += n
	}
}

func (m *countingMetrics) Observe(string, time.Duration, dx.Labels) {}

func (m *countingMetrics) get(key string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[key]
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitForWithin(t, raceSlowdown*20*time.Second, what, cond)
}

// waitForWithin polls cond until it holds, failing the test after d.
func waitForWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

func historyHas(t *testing.T, p provider.Provider, id string, pred func(provider.Event) bool) bool {
	t.Helper()
	h, err := p.Read(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range h {
		if pred(ev) {
			return true
		}
	}
	return false
}

// Trap 1: an event raised before the orchestration waits for it is dropped (duroxide's semantics,
// unchanged), and now logged at warning level and counted once per event, when its turn is stored:
// never again when later turns replay it (executor cache off) or run on the kept engine (cache on).
func TestTrapEarlyEventWarnsOnce(t *testing.T) {
	t.Parallel()
	for _, cache := range []int{0, -1} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			p := newProvider(t)
			var logs logCapture
			m := &countingMetrics{}
			o := testOptions()
			o.Logger, o.Metrics, o.ExecutorCacheSize = logs.logger(), m, cache
			rt := dx.NewRuntime(p, o)
			release := make(chan struct{})
			if err := dx.RegisterActivity(rt, "Slow", func(ctx context.Context, _ dx.Raw) (string, error) {
				<-release
				return "done", nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := dx.Register(rt, "Late", func(ctx dx.Context, _ dx.Raw) (string, error) {
				if _, err := dx.Call[string](ctx, "Slow", nil).Await(ctx); err != nil {
					return "", err
				}
				return dx.WaitEvent[string](ctx, "shipped").Await(ctx)
			}); err != nil {
				t.Fatal(err)
			}
			startRuntime(t, rt)
			c := dx.NewClient(p)
			ctx := waitCtx(t)
			id, err := c.Start(ctx, "Late", nil, dx.WithInstanceID("order-7"))
			if err != nil {
				t.Fatal(err)
			}
			isEvent := func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ExternalEventEvent); return ok }
			waitFor(t, "the activity to be scheduled", func() bool {
				return historyHas(t, p, id, func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ActivityScheduledEvent); return ok })
			})
			// Raised while the orchestration runs Slow: dropped.
			if err := c.RaiseEvent(ctx, id, "shipped", "early"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the early event in history", func() bool { return historyHas(t, p, id, isEvent) })
			close(release)
			waitFor(t, "the wait for shipped", func() bool {
				return historyHas(t, p, id, func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ExternalSubscribedEvent); return ok })
			})
			if err := c.RaiseEvent(ctx, id, "shipped", "on time"); err != nil {
				t.Fatal(err)
			}
			out, err := dx.Result[string](ctx, c, id)
			if err != nil || out != "on time" {
				t.Fatalf("result %q, %v; want the second event's data (the early one is dropped)", out, err)
			}
			warned := logs.lines("level=WARN", "external event dropped")
			if len(warned) != 1 {
				t.Fatalf("%d warnings about the dropped event, want exactly 1:\n%s", len(warned), strings.Join(warned, "\n"))
			}
			for _, want := range []string{"instance=order-7", "event=shipped", "Dequeue", "EnqueueEvent"} {
				if !strings.Contains(warned[0], want) {
					t.Errorf("warning lacks %q: %s", want, warned[0])
				}
			}
			if n := m.get(dx.MetricDroppedEvents); n != 1 {
				t.Errorf("%s = %d, want 1", dx.MetricDroppedEvents, n)
			}
		})
	}
}

// Trap 3: an unregistered orchestration, version or activity is logged once per name at warning
// level, with the names this runtime registers (before: a warning per attempt that listed nothing).
func TestTrapUnregisteredWarnsOncePerName(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var logs logCapture
	m := &countingMetrics{}
	o := testOptions()
	o.Logger, o.Metrics, o.UnregisteredBackoff, o.UnregisteredBackoffMax = logs.logger(), m, time.Millisecond, time.Millisecond
	o.MaxAttempts = 1000 // no poison in this test
	rt := dx.NewRuntime(p, o)
	for _, err := range []error{
		dx.RegisterActivity(rt, "Greet", func(ctx context.Context, s string) (string, error) { return "hi " + s, nil }),
		dx.RegisterActivity(rt, "Charge", func(ctx context.Context, s string) (string, error) { return s, nil }),
		dx.Register(rt, "Hello", func(ctx dx.Context, s string) (string, error) { return dx.Call[string](ctx, "Greeet", s).Await(ctx) }),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	for _, start := range []func() error{
		func() error { _, err := c.Start(ctx, "Helo", nil); return err },
		func() error { _, err := c.Start(ctx, "Hello", "x", dx.WithVersion("2.0.0")); return err },
		func() error { _, err := c.Start(ctx, "Hello", "x"); return err },
	} {
		if err := start(); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ what, registered string }{
		{`orchestration \"Helo\" is not registered`, "registered_orchestrations=Hello@1.0.0"},
		{`orchestration \"Hello\" version 2.0.0 is not registered`, "registered_orchestrations=Hello@1.0.0"},
		{`activity \"Greeet\" is not registered`, `registered_activities="Charge, Greet"`},
	}
	// Each name is warned about, then fetched and abandoned many more times.
	waitFor(t, "a warning per name", func() bool {
		for _, c := range cases {
			if len(logs.lines("level=WARN", c.what)) == 0 {
				return false
			}
		}
		return true
	})
	n := m.get(dx.MetricUnregistered)
	waitFor(t, "repeated abandons", func() bool { return m.get(dx.MetricUnregistered) >= n+30 })
	for _, c := range cases {
		got := logs.lines("level=WARN", c.what)
		if len(got) != 1 {
			t.Errorf("%d warnings %s, want exactly 1:\n%s", len(got), c.what, strings.Join(got, "\n"))
			continue
		}
		if !strings.Contains(got[0], c.registered) {
			t.Errorf("warning lacks %s: %s", c.registered, got[0])
		}
	}
}

// The registered names in the warning are sorted and cut after 20.
func TestTrapUnregisteredWarningTruncatesNames(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var logs logCapture
	o := testOptions()
	o.Logger = logs.logger()
	rt := dx.NewRuntime(p, o)
	for i := 24; i >= 0; i-- {
		if err := dx.RegisterActivity(rt, fmt.Sprintf("A%02d", i), func(ctx context.Context, s string) (string, error) { return s, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if err := dx.Register(rt, "Calls", func(ctx dx.Context, s string) (string, error) { return dx.Call[string](ctx, "Nope", s).Await(ctx) }); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	if _, err := dx.NewClient(p).Start(waitCtx(t), "Calls", "x"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the warning", func() bool { return len(logs.lines("level=WARN", `activity \"Nope\" is not registered`)) > 0 })
	w := logs.lines("level=WARN", `activity \"Nope\" is not registered`)[0]
	if !strings.Contains(w, `registered_activities="A00, A01, A02,`) || !strings.Contains(w, "A19, ... (5 more)") || strings.Contains(w, "A20") {
		t.Fatalf("registered names not sorted and cut after 20: %s", w)
	}
}

// Trap 3: an item that became poison for want of a handler fails with duroxide's details, unchanged,
// while the runtime's log and metric say "not registered".
func TestTrapUnregisteredPoisonSaysNotRegistered(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var logs logCapture
	m := &countingMetrics{}
	o := testOptions()
	o.Logger, o.Metrics, o.UnregisteredBackoff, o.UnregisteredBackoffMax = logs.logger(), m, time.Millisecond, time.Millisecond
	o.MaxAttempts = 2
	rt := dx.NewRuntime(p, o)
	if err := dx.Register(rt, "Hello", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Missing", s).Await(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	for _, name := range []string{"Hello", "NoSuchOrch"} {
		id, err := c.Start(ctx, name, "x")
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Wait(ctx, id)
		if err != nil || st.State != dx.StateFailed {
			t.Fatalf("%s: %+v, %v; want Failed", name, st, err)
		}
		if _, ok := st.Err.Details.Kind.(provider.PoisonError); !ok || strings.Contains(st.Err.Error(), "registered") {
			t.Errorf("%s: recorded failure %q (%T): want duroxide's poison details, unchanged", name, st.Err, st.Err.Details.Kind)
		}
	}
	if n := len(logs.lines("level=ERROR", "activity not registered: failing it as poison", "activity=Missing")); n != 1 {
		t.Errorf("%d poison records naming the unregistered activity, want 1", n)
	}
	if n := len(logs.lines("level=ERROR", "orchestration not registered: failing it as poison", "orchestration=NoSuchOrch")); n != 1 {
		t.Errorf("%d poison records naming the unregistered orchestration, want 1", n)
	}
	if n := m.get(dx.MetricPoison + "/not_registered"); n != 2 {
		t.Errorf("%s{result=not_registered} = %d, want 2", dx.MetricPoison, n)
	}
}

// noPanic runs f and reports a panic as a test error.
func noPanic(t *testing.T, what string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		err = f()
	}()
	return err
}

// Trap 4: misuse fails at the call that made it with ErrInvalidInput and a message naming it: a nil
// or typed-nil provider (before: the runtime started and a background goroutine died with SIGSEGV;
// the client panicked at its first call), nil runtime and client.
func TestTrapNilProviderRuntimeClient(t *testing.T) {
	t.Parallel()
	var typedNil *redisprovider.Provider
	ctx := context.Background()
	for name, p := range map[string]provider.Provider{"nil": nil, "typed nil": typedNil} {
		rt := dx.NewRuntime(p, testOptions())
		err := noPanic(t, "Start", func() error { return rt.Start(ctx) })
		if !errors.Is(err, dx.ErrInvalidInput) || !strings.Contains(err.Error(), "nil provider") {
			_ = rt.Shutdown(ctx)
			t.Errorf("%s provider: Start: %v, want ErrInvalidInput naming the nil provider", name, err)
		}
		c := dx.NewClient(p)
		for call, f := range map[string]func() error{
			"Start":      func() error { _, err := c.Start(ctx, "Hello", nil); return err },
			"RaiseEvent": func() error { return c.RaiseEvent(ctx, "i", "e", nil) },
			"Status":     func() error { _, err := c.Status(ctx, "i"); return err },
			"Wait":       func() error { _, err := c.Wait(ctx, "i"); return err },
			"Info":       func() error { _, err := c.Info(ctx, "i"); return err },
			"History":    func() error { _, err := c.History(ctx, "i", 0); return err },
		} {
			if err := noPanic(t, call, f); !errors.Is(err, dx.ErrInvalidInput) || !strings.Contains(err.Error(), "nil provider") {
				t.Errorf("%s provider: Client.%s: %v, want ErrInvalidInput naming the nil provider", name, call, err)
			}
		}
	}
	var rt *dx.Runtime
	var c *dx.Client
	for call, f := range map[string]func() error{
		"Runtime.Start":    func() error { return rt.Start(ctx) },
		"Runtime.Run":      func() error { return rt.Run(ctx) },
		"Runtime.Shutdown": func() error { return rt.Shutdown(ctx) },
		"Register": func() error {
			return dx.Register(rt, "X", func(dx.Context, dx.Raw) (string, error) { return "", nil })
		},
		"RegisterActivity": func() error {
			return dx.RegisterActivity(rt, "X", func(context.Context, dx.Raw) (string, error) { return "", nil })
		},
		"Client.Status": func() error { _, err := c.Status(ctx, "i"); return err },
		"Client.Cancel": func() error { return c.Cancel(ctx, "i", "r") },
		"Client.Wait":   func() error { _, err := c.Wait(ctx, "i"); return err },
	} {
		if err := noPanic(t, call, f); !errors.Is(err, dx.ErrInvalidInput) || !strings.Contains(err.Error(), "nil *") {
			t.Errorf("%s on nil: %v, want ErrInvalidInput naming the nil receiver", call, err)
		}
	}
}

// Trap 4: registrations are refused with ErrInvalidInput at the call (empty names, duplicates,
// after Start) instead of a panic; one refused before Start also fails Start, so a program that
// ignores Register's result learns it at once.
func TestTrapRegistrationErrors(t *testing.T) {
	t.Parallel()
	orch := func(dx.Context, dx.Raw) (string, error) { return "", nil }
	act := func(context.Context, dx.Raw) (string, error) { return "", nil }
	for name, reg := range map[string]func(rt *dx.Runtime) error{
		"empty orchestration name": func(rt *dx.Runtime) error { return dx.Register(rt, "", orch) },
		"empty activity name":      func(rt *dx.Runtime) error { return dx.RegisterActivity(rt, "", act) },
		"nil function":             func(rt *dx.Runtime) error { return dx.Register[dx.Raw, string](rt, "F", nil) },
		"bad version":              func(rt *dx.Runtime) error { return dx.RegisterVersion(rt, "V", "two", orch) },
		"duplicate orchestration": func(rt *dx.Runtime) error {
			if err := dx.Register(rt, "D", orch); err != nil {
				return fmt.Errorf("first registration: %v", err)
			}
			return dx.Register(rt, "D", orch)
		},
		"duplicate activity": func(rt *dx.Runtime) error {
			if err := dx.RegisterActivity(rt, "D", act); err != nil {
				return fmt.Errorf("first registration: %v", err)
			}
			return dx.RegisterActivity(rt, "D", act)
		},
	} {
		rt := dx.NewRuntime(newProvider(t), testOptions())
		err := noPanic(t, name, func() error { return reg(rt) })
		if !errors.Is(err, dx.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
			continue
		}
		if serr := rt.Start(context.Background()); !errors.Is(serr, dx.ErrInvalidInput) || !strings.Contains(serr.Error(), err.Error()) {
			_ = rt.Shutdown(context.Background())
			t.Errorf("%s: Start after the refused registration: %v, want it to return %q", name, serr, err)
		}
	}

	// After Start: refused and not registered; the running runtime is not affected.
	p := newProvider(t)
	var logs logCapture
	o := testOptions()
	o.Logger = logs.logger()
	rt := dx.NewRuntime(p, o)
	startRuntime(t, rt)
	err := noPanic(t, "late Register", func() error {
		return dx.Register(rt, "Late", func(dx.Context, dx.Raw) (string, error) { return "ran", nil })
	})
	if !errors.Is(err, dx.ErrInvalidInput) || !strings.Contains(err.Error(), "after Start") {
		t.Fatalf("Register after Start: %v, want ErrInvalidInput saying so", err)
	}
	if err := noPanic(t, "late RegisterActivity", func() error { return dx.RegisterActivity(rt, "LateAct", act) }); !errors.Is(err, dx.ErrInvalidInput) {
		t.Fatalf("RegisterActivity after Start: %v, want ErrInvalidInput", err)
	}
	if len(logs.lines("level=ERROR", "registered after Start")) != 2 {
		t.Errorf("want an error record per late registration:\n%s", strings.Join(logs.lines("after Start"), "\n"))
	}
	if err := dx.Replay(rt, []provider.Event{{EventID: 1, InstanceID: "i", ExecutionID: 1, Kind: provider.OrchestrationStartedEvent{Name: "Late", Version: "1.0.0"}}}); err == nil ||
		!strings.Contains(err.Error(), "not registered") {
		t.Errorf("the late orchestration was registered anyway (Replay: %v)", err)
	}
}

// Trap 4: an invalid retry policy fails the call's future with ErrInvalidInput (before, a negative
// Timeout silently meant none).
func TestTrapInvalidRetryPolicy(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	for _, err := range []error{
		dx.RegisterActivity(rt, "Greet", func(ctx context.Context, s string) (string, error) { return "hi " + s, nil }),
		dx.Register(rt, "R", func(ctx dx.Context, _ dx.Raw) (string, error) {
			_, err := dx.Call[string](ctx, "Greet", "x", dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2, Timeout: -time.Second})).Await(ctx)
			return fmt.Sprintf("invalid input: %v: %v", errors.Is(err, dx.ErrInvalidInput), err), nil
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := c.Start(ctx, "R", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dx.Result[string](ctx, c, id)
	if err != nil || !strings.HasPrefix(out, "invalid input: true") || !strings.Contains(out, "RetryPolicy.Timeout") {
		t.Fatalf("result %q, %v; want the call refused with ErrInvalidInput naming RetryPolicy.Timeout", out, err)
	}
}
