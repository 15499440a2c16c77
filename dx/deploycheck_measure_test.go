package dx_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// roundTrips counts the commands a client sends (an FCALL is one, whatever it runs).
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// commandStats reads INFO commandstats: calls per command, script-internal calls included.
func commandStats(t *testing.T, c redis.UniversalClient) map[string]int64 {
	t.Helper()
	txt, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(txt, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		out[strings.TrimPrefix(k, "cmdstat_")], _ = strconv.ParseInt(calls, 10, 64)
	}
	return out
}

func statsDelta(a, b map[string]int64) (int64, string) {
	var total int64
	var parts []string
	for k, v := range b {
		if d := v - a[k]; d > 0 && k != "info" {
			total += d
			parts = append(parts, fmt.Sprintf("%s %d", k, d))
		}
	}
	slices.Sort(parts)
	return total, strings.Join(parts, ", ")
}

// TestMeasureCheckReplay measures CheckReplay and VersionsInFlight over DX_MEASURE_N (10,000)
// running instances whose histories hold 20 events, on DXREDIS_TEST_ADDR (a fresh namespace,
// dropped after) and on a throw-away redis-server (where INFO commandstats counts only them).
//
//	DX_MEASURE_CHECK=1 DXREDIS_TEST_ADDR=127.0.0.1:6379 go test -run TestMeasureCheckReplay -v -timeout 30m ./dx/
func TestMeasureCheckReplay(t *testing.T) {
	if os.Getenv("DX_MEASURE_CHECK") == "" || os.Getenv("DXREDIS_TEST_ADDR") == "" {
		t.Skip("set DX_MEASURE_CHECK=1 and DXREDIS_TEST_ADDR to measure")
	}
	n := 10_000
	if s := os.Getenv("DX_MEASURE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	t.Run("shared server", func(t *testing.T) { measureCheck(t, newProvider(t), n) })
	t.Run("own server", func(t *testing.T) {
		srv := redistest.Start(t)
		p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: srv.Addr(), Namespace: "measure", Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		measureCheck(t, p, n)
	})
}

func registerSteps(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Step", func(_ context.Context, i int) (int, error) { return i + 1, nil })
	dx.Register(rt, "Steps", func(ctx dx.Context, in string) (string, error) {
		for i := range 9 {
			if _, err := dx.Call[int](ctx, "Step", i).Await(ctx); err != nil {
				return "", err
			}
		}
		return dx.WaitEvent[string](ctx, "go").Await(ctx)
	})
}

func measureCheck(t *testing.T, p *redisprovider.Provider, n int) {
	ctx := context.Background()
	// One instance run by a runtime, its 20 events cloned for n-1 more (one ack each).
	rt := dx.NewRuntime(p, testOptions())
	registerSteps(rt)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	mustStart(t, c, ctx, "Steps", "x", dx.WithInstanceID("steps-0"))
	waitFor(t, "steps-0 to wait", func() bool {
		return historyHas(t, p, "steps-0", func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ExternalSubscribedEvent); return ok })
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := rt.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	tmpl, err := p.Read(ctx, "steps-0")
	if err != nil || len(tmpl) != 20 {
		t.Fatalf("template history: %d events, %v", len(tmpl), err)
	}
	began := time.Now()
	v := "1.0.0"
	for i := 1; i < n; i++ {
		id := fmt.Sprintf("steps-%d", i)
		if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "Steps",
			Version: &v, Input: `"x"`, ExecutionID: 1}}, 0); err != nil {
			t.Fatal(err)
		}
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil || it.Item.Instance != id {
			t.Fatalf("fetch %s: %+v %v", id, it, err)
		}
		hist := slices.Clone(tmpl)
		for j := range hist {
			hist[j].InstanceID = id
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: hist,
			Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "Steps", OrchestrationVersion: "1.0.0"}}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d running instances of 20 events written in %v", n, time.Since(began).Round(time.Millisecond))

	hook := &roundTrips{}
	p.Client().AddHook(hook)
	check := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	registerSteps(check)
	for _, budget := range []float64{-1, 0} {
		before, trips := commandStats(t, p.Client()), hook.n.Load()
		rep, err := dx.CheckReplay(ctx, p, check, dx.CheckReplayOptions{ReadsPerSecond: budget})
		if err != nil || !rep.OK() || rep.Groups[0].Running != n {
			t.Fatalf("err %v, report:\n%v", err, rep)
		}
		total, by := statsDelta(before, commandStats(t, p.Client()))
		t.Logf("CheckReplay (ReadsPerSecond %v): %d instances in %v, %d reads, %d round trips; server commands %d (%s)",
			budget, n, rep.Elapsed.Round(time.Millisecond), rep.Reads, hook.n.Load()-trips-1, total, by)
	}
	before, trips := commandStats(t, p.Client()), hook.n.Load()
	began = time.Now()
	vs, err := p.VersionsInFlight(ctx)
	if err != nil || len(vs) != 1 || vs[0].Running != n {
		t.Fatalf("versions %+v %v", vs, err)
	}
	total, by := statsDelta(before, commandStats(t, p.Client()))
	t.Logf("VersionsInFlight: %d instances in %v, %d round trips; server commands %d (%s)",
		n, time.Since(began).Round(time.Millisecond), hook.n.Load()-trips-1, total, by)
}
