package dxtest_test

import (
	"errors"
	"os"
	"strings"
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

// TestScheduleMinuteForADay runs a one-minute schedule over a virtual day: 1,440 runs, each
// started once, with consecutive ids, and the schedule's history bounded. (The replay check is
// off here: it replays every turn five times; the other schedule tests keep it.)
func TestScheduleMinuteForADay(t *testing.T) {
	minuteSchedule(t, 24*time.Hour)
}

// TestScheduleMinuteForAWeek is the same over a virtual week (10,080 runs): DXREDIS_LONG_TESTS=1.
func TestScheduleMinuteForAWeek(t *testing.T) {
	if os.Getenv("DXREDIS_LONG_TESTS") == "" {
		t.Skip("long: DXREDIS_LONG_TESTS=1")
	}
	minuteSchedule(t, 7*24*time.Hour)
}

func minuteSchedule(t *testing.T, d time.Duration) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(20*time.Minute), dxtest.WithoutReplayCheck())
	registerTick(t, env)
	env.CreateSchedule("tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: tick.ScheduleAction("hi")})
	began := time.Now()
	n := int(d / time.Minute)
	maxEvents, maxExecs := uint64(0), 0
	for day := time.Duration(0); day < d; day += 6 * time.Hour { // look at the history every 6 hours
		env.RunFor(6 * time.Hour)
		execs, err := env.Client.Executions(t.Context(), dx.ScheduleInstancePrefix+"tick")
		if err != nil {
			t.Fatal(err)
		}
		maxExecs = max(maxExecs, len(execs))
		for _, ex := range execs {
			maxEvents = max(maxEvents, ex.EventCount)
		}
	}
	elapsed := time.Since(began)
	runs := env.ScheduleRuns("tick")
	sameIDs(t, "a minute schedule", runs, runIDs("tick", schedStart.Add(time.Minute), time.Minute, n))
	for _, id := range []string{runs[0], runs[n/2], runs[n-1]} {
		if got := dxtest.Result[string](env, id); got != "hi" {
			t.Fatalf("%s returned %q", id, got)
		}
	}
	info := env.Schedule("tick")
	if info.Fired != uint64(n) || info.SkippedTotal != 0 || info.State != "active" {
		t.Fatalf("info: fired %d, skipped %d, state %s", info.Fired, info.SkippedTotal, info.State)
	}
	if want := schedStart.Add(d + time.Minute); len(info.Next) == 0 || !info.Next[0].Equal(want) {
		t.Fatalf("next %v, want %v first", info.Next, want)
	}
	// Bounded: an execution holds at most ~8 events per firing (it continues as new after 100
	// wake-ups), and old executions are pruned.
	if maxEvents > 1000 || maxExecs > 3 {
		t.Fatalf("history not bounded: %d events in an execution, %d executions kept", maxEvents, maxExecs)
	}
	t.Logf("%d firings in %v (real time); execution %d; at most %d events per execution, %d executions kept",
		n, elapsed.Round(time.Millisecond), info.Execution, maxEvents, maxExecs)
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

// span is when a run started and ended (virtual time), read from its history.
func span(t *testing.T, env *dxtest.Env, id string) (start, end time.Time) {
	t.Helper()
	h := env.History(id)
	if len(h) == 0 {
		t.Fatalf("run %s has no history", id)
	}
	return time.UnixMilli(int64(h[0].TimestampMs)).UTC(), time.UnixMilli(int64(h[len(h)-1].TimestampMs)).UTC()
}

// overlapRun runs a one-minute schedule of runs that take 150 s, under policy, for ten minutes
// (and the runs to their end).
func overlapRun(t *testing.T, policy dx.OverlapPolicy) (*dxtest.Env, []string) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(60*time.Second))
	registerSlow(t, env)
	env.CreateSchedule("s", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute, End: schedStart.Add(10 * time.Minute)},
		Action: slow.ScheduleAction(150 * time.Second), Overlap: policy})
	env.RunFor(30 * time.Minute)
	runs := env.ScheduleRuns("s")
	for id, n := range startsOf(t, env, "s") {
		if n != 1 {
			t.Fatalf("%s started %d times", id, n)
		}
	}
	return env, runs
}

// noOverlap checks that each run started after the one before it ended.
func noOverlap(t *testing.T, env *dxtest.Env, runs []string) {
	t.Helper()
	var prevEnd time.Time
	for _, id := range runs {
		start, end := span(t, env, id)
		if start.Before(prevEnd) {
			t.Fatalf("%s started at %s, before the run before it ended (%s)", id, start, prevEnd)
		}
		prevEnd = end
	}
}

func TestScheduleOverlapAllowAll(t *testing.T) {
	env, runs := overlapRun(t, dx.OverlapAllowAll)
	sameIDs(t, "allow all", runs, runIDs("s", schedStart.Add(time.Minute), time.Minute, 10))
	for i, id := range runs {
		if start, _ := span(t, env, id); !start.Equal(schedStart.Add(time.Duration(i+1) * time.Minute)) {
			t.Fatalf("%s started at %s", id, start)
		}
	}
}

func TestScheduleOverlapSkip(t *testing.T) {
	env, runs := overlapRun(t, dx.OverlapSkip)
	// 150 s runs: the fire times at 1, 4, 7 and 10 minutes run, the two after each are skipped.
	sameIDs(t, "skip", runs, []string{"s@2026-03-02T00:01:00Z", "s@2026-03-02T00:04:00Z", "s@2026-03-02T00:07:00Z", "s@2026-03-02T00:10:00Z"})
	noOverlap(t, env, runs)
	info := env.Schedule("s")
	if info.SkippedTotal != 6 || len(info.Skipped) == 0 || info.Skipped[0].Reason != "overlap: s@2026-03-02T00:01:00Z is still running" {
		t.Fatalf("skipped %d: %+v", info.SkippedTotal, info.Skipped)
	}
}

func TestScheduleOverlapBufferOne(t *testing.T) {
	env, runs := overlapRun(t, dx.OverlapBufferOne)
	noOverlap(t, env, runs)
	info := env.Schedule("s")
	if uint64(len(runs)) != info.Fired || info.Fired+info.SkippedTotal != 10 || info.SkippedTotal == 0 {
		t.Fatalf("%d runs, fired %d, skipped %d: %v", len(runs), info.Fired, info.SkippedTotal, runs)
	}
	if runs[1] != "s@2026-03-02T00:02:00Z" {
		t.Fatalf("the buffered fire time did not run second: %v", runs)
	}
	if st := info.Recent[1]; st.Why != "buffered" || st.State != dx.StateCompleted {
		t.Fatalf("second run: %+v", st)
	}
	for i, r := range info.Recent[1:] { // a buffered run starts when the one before it ends
		if _, prevEnd := span(t, env, info.Recent[i].RunID); r.Why == "buffered" && !r.StartedAt.Equal(prevEnd) {
			t.Fatalf("%s started at %s, the run before it ended at %s", r.RunID, r.StartedAt, prevEnd)
		}
	}
	for _, k := range info.Skipped {
		if k.Reason != "overlap: a run is already buffered" {
			t.Fatalf("skipped: %+v", info.Skipped)
		}
	}
}

func TestScheduleOverlapBufferAll(t *testing.T) {
	env, _ := overlapRun(t, dx.OverlapBufferAll)
	env.RunFor(time.Hour) // the buffered runs, one after another
	runs := env.ScheduleRuns("s")
	sameIDs(t, "buffer all", runs, runIDs("s", schedStart.Add(time.Minute), time.Minute, 10))
	noOverlap(t, env, runs)
	if info := env.Schedule("s"); info.SkippedTotal != 0 || len(info.Buffered) != 0 {
		t.Fatalf("skipped %d, buffered %v", info.SkippedTotal, info.Buffered)
	}
}

func TestScheduleOverlapCancelOther(t *testing.T) {
	env, runs := overlapRun(t, dx.OverlapCancelOther)
	sameIDs(t, "cancel other", runs, runIDs("s", schedStart.Add(time.Minute), time.Minute, 10))
	for i, id := range runs {
		st := env.Status(id)
		if i < len(runs)-1 && (st.State != dx.StateFailed || !errors.Is(st.Err, dx.ErrCanceled)) {
			t.Fatalf("%s: %s %v, want cancelled", id, st.State, st.Err)
		}
		if i == len(runs)-1 && st.State != dx.StateCompleted {
			t.Fatalf("the last run %s: %s", id, st.State)
		}
	}
}

func TestScheduleCatchupAfterOutage(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(60*time.Second))
	registerTick(t, env)
	env.CreateSchedule("c", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: tick.ScheduleAction("x"),
		Overlap: dx.OverlapAllowAll, CatchupWindow: 30 * time.Minute})
	env.RunFor(10 * time.Minute)
	env.Advance(5 * time.Hour) // an outage: nothing ran for five hours
	env.RunFor(0)
	runs := env.ScheduleRuns("c")
	now := schedStart.Add(5*time.Hour + 10*time.Minute)
	want := append(runIDs("c", schedStart.Add(time.Minute), time.Minute, 10), runIDs("c", now.Add(-30*time.Minute), time.Minute, 31)...)
	sameIDs(t, "catch-up", runs, want)
	info := env.Schedule("c")
	late := info.Skipped[len(info.Skipped)-1]
	if info.SkippedTotal != 269 || late.Count != 269 || late.Reason != "outside the catch-up window" ||
		!late.From.Equal(schedStart.Add(11*time.Minute)) || !late.To.Equal(now.Add(-31*time.Minute)) {
		t.Fatalf("skipped %d: %+v", info.SkippedTotal, info.Skipped)
	}
	env.RunFor(10 * time.Minute) // back to normal
	if got := len(env.ScheduleRuns("c")); got != 51 {
		t.Fatalf("%d runs after the outage and 10 more minutes, want 51", got)
	}
}

func TestScheduleDST(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time-zone data:", err)
	}
	// 2026: clocks go forward on 8 March (02:00 EST becomes 03:00 EDT) and back on 1 November
	// (02:00 EDT becomes 01:00 EST).
	for _, c := range []struct {
		name, cron string
		from       time.Time
		want       []string // fire times, UTC
	}{
		{"spring daily 02:30", "30 2 * * *", time.Date(2026, 3, 7, 0, 0, 0, 0, ny),
			[]string{"2026-03-07T07:30:00Z", "2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}}, // 08 Mar: once, at the jump (03:00 EDT)
		{"autumn daily 01:30", "30 1 * * *", time.Date(2026, 10, 31, 0, 0, 0, 0, ny),
			[]string{"2026-10-31T05:30:00Z", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}}, // 01 Nov: once, the first 01:30
		{"spring hourly", "0 1-4 8 3 *", time.Date(2026, 3, 8, 0, 0, 0, 0, ny),
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}}, // 02:00 and 03:00 are one firing
		{"autumn half-hourly", "*/30 0-2 1 11 *", time.Date(2026, 11, 1, 0, 0, 0, 0, ny), // from 00:00 EDT (not fired: created then)
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z", "2026-11-01T07:30:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := dxtest.New(t, dxtest.WithStartTime(c.from), dxtest.WithTimeout(60*time.Second))
			registerTick(t, env)
			env.CreateSchedule("d", dx.Schedule{Spec: dx.ScheduleSpec{Cron: c.cron, TimeZone: "America/New_York"},
				Action: tick.ScheduleAction("x")})
			env.RunFor(3 * 24 * time.Hour)
			var want []string
			for _, w := range c.want {
				want = append(want, "d@"+w)
			}
			sameIDs(t, c.name, env.ScheduleRuns("d"), want)
		})
	}
}

func TestSchedulePauseResumeUpdateDuringRun(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(60*time.Second))
	registerSlow(t, env)
	ctx := t.Context()
	env.CreateSchedule("p", dx.Schedule{Spec: dx.ScheduleSpec{Every: 10 * time.Minute}, Action: slow.ScheduleAction(5 * time.Minute)})
	must := func(err error) {
		if err != nil {
			t.Error(err)
		}
	}
	env.After(12*time.Minute, func() { must(env.Client.PauseSchedule(ctx, "p", "maintenance")) }) // the 10-minute run is in flight
	env.RunFor(13 * time.Minute)
	if info := env.Schedule("p"); info.State != "paused" || info.PausedReason != "maintenance" || len(info.Running) != 1 {
		t.Fatalf("after pause: %+v", info)
	}
	env.After(12*time.Minute, func() { must(env.Client.ResumeSchedule(ctx, "p", "")) }) // at 25 minutes
	env.RunFor(19 * time.Minute)                                                        // to 32: the 30-minute run is in flight
	must(env.Client.UpdateSchedule(ctx, "p", dx.Schedule{Spec: dx.ScheduleSpec{Every: 15 * time.Minute},
		Action: slow.ScheduleAction(time.Minute), Note: "quarter-hourly"}))
	env.RunFor(28 * time.Minute) // to 60
	sameIDs(t, "pause, resume, update", env.ScheduleRuns("p"),
		[]string{"p@2026-03-02T00:10:00Z", "p@2026-03-02T00:30:00Z", "p@2026-03-02T00:45:00Z", "p@2026-03-02T01:00:00Z"})
	info := env.Schedule("p")
	if info.SkippedTotal != 1 || info.Skipped[0].Reason != "paused" || !info.Skipped[0].From.Equal(schedStart.Add(20*time.Minute)) {
		t.Fatalf("skipped: %+v", info.Skipped)
	}
	if info.Schedule.Note != "quarter-hourly" || info.State != "active" {
		t.Fatalf("after update: %+v", info)
	}
	for _, id := range env.ScheduleRuns("p")[:2] {
		if st := env.Wait(id); st.State != dx.StateCompleted {
			t.Fatalf("%s: %s", id, st.State)
		}
	}
}

func TestScheduleTriggerBackfillEndDelete(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(60*time.Second))
	registerTick(t, env)
	ctx := t.Context()
	env.CreateSchedule("b", dx.Schedule{Spec: dx.ScheduleSpec{Every: 10 * time.Minute, End: schedStart.Add(30 * time.Minute)},
		Action: tick.ScheduleAction("x"), Overlap: dx.OverlapAllowAll})
	env.RunFor(3 * time.Minute)
	if err := env.Client.TriggerSchedule(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.BackfillSchedule(ctx, "b", schedStart.Add(-time.Hour), schedStart.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	env.RunFor(2 * time.Hour)
	want := append(runIDs("b", schedStart.Add(-time.Hour), 10*time.Minute, 6), "b@2026-03-02T00:03:00Z")
	want = append(want, runIDs("b", schedStart.Add(10*time.Minute), 10*time.Minute, 3)...) // none after End
	sameIDs(t, "trigger, backfill, end", env.ScheduleRuns("b"), want)
	info := env.Schedule("b")
	if len(info.Next) != 0 || info.Fired != 10 {
		t.Fatalf("after the end: next %v, fired %d", info.Next, info.Fired)
	}
	// A second backfill of the same range starts nothing new: the ids exist.
	if err := env.Client.BackfillSchedule(ctx, "b", schedStart.Add(-time.Hour), schedStart); err != nil {
		t.Fatal(err)
	}
	env.RunFor(time.Minute)
	if got := len(env.ScheduleRuns("b")); got != 11 { // the fire time at 00:00 is new
		t.Fatalf("%d runs after the second backfill, want 11", got)
	}
	for _, id := range env.ScheduleRuns("b") {
		if h := env.History(id); len(h) != 2 { // started and completed, once
			t.Fatalf("%s ran again: %s", id, env.EventTypes(id))
		}
	}
	if err := env.Client.DeleteSchedule(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	env.Wait(dx.ScheduleInstancePrefix + "b")
	if info := env.Schedule("b"); info.State != "deleted" {
		t.Fatalf("after delete: %s", info.State)
	}
	if err := env.Client.TriggerSchedule(ctx, "b"); !errors.Is(err, dx.ErrNotFound) {
		t.Fatalf("trigger after delete: %v", err)
	}
	env.CreateSchedule("x", dx.Schedule{Spec: dx.ScheduleSpec{Cron: "@hourly"}, Action: tick.ScheduleAction("x")})
	env.WaitUntil("x's first turn", func() bool { return env.Status(dx.ScheduleInstancePrefix+"x").State == dx.StateRunning })
	env.Cancel(dx.ScheduleInstancePrefix+"x", "by hand")
	env.Wait(dx.ScheduleInstancePrefix + "x")
	if info := env.Schedule("x"); info.State != "failed" || !strings.Contains(info.PausedReason, "by hand") {
		t.Fatalf("a cancelled schedule instance: %s %q", info.State, info.PausedReason)
	}
	env.CreateSchedule("b", dx.Schedule{Spec: dx.ScheduleSpec{Cron: "@hourly"}, Action: tick.ScheduleAction("again")})
	env.WaitUntil("the schedule's first turn", func() bool { return env.Status(dx.ScheduleInstancePrefix+"b").State == dx.StateRunning })
	if list, err := env.Client.ListSchedules(ctx); err != nil || len(list) != 2 || list[0].ID != "b" || list[0].State != "active" {
		t.Fatalf("list after re-create: %+v, %v", list, err)
	}
}

// An update counts the new spec's fire times from when it is applied, not from the schedule's
// last wake-up: nothing of the new spec before the update is fired.
func TestScheduleUpdateCountsFromNow(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart))
	registerTick(t, env)
	env.CreateSchedule("u", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Hour}, Action: tick.ScheduleAction("x")})
	env.RunFor(95 * time.Minute) // the last wake-up at 01:00
	if err := env.Client.UpdateSchedule(t.Context(), "u", dx.Schedule{Spec: dx.ScheduleSpec{Every: 10 * time.Minute},
		Action: tick.ScheduleAction("y"), CatchupWindow: time.Hour}); err != nil {
		t.Fatal(err)
	}
	env.RunFor(25 * time.Minute) // to 02:00
	sameIDs(t, "update", env.ScheduleRuns("u"), []string{"u@2026-03-02T01:00:00Z", "u@2026-03-02T01:40:00Z",
		"u@2026-03-02T01:50:00Z", "u@2026-03-02T02:00:00Z"})
	if got := dxtest.Result[string](env, "u@2026-03-02T01:40:00Z"); got != "y" {
		t.Fatalf("the updated input: %q", got)
	}
}

// Jitter delays each run by a fixed amount under Jitter; the run id keeps the fire time.
func TestScheduleJitter(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart))
	registerTick(t, env)
	env.CreateSchedule("j", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Hour, Jitter: 10 * time.Minute},
		Action: tick.ScheduleAction("x")})
	env.RunFor(6*time.Hour + 10*time.Minute)
	runs := env.ScheduleRuns("j")
	sameIDs(t, "jitter", runs, runIDs("j", schedStart.Add(time.Hour), time.Hour, 6))
	delays := map[time.Duration]bool{}
	for i, id := range runs {
		fire := schedStart.Add(time.Duration(i+1) * time.Hour)
		start, _ := span(t, env, id)
		if d := start.Sub(fire); d < 0 || d >= 10*time.Minute {
			t.Fatalf("%s started %v after its fire time", id, d)
		} else {
			delays[d] = true
		}
	}
	if len(delays) < 2 {
		t.Fatalf("every run got the same delay: %v", delays)
	}
}

// A catch-up larger than one plan hands out (50 fire times) is fired in batches, all of it.
func TestScheduleCatchupInBatches(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(schedStart), dxtest.WithTimeout(60*time.Second))
	registerTick(t, env)
	env.CreateSchedule("c", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: tick.ScheduleAction("x"),
		Overlap: dx.OverlapAllowAll, CatchupWindow: 2 * time.Hour})
	env.RunFor(0)
	env.Advance(5 * time.Hour)
	env.RunFor(0)
	now := schedStart.Add(5 * time.Hour)
	sameIDs(t, "catch-up in batches", env.ScheduleRuns("c"), runIDs("c", now.Add(-2*time.Hour), time.Minute, 121))
	if info := env.Schedule("c"); info.SkippedTotal != 179 || info.Fired != 121 {
		t.Fatalf("fired %d, skipped %d: %+v", info.Fired, info.SkippedTotal, info.Skipped)
	}
}
