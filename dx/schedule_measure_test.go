package dx_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestMeasureSchedules measures what schedules cost on a real Redis (numbers for
// docs/schedules.md; no thresholds): memory per idle schedule, Redis commands per firing, and how
// many firings one runtime process sustains. Run it on a throw-away server:
//
//	DX_SCHED_MEASURE=1 scripts-dev/redis-server.sh run -- go test -run TestMeasureSchedules -v ./dx/
func TestMeasureSchedules(t *testing.T) {
	if os.Getenv("DX_SCHED_MEASURE") == "" || os.Getenv("DXREDIS_TEST_ADDR") == "" {
		t.Skip("measurement: DX_SCHED_MEASURE=1 and DXREDIS_TEST_ADDR (a server of its own)")
	}
	ctx := context.Background()
	addr := os.Getenv("DXREDIS_TEST_ADDR")
	ns := fmt.Sprintf("dxschedmeasure-%d", time.Now().UnixNano())
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = redisprovider.DropNamespace(ctx, p.Client(), ns); _ = p.Close() }()
	info := func(section, field string) int64 {
		s, err := p.Client().Info(ctx, section).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(s, "\r\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatalf("INFO %s has no %s", section, field)
		return 0
	}
	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger, OrchestrationConcurrency: 8, WorkerConcurrency: 8})
	dx.Register(rt, "SchedTick", schedTick)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(ctx)
	c := dx.NewClient(p)
	running := func(prefix string, n int) {
		waitForWithin(t, 5*time.Minute, fmt.Sprintf("%d schedules' first turn", n), func() bool {
			ids, err := c.ListInstances(ctx, dx.StateRunning)
			k := 0
			for _, id := range ids {
				if strings.HasPrefix(id, prefix) {
					k++
				}
			}
			return err == nil && k >= n
		})
	}

	// Memory per idle schedule: 500 yearly schedules, after their first turn.
	const idle = 500
	mem0 := info("memory", "used_memory")
	for i := range idle {
		if err := c.CreateSchedule(ctx, fmt.Sprintf("idle-%04d", i), dx.Schedule{Spec: dx.ScheduleSpec{Cron: "@yearly"},
			Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	running(dx.ScheduleInstancePrefix+"idle-", idle)
	time.Sleep(time.Second)
	mem1 := info("memory", "used_memory")
	t.Logf("memory per idle schedule: %d bytes (%d schedules, used_memory %d -> %d)", (mem1-mem0)/idle, idle, mem0, mem1)

	// Commands per firing: the runtime's idle polling first, then one one-second schedule.
	const window = 20 * time.Second
	cmd0 := info("stats", "total_commands_processed")
	time.Sleep(window)
	idleCmds := info("stats", "total_commands_processed") - cmd0
	if err := c.CreateSchedule(ctx, "tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Second},
		Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}, Overlap: dx.OverlapAllowAll}); err != nil {
		t.Fatal(err)
	}
	running(dx.ScheduleInstancePrefix+"tick", 1)
	s0, _ := c.GetSchedule(ctx, "tick")
	cmd1 := info("stats", "total_commands_processed")
	time.Sleep(window)
	cmds := info("stats", "total_commands_processed") - cmd1
	s1, _ := c.GetSchedule(ctx, "tick")
	fired := s1.Fired - s0.Fired
	t.Logf("commands per firing: %.1f (%d commands over %v with %d firings, minus %d while idle; schedule and run together)",
		float64(cmds-idleCmds)/float64(fired), cmds, window, fired, idleCmds)
	h, _ := c.History(ctx, dx.ScheduleInstancePrefix+"tick", 0)
	t.Logf("schedule history: %d events in execution %d after %d firings", len(h), s1.Execution, s1.Fired)
	_ = c.DeleteSchedule(ctx, "tick")

	// Throughput: 300 schedules that all fire at the same minute; how long until every run exists.
	const burst = 300
	for i := range burst {
		if err := c.CreateSchedule(ctx, fmt.Sprintf("burst-%04d", i), dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute},
			Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}, Overlap: dx.OverlapAllowAll}); err != nil {
			t.Fatal(err)
		}
	}
	running(dx.ScheduleInstancePrefix+"burst-", burst)
	fire := time.Now().Truncate(time.Minute).Add(time.Minute)
	waitForWithin(t, 3*time.Minute, "the burst's runs", func() bool {
		ids, err := c.ListInstances(ctx, dx.StateCompleted)
		k := 0
		suffix := "@" + fire.UTC().Format(time.RFC3339)
		for _, id := range ids {
			if strings.HasPrefix(id, "burst-") && strings.HasSuffix(id, suffix) {
				k++
			}
		}
		return err == nil && k >= burst
	})
	took := time.Since(fire)
	t.Logf("burst: %d schedules firing at one instant: every run completed %v after the fire time (%.0f firings/s on one runtime process)",
		burst, took.Round(time.Millisecond), float64(burst)/took.Seconds())
}

func waitForWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
