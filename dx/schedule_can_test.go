package dx_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

// A control message that arrives while the schedule plans its continue-as-new (the plan of its
// 100th wake-up, after which it continues as new) is carried to the next execution and applied
// there: nothing sent to a schedule is dropped at a continue-as-new. A trigger sent at the very
// instant of a fire time gets a fire time of its own.
func TestScheduleControlSurvivesContinueAsNew(t *testing.T) {
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	env := dxtest.New(t, dxtest.WithStartTime(start), dxtest.WithTimeout(60*time.Second))
	if err := dx.Register(env.Runtime, "SchedTick", schedTick); err != nil {
		t.Fatal(err)
	}
	var plans atomic.Int32
	dx.SetSchedulePlanHook(func() {
		if plans.Add(1) == 101 { // wake-up 100: the plan whose turn continues as new
			if err := env.Client.TriggerSchedule(t.Context(), "can"); err != nil {
				t.Error(err)
			}
		}
	})
	t.Cleanup(func() { dx.SetSchedulePlanHook(nil) })
	env.CreateSchedule("can", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"},
		Overlap: dx.OverlapAllowAll})
	env.RunFor(102 * time.Minute)
	info := env.Schedule("can")
	if info.Execution < 2 {
		t.Fatalf("no continue-as-new: execution %d", info.Execution)
	}
	var triggered []string
	for _, r := range info.Recent {
		if r.Why == "trigger" {
			triggered = append(triggered, r.RunID)
		}
	}
	// The trigger is handled at 01:40, the instant the 01:40 fire time runs: it gets 01:40:00.001.
	if len(triggered) != 1 || triggered[0] != "can@2026-03-02T01:40:00.001Z" || info.Fired != 103 {
		t.Fatalf("triggered %v, fired %d: %+v", triggered, info.Fired, info.Recent)
	}
	if st := env.Wait(triggered[0]); st.State != dx.StateCompleted {
		t.Fatalf("the triggered run: %s", st.State)
	}
}
