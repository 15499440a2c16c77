package dx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Fault tests: runtimes in child processes (this test binary re-executed with DX_CHILD set) over
// one Redis namespace, killed with SIGKILL while they work.

func TestMain(m *testing.M) {
	if os.Getenv("DX_CHILD") != "" {
		os.Exit(runChild())
	}
	os.Exit(m.Run())
}

// faultProgram registers the workload every child and the checks share: a chain of activities
// followed by a fan-out, each activity slow enough for kills to land mid-activity.
func faultProgram(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Step", func(ctx context.Context, n int) (int, error) {
		select {
		case <-time.After(time.Duration(5+n%10) * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		return n + 1, nil
	})
	dx.Register(rt, "Chain", func(ctx dx.Context, n int) (int, error) {
		for range 3 {
			var err error
			if n, err = dx.Call[int](ctx, "Step", n).Await(ctx); err != nil {
				return 0, err
			}
		}
		fs := make([]dx.Future[int], 3)
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Step", n)
		}
		vs, err := dx.All(ctx, fs...)
		if err != nil {
			return 0, err
		}
		return vs[0] + vs[1] + vs[2], nil
	})
}

func faultOptions() dx.Options {
	return dx.Options{OrchestrationLockTimeout: time.Second, WorkerLockTimeout: time.Second,
		PollTimeout: 500 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger,
		OrchestrationConcurrency: 4, WorkerConcurrency: 4}
}

// runChild runs a runtime until killed (or SIGTERM, which shuts it down gracefully).
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: os.Getenv("DX_ADDR"), Namespace: os.Getenv("DX_NS"), Logger: quietLogger})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer p.Close()
	rt := dx.NewRuntime(p, faultOptions())
	faultProgram(rt)
	if err := rt.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// faultBackend returns an address children can reach and a provider on a fresh namespace there.
func faultBackend(t *testing.T) (addr, ns string, p *redisprovider.Provider) {
	t.Helper()
	addr = os.Getenv("DXREDIS_TEST_ADDR")
	if addr == "" {
		addr = miniredis.RunT(t).Addr() // served by this process, reachable by the children
	}
	ns = fmt.Sprintf("dxfault-%d-%d", os.Getpid(), time.Now().UnixNano())
	parts, _ := strconv.Atoi(os.Getenv("DXREDIS_TEST_PARTITIONS")) // the children adopt the count
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: addr, Namespace: ns, Logger: quietLogger, Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkFsck(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = redisprovider.DropNamespace(ctx, p.Client(), ns)
		_ = p.Close()
	})
	return addr, ns, p
}

// waitLockedWork waits until some orchestration turn or activity holds a lock: work is in progress.
func waitLockedWork(t *testing.T, p *redisprovider.Provider) {
	t.Helper()
	waitFor(t, "work in progress", func() bool {
		st, err := p.GetQueueStats(context.Background())
		return err == nil && (st.Orchestrator.LockedInstances > 0 || st.Worker.Locked > 0)
	})
}

func startChild(t *testing.T, addr, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DX_CHILD=1", "DX_ADDR="+addr, "DX_NS="+ns)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// checkExactlyOnce checks that every instance completed once with the expected output and an
// intact history: contiguous ids, every schedule answered exactly once, one terminal event.
func checkExactlyOnce(t *testing.T, p provider.Provider, ids []string, want func(i int) string) {
	t.Helper()
	ctx := context.Background()
	for i, id := range ids {
		h, err := p.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		completions := map[uint64]int{}
		terminal := 0
		for j, ev := range h {
			if ev.EventID != uint64(j+1) {
				t.Fatalf("%s: event ids not contiguous at %d", id, j)
			}
			if ev.SourceEventID != nil && (ev.EventType() == "ActivityCompleted" || ev.EventType() == "ActivityFailed") {
				completions[*ev.SourceEventID]++
			}
			if ev.IsTerminal() {
				terminal++
			}
		}
		for _, ev := range h {
			if ev.EventType() == "ActivityScheduled" && completions[ev.EventID] != 1 {
				t.Fatalf("%s: activity %d answered %d times", id, ev.EventID, completions[ev.EventID])
			}
		}
		last, ok := h[len(h)-1].Kind.(provider.OrchestrationCompletedEvent)
		if terminal != 1 || !ok || last.Output != want(i) {
			t.Fatalf("%s: %d terminal events, last %s, want output %s", id, terminal, h[len(h)-1].EventType(), want(i))
		}
	}
}

func startChains(t *testing.T, c *dx.Client, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := c.Start(context.Background(), "Chain", i*10, dx.WithInstanceID(fmt.Sprintf("chain-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func chainOutput(i int) string { return strconv.Itoa(3 * (i*10 + 4)) }

func waitAll(t *testing.T, c *dx.Client, ids []string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, id := range ids {
		st, err := c.Wait(ctx, id)
		if err != nil {
			t.Fatalf("%s did not finish within %s: %v (state %s)", id, within, err, st.State)
		}
	}
}

func TestSigkillMidTurnAndActivity(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, ns, p := faultBackend(t)
	c := dx.NewClient(p)
	n := 60
	if os.Getenv("DX_FAULT_LONG") != "" {
		n = 1000
	}
	ids := startChains(t, c, n)
	victim := startChild(t, addr, ns)
	startChild(t, addr, ns)
	// Kill one process while both are busy.
	waitFor(t, "a third of the chains done", func() bool {
		done := 0
		for _, id := range ids {
			if st, _ := c.Status(context.Background(), id); st.Terminal() {
				done++
			}
		}
		return done >= n/3
	})
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The survivor takes the victim's locked work over once its locks expire (1 s).
	waitAll(t, c, ids, 60*time.Second)
	checkExactlyOnce(t, p, ids, chainOutput)
	checkFsck(t, p)
}

func TestSigkillWhileSurvivorIdle(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, ns, p := faultBackend(t)
	c := dx.NewClient(p)
	victim := startChild(t, addr, ns)
	survivor := startChild(t, addr, ns)
	_ = survivor
	// Lets both children reach their long poll (deliberate: there is nothing to observe, and a
	// child still starting only makes the test weaker, never wrong).
	time.Sleep(300 * time.Millisecond)
	ids := startChains(t, c, 4)
	waitLockedWork(t, p) // work in progress
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Nothing new arrives: the idle survivor must notice the expired locks by itself.
	waitAll(t, c, ids, 30*time.Second)
	checkExactlyOnce(t, p, ids, chainOutput)
}

// TestRedisRestartUnderLoad: Redis (AOF, appendfsync always) is SIGKILLed and restarted while a
// runtime works; the runtime reconnects by itself and every instance completes exactly once, so
// nothing acknowledged was lost.
func TestRedisRestartUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Namespace: "restart", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	opts := faultOptions()
	rt := dx.NewRuntime(p, opts)
	faultProgram(rt)
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ids := startChains(t, c, 100)
	waitLockedWork(t, p) // work in progress
	done, _ := c.ListInstances(ctx, dx.StateCompleted)
	t.Logf("killing Redis with %d of %d instances completed", len(done), len(ids))
	srv.Kill()
	time.Sleep(300 * time.Millisecond) // deliberate: Redis stays down a while
	srv.Restart()
	waitAll(t, c, ids, 60*time.Second)
	checkExactlyOnce(t, p, ids, chainOutput)
}
