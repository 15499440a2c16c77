package dx_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Caps per tag across the fleet (redisprovider.TagLimits): worker processes with many slots run
// a capped tag's activities, which record in Redis how many of them run at once.

const (
	capsTag  = "api"
	capsSlot = 16
)

// capsRuntime is the caps children's runtime: 16 worker slots for the tag "api" and untagged
// activities; "Hold" counts itself in the namespace's key caps-test:cur while it runs (the highest
// count seen in caps-test:max) and sleeps ms; "Fan" runs n of them at once.
func capsRuntime(p *redisprovider.Provider) *dx.Runtime {
	filter, _ := provider.TagFilterDefaultAnd(capsTag)
	rt := dx.NewRuntime(p, dx.Options{WorkerLockTimeout: time.Second, PollTimeout: 200 * time.Millisecond,
		MinPollInterval: 5 * time.Millisecond, Logger: quietLogger, WorkerConcurrency: capsSlot, WorkerTagFilter: filter})
	cur, max := p.Keyspace().Prefix(0)+"caps-test:cur", p.Keyspace().Prefix(0)+"caps-test:max"
	dx.RegisterActivity(rt, "Hold", func(ctx context.Context, ms int) (int, error) {
		c := p.Client()
		n, err := c.Incr(ctx, cur).Result()
		if err != nil {
			return 0, err
		}
		// The highest count seen: a compare-and-set in one script.
		c.Eval(ctx, `if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end`, []string{max}, n)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
		}
		c.Decr(context.Background(), cur)
		return ms, nil
	})
	dx.Register(rt, "Fan", func(ctx dx.Context, in [2]int) (int, error) {
		fs := make([]dx.Future[int], in[0])
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Hold", in[1], dx.WithTag(capsTag))
		}
		_, err := dx.All(ctx, fs...)
		return in[0], err
	})
	return rt
}

// TestTagCapAcrossWorkerProcesses: 3 worker processes of 16 slots each run 60 activities of a tag
// capped at 5: never more than 5 run at once, all complete.
func TestTagCapAcrossWorkerProcesses(t *testing.T) {
	t.Parallel()
	addr, ns, p := faultBackend(t)
	ctx := context.Background()
	if err := p.SetTagLimits(ctx, capsTag, redisprovider.TagLimits{Concurrency: 5}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		startChildOf(t, "caps", addr, ns)
	}
	c := dx.NewClient(p)
	var ids []string
	for i := range 6 {
		id, err := c.Start(ctx, "Fan", [2]int{10, 50}, dx.WithInstanceID(fmt.Sprintf("fan-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitAll(t, c, ids, 60*time.Second)
	for _, id := range ids {
		if st, err := c.Status(ctx, id); err != nil || st.State != dx.StateCompleted {
			t.Fatalf("%s: %+v %v", id, st, err)
		}
	}
	peak, err := p.Client().Get(ctx, p.Keyspace().Prefix(0)+"caps-test:max").Int()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peak %d activities of the capped tag at once over 3 x %d slots", peak, capsSlot)
	if peak > 5 || peak < 2 {
		t.Fatalf("peak %d at once, want at most the cap of 5 (and some overlap)", peak)
	}
	p.Client().Del(ctx, p.Keyspace().Prefix(0)+"caps-test:cur", p.Keyspace().Prefix(0)+"caps-test:max")
}

// TestTagCapSlotsOfAKilledWorker: a worker process SIGKILLed while it holds the tag's 5 slots:
// they come back once its locks expire (1 s), and another worker completes everything.
func TestTagCapSlotsOfAKilledWorker(t *testing.T) {
	t.Parallel()
	addr, ns, p := faultBackend(t)
	ctx := context.Background()
	if err := p.SetTagLimits(ctx, capsTag, redisprovider.TagLimits{Concurrency: 5}); err != nil {
		t.Fatal(err)
	}
	victim := startChildOf(t, "caps", addr, ns)
	c := dx.NewClient(p)
	id, err := c.Start(ctx, "Fan", [2]int{8, 3000}, dx.WithInstanceID("fan-killed"))
	if err != nil {
		t.Fatal(err)
	}
	running := func() int {
		ls, err := p.GetTagLimits(ctx)
		if err != nil || len(ls) != 1 {
			t.Fatalf("GetTagLimits: %+v %v", ls, err)
		}
		return ls[0].Running
	}
	waitFor(t, "the victim holding the 5 slots", func() bool { return running() == 5 })
	if err := victim.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()
	killed := time.Now()
	waitFor(t, "the dead worker's slots to come back", func() bool { return running() == 0 })
	t.Logf("slots back %v after the SIGKILL (lock timeout 1 s)", time.Since(killed).Round(time.Millisecond))
	startChildOf(t, "caps", addr, ns)
	waitAll(t, c, []string{id}, 60*time.Second)
	p.Client().Del(ctx, p.Keyspace().Prefix(0)+"caps-test:cur", p.Keyspace().Prefix(0)+"caps-test:max")
}

// TestTagRateLimitOverTenSeconds: a rate limit of 50 starts a second (bursts of 5, so that a late
// fetch loses no token) over 550 activities run by runtimes with 48 slots: the starts come at
// 50/s within 10%, none is lost.
func TestTagRateLimitOverTenSeconds(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := context.Background()
	if err := p.SetTagLimits(ctx, capsTag, redisprovider.TagLimits{Rate: 50, Burst: 5}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var starts []time.Time
	filter, _ := provider.TagFilterDefaultAnd(capsTag)
	for range 3 {
		opts := testOptions()
		opts.WorkerConcurrency, opts.WorkerTagFilter = capsSlot, filter
		rt := dx.NewRuntime(p, opts)
		dx.RegisterActivity(rt, "Tick", func(context.Context, int) (int, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return 0, nil
		})
		dx.Register(rt, "Ticks", func(ctx dx.Context, n int) (int, error) {
			fs := make([]dx.Future[int], n)
			for i := range fs {
				fs[i] = dx.Call[int](ctx, "Tick", i, dx.WithTag(capsTag))
			}
			_, err := dx.All(ctx, fs...)
			return n, err
		})
		startRuntime(t, rt)
	}
	c := dx.NewClient(p)
	var ids []string
	for i := range 11 {
		ids = append(ids, mustStart(t, c, ctx, "Ticks", 50, dx.WithInstanceID(fmt.Sprintf("ticks-%d", i))))
	}
	waitAll(t, c, ids, 60*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(starts) != 550 {
		t.Fatalf("%d activity runs, want 550", len(starts))
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	span := starts[len(starts)-1].Sub(starts[0])
	rate := float64(len(starts)-1) / span.Seconds()
	t.Logf("550 starts over %v: %.1f/s", span.Round(time.Millisecond), rate)
	if rate < 45 || rate > 55 {
		t.Fatalf("%.1f starts/s, want 50 within 10%%", rate)
	}
}
