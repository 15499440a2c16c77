package dxtest

import (
	"slices"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

// CreateSchedule creates a schedule (dx.Client.CreateSchedule) on the environment's virtual clock.
func (e *Env) CreateSchedule(id string, s dx.Schedule) {
	e.t.Helper()
	e.ensureStarted()
	if err := e.Client.CreateSchedule(e.ctx, id, s); err != nil {
		e.t.Fatalf("dxtest: create schedule %s: %v", id, err)
	}
}

// Schedule reads a schedule's visible state (dx.Client.GetSchedule).
func (e *Env) Schedule(id string) dx.ScheduleInfo {
	e.t.Helper()
	info, err := e.Client.GetSchedule(e.ctx, id)
	if err != nil {
		e.t.Fatalf("dxtest: schedule %s: %v", id, err)
	}
	return info
}

// ScheduleRuns lists the ids of the runs a schedule started that exist in the store (those whose
// id begins with "<id>@"), sorted: by fire time, as run ids end with it.
func (e *Env) ScheduleRuns(id string) []string {
	e.t.Helper()
	ids, err := e.Client.ListInstances(e.ctx, "")
	if err != nil {
		e.t.Fatalf("dxtest: list instances: %v", err)
	}
	var runs []string
	for _, inst := range ids {
		if strings.HasPrefix(inst, id+"@") {
			runs = append(runs, inst)
		}
	}
	sortRunIDs(runs)
	return runs
}

// sortRunIDs sorts run ids by their fire time.
func sortRunIDs(runs []string) {
	keys := make(map[string]time.Time, len(runs))
	for _, r := range runs {
		if i := strings.LastIndexByte(r, '@'); i >= 0 {
			keys[r], _ = time.Parse(time.RFC3339Nano, r[i+1:])
		}
	}
	slices.SortFunc(runs, func(a, b string) int { return keys[a].Compare(keys[b]) })
}
