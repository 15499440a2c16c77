// Command dxbench is dxredis's load generator. By default (-mode runtime) it runs the workloads'
// orchestrations on the real dx runtime (dx.NewRuntime, started through dx.NewClient); -mode
// provider plays duroxide's runtime dispatchers directly over the provider.Provider interface
// (orchestration dispatchers that fetch, replay, decide and ack turns; worker dispatchers that run
// activities), and -mode both runs each workload both ways, side by side. It reports throughput,
// latency and what each orchestration costs Redis and the client.
//
// Workloads (-workload): hello (W1: one activity per orchestration), fanout (W2: 10 parallel
// activities), timer (W3: one 100 ms durable timer, with 1,000 other timers pending), longhistory
// (W4: 500 sequential activities, turn latency by history size), wake (enqueue -> fetch-return
// latency of one long-polling fetcher), idle (what an idle fetcher costs), all.
//
// The report ends with one JSON line (see bench/README.md). The run's namespace (-ns, default
// dxbench-<random>) must be empty at the start and is deleted at the end; -keep keeps it for
// inspection (dxctl).
//
// Without -addr, dxbench uses 127.0.0.1:6379 and, when nothing answers there, an embedded
// miniredis; numbers from miniredis mean nothing.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// defaultAddr is where dxbench looks for Redis without -addr (a variable so tests can point it
// at nothing).
var defaultAddr = "127.0.0.1:6379"

type config struct {
	addr              string
	addrSet           bool
	miniredis         bool
	workload          string
	mode              string
	n                 int
	nSet              bool
	orchConcurrency   int
	workerConcurrency int
	payloadBytes      int
	ns                string
	keep              bool
	noKeyBytes        bool
	noExt             bool
	ackBatch          int
	batchAcks         bool
	noBatchFetch      bool
	rate              float64
	inflight          int
	orchPollers       int
	workerPollers     int
	timerDelay        time.Duration
	timerRate         float64
	timerBackground   int
	fanoutWidth       int
	namedChildren     bool
	partitions        int
	lhSteps           int
	idle              time.Duration
	baselineDur       time.Duration
	activityDelay     time.Duration
	timeout           time.Duration
	stall             time.Duration
	cpuprofile        string
}

// Result is one workload's report; it is printed as the last line, as JSON. Fields that could not
// be measured (e.g. memory on miniredis) are null.
type Result struct {
	Workload                  string   `json:"workload"`
	Mode                      string   `json:"mode"`
	N                         int      `json:"n"`
	Seconds                   *float64 `json:"seconds"`
	OrchPerSec                *float64 `json:"orch_per_sec"`
	ActivitiesPerSec          *float64 `json:"activities_per_sec"`
	P50Ms                     *float64 `json:"p50_ms"`
	P99Ms                     *float64 `json:"p99_ms"`
	RedisCmdsPerOrch          *float64 `json:"redis_cmds_per_orch"`
	RoundTripsPerOrch         *float64 `json:"round_trips_per_orch"`
	RedisBytesPerOrch         *float64 `json:"redis_bytes_per_orch"`
	RedisCPUUsecPerOrch       *float64 `json:"redis_cpu_usec_per_orch"`
	ClientCPUUsecPerOrch      *float64 `json:"client_cpu_usec_per_orch"`
	BaselineScriptCallsPerSec *float64 `json:"baseline_script_calls_per_sec"`

	Backend                string   `json:"backend"`
	Error                  string   `json:"error,omitempty"`
	Completed              int      `json:"completed"`
	Turns                  int64    `json:"turns"`
	Activities             int64    `json:"activities"`
	TurnsPerSec            *float64 `json:"turns_per_sec,omitempty"`
	Rate                   float64  `json:"rate,omitempty"`
	Inflight               int      `json:"inflight,omitempty"`
	RedisRoundTripsPerOrch *float64 `json:"redis_round_trips_per_orch,omitempty"`
	// RedisKeptBytesPerOrch is MEMORY USAGE of the namespace's keys after - before / N, counting
	// only keys without a TTL or with one over a minute (what a completed instance keeps);
	// RedisExpiringBytesPerOrch is the rest (attempt-id keys, wake lists: gone within seconds).
	RedisKeptBytesPerOrch     *float64 `json:"redis_kept_bytes_per_orch,omitempty"`
	RedisExpiringBytesPerOrch *float64 `json:"redis_expiring_bytes_per_orch,omitempty"`
	RedisUsecPerOrch          *float64 `json:"redis_script_usec_per_orch,omitempty"`
	RedisCPUCores             *float64 `json:"redis_cpu_cores,omitempty"`
	ClientCPUCores            *float64 `json:"client_cpu_cores,omitempty"`
	Errors                    int      `json:"errors"`
	ErrorDetail               string   `json:"error_detail,omitempty"`

	LatenessP50Ms    *float64 `json:"lateness_p50_ms,omitempty"`
	LatenessP99Ms    *float64 `json:"lateness_p99_ms,omitempty"`
	LatenessMaxMs    *float64 `json:"lateness_max_ms,omitempty"`
	TimersPendingAvg *float64 `json:"timers_pending_avg,omitempty"`
	TimersPendingMax int64    `json:"timers_pending_max,omitempty"`
	TimerBackground  int      `json:"timer_background,omitempty"`

	WakeP50Ms   *float64 `json:"wake_p50_ms,omitempty"`
	WakeP99Ms   *float64 `json:"wake_p99_ms,omitempty"`
	WakeSamples int      `json:"wake_samples,omitempty"`

	IdleSeconds                 *float64 `json:"idle_seconds,omitempty"`
	IdleCmdsPerPoll             *float64 `json:"idle_cmds_per_poll,omitempty"`
	IdleRoundTripsPerPoll       *float64 `json:"idle_round_trips_per_poll,omitempty"`
	IdleWorkerCmdsPerPoll       *float64 `json:"idle_worker_cmds_per_poll,omitempty"`
	IdleWorkerRoundTripsPerPoll *float64 `json:"idle_worker_round_trips_per_poll,omitempty"`
	IdleWorkerNote              string   `json:"idle_worker_note,omitempty"`

	TurnLatency []TurnBucket `json:"turn_latency,omitempty"`
	TurnGrowth  *float64     `json:"turn_growth_500_vs_first,omitempty"`

	Results []*Result `json:"results,omitempty"`
	// ProviderOnly is, with -mode both, the same workload's -mode provider report.
	ProviderOnly *Result `json:"provider_only,omitempty"`

	diff       statsDiff
	enqueueDur time.Duration
	idleOrch   *statsDiff
	idleWorker *statsDiff
}

// TurnBucket is W4's turn latency (fetch call start -> ack return) for one history size.
type TurnBucket struct {
	HistoryEvents int      `json:"history_events"`
	Turns         int      `json:"turns"`
	P50Ms         *float64 `json:"p50_ms"`
	P99Ms         *float64 `json:"p99_ms"`
	FetchP50Ms    *float64 `json:"fetch_p50_ms"`
	AckP50Ms      *float64 `json:"ack_p50_ms"`
}

type bench struct {
	cfg      *config
	p        *redisprovider.Provider
	admin    *redis.Client
	hook     *countingHook
	logger   *slog.Logger // the dx runtime's
	backend  string
	mini     bool // miniredis (embedded or not): numbers mean nothing, no targets
	embedded bool // dxbench's own miniredis, gone when it exits
	baseline float64
	stdout   io.Writer
	stderr   io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// command is the process without exiting: it silences go-redis's own logging (a line per failed
// dial; dxbench reports the outcome itself), runs dxbench and returns the exit status (0 for -h).
func command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	redis.SetLogger(silentLogger{})
	err := run(ctx, args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(flagError)):
		return 1 // the flag package has printed it, with the usage
	}
	fmt.Fprintln(stderr, "dxbench:", err)
	return 1
}

type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

// flagError is a command-line error the flag package has already reported.
type flagError struct{ error }

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("dxbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "dxbench runs orchestrations on the dx runtime (or plays duroxide's dispatchers, -mode provider)\n"+
			"against Redis and reports throughput, latency and what each orchestration costs Redis and the client.\n"+
			"Usage: dxbench [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.addr, "addr", defaultAddr, "Redis address; without it, an embedded miniredis is used when nothing answers at the default")
	fs.BoolVar(&cfg.miniredis, "miniredis", false, "run on an embedded miniredis (numbers mean nothing; for smoke tests)")
	fs.StringVar(&cfg.workload, "workload", "hello", "hello | fanout | children | timer | longhistory | wake | idle | all")
	fs.StringVar(&cfg.mode, "mode", modeRuntime, "runtime (the dx runtime runs real orchestrations) | provider (dispatchers played over the provider) | both (each workload both ways, side by side); wake and idle always measure the provider")
	fs.IntVar(&cfg.n, "n", 2000, "orchestrations per workload (without -n: longhistory 20, wake 500)")
	fs.IntVar(&cfg.orchConcurrency, "orch-concurrency", 4, "orchestration dispatcher goroutines")
	fs.IntVar(&cfg.workerConcurrency, "worker-concurrency", 4, "worker dispatcher goroutines (-mode runtime: activities run at once)")
	fs.IntVar(&cfg.orchPollers, "orch-pollers", 0, "-mode runtime: dx.Options.OrchestrationPollers (0: its default, the concurrency, at most 4)")
	fs.IntVar(&cfg.workerPollers, "worker-pollers", 0, "-mode runtime: dx.Options.WorkerPollers (0: its default, the concurrency, at most 4)")
	fs.IntVar(&cfg.payloadBytes, "payload-bytes", 100, "size of each activity result (a JSON string)")
	fs.StringVar(&cfg.ns, "ns", "", "namespace, empty at the start (default dxbench-<random>); deleted at the end unless -keep")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the namespace's keys at the end (inspect them with dxctl)")
	fs.BoolVar(&cfg.noKeyBytes, "no-keybytes", false, "skip the kept-bytes measurement (SCAN, MEMORY USAGE and PTTL of every key before and after a workload): bench/callgrind.sh counts only the system's own Redis work")
	fs.BoolVar(&cfg.batchAcks, "batch-acks", false, "-mode runtime: the same as -ack-batch 32 (kept for older scripts)")
	fs.IntVar(&cfg.ackBatch, "ack-batch", 0, "-mode runtime: dx.Options.ActivityAckBatch, the most activity acks in one call (those that wait for the one in flight go together, with fetches); 1 each alone, 0 dx's default (32 from 32 worker slots, else 1)")
	fs.BoolVar(&cfg.noBatchFetch, "no-batch-fetch", false, "-mode runtime: hide provider.WorkBatchFetcher, so that the worker's pollers fetch one activity per call")
	fs.BoolVar(&cfg.noExt, "noext", false, "-mode provider: the played dispatchers ack and fetch in separate calls, without the provider's ack-and-fetch-next extensions")
	fs.Float64Var(&cfg.rate, "rate", 0, "orchestrations started per second; 0 = all enqueued upfront, as fast as possible")
	fs.IntVar(&cfg.inflight, "inflight", 0, "at most this many orchestrations started and not completed: each completion starts the next (0 = no limit; not with -rate)")
	fs.DurationVar(&cfg.timerDelay, "timer-delay", 100*time.Millisecond, "W3: durable timer of each orchestration")
	fs.Float64Var(&cfg.timerRate, "timer-rate", 1000, "W3: orchestrations started per second (0 = all upfront)")
	fs.IntVar(&cfg.timerBackground, "timer-background", 1000, "W3: background instances each holding a pending 1 h timer")
	fs.IntVar(&cfg.fanoutWidth, "fanout-width", 10, "W2: parallel activities per orchestration; children: sub-orchestrations per orchestration")
	fs.BoolVar(&cfg.namedChildren, "named-children", false, "children: name each sub-orchestration explicitly (placed by its own id) instead of <parent>::sub::<n> (in its root's partition)")
	fs.IntVar(&cfg.partitions, "partitions", 1, "partitions of the namespace (1-256): instances spread over that many slots")
	fs.IntVar(&cfg.lhSteps, "lh-activities", 500, "W4: sequential activities per orchestration")
	fs.DurationVar(&cfg.idle, "idle", 10*time.Second, "idle: how long the idle fetcher is observed")
	fs.DurationVar(&cfg.baselineDur, "baseline", 2*time.Second, "duration of the EVALSHA 'return 1' baseline (0 = skip)")
	fs.DurationVar(&cfg.activityDelay, "activity-delay", 0, "time each activity takes")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up on a workload after this long")
	fs.DurationVar(&cfg.stall, "stall", 30*time.Second, "give up on a workload after this long without a completion")
	fs.StringVar(&cfg.cpuprofile, "cpuprofile", "", "write a CPU profile of dxbench to this file")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, flagError{err}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr":
			cfg.addrSet = true
		case "n":
			cfg.nSet = true
		}
	})
	if cfg.ns == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.ns = "dxbench-" + hex.EncodeToString(b[:])
	}
	if cfg.batchAcks && cfg.ackBatch == 0 {
		cfg.ackBatch = 32
	}
	switch {
	case cfg.n < 1, cfg.orchConcurrency < 1, cfg.workerConcurrency < 1, cfg.payloadBytes < 0,
		cfg.fanoutWidth < 1, cfg.lhSteps < 1, cfg.rate < 0, cfg.timerRate < 0, cfg.timerBackground < 0, cfg.inflight < 0:
		return nil, errors.New("-n, -orch-concurrency, -worker-concurrency, -fanout-width and -lh-activities must be positive; sizes and rates not negative")
	}
	if cfg.inflight > 0 && cfg.rate > 0 {
		return nil, errors.New("-inflight and -rate: one or the other")
	}
	if cfg.mode != modeRuntime && cfg.mode != modeProvider && cfg.mode != modeBoth {
		return nil, fmt.Errorf("unknown -mode %q (runtime, provider, both)", cfg.mode)
	}
	if _, ok := workloads[cfg.workload]; !ok && cfg.workload != "all" {
		return nil, fmt.Errorf("unknown -workload %q (hello, fanout, children, timer, longhistory, wake, idle, all)", cfg.workload)
	}
	return cfg, nil
}

type workloadDef struct {
	defaultN     int  // used when -n is not given; 0 = -n's default
	providerOnly bool // measures the provider's fetch path: the same in every mode
	runtimeOnly  bool // runs on the dx runtime only (-mode provider plays no such orchestration)
	run          func(b *bench, ctx context.Context, mode string, n int) (*Result, error)
}

var workloads = map[string]workloadDef{
	"hello":       {run: (*bench).runHello},
	"fanout":      {run: (*bench).runFanout},
	"children":    {runtimeOnly: true, run: (*bench).runChildren},
	"timer":       {run: (*bench).runTimer},
	"longhistory": {defaultN: 20, run: (*bench).runLongHistory},
	"wake":        {defaultN: 500, providerOnly: true, run: (*bench).runWake},
	"idle":        {providerOnly: true, run: (*bench).runIdle},
}

// allOrder is the order of -workload all: idle first (nothing else in the namespace yet), timer
// last (its background instances stay Running).
var allOrder = []string{"idle", "wake", "hello", "fanout", "longhistory", "timer"}

// run is main without the process: flags, connection, workloads, report.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if cfg.cpuprofile != "" {
		f, err := os.Create(cfg.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	b := &bench{cfg: cfg, stdout: stdout, stderr: stderr, hook: &countingHook{}}
	if cfg.miniredis || (!cfg.addrSet && !reachable(cfg.addr)) {
		mr, err := miniredis.Run()
		if err != nil {
			return fmt.Errorf("embedded miniredis: %w", err)
		}
		defer mr.Close()
		if !cfg.miniredis {
			fmt.Fprintf(stderr, "dxbench: WARNING: nothing answers at %s; running on an embedded miniredis.\n", cfg.addr)
		}
		cfg.addr = mr.Addr()
		b.mini, b.embedded = true, true
	}
	b.admin = redis.NewClient(&redis.Options{Addr: cfg.addr, PoolSize: max(20, cfg.orchConcurrency+cfg.workerConcurrency+4)})
	defer b.admin.Close()
	// A server without INFO server is (in practice) miniredis: same warning, no targets.
	if v := redisVersion(ctx, b.admin); v != "" && !b.mini {
		b.backend = "redis " + v
	} else {
		b.backend, b.mini = "miniredis", true
	}
	level := slog.LevelWarn
	if b.mini {
		level = slog.LevelError // miniredis has no CONFIG GET maxmemory-policy; that warning is noise here
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	b.logger = logger
	b.p, err = redisprovider.New(ctx, redisprovider.Options{Addr: cfg.addr, Namespace: cfg.ns, Logger: logger, Partitions: cfg.partitions})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.addr, err)
	}
	defer b.p.Close()
	b.p.Client().AddHook(b.hook)
	// Old data (an earlier -keep run, or someone else's namespace) would stall the workloads
	// until -stall: refuse it at once. The first write creates the partition's format record.
	// (A namespace of several partitions gets its records from New: data means a sequence.)
	used := false
	for part := range b.p.Keyspace().Partitions() {
		n, err := b.admin.HExists(ctx, b.p.Keyspace().Meta(part), "seq").Result()
		if err != nil {
			return fmt.Errorf("checking namespace %q: %w", cfg.ns, err)
		}
		used = used || n
	}
	if used {
		return fmt.Errorf("namespace %q already holds data (an earlier run with -keep?): dxbench needs an empty one: "+
			"delete it with `%s` or choose another with -ns", cfg.ns, dropCommand(cfg))
	}
	cleanup := func() {} // deletes the namespace (once) unless -keep; deferred for early returns
	if !cfg.keep {
		done := false
		cleanup = func() {
			if !done {
				done = true
				b.dropNamespace(ctx)
			}
		}
		defer cleanup()
	}

	fmt.Fprintf(stdout, "dxbench: %s at %s, namespace %s, GOMAXPROCS %d, %d orchestration + %d worker dispatchers, %s\n",
		b.backend, cfg.addr, cfg.ns, runtime.GOMAXPROCS(0), cfg.orchConcurrency, cfg.workerConcurrency, modeWords[cfg.mode])
	if b.mini {
		fmt.Fprintln(stdout, "dxbench: WARNING: miniredis — these numbers mean nothing about Redis; use a real server (-addr).")
	}
	conc := cfg.orchConcurrency + cfg.workerConcurrency
	if b.baseline, err = baseline(ctx, b.admin, conc, cfg.baselineDur); err != nil {
		return err
	}
	if cfg.baselineDur > 0 {
		fmt.Fprintf(stdout, "baseline: EVALSHA 'return 1' x %d goroutines for %v: %.0f calls/s\n", conc, cfg.baselineDur, b.baseline)
	}

	names := []string{cfg.workload}
	if cfg.workload == "all" {
		names = allOrder
	}
	var results []*Result
	var failed []string
	for _, name := range names {
		def := workloads[name]
		n := cfg.n
		if !cfg.nSet && def.defaultN > 0 {
			n = def.defaultN
		}
		modes := []string{cfg.mode}
		switch {
		case def.providerOnly:
			modes = []string{modeProvider}
		case def.runtimeOnly:
			modes = []string{modeRuntime}
		case cfg.mode == modeBoth:
			modes = []string{modeProvider, modeRuntime}
		}
		var res, prev *Result
		for _, mode := range modes {
			r, werr := def.run(b, ctx, mode, n)
			if werr != nil {
				r = &Result{Workload: name, Mode: mode, N: n, Backend: b.backend, Error: werr.Error(), BaselineScriptCallsPerSec: num(b.baseline)}
				failed = append(failed, name+" ("+mode+")")
				fmt.Fprintf(stdout, "\n== %s (%s): FAILED: %v\n", name, mode, werr)
			} else {
				r.ProviderOnly = prev
				b.printSummary(r)
			}
			res, prev = r, r
			if ctx.Err() != nil {
				break
			}
		}
		results = append(results, res)
		if ctx.Err() != nil {
			break
		}
	}

	cleanup()
	if cfg.keep && !b.embedded {
		fmt.Fprintf(stdout, "\nnamespace %s kept (keys under %s); delete it with: %s\n", cfg.ns, b.p.Keyspace().Prefix(0), dropCommand(cfg))
	}

	final := results[0]
	if len(results) > 1 || cfg.workload == "all" {
		final = combine(results, b)
	}
	line, jerr := json.Marshal(final)
	if jerr != nil {
		return jerr
	}
	fmt.Fprintln(stdout, string(line))
	if len(failed) > 0 {
		return fmt.Errorf("workloads failed: %s", strings.Join(failed, ", "))
	}
	return nil
}

// dropNamespace deletes the run's namespace and says so.
func (b *bench) dropNamespace(ctx context.Context) {
	// Close first: a fetcher's last wait may otherwise hand its wake token back after the SCAN.
	_ = b.p.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	n, err := redisprovider.DropNamespace(ctx, b.admin, b.cfg.ns)
	if err != nil {
		fmt.Fprintf(b.stdout, "\nnamespace %s: deleted %d keys, then: %v; delete the rest with: %s\n", b.cfg.ns, n, err, dropCommand(b.cfg))
		return
	}
	fmt.Fprintf(b.stdout, "\nnamespace %s deleted (%d keys; run with -keep to keep them)\n", b.cfg.ns, n)
}

// dropCommand is the dxctl command line that deletes the run's namespace.
func dropCommand(cfg *config) string {
	return fmt.Sprintf("dxctl --addr %s --ns %s drop", cfg.addr, cfg.ns)
}

// combine builds -workload all's last line: the headline fields are W1's (hello), every
// workload's own report is in results.
func combine(results []*Result, b *bench) *Result {
	out := &Result{Workload: "all", Mode: b.cfg.mode, Backend: b.backend, BaselineScriptCallsPerSec: num(b.baseline), Results: results}
	for _, r := range results {
		out.N += r.N
		out.Completed += r.Completed
		out.Turns += r.Turns
		out.Activities += r.Activities
		out.Errors += r.Errors
		if r.Error != "" {
			out.Error = strings.TrimPrefix(out.Error+"; "+r.Workload+": "+r.Error, "; ")
		}
		if r.Workload == "hello" && r.Error == "" {
			out.Seconds, out.OrchPerSec, out.ActivitiesPerSec = r.Seconds, r.OrchPerSec, r.ActivitiesPerSec
			out.P50Ms, out.P99Ms = r.P50Ms, r.P99Ms
			out.RedisCmdsPerOrch, out.RedisBytesPerOrch, out.RoundTripsPerOrch = r.RedisCmdsPerOrch, r.RedisBytesPerOrch, r.RoundTripsPerOrch
			out.RedisCPUUsecPerOrch, out.ClientCPUUsecPerOrch = r.RedisCPUUsecPerOrch, r.ClientCPUUsecPerOrch
			out.ProviderOnly = r.ProviderOnly
		}
	}
	return out
}

// printSummary writes a readable block for one workload.
func (b *bench) printSummary(r *Result) {
	w := b.stdout
	fmt.Fprintf(w, "\n== %s", r.Workload)
	if r.Workload != "idle" {
		fmt.Fprintf(w, ": %d/%d orchestrations completed", r.Completed, r.N)
	}
	fmt.Fprintf(w, " (%s; %s)\n", r.Backend, modeWords[r.Mode])
	line := func(label, format string, args ...any) {
		fmt.Fprintf(w, "  %-17s "+format+"\n", append([]any{label}, args...)...)
	}
	targets := []string{}
	target := func(ok bool, what string) {
		if b.mini {
			return
		}
		mark := "MISS"
		if ok {
			mark = "ok"
		}
		targets = append(targets, fmt.Sprintf("%s [%s]", what, mark))
	}
	val := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p
	}
	switch r.Workload {
	case "idle":
		line("orch fetcher", "%s commands, %s round trips per 2 s poll (over %s s; script-internal calls counted as commands)",
			fmtNum(r.IdleCmdsPerPoll), fmtNum(r.IdleRoundTripsPerPoll), fmtNum(r.IdleSeconds))
		if r.idleOrch != nil {
			line("  commands", "%s", r.idleOrch.topCommands(8))
		}
		if r.IdleWorkerNote != "" {
			line("worker fetcher", "%s", r.IdleWorkerNote)
		} else {
			line("worker fetcher", "%s commands, %s round trips per 2 s poll", fmtNum(r.IdleWorkerCmdsPerPoll), fmtNum(r.IdleWorkerRoundTripsPerPoll))
			if r.idleWorker != nil {
				line("  commands", "%s", r.idleWorker.topCommands(8))
			}
		}
		if r.IdleRoundTripsPerPoll != nil {
			target(val(r.IdleRoundTripsPerPoll) <= 1, "idle orch fetcher <= 1 command per poll (round trips)")
		}
	default:
		if r.enqueueDur > 0 {
			line("starts", "all %d enqueued upfront in %.3f s (%.0f/s), then dispatched", r.N, r.enqueueDur.Seconds(), float64(r.N)/r.enqueueDur.Seconds())
		} else if r.Rate > 0 {
			line("starts", "paced at %.0f/s", r.Rate)
		} else if r.Inflight > 0 {
			line("starts", "at most %d in flight: each completion starts the next", r.Inflight)
		}
		line("throughput", "%s orch/s, %s activities/s, %s turns/s over %s s",
			fmtNum(r.OrchPerSec), fmtNum(r.ActivitiesPerSec), fmtNum(r.TurnsPerSec), fmtNum(r.Seconds))
		if r.Workload == "wake" {
			line("wake latency", "enqueue -> fetch return p50 %s, p99 %s (%d samples)", fmtMs(r.WakeP50Ms), fmtMs(r.WakeP99Ms), r.WakeSamples)
			target(val(r.WakeP50Ms) < 1, "wake p50 < 1 ms")
			target(val(r.WakeP99Ms) < 5, "wake p99 < 5 ms")
		} else {
			line("start->complete", "p50 %s, p99 %s", fmtMs(r.P50Ms), fmtMs(r.P99Ms))
			if r.enqueueDur > 0 {
				line("", "from enqueue to completion, queueing included: -rate 0 enqueues every start upfront,")
				line("", "so this is mostly time waiting in line; -rate N measures latency at a set load")
			} else if r.Inflight > 0 {
				line("", "from start to completion, at most %d in flight", r.Inflight)
			} else {
				line("", "from enqueue to completion, queueing included (starts paced at %.0f/s)", r.Rate)
			}
		}
		if r.Workload == "timer" {
			line("timer lateness", "fetched after fire_at: p50 %s, p99 %s, max %s; pending timers avg %s, max %d (%d background 1 h timers)",
				fmtMs(r.LatenessP50Ms), fmtMs(r.LatenessP99Ms), fmtMs(r.LatenessMaxMs), fmtNum(r.TimersPendingAvg), r.TimersPendingMax, r.TimerBackground)
			target(r.LatenessP99Ms != nil && *r.LatenessP99Ms < 10, "timer lateness p99 < 10 ms")
		}
		for _, tb := range r.TurnLatency {
			label := fmt.Sprintf("turn @%d events", tb.HistoryEvents)
			if tb.HistoryEvents == 0 {
				label = "turn @first"
			}
			line(label, "p50 %s, p99 %s (fetch p50 %s, ack p50 %s; %d turns)", fmtMs(tb.P50Ms), fmtMs(tb.P99Ms), fmtMs(tb.FetchP50Ms), fmtMs(tb.AckP50Ms), tb.Turns)
		}
		if r.TurnGrowth != nil {
			target(*r.TurnGrowth <= 3, fmt.Sprintf("turn latency @500 events within 3x of first (%.2fx)", *r.TurnGrowth))
		}
		line("per orch", "%s round trips (dispatchers' provider calls; %s Redis round trips, starts included)",
			fmtNum(r.RoundTripsPerOrch), fmtNum(r.RedisRoundTripsPerOrch))
		line("redis per orch", "%s commands (script-internal included), %s bytes, %s us in scripts",
			fmtNum(r.RedisCmdsPerOrch), fmtNum(r.RedisBytesPerOrch), fmtNum(r.RedisUsecPerOrch))
		if r.RedisKeptBytesPerOrch != nil {
			line("keys per orch", "%s bytes kept (MEMORY USAGE of keys with no TTL or one over 60 s), %s bytes expiring within 60 s",
				fmtNum(r.RedisKeptBytesPerOrch), fmtNum(r.RedisExpiringBytesPerOrch))
		}
		line("cpu", "redis %s cores (%s us per orch), dxbench %s cores (%s us per orch)", fmtNum2(r.RedisCPUCores),
			fmtNum(r.RedisCPUUsecPerOrch), fmtNum2(r.ClientCPUCores), fmtNum(r.ClientCPUUsecPerOrch))
		if p := r.ProviderOnly; p != nil {
			line("runtime/provider", "orch/s %s, activities/s %s, round trips %s, client cpu us %s, redis cpu us %s (ratios, this run)",
				ratio(r.OrchPerSec, p.OrchPerSec), ratio(r.ActivitiesPerSec, p.ActivitiesPerSec), ratio(r.RoundTripsPerOrch, p.RoundTripsPerOrch),
				ratio(r.ClientCPUUsecPerOrch, p.ClientCPUUsecPerOrch), ratio(r.RedisCPUUsecPerOrch, p.RedisCPUUsecPerOrch))
		}
		line("commands", "%s", r.diff.topCommands(8))
		switch r.Workload {
		case "hello":
			if r.Rate == 0 {
				target(val(r.OrchPerSec) >= 5000, "W1 >= 5000 orch/s")
			} else {
				target(val(r.P50Ms) < 2, fmt.Sprintf("W1 p50 start->complete < 2 ms at %.0f/s", r.Rate))
			}
			if r.RoundTripsPerOrch != nil {
				target(*r.RoundTripsPerOrch <= 5, "W1 <= 5 round trips per orchestration")
			}
		case "fanout":
			target(val(r.ActivitiesPerSec) >= 10000, "W2 >= 10000 activities/s")
		}
	}
	if r.Errors > 0 {
		line("errors", "%d: %s", r.Errors, r.ErrorDetail)
	}
	if len(targets) > 0 {
		line("targets", "%s", strings.Join(targets, "; "))
	}
}

func fmtNum2(p *float64) string {
	if p == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", *p)
}

// modeWords say in the report what drove a workload.
var modeWords = map[string]string{
	modeRuntime:  "dx runtime",
	modeProvider: "provider only, dispatchers played by dxbench",
	modeBoth:     "provider only, then dx runtime",
}

// ratio renders a/b ("n/a" when either is missing or b is 0).
func ratio(a, b *float64) string {
	if a == nil || b == nil || *b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", *a / *b)
}
