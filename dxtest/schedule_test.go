package dxtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
	"github.com/duroxide-go/dxredis/provider"
)

// tick is what the test schedules start: it returns its input at once.
var tick = dx.NewOrchestration[string, string]("Tick")

func registerTick(t *testing.T, env *dxtest.Env) {
	t.Helper()
	if err := tick.Register(env.Runtime, func(ctx dx.Context, in string) (string, error) { return in, nil }); err != nil {
		t.Fatal(err)
	}
}

// slow takes its input's duration (a durable timer) before it returns.
var slow = dx.NewOrchestration[time.Duration, string]("Slow")

func registerSlow(t *testing.T, env *dxtest.Env) {
	t.Helper()
	if err := slow.Register(env.Runtime, func(ctx dx.Context, d time.Duration) (string, error) {
		return "done", ctx.Sleep(d)
	}); err != nil {
		t.Fatal(err)
	}
}

var schedStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday, 00:00 UTC

// runIDs are the ids of fire times from, from+step, ... (n of them).
func runIDs(sched string, from time.Time, step time.Duration, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = sched + "@" + from.Add(time.Duration(i)*step).UTC().Format(time.RFC3339)
	}
	return ids
}

func sameIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d runs, want %d\n got %v\nwant %v", what, len(got), len(want), clipList(got), clipList(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: run %d is %s, want %s", what, i, got[i], want[i])
		}
	}
}

func clipList(s []string) []string {
	if len(s) > 12 {
		return append(append(s[:6:6], "..."), s[len(s)-6:]...)
	}
	return s
}

// startsOf counts the starts of each run id in the schedule's histories (all executions).
func startsOf(t *testing.T, env *dxtest.Env, sched string) map[string]int {
	t.Helper()
	execs, err := env.Client.Executions(t.Context(), dx.ScheduleInstancePrefix+sched)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]int{}
	for _, ex := range execs {
		hist, err := env.Client.History(t.Context(), dx.ScheduleInstancePrefix+sched, ex.ExecutionID)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			if c, ok := ev.Kind.(provider.OrchestrationChainedEvent); ok {
				starts[c.Instance]++
			}
		}
	}
	return starts
}

func TestScheduleMinuteForADay(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(120*time.Second), dxtest.WithoutReplayCheck())
	registerTick(t, env)
	env.CreateSchedule("tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: tick.ScheduleAction("hi")})
	env.RunFor(24 * time.Hour)
	runs := env.ScheduleRuns("tick")
	sameIDs(t, "a day of minutes", runs, runIDs("tick", schedStart.Add(time.Minute), time.Minute, 1440))
	for _, id := range []string{runs[0], runs[719], runs[1439]} {
		if got := dxtest.Result[string](env, id); got != "hi" {
			t.Fatalf("%s returned %q", id, got)
		}
	}
	info := env.Schedule("tick")
	if info.Fired != 1440 || info.SkippedTotal != 0 || info.State != "active" {
		t.Fatalf("info: fired %d, skipped %d, state %s", info.Fired, info.SkippedTotal, info.State)
	}
	if want := schedStart.Add(24*time.Hour + time.Minute); len(info.Next) == 0 || !info.Next[0].Equal(want) {
		t.Fatalf("next %v, want %v first", info.Next, want)
	}
	if info.Execution < 2 {
		t.Fatalf("the schedule never continued as new (execution %d)", info.Execution)
	}
	t.Logf("execution %d after 1,440 firings", info.Execution)
}

func TestScheduleBadSpecRefused(t *testing.T) {
	env := dxtest.New(t)
	good := dx.Schedule{Spec: dx.ScheduleSpec{Cron: "0 3 * * *"}, Action: dx.ScheduleAction{Orchestration: "Tick"}}
	bad := map[string]func(s *dx.Schedule){
		"cron syntax":      func(s *dx.Schedule) { s.Spec.Cron = "61 * * * *" },
		"zone":             func(s *dx.Schedule) { s.Spec.TimeZone = "Mars/Olympus" },
		"both":             func(s *dx.Schedule) { s.Spec.Every = time.Hour },
		"neither":          func(s *dx.Schedule) { s.Spec.Cron = "" },
		"never fires":      func(s *dx.Schedule) { s.Spec.Cron = "0 0 30 2 *" },
		"tz prefix":        func(s *dx.Schedule) { s.Spec.Cron = "CRON_TZ=UTC 0 3 * * *" },
		"short interval":   func(s *dx.Schedule) { s.Spec = dx.ScheduleSpec{Every: time.Millisecond} },
		"offset":           func(s *dx.Schedule) { s.Spec = dx.ScheduleSpec{Every: time.Hour, Offset: time.Hour} },
		"end before start": func(s *dx.Schedule) { s.Spec.Start, s.Spec.End = schedStart, schedStart.Add(-time.Hour) },
		"jitter":           func(s *dx.Schedule) { s.Spec.Jitter = -time.Second },
		"policy":           func(s *dx.Schedule) { s.Overlap = "sometimes" },
		"window":           func(s *dx.Schedule) { s.CatchupWindow = -time.Minute },
		"orchestration":    func(s *dx.Schedule) { s.Action.Orchestration = "" },
		"version":          func(s *dx.Schedule) { s.Action.Version = "two" },
		"input":            func(s *dx.Schedule) { s.Action.Input = func() {} },
	}
	for name, mutate := range bad {
		s := good
		mutate(&s)
		if err := env.Client.CreateSchedule(t.Context(), "bad", s); !errors.Is(err, dx.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", name, err)
		}
	}
	for _, id := range []string{"", "a@b"} {
		if err := env.Client.CreateSchedule(t.Context(), id, good); !errors.Is(err, dx.ErrInvalidInput) {
			t.Errorf("id %q: %v, want ErrInvalidInput", id, err)
		}
	}
	if ids, _ := env.Client.ListInstances(t.Context(), ""); len(ids) != 0 {
		t.Fatalf("refused creates wrote %v", ids)
	}
	if err := env.Client.UpdateSchedule(t.Context(), "bad", dx.Schedule{}); !errors.Is(err, dx.ErrInvalidInput) {
		t.Fatalf("update with an empty schedule: %v", err)
	}
	if err := env.Client.PauseSchedule(t.Context(), "missing", ""); !errors.Is(err, dx.ErrNotFound) {
		t.Fatalf("pause of a missing schedule: %v", err)
	}
}
