// Command partbench measures how a namespace of several partitions spreads its Redis work over
// the primaries of a Redis Cluster (issue 29's balance, overhead and idle numbers): it runs a
// workload on the dx runtime against a cluster (or one server) and prints, per node, the commands
// and microseconds Redis spent (INFO commandstats deltas, script-internal commands included), the
// sum per orchestration, and the share of turns that sent messages to other partitions.
//
//	go run ./bench/partbench -addrs 127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003 -partitions 12 -workload hello -n 2000
//	go run ./bench/partbench -addrs ... -partitions 12 -idle 60s     # commands per minute of an idle runtime
//
// Run it on a cluster nothing else uses: the deltas are the whole nodes'.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "partbench:", err)
		os.Exit(1)
	}
}

type nodeStats struct {
	calls, usec int64
	cpu         float64 // used_cpu_sys + used_cpu_user, seconds
}

// nodes reads INFO commandstats and cpu of every primary (one server: itself).
func nodes(ctx context.Context, c redis.UniversalClient) (map[string]nodeStats, error) {
	out := map[string]nodeStats{}
	var mu sync.Mutex
	read := func(ctx context.Context, n *redis.Client) error {
		info, err := n.Info(ctx, "commandstats", "cpu").Result()
		if err != nil {
			return err
		}
		var s nodeStats
		for _, line := range strings.Split(info, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
				x, _ := strconv.ParseFloat(v, 64)
				s.cpu += x
			}
			if !strings.HasPrefix(line, "cmdstat_") {
				continue
			}
			for _, kv := range strings.Split(strings.TrimSpace(line[strings.Index(line, ":")+1:]), ",") {
				k, v, _ := strings.Cut(kv, "=")
				x, _ := strconv.ParseFloat(v, 64)
				switch k {
				case "calls":
					s.calls += int64(x)
				case "usec":
					s.usec += int64(x)
				}
			}
		}
		mu.Lock()
		out[n.Options().Addr] = s
		mu.Unlock()
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		return out, cc.ForEachMaster(ctx, read)
	}
	return out, read(ctx, c.(*redis.Client))
}

// counter counts the provider's script calls by operation (redisprovider.Observer).
type counter struct {
	mu   sync.Mutex
	ops  map[string]int64
	acks []time.Duration // latency of every orchestration ack call (WaitReplicas adds its WAITs)
}

func (c *counter) ObserveCall(_ context.Context, op string, d time.Duration, _ error) {
	c.mu.Lock()
	c.ops[op]++
	if strings.HasPrefix(op, "ack_orchestration_item") {
		c.acks = append(c.acks, d)
	}
	c.mu.Unlock()
}

// quantile returns the q-quantile of ds (sorted in place), 0 when empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

type input struct {
	N int `json:"n"`
}

// done counts the completed turns of one orchestration name (dx.Metrics): waiting for the run to
// end costs Redis nothing.
type done struct {
	name string
	n    atomic.Int64
}

func (d *done) Count(metric string, n int64, l dx.Labels) {
	if metric == dx.MetricTurns && l.Result == "completed" && l.Orchestration == d.name {
		d.n.Add(n)
	}
}
func (*done) Observe(string, time.Duration, dx.Labels) {}

func run() error {
	addrs := flag.String("addrs", "127.0.0.1:6379", "a server, or cluster nodes (comma-separated)")
	parts := flag.Int("partitions", 1, "partitions of the namespace")
	workload := flag.String("workload", "hello", "hello | fanout | children")
	named := flag.Bool("named-children", false, "children: name each child explicitly (placed by its own id)")
	n := flag.Int("n", 1000, "orchestrations")
	width := flag.Int("width", 10, "fanout and children: activities or children per orchestration")
	conc := flag.Int("concurrency", 8, "orchestration and worker dispatcher goroutines each")
	idle := flag.Duration("idle", 0, "instead of a workload: observe an idle runtime this long")
	waitReplicas := flag.Int("wait-replicas", 0, "Options.WaitReplicas")
	rate := flag.Float64("rate", 0, "orchestrations started per second (0: all at once, as fast as possible)")
	flag.Parse()
	ctx := context.Background()
	list := strings.Split(*addrs, ",")
	var client redis.UniversalClient
	if len(list) > 1 {
		// Pools big enough for every dispatcher's long poll (at P = 1 they share this client's pool).
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: list, MaxRetries: -1, ReadTimeout: 5 * time.Second, PoolSize: 4**conc + 16})
	} else {
		client = redis.NewClient(&redis.Options{Addr: list[0], MaxRetries: -1, PoolSize: 4**conc + 16})
	}
	defer client.Close()
	ns := fmt.Sprintf("partbench-%d", time.Now().UnixNano())
	obs := &counter{ops: map[string]int64{}}
	p, err := redisprovider.NewFromClient(ctx, client, redisprovider.Options{Namespace: ns, Partitions: *parts,
		Observer: obs, WaitReplicas: *waitReplicas, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	defer func() {
		_ = p.Close()
		_, _ = redisprovider.DropNamespace(context.Background(), client, ns)
	}()
	name := map[string]string{"hello": "Hello", "fanout": "FanOut", "children": "Children"}[*workload]
	if name == "" && *idle == 0 {
		return fmt.Errorf("unknown -workload %q", *workload)
	}
	completed := &done{name: name}
	rt := dx.NewRuntime(p, dx.Options{OrchestrationConcurrency: *conc, WorkerConcurrency: *conc, Metrics: completed,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	dx.RegisterActivity(rt, "Work", func(_ context.Context, in input) (int, error) { return in.N, nil })
	// Latency: from the start call to the turn that completes the orchestration (its ack, about a
	// millisecond, not included), noted by the orchestration's code the first time it gets there.
	var startedAt, doneAt sync.Map
	finished := func(ctx dx.Context) {
		if !ctx.IsReplaying() {
			doneAt.LoadOrStore(ctx.InstanceID(), time.Now())
		}
	}
	dx.Register(rt, "Hello", func(ctx dx.Context, in input) (int, error) {
		v, err := dx.Call[int](ctx, "Work", in).Await(ctx)
		finished(ctx)
		return v, err
	})
	dx.Register(rt, "Child", func(ctx dx.Context, in input) (int, error) { return dx.Call[int](ctx, "Work", in).Await(ctx) })
	dx.Register(rt, "FanOut", func(ctx dx.Context, in input) (int, error) {
		fs := make([]dx.Future[int], *width)
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Work", input{i})
		}
		_, err := dx.All(ctx, fs...)
		finished(ctx)
		return len(fs), err
	})
	dx.Register(rt, "Children", func(ctx dx.Context, in input) (int, error) {
		fs := make([]dx.Future[int], *width)
		for i := range fs {
			var opts []dx.SubOption
			if *named {
				opts = append(opts, dx.WithInstanceID(ctx.InstanceID()+"-c"+strconv.Itoa(i)))
			}
			fs[i] = dx.CallSub[int](ctx, "Child", input{i}, opts...)
		}
		_, err := dx.All(ctx, fs...)
		finished(ctx)
		return len(fs), err
	})
	c := dx.NewClient(p)
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	if *idle > 0 {
		time.Sleep(3 * time.Second) // the runtime reaches its long polls
		before, err := nodes(ctx, client)
		if err != nil {
			return err
		}
		time.Sleep(*idle)
		after, err := nodes(ctx, client)
		if err != nil {
			return err
		}
		var calls int64
		for addr, a := range after {
			calls += a.calls - before[addr].calls
		}
		perMin := float64(calls) / idle.Minutes()
		fmt.Printf("idle: P=%d, %d commands in %v over %d node(s): %.0f commands per minute (INFO commandstats, the INFO calls included)\n",
			*parts, calls, *idle, len(after), perMin)
		return json.NewEncoder(os.Stdout).Encode(map[string]any{"partitions": *parts, "idle_commands_per_min": perMin, "nodes": len(after)})
	}
	before, err := nodes(ctx, client)
	if err != nil {
		return err
	}
	obs.mu.Lock()
	clear(obs.ops)
	obs.acks = nil
	obs.mu.Unlock()
	start := time.Now()
	cpu0 := appCPU()
	var started atomic.Int64
	var wg sync.WaitGroup
	starters := 8
	if *rate > 0 {
		starters = 1
	}
	for w := range starters {
		wg.Go(func() {
			for i := w; i < *n; i += starters {
				if *rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))))
				}
				id := fmt.Sprintf("pb-%d", i)
				startedAt.Store(id, time.Now())
				if _, err := c.Start(ctx, name, input{i}, dx.WithInstanceID(id)); err != nil {
					fmt.Fprintln(os.Stderr, "start:", err)
					return
				}
				started.Add(1)
			}
		})
	}
	wg.Wait()
	for completed.n.Load() < int64(*n) {
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("%d of %d completed after 10 minutes", completed.n.Load(), *n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	elapsed := time.Since(start)
	appPct := 100 * (appCPU() - cpu0).Seconds() / elapsed.Seconds()
	after, err := nodes(ctx, client)
	if err != nil {
		return err
	}
	type row struct {
		addr        string
		calls, usec int64
		cpu         float64
	}
	var rows []row
	var calls, usec int64
	for addr, a := range after {
		r := row{addr, a.calls - before[addr].calls, a.usec - before[addr].usec, a.cpu - before[addr].cpu}
		rows = append(rows, r)
		calls, usec = calls+r.calls, usec+r.usec
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].addr < rows[j].addr })
	obs.mu.Lock()
	ops := maps(obs.ops)
	ackP50, ackP99 := quantile(obs.acks, 0.5), quantile(obs.acks, 0.99)
	obs.mu.Unlock()
	var lat []time.Duration
	startedAt.Range(func(id, at any) bool {
		if d, ok := doneAt.Load(id); ok {
			lat = append(lat, d.(time.Time).Sub(at.(time.Time)))
		}
		return true
	})
	latP50, latP99 := quantile(lat, 0.5), quantile(lat, 0.99)
	acks := ops["ack_orchestration_item"] + ops["ack_orchestration_item_and_fetch"]
	fmt.Printf("%s: P=%d, %d orchestrations in %v (%.0f/s) over %d node(s)\n", *workload, *parts, *n, elapsed.Round(time.Millisecond),
		float64(*n)/elapsed.Seconds(), len(rows))
	var cpus []float64
	minC, maxC, minU, maxU := rows[0].calls, rows[0].calls, rows[0].usec, rows[0].usec
	for _, r := range rows {
		fmt.Printf("  node %-22s %9d commands (%.1f per orch)  %9d us (%.1f per orch)  cpu %.0f%%\n", r.addr, r.calls, float64(r.calls)/float64(*n), r.usec, float64(r.usec)/float64(*n), 100*r.cpu/elapsed.Seconds())
		cpus = append(cpus, 100*r.cpu/elapsed.Seconds())
		minC, maxC, minU, maxU = min(minC, r.calls), max(maxC, r.calls), min(minU, r.usec), max(maxU, r.usec)
	}
	fmt.Printf("  sum: %.1f commands and %.1f us per orchestration; max/min per node: commands %.2f, us %.2f\n",
		float64(calls)/float64(*n), float64(usec)/float64(*n), float64(maxC)/float64(minC), float64(maxU)/float64(minU))
	fmt.Printf("  forwards (ob_take calls) %d for %d turn acks: %.2f per ack\n", ops["forward"], acks, float64(ops["forward"])/float64(max(acks, 1)))
	fmt.Printf("  start -> completing turn: p50 %v, p99 %v (%d samples, rate %.0f/s)\n", latP50, latP99, len(lat), *rate)
	fmt.Printf("  orchestration ack calls: p50 %v, p99 %v (WaitReplicas %d); partbench itself used %.0f%% of a core\n", ackP50, ackP99, *waitReplicas, appPct)
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"workload": *workload, "partitions": *parts, "n": *n, "named_children": *named,
		"commands_per_orch": float64(calls) / float64(*n), "usec_per_orch": float64(usec) / float64(*n),
		"max_min_commands": float64(maxC) / float64(minC), "max_min_usec": float64(maxU) / float64(minU), "ops": ops, "seconds": elapsed.Seconds(),
		"orch_per_s": float64(*n) / elapsed.Seconds(), "app_cpu_pct": appPct, "node_cpu_pct": cpus, "wait_replicas": *waitReplicas,
		"rate": *rate, "latency_p50_ms": latP50.Seconds() * 1000, "latency_p99_ms": latP99.Seconds() * 1000,
		"ack_p50_ms": ackP50.Seconds() * 1000, "ack_p99_ms": ackP99.Seconds() * 1000})
}

// appCPU is the CPU time this process used so far (user and system).
func appCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func maps(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
