package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/testwait"
)

// eventually polls cond (real time: these tests run a real runtime) for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

func TestSchedule(t *testing.T) {
	f := newFixture(t)
	c := f.runtime()
	ctx := context.Background()
	if out := f.ok("schedule", "list"); !strings.Contains(out, "no schedules") {
		f.ok("start", "Hello", "--input", `"x"`) // the namespace must exist for list
	}
	if err := c.CreateSchedule(ctx, "nightly", dx.Schedule{Spec: dx.ScheduleSpec{Cron: "0 3 * * *", TimeZone: "Europe/Berlin"},
		Action: dx.ScheduleAction{Orchestration: "Hello", Input: "night"}, Overlap: dx.OverlapBufferOne, Note: "the report"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the schedule's first turn", func() bool {
		info, err := c.GetSchedule(ctx, "nightly")
		return err == nil && len(info.Next) > 0
	})
	out := f.ok("schedule", "list")
	if !regexpLine(out, `^nightly\s+active\s+cron 0 3 \* \* \*, Europe/Berlin\s+Hello\s+buffer_one\s+\S+\s+0\s+0\s+the report$`) {
		t.Fatalf("list:\n%s", out)
	}
	f.ok("schedule", "pause", "nightly", "--reason", "holiday")
	eventually(t, "the pause", func() bool { info, _ := c.GetSchedule(ctx, "nightly"); return info.State == "paused" })
	if out := f.ok("schedule", "show", "nightly"); !regexpLine(out, `^State:\s+paused \(holiday\)$`) || !regexpLine(out, `^Overlap:\s+buffer_one$`) {
		t.Fatalf("show:\n%s", out)
	}
	f.ok("schedule", "resume", "nightly")
	f.ok("schedule", "trigger", "nightly")
	eventually(t, "the triggered run", func() bool {
		info, _ := c.GetSchedule(ctx, "nightly")
		return len(info.Recent) == 1 && info.Recent[0].State == dx.StateCompleted
	})
	var info dx.ScheduleInfo
	if err := json.Unmarshal([]byte(f.ok("--json", "schedule", "show", "nightly")), &info); err != nil {
		t.Fatal(err)
	}
	if info.State != "active" || info.Fired != 1 || info.Recent[0].Why != "trigger" || !strings.HasPrefix(info.Recent[0].RunID, "nightly@") {
		t.Fatalf("show --json: %+v", info)
	}
	if out := f.ok("schedule", "show", "nightly"); !regexpLine(out, `^nightly@\S+\s+trigger\s+\S+\s+Completed$`) {
		t.Fatalf("show after trigger:\n%s", out)
	}
	f.ok("schedule", "backfill", "nightly", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T12:00:00Z")
	eventually(t, "the backfill", func() bool { info, _ := c.GetSchedule(ctx, "nightly"); return info.Fired == 3 })
	f.ok("schedule", "delete", "nightly")
	eventually(t, "the deletion", func() bool { info, _ := c.GetSchedule(ctx, "nightly"); return info.State == "deleted" })
	var list struct {
		Schedules []dx.ScheduleInfo `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(f.ok("schedule", "list", "--json")), &list); err != nil || len(list.Schedules) != 1 || list.Schedules[0].State != "deleted" {
		t.Fatalf("list --json: %+v, %v", list, err)
	}
	f.fails(`schedule "nightly" not found`, "schedule", "pause", "nightly")
	f.fails(`schedule "nope" not found`, "schedule", "show", "nope")
	f.fails("unknown subcommand", "schedule", "frobnicate", "x")
	f.fails("want 1 argument", "schedule", "show")
	f.fails("--from", "schedule", "backfill", "nightly", "--from", "yesterday", "--to", "2026-01-01T00:00:00Z")
}
