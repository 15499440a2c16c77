package dxtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

// Nondeterministic orchestrations: the executor cache runs a kept instance's new events only, so
// without dxtest's replay check they complete every time in a test and fail after a restart.

// countByMap ranges over a map of 8 keys, calling one activity per key: the order of its
// schedules changes from one run of the code to the next.
func countByMap(ctx dx.Context, _ string) (int, error) {
	stock := map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8}
	var calls []dx.Future[int]
	for sku := range stock {
		calls = append(calls, dx.Call[int](ctx, "Count", sku))
	}
	sum := 0
	for _, c := range calls {
		n, err := c.Await(ctx)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}

// workTakes is how long the Work activity takes in real time; lateOrOnTime reads time.Now to
// choose a branch after it.
const workTakes = 100 * time.Millisecond

func lateOrOnTime(ctx dx.Context, _ string) (string, error) {
	began := time.Now() // nondeterministic: a replay reads the clock again
	if _, err := dx.Call[string](ctx, "Work", "").Await(ctx); err != nil {
		return "", err
	}
	if time.Since(began) >= workTakes { // a replay finds Work done at once: never late
		return dx.Call[string](ctx, "Late", "").Await(ctx)
	}
	return dx.Call[string](ctx, "OnTime", "").Await(ctx)
}

func timeEnv(t *testing.T, opts ...dxtest.Option) *dxtest.Env {
	env := dxtest.New(t, opts...)
	dx.Register(env.Runtime, "LateOrOnTime", lateOrOnTime)
	dx.RegisterActivity(env.Runtime, "Work", func(ctx context.Context, _ string) (string, error) {
		// The activity's work: it takes workTakes of real time (not a test waiting for something).
		timer := time.NewTimer(workTakes)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
		}
		return "done", nil
	})
	env.OnActivity("Late").Return("late")
	env.OnActivity("OnTime").Return("on time")
	return env
}

func wantNondeterminism(t *testing.T, env *dxtest.Env, id string) {
	t.Helper()
	err := env.Err(id)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "nondetermin") {
		t.Fatalf("instance %s: err %v, want a nondeterminism failure (history: %s)", id, err, env.EventTypes(id))
	}
}

func TestReplayCheckFailsMapOrderEveryTime(t *testing.T) {
	for i := range 20 {
		env := dxtest.New(t)
		dx.Register(env.Runtime, "CountByMap", countByMap)
		dx.RegisterActivity(env.Runtime, "Count", func(_ context.Context, sku string) (int, error) { return len(sku), nil })
		id := env.Start("CountByMap", "", dx.WithInstanceID("map-"+string(rune('a'+i))))
		wantNondeterminism(t, env, id)
	}
}

func TestReplayCheckFailsTimeNowBranchEveryTime(t *testing.T) {
	for range 20 {
		env := timeEnv(t)
		wantNondeterminism(t, env, env.Start("LateOrOnTime", ""))
	}
}

func TestWithoutReplayCheckTheCacheHidesNondeterminism(t *testing.T) {
	// One dispatcher, so that every turn after the first finds the instance in the cache.
	env := timeEnv(t, dxtest.WithoutReplayCheck(), dxtest.WithRuntimeOptions(dx.Options{OrchestrationConcurrency: 1}))
	if got := dxtest.Result[string](env, env.Start("LateOrOnTime", "")); got != "late" {
		t.Fatalf("result %q, want late: the kept instance ran Work's completion without a replay", got)
	}
}

// Under dx.HoldOnNondeterminism a held instance would never finish: the wait fails at once and
// says why, instead of timing out.
func TestHeldInstanceFailsTheWait(t *testing.T) {
	msg := failure(t, func(ft *fakeT) {
		env := dxtest.New(ft, dxtest.WithRuntimeOptions(dx.Options{OnNondeterminism: dx.HoldOnNondeterminism}))
		dx.Register(env.Runtime, "CountByMap", countByMap)
		dx.RegisterActivity(env.Runtime, "Count", func(_ context.Context, sku string) (int, error) { return len(sku), nil })
		env.Wait(env.Start("CountByMap", ""))
	})
	if !strings.Contains(msg, `orchestration "CountByMap"`) || !strings.Contains(msg, "is nondeterministic: an instance is held") {
		t.Fatalf("wait on a held instance: %q", msg)
	}
}
