package web

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// counter is a go-redis hook that counts round trips and commands sent.
type counter struct{ trips, cmds atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// serverCalls sums the calls of INFO commandstats: commands run by the server, those run inside
// scripts included (minus the INFO calls themselves).
func serverCalls(t *testing.T, rdb *redis.Client) int64 {
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" {
			continue
		}
		v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		n += v
	}
	return n
}

// TestMeasureCosts prints what the list and instance pages cost on a real Redis: round trips and
// commands sent by the console (a go-redis hook), commands the server ran (INFO commandstats,
// scripts' inner calls included; the least of 5 tries, since other clients of the server add
// noise) and the time of a request (median of 5). Run with DXCTL_WEB_MEASURE=1 and
// DXREDIS_TEST_ADDR=127.0.0.1:6379. It reports; it asserts nothing about speed.
func TestMeasureCosts(t *testing.T) {
	addr := os.Getenv("DXREDIS_TEST_ADDR")
	if os.Getenv("DXCTL_WEB_MEASURE") != "1" || addr == "" {
		t.Skip("set DXCTL_WEB_MEASURE=1 and DXREDIS_TEST_ADDR to measure")
	}
	ctx := context.Background()
	ns := fmt.Sprintf("webmeasure-%d", time.Now().UnixNano())
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	defer func() {
		if _, err := redisprovider.DropNamespace(ctx, p.Client(), ns); err != nil {
			t.Error(err)
		}
	}()
	rt := dx.NewRuntime(p, dx.Options{WorkerConcurrency: 8, OrchestrationConcurrency: 4, MinPollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	dx.RegisterActivity(rt, "Step", func(_ context.Context, n int) (int, error) { return n, nil })
	dx.Register(rt, "Big", func(ctx dx.Context, batches int) (int, error) {
		sum := 0
		for b := range batches {
			fs := make([]dx.Future[int], 500)
			for i := range fs {
				fs[i] = dx.Call[int](ctx, "Step", b*500+i)
			}
			for _, f := range fs {
				v, err := f.Await(ctx)
				if err != nil {
					return 0, err
				}
				sum += v
			}
		}
		return sum, nil
	})
	dx.Register(rt, "Tiny", func(ctx dx.Context, n int) (int, error) { return n, nil })
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(rctx) }()
	defer func() { stop(); <-done }()
	c := dx.NewClient(p)
	if _, err := c.Start(ctx, "Big", 10, dx.WithInstanceID("big")); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if _, err := c.Start(ctx, "Tiny", i, dx.WithInstanceID(fmt.Sprintf("tiny-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer wcancel()
	if st, err := c.Wait(wctx, "big"); err != nil || st.State != dx.StateCompleted {
		t.Fatalf("big: %+v %v", st, err)
	}
	if st, err := c.Wait(wctx, "tiny-0999"); err != nil || st.State != dx.StateCompleted {
		t.Fatalf("tiny: %+v %v", st, err)
	}
	x, err := p.GetExecutionInfo(ctx, "big", 1)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	<-done

	s, err := New(Config{Provider: p, AllowedHosts: AllowedHostsFor(testHost)})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	hook := &counter{}
	p.Client().AddHook(hook)
	info := redis.NewClient(&redis.Options{Addr: addr})
	defer info.Close()
	t.Logf("namespace: 1,001 instances; instance \"big\" has %d events", x.EventCount)
	for _, target := range []string{
		"/instances", "/api/instances", "/instances?name=Nope", "/api/overview",
		"/instances/big", "/api/instances/big", "/api/instances/big/history?offset=9800", "/instances/tiny-0001",
	} {
		var times []time.Duration
		best := int64(-1)
		var trips, cmds int64
		size := 0
		for range 5 {
			before := serverCalls(t, info)
			t0, c0 := hook.trips.Load(), hook.cmds.Load()
			r := httptest.NewRequest("GET", target, nil)
			r.Host = testHost
			w := httptest.NewRecorder()
			start := time.Now()
			h.ServeHTTP(w, r)
			times = append(times, time.Since(start))
			if w.Code != 200 {
				t.Fatalf("%s: %d %s", target, w.Code, w.Body.String())
			}
			calls := serverCalls(t, info) - before
			if best < 0 || calls < best {
				best = calls
			}
			trips, cmds, size = hook.trips.Load()-t0, hook.cmds.Load()-c0, w.Body.Len()
		}
		sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
		t.Logf("%-42s %4d round trips, %4d commands sent, %6d server commands, %8s median, %7d bytes",
			target, trips, cmds, best, times[2].Round(10*time.Microsecond), size)
	}
}
