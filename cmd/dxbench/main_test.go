package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

// tiny makes every workload finish in about a second on miniredis.
var tiny = []string{"-n", "4", "-lh-activities", "5", "-fanout-width", "3", "-timer-background", "5",
	"-timer-delay", "20ms", "-idle", "300ms", "-baseline", "100ms", "-stall", "20s", "-timeout", "1m"}

// requiredKeys are the fields every last line carries (spec of the JSON report).
var requiredKeys = []string{"workload", "mode", "n", "seconds", "orch_per_sec", "activities_per_sec", "p50_ms", "p99_ms",
	"redis_cmds_per_orch", "round_trips_per_orch", "redis_bytes_per_orch", "redis_cpu_usec_per_orch",
	"client_cpu_usec_per_orch", "baseline_script_calls_per_sec"}

// runBench runs dxbench and returns its stdout, stderr and decoded last line.
func runBench(t *testing.T, args ...string) (string, string, Result) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, args, &out, &errOut); err != nil {
		t.Fatalf("dxbench %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(last), &keys); err != nil {
		t.Fatalf("last line is not a JSON object: %v\n%s", err, last)
	}
	for _, k := range requiredKeys {
		if _, ok := keys[k]; !ok {
			t.Errorf("last line has no %q: %s", k, last)
		}
	}
	var res Result
	if err := json.Unmarshal([]byte(last), &res); err != nil {
		t.Fatalf("decoding last line: %v", err)
	}
	return out.String(), errOut.String(), res
}

func checkCompleted(t *testing.T, r Result) {
	t.Helper()
	if r.Error != "" || r.Errors != 0 {
		t.Errorf("%s: error %q, %d dispatcher errors (%s)", r.Workload, r.Error, r.Errors, r.ErrorDetail)
	}
	if r.Workload == "idle" {
		if r.IdleCmdsPerPoll == nil {
			t.Errorf("idle: no idle_cmds_per_poll")
		}
		return
	}
	if r.Completed != r.N || r.N == 0 {
		t.Errorf("%s: %d/%d orchestrations completed", r.Workload, r.Completed, r.N)
	}
	if r.OrchPerSec == nil || *r.OrchPerSec <= 0 || r.P50Ms == nil {
		t.Errorf("%s: missing throughput or latency: %+v", r.Workload, r)
	}
}

func TestWorkloadsOnMiniredis(t *testing.T) {
	for _, mode := range []string{"provider", "runtime"} {
		for _, wl := range []string{"hello", "fanout", "timer", "longhistory", "wake", "idle"} {
			t.Run(mode+"/"+wl, func(t *testing.T) {
				t.Parallel()
				mr := miniredis.RunT(t)
				_, _, res := runBench(t, append([]string{"-addr", mr.Addr(), "-workload", wl, "-mode", mode}, tiny...)...)
				if res.Workload != wl || res.Backend != "miniredis" {
					t.Errorf("workload %q backend %q", res.Workload, res.Backend)
				}
				checkWorkload(t, wl, mode, res)
			})
		}
	}
}

// checkWorkload checks one workload's report: everything completed, the counts its
// orchestrations imply, and fields that are sane (never a timing threshold).
func checkWorkload(t *testing.T, wl, mode string, res Result) {
	t.Helper()
	checkCompleted(t, res)
	// wake and idle measure the provider's fetch path: the same in both modes.
	wantMode := mode
	if wl == "wake" || wl == "idle" {
		wantMode = "provider"
	}
	if res.Mode != wantMode {
		t.Errorf("%s: mode %q, want %q", wl, res.Mode, wantMode)
	}
	if wl != "idle" && wl != "wake" {
		checkCosts(t, res)
	}
	switch wl {
	case "hello":
		if res.Activities != int64(res.N) {
			t.Errorf("hello ran %d activities, want %d", res.Activities, res.N)
		}
	case "fanout":
		if res.Activities != 4*3 {
			t.Errorf("fanout ran %d activities, want 12", res.Activities)
		}
	case "longhistory":
		if res.Activities != 4*5 || len(res.TurnLatency) == 0 || res.TurnLatency[0].HistoryEvents != 0 {
			t.Errorf("longhistory: %d activities, buckets %+v", res.Activities, res.TurnLatency)
		}
	case "timer":
		if res.LatenessP50Ms == nil || *res.LatenessP50Ms < -1 {
			t.Errorf("timer lateness %v", res.LatenessP50Ms)
		}
	case "wake":
		if res.WakeSamples != 8 {
			t.Errorf("wake: %d samples, want 8", res.WakeSamples)
		}
	}
}

// checkCosts checks the per-orchestration cost fields of an orchestration workload.
func checkCosts(t *testing.T, res Result) {
	t.Helper()
	positive := map[string]*float64{"round_trips_per_orch": res.RoundTripsPerOrch, "redis_cmds_per_orch": res.RedisCmdsPerOrch,
		"client_cpu_usec_per_orch": res.ClientCPUUsecPerOrch, "activities_per_sec": res.ActivitiesPerSec}
	if res.Workload == "timer" {
		delete(positive, "activities_per_sec") // W3 runs no activity
	}
	for k, v := range positive {
		if v == nil || *v <= 0 {
			t.Errorf("%s/%s: %s = %v, want a positive number", res.Mode, res.Workload, k, fmtNum(v))
		}
	}
	// A turn needs a fetch and an ack: at least two dispatcher calls per orchestration, and a
	// hello needs no more than a few dozen (empty polls included).
	if rt := res.RoundTripsPerOrch; rt != nil && (*rt < 2 || (res.Workload == "hello" && *rt > 50)) {
		t.Errorf("%s/%s: %v round trips per orchestration", res.Mode, res.Workload, *rt)
	}
	if res.Backend == "miniredis" && (res.RedisCPUUsecPerOrch != nil || res.RedisBytesPerOrch != nil) {
		t.Errorf("%s/%s: miniredis reports no CPU or memory, got %v, %v", res.Mode, res.Workload, fmtNum(res.RedisCPUUsecPerOrch), fmtNum(res.RedisBytesPerOrch))
	}
}

// With no -addr and nothing at the default address, dxbench falls back to miniredis and says so;
// -workload all reports every workload; the namespace is deleted at the end.
func TestAllWithFallbackAndCleanup(t *testing.T) {
	saved := defaultAddr
	defaultAddr = "127.0.0.1:1" // nothing listens on port 1
	t.Cleanup(func() { defaultAddr = saved })
	out, errOut, res := runBench(t, append([]string{"-workload", "all", "-n", "3"}, tiny[2:]...)...)
	if !strings.Contains(errOut, "WARNING") || !strings.Contains(out, "numbers mean nothing") {
		t.Errorf("no miniredis warning\nstdout:\n%s\nstderr:\n%s", out, errOut)
	}
	if !regexp.MustCompile(`namespace dxbench-\w+ deleted \(\d+ keys`).MatchString(out) {
		t.Errorf("no cleanup report:\n%s", out)
	}
	if res.Workload != "all" || len(res.Results) != len(allOrder) {
		t.Fatalf("all: workload %q with %d results", res.Workload, len(res.Results))
	}
	for _, r := range res.Results {
		checkCompleted(t, *r)
	}
}

// By default the run's namespace is deleted at the end, and nothing else.
func TestDeletesOnlyItsNamespace(t *testing.T) {
	mr := miniredis.RunT(t)
	_ = mr.Set("other-key", "stays")
	_ = mr.Set("{dxbench-x:0}-not-ours", "stays")
	out, _, _ := runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "hello", "-ns", "dxbench-x"}, tiny...)...)
	keys := mr.Keys()
	if len(keys) != 2 {
		t.Errorf("keys after the run: %v", keys)
	}
	if !regexp.MustCompile(`namespace dxbench-x deleted \(\d+ keys`).MatchString(out) {
		t.Errorf("no deletion report:\n%s", out)
	}
}

// -keep keeps the namespace and says how to delete it; a second run on it refuses at once
// (instead of stalling on the old data) and says how to clear it.
func TestKeepThenRefuseOldData(t *testing.T) {
	mr := miniredis.RunT(t)
	args := append([]string{"-addr", mr.Addr(), "-workload", "hello", "-ns", "dxbench-k", "-keep"}, tiny...)
	out, _, _ := runBench(t, args...)
	drop := "dxctl --addr " + mr.Addr() + " --ns dxbench-k drop"
	if len(mr.Keys()) == 0 || !strings.Contains(out, drop) {
		t.Fatalf("-keep: %d keys; output lacks %q:\n%s", len(mr.Keys()), drop, out)
	}
	before := len(mr.Keys())

	var stdout, stderr bytes.Buffer
	start := time.Now()
	err := run(context.Background(), args, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `namespace "dxbench-k" already holds data`) ||
		!strings.Contains(err.Error(), drop) || !strings.Contains(err.Error(), "-ns") || time.Since(start) > 5*time.Second {
		t.Fatalf("rerun on old data: %v after %v\n%s", err, time.Since(start), stdout.String())
	}
	if n := len(mr.Keys()); n != before {
		t.Fatalf("the refused run changed the namespace: %d keys, had %d", n, before)
	}
}

// The summary says what start->complete latency includes.
func TestLatencyNote(t *testing.T) {
	mr := miniredis.RunT(t)
	out, _, _ := runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "hello"}, tiny...)...)
	if !strings.Contains(out, "queueing included") || !strings.Contains(out, "-rate 0") {
		t.Fatalf("no latency note for -rate 0:\n%s", out)
	}
	out, _, _ = runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "hello", "-rate", "200"}, tiny...)...)
	if !strings.Contains(out, "queueing included") || !strings.Contains(out, "paced at 200/s") {
		t.Fatalf("no latency note for -rate 200:\n%s", out)
	}
}

// enqueueStarts with inflight 3 never has more than 3 instances started and not completed: each
// start waits for a completion once 3 are out. The test completes one only once 3 are out (or all
// that are left), so a starter that did not wait would run ahead.
func TestEnqueueStartsInflight(t *testing.T) {
	const n, limit = 20, 3
	r := newRunState("x-", n)
	var mu sync.Mutex
	changed := sync.NewCond(&mu)
	var out []int // started, not completed
	most := 0
	done := make(chan error, 1)
	go func() {
		done <- enqueueStarts(t.Context(), r, 0, limit, time.Now(), func(i int) error {
			mu.Lock()
			defer mu.Unlock()
			out = append(out, i)
			most = max(most, len(out))
			changed.Broadcast()
			return nil
		})
	}()
	for completed := 0; completed < n; completed++ {
		mu.Lock()
		for len(out) < min(limit, n-completed) {
			changed.Wait()
		}
		next := out[0]
		out = out[1:]
		mu.Unlock()
		r.completeIndex(next, time.Now())
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if most != limit {
		t.Fatalf("at most %d started and not completed, want %d", most, limit)
	}
}

// -inflight keeps at most N instances started and not completed, and is refused with -rate.
func TestInflight(t *testing.T) {
	mr := miniredis.RunT(t)
	out, _, res := runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "hello", "-inflight", "2"}, tiny...)...)
	if res.Inflight != 2 || !strings.Contains(out, "at most 2 in flight") {
		t.Fatalf("-inflight 2: %+v\n%s", res, out)
	}
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-addr", mr.Addr(), "-inflight", "2", "-rate", "5"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "-inflight and -rate") {
		t.Fatalf("-inflight with -rate: %v", err)
	}
}

// command is the process: -h exits 0, bad flags 1, and go-redis's own log lines (one per
// failed dial) are silenced.
func TestCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := command(context.Background(), []string{"-h"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String()+errOut.String(), "-keep") {
		t.Fatalf("-h: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if code := command(context.Background(), []string{"-n", "0"}, &out, &errOut); code != 1 {
		t.Fatalf("-n 0: exit %d", code)
	}
	rec := &logRecorder{}
	redis.SetLogger(rec)
	errOut.Reset()
	if code := command(context.Background(), []string{"-addr", "127.0.0.1:1", "-baseline", "0"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "127.0.0.1:1") {
		t.Fatalf("unreachable: exit %d, stderr %q", code, errOut.String())
	}
	if rec.n.Load() != 0 {
		t.Fatalf("go-redis logged %d lines", rec.n.Load())
	}
}

type logRecorder struct{ n atomic.Int64 }

func (r *logRecorder) Printf(context.Context, string, ...any) { r.n.Add(1) }

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-workload", "nope"}, {"-n", "0"}, {"stray"}} {
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The fake runtime's hello orchestration writes what duroxide writes for it.
func TestHelloTurns(t *testing.T) {
	start := startItem("i1", "Hello", `"in"`)
	now := time.UnixMilli(1_700_000_000_000)
	item := &provider.LockedOrchestrationItem{Item: provider.OrchestrationItem{Instance: "i1", OrchestrationName: "Hello",
		ExecutionID: 1, Version: "1.0.0", Messages: []provider.WorkItem{start}}}
	t1, ack := decideTurn(item, helloOrch{}, now)
	if len(ack.HistoryDelta) != 2 || ack.HistoryDelta[0].EventType() != "OrchestrationStarted" ||
		ack.HistoryDelta[1].EventType() != "ActivityScheduled" || ack.HistoryDelta[1].EventID != 2 {
		t.Fatalf("turn 1 delta: %+v", ack.HistoryDelta)
	}
	if len(ack.WorkerItems) != 1 || ack.WorkerItems[0].Kind.(provider.ActivityExecute).ID != 2 {
		t.Fatalf("turn 1 worker items: %+v", ack.WorkerItems)
	}
	md := ack.Metadata
	if md.PinnedDuroxideVersion == nil || md.PinnedDuroxideVersion.String() != duroxideVersion || md.Status != "" ||
		md.OrchestrationName != "Hello" || md.OrchestrationVersion != "1.0.0" || t1.completed {
		t.Fatalf("turn 1 metadata: %+v", md)
	}
	for _, e := range ack.HistoryDelta {
		if e.DuroxideVersion != duroxideVersion || e.TimestampMs != uint64(now.UnixMilli()) || e.InstanceID != "i1" || e.ExecutionID != 1 {
			t.Fatalf("envelope: %+v", e)
		}
	}

	item.Item.History = ack.HistoryDelta
	item.Item.Messages = []provider.WorkItem{{Kind: provider.ActivityCompleted{Instance: "i1", ExecutionID: 1, ID: 2, Result: `"hi"`}},
		{Kind: provider.ActivityCompleted{Instance: "i1", ExecutionID: 1, ID: 2, Result: `"dup"`}}}
	t2, ack := decideTurn(item, helloOrch{}, now)
	if !t2.completed || len(ack.HistoryDelta) != 2 || ack.HistoryDelta[0].EventID != 3 ||
		*ack.HistoryDelta[0].SourceEventID != 2 || ack.HistoryDelta[1].EventType() != "OrchestrationCompleted" {
		t.Fatalf("turn 2 delta: %+v", ack.HistoryDelta)
	}
	if ack.Metadata.Status != provider.StatusCompleted || *ack.Metadata.Output != `"hi"` || ack.Metadata.PinnedDuroxideVersion != nil {
		t.Fatalf("turn 2 metadata: %+v", ack.Metadata)
	}

	// A message for a completed instance is consumed without new events.
	item.Item.History = append(item.Item.History, ack.HistoryDelta...)
	_, ack = decideTurn(item, helloOrch{}, now)
	if len(ack.HistoryDelta) != 0 || ack.Metadata.Status != "" {
		t.Fatalf("turn after completion: %+v", ack)
	}
}

func TestTimerTurnEmitsTimerFired(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	item := &provider.LockedOrchestrationItem{Item: provider.OrchestrationItem{Instance: "t1", OrchestrationName: "Timer",
		ExecutionID: 1, Version: "1.0.0", Messages: []provider.WorkItem{startItem("t1", "Timer", "{}")}}}
	_, ack := decideTurn(item, timerOrch{delay: 100 * time.Millisecond, bgDelay: time.Hour, bgPrefix: "bg-"}, now)
	if len(ack.OrchestratorItems) != 1 {
		t.Fatalf("no TimerFired item: %+v", ack)
	}
	tf := ack.OrchestratorItems[0].Kind.(provider.TimerFired)
	if tf.FireAtMs != uint64(now.UnixMilli())+100 || tf.ID != 2 || ack.HistoryDelta[1].EventType() != "TimerCreated" {
		t.Fatalf("timer: %+v %+v", tf, ack.HistoryDelta)
	}
	item.Item.History = ack.HistoryDelta
	item.Item.Messages = ack.OrchestratorItems
	tn, ack := decideTurn(item, timerOrch{delay: 100 * time.Millisecond}, now.Add(100*time.Millisecond))
	if !tn.completed || len(tn.firedNow) != 1 || ack.HistoryDelta[0].EventType() != "TimerFired" {
		t.Fatalf("timer fired turn: %+v", ack.HistoryDelta)
	}
}

func TestBucketOf(t *testing.T) {
	for events, want := range map[int]int{0: 0, 1: -1, 96: 1, 105: 1, 106: -1, 240: 2, 500: 3, 526: -1, 1001: 4} {
		if got := bucketOf(events); got != want {
			t.Errorf("bucketOf(%d) = %d, want %d", events, got, want)
		}
	}
}

// Without -mode, dxbench drives the real dx runtime; -mode both runs the provider-only
// dispatchers first and reports them beside the runtime's numbers.
func TestModes(t *testing.T) {
	mr := miniredis.RunT(t)
	out, _, res := runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "hello"}, tiny...)...)
	if res.Mode != "runtime" || !strings.Contains(out, "dx runtime") {
		t.Errorf("default mode %q:\n%s", res.Mode, out)
	}
	out, _, res = runBench(t, append([]string{"-addr", mr.Addr(), "-workload", "fanout", "-mode", "both"}, tiny...)...)
	checkWorkload(t, "fanout", "runtime", res)
	if res.ProviderOnly == nil {
		t.Fatalf("-mode both: no provider_only in the last line:\n%s", out)
	}
	checkWorkload(t, "fanout", "provider", *res.ProviderOnly)
	if !strings.Contains(out, "runtime/provider") {
		t.Errorf("-mode both: no comparison in the summary:\n%s", out)
	}
	if err := run(context.Background(), []string{"-mode", "nope"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "-mode") {
		t.Errorf("-mode nope: %v", err)
	}
}

// On a real server (DXREDIS_TEST_ADDR; a fresh namespace that dxbench deletes) every cost field
// is measured.
func TestRuntimeModeOnRedis(t *testing.T) {
	addr := os.Getenv("DXREDIS_TEST_ADDR")
	if addr == "" {
		t.Skip("DXREDIS_TEST_ADDR not set")
	}
	_, _, res := runBench(t, "-addr", addr, "-workload", "hello", "-n", "50", "-baseline", "100ms", "-stall", "20s", "-timeout", "1m")
	checkWorkload(t, "hello", "runtime", res)
	for k, v := range map[string]*float64{"redis_cpu_usec_per_orch": res.RedisCPUUsecPerOrch, "redis_bytes_per_orch": res.RedisBytesPerOrch,
		"baseline_script_calls_per_sec": res.BaselineScriptCallsPerSec} {
		if v == nil {
			t.Errorf("%s not measured on %s", k, res.Backend)
		}
	}
}
