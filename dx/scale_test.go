package dx_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Scale-out tests (issue 34): resharding and failover of a Redis Cluster while work runs. They
// change the cluster (move slots, kill a primary), so they run only on a throw-away cluster that
// says so: DXREDIS_TEST_CLUSTER_DISPOSABLE=1 (make test-scale starts one).

// disposableCluster returns the cluster's seed addresses, or skips the test.
func disposableCluster(t *testing.T) []string {
	t.Helper()
	addrs := os.Getenv("DXREDIS_TEST_CLUSTER")
	if addrs == "" || os.Getenv("DXREDIS_TEST_CLUSTER_DISPOSABLE") == "" {
		t.Skip("needs a throw-away cluster: DXREDIS_TEST_CLUSTER and DXREDIS_TEST_CLUSTER_DISPOSABLE=1 (make test-scale)")
	}
	return strings.Split(addrs, ",")
}

// callErrors counts the provider calls that failed, by a short form of their error, from when
// counting until stop.
type callErrors struct {
	mu       sync.Mutex
	counting atomic.Bool
	byKind   map[string]int
	fatal    []string // errors a caller could not retry
	// slotRetried counts the calls retried inside the provider while their slot moved.
	slotRetried int
}

func (e *callErrors) ObserveCall(_ context.Context, op string, _ time.Duration, err error) {
	if err == nil || !e.counting.Load() {
		return
	}
	msg := err.Error()
	kind := msg
	if i := strings.Index(msg, ": "); i >= 0 {
		kind = msg[i+2:]
	}
	if len(kind) > 60 {
		kind = kind[:60]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byKind == nil {
		e.byKind = map[string]int{}
	}
	e.byKind[op+": "+kind]++
	if unexpectedError(msg) {
		e.fatal = append(e.fatal, op+": "+msg)
	}
}

// unexpectedError reports whether a failed call's raw error (what Observer sees, before the
// provider maps it) is one a slot move or a failover must not cause: a script stopped by a key
// that moved, a redirection not followed, a script or argument error. Connection errors,
// CLUSTERDOWN, TRYAGAIN, LOADING, lock tokens lost to expiry and ErrNotReplicated are expected
// while a node fails, and retried.
func unexpectedError(msg string) bool {
	for _, bad := range []string{"non local key", "MOVED ", "ASK ", "CROSSSLOT", "DX_FORMAT", "DX_INVALID ", "DX_DUPLICATE", "ERR "} {
		if strings.Contains(msg, bad) {
			return true
		}
	}
	return false
}

// The provider's log: counts the calls it retried while their slot moved (a Debug record each).
func (e *callErrors) Enabled(_ context.Context, l slog.Level) bool { return true }
func (e *callErrors) WithAttrs([]slog.Attr) slog.Handler           { return e }
func (e *callErrors) WithGroup(string) slog.Handler                { return e }
func (e *callErrors) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "slot moved") {
		e.mu.Lock()
		e.slotRetried++
		e.mu.Unlock()
	}
	return nil
}

func (e *callErrors) report(t *testing.T) {
	e.counting.Store(false)
	e.mu.Lock()
	defer e.mu.Unlock()
	t.Logf("calls the provider retried while their slot moved: %d; failed calls (the runtime retries them): %v", e.slotRetried, e.byKind)
	if len(e.fatal) > 10 {
		e.fatal = e.fatal[:10]
	}
	for _, f := range e.fatal {
		t.Errorf("a call failed with an error no caller retries: %s", f)
	}
}

// scaleRun is the load of the scale tests: an in-process runtime over a namespace of 12
// partitions on the cluster, starting fan-outs (Fan: ten parallel activities, W2) and trees
// (Tree: five children, four of them named, so their starts and completions cross partitions)
// until stopped.
type scaleRun struct {
	ns     string
	p      *redisprovider.Provider
	c      *dx.Client
	errs   *callErrors
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	fans   []string
	trees  []string
}

func startScaleRun(t *testing.T, addrs []string, opts redisprovider.Options) *scaleRun {
	t.Helper()
	ctx := context.Background()
	r := &scaleRun{errs: &callErrors{}}
	opts.Namespace = fmt.Sprintf("dxscale-%d", time.Now().UnixNano())
	opts.Partitions, opts.Logger, opts.Observer = 12, slog.New(r.errs), r.errs
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ReadTimeout: opts.WaitTimeout + 3*time.Second})
	p, err := redisprovider.NewFromClient(ctx, cc, opts)
	if err != nil {
		_ = cc.Close()
		t.Fatal(err)
	}
	r.p, r.c, r.ns = p, dx.NewClient(p), opts.Namespace
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = redisprovider.DropNamespace(ctx, p.Client(), opts.Namespace)
		_ = p.Close()
		_ = cc.Close()
	})
	rt := dx.NewRuntime(p, faultOptions())
	faultProgram(rt)
	rctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.errs.counting.Store(true)
	r.wg.Go(func() { _ = rt.Run(rctx) })
	r.wg.Go(func() {
		for i := 0; rctx.Err() == nil; i++ {
			fan, err1 := r.c.Start(rctx, "Fan", i, dx.WithInstanceID(fmt.Sprintf("fan-%d", i)))
			tree, err2 := r.c.Start(rctx, "Tree", i*10, dx.WithInstanceID(fmt.Sprintf("tree-%d", i)))
			r.mu.Lock()
			if err1 == nil {
				r.fans = append(r.fans, fan)
			}
			if err2 == nil {
				r.trees = append(r.trees, tree)
			}
			r.mu.Unlock()
			select {
			case <-rctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return r
}

func (r *scaleRun) started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.trees)
}

// stopStarting ends the starts and waits until every instance started is done, then stops the
// runtime and checks every instance: the right output, every activity answered once, every child
// started once and answered once, and fsck clean.
func (r *scaleRun) finish(t *testing.T, within time.Duration) {
	t.Helper()
	r.mu.Lock()
	fans, trees := r.fans, r.trees
	r.fans, r.trees = nil, nil // the starter stops adding
	r.mu.Unlock()
	waitAll(t, r.c, fans, within)
	waitAll(t, r.c, trees, within)
	r.cancel()
	r.wg.Wait()
	r.errs.report(t)
	t.Logf("%d fan-outs and %d trees completed", len(fans), len(trees))
	num := func(id string) int { n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:]); return n }
	checkExactlyOnce(t, r.p, fans, func(i int) string { return strconv.Itoa(10*num(fans[i]) + 55) })
	checkExactlyOnce(t, r.p, trees, func(i int) string {
		return strconv.Itoa(treeWidth*(num(trees[i])*10) + treeWidth*(treeWidth+1)/2)
	})
	ctx := context.Background()
	for _, id := range trees {
		h, err := r.p.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		answered := map[uint64]int{}
		for _, ev := range h {
			if ev.EventType() == "SubOrchestrationCompleted" || ev.EventType() == "SubOrchestrationFailed" {
				answered[*ev.SourceEventID]++
			}
		}
		if len(answered) != treeWidth {
			t.Fatalf("%s: %d children answered, want %d", id, len(answered), treeWidth)
		}
		for e, k := range answered {
			if k != 1 {
				t.Fatalf("%s: child of event %d answered %d times", id, e, k)
			}
		}
		for j := 1; j < treeWidth; j++ {
			leaf := fmt.Sprintf("%s-leaf-%d", id, j)
			if execs, err := r.p.ListExecutions(ctx, leaf); err != nil || len(execs) != 1 {
				t.Fatalf("%s: executions %v, %v, want one", leaf, execs, err)
			}
		}
	}
	checkFsck(t, r.p)
}

// masters returns the cluster's primaries: address -> node id, from CLUSTER NODES.
func masters(t *testing.T, addrs []string) map[string]string {
	t.Helper()
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		out, err := c.ClusterNodes(context.Background()).Result()
		_ = c.Close()
		if err != nil {
			continue
		}
		m := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 8 && strings.Contains(f[2], "master") && !strings.Contains(f[2], "fail") {
				m[strings.Split(f[1], "@")[0]] = f[0]
			}
		}
		return m
	}
	t.Fatal("no cluster node answers")
	return nil
}

// TestReshardUnderLoad: redis-cli --cluster reshard moves every slot of one primary (a third of
// them, and four of the twelve partitions) to another while fan-outs and trees run: no call fails
// with an error its caller does not retry, every instance completes exactly as expected, fsck is
// clean, and GetPartitionStats (dxctl partitions) shows the moved partitions on their new node.
func TestReshardUnderLoad(t *testing.T) {
	addrs := disposableCluster(t)
	r := startScaleRun(t, addrs, redisprovider.Options{})
	ctx := context.Background()
	before, err := r.p.GetPartitionStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	from := before[0].Node
	var to string
	for _, s := range before {
		if s.Node != from {
			to = s.Node
			break
		}
	}
	ms := masters(t, addrs)
	if ms[from] == "" || ms[to] == "" {
		t.Fatalf("partition nodes %s, %s not among the primaries %v", from, to, ms)
	}
	waitFor(t, "the load to run", func() bool { return r.started() >= 20 })
	slots := 16384 / len(ms)
	start := time.Now()
	cmd := exec.Command("redis-cli", "--cluster", "reshard", to, "--cluster-from", ms[from], "--cluster-to", ms[to],
		"--cluster-slots", strconv.Itoa(slots), "--cluster-yes", "--cluster-pipeline", reshardPipeline)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reshard: %v\n%s", err, out)
	}
	t.Logf("moved %d slots from %s to %s in %v under load (%d trees started so far)", slots, from, to,
		time.Since(start).Round(time.Millisecond), r.started())
	if longTests() {
		waitFor(t, "more load after the move", func() bool { return r.started() >= 200 })
	}
	r.finish(t, 60*time.Second)
	after, err := r.p.GetPartitionStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i, s := range after {
		want := before[i].Node
		if want == from {
			want, moved = to, moved+1
		}
		if s.Node != want {
			t.Errorf("partition %d (slot %d): node %s after the move, want %s", i, s.Slot, s.Node, want)
		}
	}
	if moved == 0 {
		t.Errorf("no partition was on %s", from)
	}
	t.Logf("%d partitions moved to %s", moved, to)
}

// reshardPipeline is --cluster-pipeline of the reshard: keys moved per MIGRATE.
const reshardPipeline = "10"

func longTests() bool { return os.Getenv("DXREDIS_LONG_TESTS") != "" }

// TestClusterFailover: a 3-primary cluster with one replica each; a primary is SIGKILLed while
// trees and fan-outs run with WaitReplicas 1, and its replica is promoted: every instance
// completes, every child started once, every completion delivered once, fsck clean. With
// DXREDIS_FAILOVER_WAIT=0 the same runs without WaitReplicas and reports what was lost instead.
func TestClusterFailover(t *testing.T) {
	addrs := disposableCluster(t)
	wait := 1
	if v := os.Getenv("DXREDIS_FAILOVER_WAIT"); v != "" {
		wait, _ = strconv.Atoi(v)
	}
	r := startScaleRun(t, addrs, redisprovider.Options{WaitReplicas: wait, WaitTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	stats, err := r.p.GetPartitionStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	victim := stats[0].Node
	if len(masters(t, addrs)) < 3 {
		t.Skip("needs 3 primaries")
	}
	waitFor(t, "the load to run", func() bool { return r.started() >= 30 })
	failPrimary(t, addrs, victim, r.started)
	if wait > 0 {
		r.finish(t, 120*time.Second)
		return
	}
	// WaitReplicas 0: report what the failover lost (no assertion: this is the documented risk).
	r.mu.Lock()
	fans, trees := r.fans, r.trees
	r.fans, r.trees = nil, nil
	r.mu.Unlock()
	lost := 0
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, id := range append(fans, trees...) {
		if st, err := r.c.Wait(wctx, id); err != nil || !st.Terminal() {
			lost++
		}
	}
	r.cancel()
	r.wg.Wait()
	r.errs.report(t)
	t.Logf("WaitReplicas 0: %d of %d instances did not complete within 60 s of the failover", lost, len(fans)+len(trees))
	if rep, err := r.p.Fsck(ctx); err == nil {
		t.Logf("WaitReplicas 0: fsck after the failover: %d violations %v", len(rep.Violations), rep.Violations)
	}
}

// failPrimary SIGKILLs the primary at victim, waits until the cluster promoted its replica, and
// brings the killed node back with its configuration (its nodes.conf makes it rejoin as a replica
// of the promoted one, which WaitReplicas needs): a failover as an operator lives it. It skips
// the test when victim has no replica.
func failPrimary(t *testing.T, addrs []string, victim string, started func() int) {
	t.Helper()
	ctx := context.Background()
	vc := redis.NewClient(&redis.Options{Addr: victim})
	info, err := vc.Info(ctx, "server", "replication").Result()
	_ = vc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(info, "connected_slaves:1") {
		t.Skip("needs a replica for each primary (DXREDIS_CLUSTER_REPLICAS=1)")
	}
	pid := 0
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	// The killed node comes back (as an operator would bring it back) with its configuration: its
	// nodes.conf makes it rejoin as a replica of the promoted one, which WaitReplicas needs.
	vc = redis.NewClient(&redis.Options{Addr: victim})
	conf, err := vc.ConfigGet(ctx, "*").Result()
	_ = vc.Close()
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(victim, ":")
	argv := []string{"--bind", host, "--port", port, "--daemonize", "yes", "--save", "", "--appendonly", "no"}
	for _, k := range []string{"dir", "pidfile", "logfile", "cluster-enabled", "cluster-config-file", "cluster-node-timeout",
		"repl-diskless-sync", "repl-diskless-sync-delay", "maxmemory-policy"} {
		argv = append(argv, "--"+k, conf[k])
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("SIGKILLed primary %s (pid %d) with %d trees started", victim, pid, started())
	deadline := time.Now().Add(60 * time.Second)
	for {
		ms := masters(t, addrs[1:])
		if _, ok := ms[victim]; !ok && len(ms) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no replica promoted within 60 s: primaries %v", ms)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("replica promoted %v after the kill", time.Since(killed).Round(time.Millisecond))
	if out, err := exec.Command("redis-server", argv...).CombinedOutput(); err != nil {
		t.Fatalf("restarting %v: %v\n%s", argv, err, out)
	}
	waitFor(t, "the old primary to rejoin as a replica", func() bool {
		c := redis.NewClient(&redis.Options{Addr: victim})
		defer c.Close()
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	t.Logf("the old primary is a replica again %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// TestSoak (DXREDIS_LONG_TESTS=1, a throw-away cluster of 3 primaries with a replica each):
// DXREDIS_SOAK_FOR (default 10m) of trees and fan-outs at P = 12 with WaitReplicas 1, run by this
// process and two worker processes; every 20 s one worker process is SIGKILLed and replaced, and
// a third of the way in a primary is SIGKILLed (its replica promoted, the node brought back).
// Then every instance completes exactly as expected and fsck is clean.
func TestSoak(t *testing.T) {
	addrs := disposableCluster(t)
	if !longTests() {
		t.Skip("a long run: DXREDIS_LONG_TESTS=1")
	}
	soak := 10 * time.Minute
	if v := os.Getenv("DXREDIS_SOAK_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		soak = d
	}
	t.Setenv("DX_WAIT_REPLICAS", "1") // the worker processes wait too
	r := startScaleRun(t, addrs, redisprovider.Options{WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	stats, err := r.p.GetPartitionStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.Join(addrs, ",")
	workers := []*exec.Cmd{startChild(t, addr, r.ns), startChild(t, addr, r.ns)}
	start, kills, failed := time.Now(), 0, false
	tick := time.NewTicker(20 * time.Second) // the soak's pace, not a wait for a condition
	defer tick.Stop()
	for time.Since(start) < soak {
		<-tick.C
		victim := workers[kills%len(workers)]
		_ = victim.Process.Signal(syscall.SIGKILL)
		_ = victim.Wait()
		workers[kills%len(workers)] = startChild(t, addr, r.ns)
		kills++
		if !failed && time.Since(start) > soak/3 {
			failPrimary(t, addrs, stats[0].Node, r.started)
			failed = true
		}
	}
	t.Logf("soak of %v: %d worker processes SIGKILLed, a primary failed over: %v", soak, kills, failed)
	r.finish(t, 5*time.Minute)
}
