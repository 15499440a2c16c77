package dx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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
//
// bench/schedule-callgrind.sh runs it against a server under callgrind (DX_SCHED_CALLGRIND names
// the server's pid and callgrind output file): it then also reports Redis instructions per firing.
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

	cg := newCallgrindDumps(t)
	// Memory per idle schedule: 500 yearly schedules (50 under callgrind), after their first turn.
	idle := 500
	if cg != nil {
		idle = 50
	}
	mem0 := info("memory", "used_memory")
	for i := range idle {
		if err := c.CreateSchedule(ctx, fmt.Sprintf("idle-%04d", i), dx.Schedule{Spec: dx.ScheduleSpec{Cron: "@yearly"},
			Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}}); err != nil {
			t.Fatal(err)
		}
	}
	running(dx.ScheduleInstancePrefix+"idle-", idle)
	waitForWithin(t, time.Minute, "the schedules asleep on their timers", func() bool {
		st, err := p.Idle(ctx)
		return err == nil && st.Idle
	})
	mem1 := info("memory", "used_memory")
	t.Logf("memory per idle schedule: %d bytes (%d schedules, used_memory %d -> %d)", (mem1-mem0)/int64(idle), idle, mem0, mem1)

	// Commands (and under callgrind instructions) per firing: the runtime's idle polling first,
	// then one one-second schedule.
	const window = 20 * time.Second
	cmd0 := info("stats", "total_commands_processed")
	cg.dump()
	time.Sleep(window) // a measurement window of real time, not a wait for something
	idleCmds := info("stats", "total_commands_processed") - cmd0
	idleInstr := cg.dump()
	if err := c.CreateSchedule(ctx, "tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Second},
		Action: dx.ScheduleAction{Orchestration: "SchedTick", Input: "x"}, Overlap: dx.OverlapAllowAll}); err != nil {
		t.Fatal(err)
	}
	running(dx.ScheduleInstancePrefix+"tick", 1)
	s0, _ := c.GetSchedule(ctx, "tick")
	cmd1 := info("stats", "total_commands_processed")
	cg.dump()
	time.Sleep(window)
	cmds := info("stats", "total_commands_processed") - cmd1
	instr := cg.dump()
	s1, _ := c.GetSchedule(ctx, "tick")
	fired := s1.Fired - s0.Fired
	t.Logf("commands per firing: %.1f (%d commands over %v with %d firings, minus %d while idle; schedule and run together)",
		float64(cmds-idleCmds)/float64(fired), cmds, window, fired, idleCmds)
	if cg != nil {
		t.Logf("Redis instructions per firing: %.2f M (%d over %v with %d firings, minus %d while idle; serverCron left out)",
			float64(instr-idleInstr)/float64(fired)/1e6, instr, window, fired, idleInstr)
		_ = c.DeleteSchedule(ctx, "tick")
		return // throughput under valgrind says nothing
	}
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

// callgrindDumps reads a server's instructions under callgrind (DX_SCHED_CALLGRIND="<pid> <its
// --callgrind-out-file>"): dump asks callgrind for a dump, which holds the instructions since the
// one before, and returns them less serverCron's (as bench/callgrind.sh counts). nil without the
// variable (dump then returns 0).
type callgrindDumps struct {
	t         *testing.T
	pid, file string
	n         int
}

func newCallgrindDumps(t *testing.T) *callgrindDumps {
	pid, file, ok := strings.Cut(os.Getenv("DX_SCHED_CALLGRIND"), " ")
	if !ok {
		return nil
	}
	return &callgrindDumps{t: t, pid: pid, file: file}
}

func (c *callgrindDumps) dump() int64 {
	if c == nil {
		return 0
	}
	if out, err := exec.Command("callgrind_control", "-d", c.pid).CombinedOutput(); err != nil {
		c.t.Fatalf("callgrind_control: %v: %s", err, out)
	}
	c.n++
	name := fmt.Sprintf("%s.%d", c.file, c.n)
	var total int64
	waitForWithin(c.t, time.Minute, "callgrind's dump "+name, func() bool {
		b, err := os.ReadFile(name)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "totals: "); ok {
				total, _ = strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				return true
			}
		}
		return false
	})
	out, err := exec.Command("callgrind_annotate", "--inclusive=yes", "--threshold=100", name).Output()
	if err != nil {
		c.t.Fatalf("callgrind_annotate %s: %v", name, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.Contains(line, ":serverCron [") && !strings.Contains(line, "=>") {
			cron, _ := strconv.ParseInt(strings.ReplaceAll(f[0], ",", ""), 10, 64)
			return total - cron
		}
	}
	return total
}
