package dxtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

// uploadThenWait retries an upload with an hour's backoff, then says so and waits for "Go".
func uploadThenWait(ctx dx.Context, _ struct{}) (string, error) {
	up, err := dx.Call[string](ctx, "Upload", "file", dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2, Backoff: dx.FixedBackoff(time.Hour)})).Await(ctx)
	if err != nil {
		return "", err
	}
	ctx.SetCustomStatus("uploaded")
	g, err := dx.WaitEvent[string](ctx, "Go").Await(ctx)
	return up + " " + g, err
}

// Every wait moves the virtual clock when nothing else can happen: a retry's backoff before a
// custom status or an event wait does not hang the wait until its timeout.
func TestWaitsMoveTheClock(t *testing.T) {
	for _, wait := range []string{"WaitForEventWait", "WaitForCustomStatus"} {
		t.Run(wait, func(t *testing.T) {
			env := dxtest.New(t, dxtest.WithTimeout(3*time.Second))
			dx.Register(env.Runtime, "Sync", uploadThenWait)
			env.OnActivity("Upload").ReturnError(errors.New("503")).Return("ok")
			start := env.Now()
			id := env.Start("Sync", struct{}{})
			if wait == "WaitForEventWait" {
				env.WaitForEventWait(id, "Go")
			} else {
				env.WaitForCustomStatus(id, "uploaded")
			}
			if d := env.Now().Sub(start); d != time.Hour {
				t.Fatalf("clock moved %v, want the backoff's hour", d)
			}
			if wait == "WaitForCustomStatus" {
				env.WaitForEventWait(id, "Go")
			}
			env.RaiseEvent(id, "Go", "go")
			if got := dxtest.Result[string](env, id); got != "ok go" {
				t.Fatalf("got %q", got)
			}
		})
	}
}

var chargeAct = dx.NewActivity[order, string]("Charge")

// A test registers the real activities, as the program does, and mocks one of them, before or
// after registering it, by name or by handle.
func TestMockOverridesRegisteredActivity(t *testing.T) {
	real := func(context.Context, order) (string, error) { return "real", nil }
	for _, how := range []string{"mock after", "mock before", "handle"} {
		t.Run(how, func(t *testing.T) {
			env := dxtest.New(t)
			dx.Register(env.Runtime, "Checkout", checkout)
			dx.RegisterActivity(env.Runtime, "Ship", func(context.Context, string) (bool, error) { return true, nil })
			switch how {
			case "mock after":
				if err := chargeAct.Register(env.Runtime, real); err != nil {
					t.Fatal(err)
				}
				env.OnActivity("Charge").Return("mocked")
			case "mock before":
				env.OnActivity("Charge").Return("mocked")
				if err := dx.RegisterActivity(env.Runtime, "Charge", real); err != nil {
					t.Fatal(err)
				}
			case "handle":
				if err := chargeAct.Register(env.Runtime, real); err != nil {
					t.Fatal(err)
				}
				dxtest.OnActivity(env, chargeAct).Return("mocked")
			}
			if got := dxtest.Result[receipt](env, env.Start("Checkout", order{ID: "o-1"})); got.Charge != "mocked" {
				t.Fatalf("charge %q, want the mock's", got.Charge)
			}
		})
	}
	// The mock is the environment's: another one runs the real activity.
	env := dxtest.New(t)
	dx.Register(env.Runtime, "Checkout", checkout)
	dx.RegisterActivity(env.Runtime, "Ship", func(context.Context, string) (bool, error) { return true, nil })
	chargeAct.Register(env.Runtime, real)
	if got := dxtest.Result[receipt](env, env.Start("Checkout", order{ID: "o-1"})); got.Charge != "real" {
		t.Fatalf("charge %q without a mock", got.Charge)
	}
}

// raiseEarly raises "Go" before the orchestration waits for it (it sleeps an hour first), then
// again once it waits.
func raiseEarly(t testing.TB, opts ...dxtest.Option) string {
	env := dxtest.New(t, opts...)
	dx.Register(env.Runtime, "Late", func(ctx dx.Context, _ struct{}) (string, error) {
		if _, err := ctx.Timer(time.Hour).Await(ctx); err != nil {
			return "", err
		}
		return dx.WaitEvent[string](ctx, "Go").Await(ctx)
	})
	id := env.Start("Late", struct{}{}, dx.WithInstanceID("late-1"))
	env.RaiseEvent(id, "Go", "early")
	env.WaitForEventWait(id, "Go")
	env.RaiseEvent(id, "Go", "on time")
	return dxtest.Result[string](env, id)
}

// A test fails, at its end, when an external event was dropped for want of a waiter, unless it
// allows it.
func TestDroppedEventFailsTheTest(t *testing.T) {
	var ft *fakeT
	t.Run("default", func(t *testing.T) {
		ft = &fakeT{TB: t}
		if got := raiseEarly(ft); got != "on time" {
			t.Errorf("got %q", got)
		}
	})
	if !strings.Contains(ft.msg, `external event "Go" raised on instance late-1 was dropped`) || !strings.Contains(ft.msg, "AllowDroppedEvents") {
		t.Errorf("dropped event: %q", ft.msg)
	}
	t.Run("allowed", func(t *testing.T) {
		ft = &fakeT{TB: t}
		raiseEarly(ft, dxtest.AllowDroppedEvents())
	})
	if ft.msg != "" {
		t.Errorf("AllowDroppedEvents: %q", ft.msg)
	}
	t.Run("none dropped", func(t *testing.T) {
		ft = &fakeT{TB: t}
		env := dxtest.New(ft)
		dx.Register(env.Runtime, "Approval", approval)
		id := env.Start("Approval", struct{}{})
		env.WaitForEventWait(id, "Approved")
		env.RaiseEvent(id, "Approved", true)
		dxtest.Result[string](env, id)
	})
	if ft.msg != "" {
		t.Errorf("no event dropped: %q", ft.msg)
	}
}

// A failing helper reports the test's line, not dxtest's: run in a child process, whose output
// is read.
func TestFailurePointsAtTheTestLine(t *testing.T) {
	if os.Getenv("DXTEST_CHILD") == "1" {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "Quick", func(ctx dx.Context, _ struct{}) (int, error) { return 1, nil })
		id := env.Start("Quick", struct{}{})
		env.WaitForEventWait(id, "Never") // the failing line
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailurePointsAtTheTestLine$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DXTEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed:\n%s", out)
	}
	if m := regexp.MustCompile(`(\w+\.go):\d+: dxtest: instance`).FindSubmatch(out); m == nil || string(m[1]) != "safe_test.go" {
		t.Fatalf("the failure does not point at safe_test.go:\n%s", out)
	}
}
