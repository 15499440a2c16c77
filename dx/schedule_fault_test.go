package dx_test

import (
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

func schedTick(ctx dx.Context, in string) (string, error) { return in, nil }

// TestSigkillSchedule runs a one-second schedule on two runtime processes, one of them SIGKILLed
// (and replaced) every 1-3 s, for 20 s (DX_FAULT_LONG: 3 minutes): every fire time from the first
// run to the last started exactly once (a run each, contiguous, one execution each), none twice
// (the schedule counted as many as exist), none skipped but those passing once it is paused; fsck is clean.
func TestSigkillSchedule(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, ns, p := faultBackend(t)
	c := dx.NewClient(p)
	ctx := context.Background()
	d := 20 * time.Second
	if os.Getenv("DX_FAULT_LONG") != "" {
		d = 3 * time.Minute
	}
	procs := []*exec.Cmd{startChild(t, addr, ns), startChild(t, addr, ns)}
	created := time.Now()
	if err := c.CreateSchedule(ctx, "tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Second},
		Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}, Overlap: dx.OverlapAllowAll,
		CatchupWindow: time.Minute}); err != nil {
		t.Fatal(err)
	}
	kills := 0
	for end := time.Now().Add(d); time.Now().Before(end); kills++ {
		time.Sleep(time.Second + time.Duration(rand.Int64N(int64(2*time.Second))))
		i := rand.IntN(len(procs))
		if err := procs[i].Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = procs[i].Wait()
		procs[i] = startChild(t, addr, ns)
	}
	paused := time.Now()
	if err := c.PauseSchedule(ctx, "tick", "test over"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pause", func() bool { info, err := c.GetSchedule(ctx, "tick"); return err == nil && info.State == "paused" })
	info, err := c.GetSchedule(ctx, "tick")
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	waitFor(t, "every run to finish", func() bool {
		ids, err := c.ListInstances(ctx, "")
		if err != nil {
			return false
		}
		runs = runs[:0]
		for _, id := range ids {
			if strings.HasPrefix(id, "tick@") {
				runs = append(runs, id)
			}
		}
		for _, id := range runs {
			if st, _ := c.Status(ctx, id); st.State != dx.StateCompleted {
				return false
			}
		}
		return uint64(len(runs)) == info.Fired
	})
	fires := map[int64]bool{}
	var first, last time.Time
	for _, id := range runs {
		_, ft, ok := dx.ScheduleRunOf(id)
		if !ok {
			t.Fatalf("run id %q", id)
		}
		fires[ft.Unix()] = true
		if first.IsZero() || ft.Before(first) {
			first = ft
		}
		if ft.After(last) {
			last = ft
		}
		if execs, err := c.Executions(ctx, id); err != nil || len(execs) != 1 {
			t.Fatalf("%s: %d executions, %v", id, len(execs), err)
		}
	}
	// Fire times that pass once the schedule is paused are skipped as "paused" (the pause and the
	// waits above may span one); any other skip is a lost fire time.
	var skipped, visible uint64
	for _, k := range info.Skipped {
		visible += k.Count
		if k.Reason != "paused" || k.From.Before(paused.Add(-time.Second)) {
			skipped += k.Count
		}
	}
	var missing []string
	for s := first.Unix(); s <= last.Unix(); s++ {
		if !fires[s] {
			missing = append(missing, time.Unix(s, 0).UTC().Format(time.RFC3339))
		}
	}
	if len(missing) > 0 || skipped != 0 || info.SkippedTotal != visible || uint64(len(runs)) != info.Fired || first.After(created.Add(5*time.Second)) || last.Before(paused.Add(-5*time.Second)) {
		t.Fatalf("%d runs from %s to %s, fired %d, skipped %d %+v, missing %v", len(runs), first, last, info.Fired,
			info.SkippedTotal, info.Skipped, missing)
	}
	// The window: from the schedule's first turn (its creation, the kills permitting) to the pause.
	t.Logf("%d kills; %d fire times from %s to %s, each started once; schedule execution %d", kills, len(runs),
		first.Format(time.RFC3339), last.Format(time.RFC3339), info.Execution)
}
