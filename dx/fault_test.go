package dx_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

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
	// Tree: children named explicitly (in a namespace of several partitions, placed by their own
	// ids: their starts and completions cross partitions) and one auto-named (in the root's).
	dx.Register(rt, "Leaf", func(ctx dx.Context, n int) (int, error) {
		return dx.Call[int](ctx, "Step", n).Await(ctx)
	})
	dx.Register(rt, "Tree", func(ctx dx.Context, n int) (int, error) {
		fs := make([]dx.Future[int], treeWidth)
		for j := range fs {
			var opts []dx.SubOption
			if j > 0 {
				opts = append(opts, dx.WithInstanceID(fmt.Sprintf("%s-leaf-%d", ctx.InstanceID(), j)))
			}
			fs[j] = dx.CallSub[int](ctx, "Leaf", n+j, opts...)
		}
		vs, err := dx.All(ctx, fs...)
		sum := 0
		for _, v := range vs {
			sum += v
		}
		return sum, err
	})
	// Fan: ten parallel activities (W2; the scale tests).
	dx.Register(rt, "Fan", func(ctx dx.Context, n int) (int, error) {
		fs := make([]dx.Future[int], 10)
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Step", n+i)
		}
		vs, err := dx.All(ctx, fs...)
		sum := 0
		for _, v := range vs {
			sum += v
		}
		return sum, err
	})
}

// SchedTick is what TestSigkillSchedule's schedule starts.
func init() {
	faultExtra = append(faultExtra, func(rt *dx.Runtime) { dx.Register(rt, "SchedTick", schedTick) })
}

// treeWidth is how many children a Tree starts.
const treeWidth = 5

// faultExtra are further registrations of the children (other tests' workloads).
var faultExtra []func(*dx.Runtime)

func faultOptions() dx.Options {
	return dx.Options{OrchestrationLockTimeout: time.Second, WorkerLockTimeout: time.Second,
		PollTimeout: 500 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger,
		OrchestrationConcurrency: 4, WorkerConcurrency: 4}
}

// runChild runs a runtime until killed (or SIGTERM, which shuts it down gracefully).
func runChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	p, err := faultProvider(ctx, os.Getenv("DX_ADDR"), os.Getenv("DX_NS"), 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer p.Close()
	var rt *dx.Runtime
	switch os.Getenv("DX_CHILD") {
	case "caps": // caps_test.go
		rt = capsRuntime(p)
	case "dead": // dead_test.go
		rt = deadChildRuntime(p)
	default:
		rt = dx.NewRuntime(p, faultOptions())
		faultProgram(rt)
		for _, reg := range faultExtra {
			reg(rt)
		}
	}
	if err := rt.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return 0
}

// faultProvider opens a provider on addr: comma-separated addresses are a cluster's nodes.
func faultProvider(ctx context.Context, addr, ns string, partitions int) (*redisprovider.Provider, error) {
	opts := redisprovider.Options{Namespace: ns, Logger: quietLogger, Partitions: partitions}
	opts.WaitReplicas, _ = strconv.Atoi(os.Getenv("DX_WAIT_REPLICAS")) // TestSoak
	if nodes := strings.Split(addr, ","); len(nodes) > 1 {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: nodes, MaxRetries: -1})
		p, err := redisprovider.NewFromClient(ctx, c, opts)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return p, nil
	}
	opts.Addr = addr
	return redisprovider.New(ctx, opts)
}

// faultBackend returns an address children can reach (DXREDIS_TEST_CLUSTER's nodes, the server of
// DXREDIS_TEST_ADDR, or a miniredis this process serves) and a provider on a fresh namespace there.
func faultBackend(t *testing.T) (addr, ns string, p *redisprovider.Provider) {
	t.Helper()
	addr = os.Getenv("DXREDIS_TEST_CLUSTER")
	if addr == "" {
		addr = os.Getenv("DXREDIS_TEST_ADDR")
	}
	if addr == "" {
		addr = miniredis.RunT(t).Addr() // served by this process, reachable by the children
	}
	ns = fmt.Sprintf("dxfault-%d-%d", os.Getpid(), time.Now().UnixNano())
	parts, _ := strconv.Atoi(os.Getenv("DXREDIS_TEST_PARTITIONS")) // the children adopt the count
	p, err := faultProvider(context.Background(), addr, ns, parts)
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

func startChild(t *testing.T, addr, ns string) *exec.Cmd { return startChildOf(t, "1", addr, ns) }

// startChildOf starts a child running program ("1": faultProgram, "caps": capsRuntime).
func startChildOf(t *testing.T, program, addr, ns string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DX_CHILD="+program, "DX_ADDR="+addr, "DX_NS="+ns)
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

// TestSigkillTrees: trees whose children are named explicitly (so that, in a namespace of several
// partitions, every start and completion crosses partitions through the outboxes) complete exactly
// once when one of two runtimes is SIGKILLed mid-run: every child started once, every completion
// delivered once.
func TestSigkillTrees(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, ns, p := faultBackend(t)
	c := dx.NewClient(p)
	n := 20
	ids := make([]string, n)
	for i := range ids {
		id, err := c.Start(context.Background(), "Tree", i*10, dx.WithInstanceID(fmt.Sprintf("tree-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	victim := startChild(t, addr, ns)
	startChild(t, addr, ns)
	waitFor(t, "a third of the trees done", func() bool {
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
	waitAll(t, c, ids, 60*time.Second)
	// Each tree: one terminal event with the sum of its leaves (each leaf returns n+j+1), every child
	// scheduled once and answered once.
	checkExactlyOnce(t, p, ids, func(i int) string { return strconv.Itoa(treeWidth*(i*10) + treeWidth*(treeWidth+1)/2) })
	ctx := context.Background()
	for _, id := range ids {
		h, err := p.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		answered := map[uint64]int{}
		scheduled := 0
		for _, ev := range h {
			switch ev.EventType() {
			case "SubOrchestrationScheduled":
				scheduled++
			case "SubOrchestrationCompleted", "SubOrchestrationFailed":
				answered[*ev.SourceEventID]++
			}
		}
		if scheduled != treeWidth || len(answered) != treeWidth {
			t.Fatalf("%s: %d children scheduled, %d answered, want %d", id, scheduled, len(answered), treeWidth)
		}
		for e, k := range answered {
			if k != 1 {
				t.Fatalf("%s: child of event %d answered %d times", id, e, k)
			}
		}
		for j := 1; j < treeWidth; j++ {
			leaf := fmt.Sprintf("%s-leaf-%d", id, j)
			if execs, err := p.ListExecutions(ctx, leaf); err != nil || len(execs) != 1 {
				t.Fatalf("%s: executions %v, %v, want one", leaf, execs, err)
			}
		}
	}
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
	// Enough chains that their work lasts a while: a loaded machine (12 partitions make each
	// queue-stats poll a dozen calls) missed the window of four.
	ids := startChains(t, c, 24)
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
