package dxtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

type order struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

type receipt struct {
	OrderID string `json:"order_id"`
	Charge  string `json:"charge"`
}

func checkout(ctx dx.Context, o order) (receipt, error) {
	ch, err := dx.Call[string](ctx, "Charge", o).Await(ctx)
	if err != nil {
		return receipt{}, fmt.Errorf("charge: %w", err)
	}
	if _, err := dx.Call[bool](ctx, "Ship", o.ID).Await(ctx); err != nil {
		return receipt{}, err
	}
	return receipt{OrderID: o.ID, Charge: ch}, nil
}

func TestResultWithMocksAndRealActivities(t *testing.T) {
	env := dxtest.New(t)
	dx.Register(env.Runtime, "Checkout", checkout)
	charge := env.OnActivity("Charge").Return("ch-1")
	var shipped []string
	var mu sync.Mutex
	dx.RegisterActivity(env.Runtime, "Ship", func(_ context.Context, id string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		shipped = append(shipped, id)
		return true, nil
	})

	id := env.Start("Checkout", order{ID: "o-7", Cents: 1250}, dx.WithInstanceID("checkout-7"))
	got := dxtest.Result[receipt](env, id)
	if got != (receipt{OrderID: "o-7", Charge: "ch-1"}) {
		t.Fatalf("result %+v", got)
	}
	if charge.Calls() != 1 || charge.Inputs()[0] != `{"id":"o-7","cents":1250}` {
		t.Fatalf("Charge calls %d inputs %q", charge.Calls(), charge.Inputs())
	}
	if len(shipped) != 1 || shipped[0] != "o-7" {
		t.Fatalf("shipped %v", shipped)
	}
	if got := env.EventTypes(id); got != "OrchestrationStarted ActivityScheduled ActivityCompleted ActivityScheduled ActivityCompleted OrchestrationCompleted" {
		t.Fatalf("events: %s", got)
	}
	if st := env.Status(id); st.State != dx.StateCompleted {
		t.Fatalf("status %v", st.State)
	}
}

func TestMockAnswersInOrderAndErrors(t *testing.T) {
	env := dxtest.New(t)
	dx.Register(env.Runtime, "Checkout", checkout)
	charge := env.OnActivity("Charge").ReturnError(errors.New("card declined")).Return("ch-2")
	env.OnActivity("Ship").Do(func(_ context.Context, id string) (bool, error) { return id == "o-2", nil })

	if err := env.Err(env.Start("Checkout", order{ID: "o-1"})); err == nil || !strings.Contains(err.Error(), "charge: card declined") {
		t.Fatalf("first checkout: %v", err)
	}
	if got := dxtest.Result[receipt](env, env.Start("Checkout", order{ID: "o-2"})); got.Charge != "ch-2" {
		t.Fatalf("second checkout %+v", got)
	}
	if charge.Calls() != 2 {
		t.Fatalf("Charge called %d times", charge.Calls())
	}
}

// A day-long sleep finishes in (real) milliseconds, and the orchestration sees the day pass.
func TestDayLongSleepFinishesFast(t *testing.T) {
	start := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	env := dxtest.New(t, dxtest.WithStartTime(start))
	dx.Register(env.Runtime, "Reminder", func(ctx dx.Context, days int) (time.Time, error) {
		for range days {
			if err := ctx.Sleep(24 * time.Hour); err != nil {
				return time.Time{}, err
			}
		}
		return ctx.UtcNow().Await(ctx)
	})
	// Without the virtual clock the three days would outlast the environment's wait timeout and
	// Result would fail the test: no real-time threshold needed (nor wanted on a loaded machine).
	got := dxtest.Result[time.Time](env, env.Start("Reminder", 3))
	if want := start.Add(72 * time.Hour); !got.Equal(want) || !env.Now().Equal(want) {
		t.Fatalf("orchestration saw %v, clock %v, want %v", got, env.Now(), want)
	}
}

// Retries with hour-long backoffs are skipped too; the mock fails, then succeeds.
func TestRetryBackoffIsSkipped(t *testing.T) {
	env := dxtest.New(t)
	start := env.Now()
	dx.Register(env.Runtime, "Sync", func(ctx dx.Context, _ struct{}) (string, error) {
		return dx.Call[string](ctx, "Upload", "file", dx.WithRetry(dx.RetryPolicy{MaxAttempts: 3, Backoff: dx.FixedBackoff(time.Hour)})).Await(ctx)
	})
	up := env.OnActivity("Upload").ReturnError(errors.New("503")).ReturnError(errors.New("503")).Return("ok")
	if got := dxtest.Result[string](env, env.Start("Sync", struct{}{})); got != "ok" {
		t.Fatalf("got %q", got)
	}
	if up.Calls() != 3 || env.Now().Sub(start) != 2*time.Hour {
		t.Fatalf("calls %d, clock moved %v", up.Calls(), env.Now().Sub(start))
	}
}

func approval(ctx dx.Context, _ struct{}) (string, error) {
	ctx.SetCustomStatus("waiting")
	ok := dx.WaitEvent[bool](ctx, "Approved")
	timeout := ctx.Timer(24 * time.Hour)
	switch dx.Select(ctx, ok, timeout) {
	case ok:
		v, err := ok.Await(ctx)
		if err != nil {
			return "", err
		}
		return fmt.Sprint("approved=", v), nil
	default:
		return "timed out", nil
	}
}

func TestEventOrTimeout(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "Approval", approval)
		id := env.Start("Approval", struct{}{})
		if got := dxtest.Result[string](env, id); got != "timed out" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("event raised once the code waits", func(t *testing.T) {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "Approval", approval)
		id := env.Start("Approval", struct{}{})
		env.WaitForEventWait(id, "Approved")
		if s := env.CustomStatus(id); s != "waiting" {
			t.Fatalf("custom status %q", s)
		}
		env.RaiseEvent(id, "Approved", true)
		if got := dxtest.Result[string](env, id); got != "approved=true" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("event raised two hours in", func(t *testing.T) {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "Approval", approval)
		start := env.Now()
		id := env.Start("Approval", struct{}{})
		env.After(2*time.Hour, func() { env.RaiseEvent(id, "Approved", false) })
		if got := dxtest.Result[string](env, id); got != "approved=false" {
			t.Fatalf("got %q", got)
		}
		if d := env.Now().Sub(start); d != 2*time.Hour {
			t.Fatalf("clock moved %v", d)
		}
	})
}

func TestQueueCancelCustomStatusKV(t *testing.T) {
	env := dxtest.New(t)
	dx.Register(env.Runtime, "Sum", func(ctx dx.Context, n int) (int, error) {
		total := 0
		for i := range n {
			v, err := dx.Dequeue[int](ctx, "numbers").Await(ctx)
			if err != nil {
				return 0, err
			}
			total += v
			ctx.SetKV("total", fmt.Sprint(total))
			ctx.SetCustomStatus(fmt.Sprintf("%d/%d", i+1, n))
		}
		return total, nil
	})
	id := env.Start("Sum", 3)
	for _, v := range []int{1, 2, 3} {
		env.Enqueue(id, "numbers", v)
	}
	if got := dxtest.Result[int](env, id); got != 6 {
		t.Fatalf("sum %d", got)
	}
	if v, ok := env.KV(id, "total"); !ok || v != "6" {
		t.Fatalf("KV total %q %v", v, ok)
	}
	if all := env.KVAll(id); len(all) != 1 {
		t.Fatalf("KV %v", all)
	}
	if s := env.CustomStatus(id); s != "3/3" {
		t.Fatalf("custom status %q", s)
	}

	id = env.Start("Sum", 2)
	env.Enqueue(id, "numbers", 5)
	env.WaitForCustomStatus(id, "1/2")
	env.Cancel(id, "changed my mind")
	if err := env.Err(id); !errors.Is(err, dx.ErrCanceled) {
		t.Fatalf("cancelled instance: %v", err)
	}
}

// fakeT records a fatal failure instead of failing the real test.
type fakeT struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
}

// failure runs fn with a fakeT and returns the message it failed with ("" when it did not).
func failure(t *testing.T, fn func(ft *fakeT)) string {
	ft := &fakeT{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); fn(ft) }()
	<-done
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.msg
}

func TestFailuresSayWhatToDo(t *testing.T) {
	msg := failure(t, func(ft *fakeT) {
		env := dxtest.New(ft)
		dx.Register(env.Runtime, "Checkout", checkout)
		env.Wait(env.Start("Checkout", order{ID: "o-1"}))
	})
	if !strings.Contains(msg, `activity "Charge" is neither registered nor mocked`) || !strings.Contains(msg, `env.OnActivity("Charge")`) {
		t.Errorf("unregistered activity: %q", msg)
	}

	msg = failure(t, func(ft *fakeT) {
		env := dxtest.New(ft)
		dx.Register(env.Runtime, "Wait", func(ctx dx.Context, _ struct{}) (int, error) {
			return dx.WaitEvent[int](ctx, "Go").Await(ctx)
		})
		env.Wait(env.Start("Wait", struct{}{}, dx.WithInstanceID("w")))
	})
	if !strings.Contains(msg, "nothing is running or scheduled") || !strings.Contains(msg, `it waits for events ["Go"]`) {
		t.Errorf("stuck instance: %q", msg)
	}

	msg = failure(t, func(ft *fakeT) {
		env := dxtest.New(ft)
		dx.Register(env.Runtime, "Hello", func(ctx dx.Context, _ struct{}) (int, error) { return 1, nil })
		env.OnActivity("Hello")
		env.OnActivity("Greet").Do(func(string) string { return "" })
	})
	if !strings.Contains(msg, "want a func(context.Context, In) (Out, error)") {
		t.Errorf("bad Do: %q", msg)
	}

	msg = failure(t, func(ft *fakeT) {
		env := dxtest.New(ft)
		dx.Register(env.Runtime, "Fail", func(ctx dx.Context, _ struct{}) (int, error) { return 0, errors.New("boom") })
		dxtest.Result[int](env, env.Start("Fail", struct{}{}))
	})
	if !strings.Contains(msg, "failed, want it completed: boom") {
		t.Errorf("Result of a failed instance: %q", msg)
	}
}

// An environment leaves no goroutine behind once its test ends.
func TestNoGoroutineLeftBehind(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("env", func(t *testing.T) {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "Approval", approval)
		dxtest.Result[string](env, env.Start("Approval", struct{}{}))
	})
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left (before: %d):\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
