package main

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

// A week of nights on the virtual clock; the report of the night of 4 March takes 50 hours, so the
// night after it waits for it (buffer one) and the night after that is skipped.
func TestNightlyBufferOne(t *testing.T) {
	env := dxtest.New(t, dxtest.WithStartTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	// The real activity, but the night of 4 March takes 50 hours (a mock of BuildReport that sleeps
	// would block the clock: the orchestration sleeps instead).
	slow := dx.NewOrchestration[Request, Report]("SlowNightlyReport")
	if err := slow.Register(env.Runtime, func(ctx dx.Context, r Request) (Report, error) {
		_, fired, _ := dx.ScheduleRunOf(ctx.InstanceID())
		if fired.Day() == 4 {
			if err := ctx.Sleep(50 * time.Hour); err != nil {
				return Report{}, err
			}
		}
		return nightly(ctx, r)
	}); err != nil {
		t.Fatal(err)
	}
	s := schedule(NightlySpec)
	s.Action.Orchestration = slow.Name()
	env.CreateSchedule("nightly", s)
	env.RunFor(7 * 24 * time.Hour)

	// 02:00 Berlin is 01:00 UTC in March (before the change to summer time on 29 March).
	want := []string{"nightly@2026-03-02T01:00:00Z", "nightly@2026-03-03T01:00:00Z", "nightly@2026-03-04T01:00:00Z",
		"nightly@2026-03-05T01:00:00Z", "nightly@2026-03-07T01:00:00Z", "nightly@2026-03-08T01:00:00Z"}
	runs := env.ScheduleRuns("nightly")
	if len(runs) != len(want) {
		t.Fatalf("runs %v, want %v", runs, want)
	}
	for i := range want {
		if runs[i] != want[i] {
			t.Fatalf("runs %v, want %v", runs, want)
		}
	}
	if r := dxtest.Result[Report](env, "nightly@2026-03-05T01:00:00Z"); r.Day != "2026-03-05" {
		t.Fatalf("report %+v", r)
	}
	info := env.Schedule("nightly")
	if info.SkippedTotal != 1 || info.Skipped[0].Reason != "overlap: a run is already buffered" ||
		!info.Skipped[0].From.Equal(time.Date(2026, 3, 6, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("skipped %+v", info.Skipped)
	}
	// The buffered night started as soon as the long one ended (4 March 01:00 + 50 h).
	h := env.History("nightly@2026-03-05T01:00:00Z")
	started := time.UnixMilli(int64(h[0].TimestampMs)).UTC()
	if end := time.Date(2026, 3, 6, 3, 0, 0, 0, time.UTC); !started.Equal(end) {
		t.Fatalf("the buffered night started at %v", started)
	}
}
