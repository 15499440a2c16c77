package dx_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestRedisBlipReRunsNothingFinished: Redis (AOF, appendfsync always) is SIGKILLed while a
// fan-out's activities, renewing their locks, are finishing, and restarted from its AOF about 2.5 s
// later (longer than the ~2 s the runtime used to retry an ack against go-redis's failing dials). The runtime retries acks and renewals while the locks they hold are valid, so every
// orchestration completes and no activity that had returned runs again. (Before: an ack was
// retried for ~0.2 s and a renewal failure cancelled the activity at once, so every result
// finished in the outage ran again once its lock expired.)
func TestRedisBlipReRunsNothingFinished(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a redis-server")
	}
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always") // skips without redis-server
	ctx := context.Background()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Namespace: "blip", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const fans, width = 4, 6
	var mu sync.Mutex
	started := map[int]int{}        // runs per activity input
	finished := map[int]time.Time{} // when an activity returned its result
	var killedAt time.Time          // zero while Redis is up
	var rerun []string              // activities that ran again after returning
	finishedInOutage := 0
	allStarted := make(chan struct{}) // closed when every activity has started once
	opts := dx.Options{WorkerLockTimeout: 10 * time.Second, WorkerConcurrency: fans * width, OrchestrationConcurrency: 2,
		PollTimeout: 500 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: testLogger()}
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Work", func(ctx context.Context, n int) (int, error) {
		mu.Lock()
		started[n]++
		if at, ok := finished[n]; ok {
			rerun = append(rerun, fmt.Sprintf("%d (returned at %s, run %d)", n, at.Format("15:04:05.000"), started[n]))
		}
		if len(started) == fans*width && started[n] == 1 {
			close(allStarted)
		}
		mu.Unlock()
		// Every activity is running before the first returns (on a loaded machine some would
		// otherwise start only after the kill, and not return before the restart the test waits for).
		<-allStarted
		// Like most activities it does not watch its context. The fan's activities start
		// together and return from 4.5 s to 6.5 s; those still running at 5 s renew their locks
		// (10 s) then, in the outage, which begins when the first one returns.
		<-time.After(4500*time.Millisecond + time.Duration(n%width)*400*time.Millisecond)
		mu.Lock()
		finished[n] = time.Now()
		if !killedAt.IsZero() {
			finishedInOutage++
		}
		mu.Unlock()
		return n, nil
	})
	dx.Register(rt, "Fan", func(ctx dx.Context, k int) (int, error) {
		fs := make([]dx.Future[int], width)
		for i := range fs {
			fs[i] = dx.Call[int](ctx, "Work", k*100+i)
		}
		vs, err := dx.All(ctx, fs...)
		sum := 0
		for _, v := range vs {
			sum += v
		}
		return sum, err
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ids := make([]string, fans)
	for k := range ids {
		if ids[k], err = c.Start(ctx, "Fan", k, dx.WithInstanceID(fmt.Sprintf("fan-%d", k))); err != nil {
			t.Fatal(err)
		}
	}
	// Kill Redis as soon as the first activity returns: the others finish in the outage.
	waitFor := func(what string, within time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, within)
			}
		}
	}
	waitFor("an activity returns", 15*time.Second, func() bool { return len(finished) > 0 })
	srv.Kill()
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	// Restart once every activity has returned, and at least 2.5 s after the kill.
	waitFor("every activity returns", 10*time.Second, func() bool {
		return len(finished) == fans*width && time.Since(killedAt) >= 2500*time.Millisecond
	})
	srv.Restart()
	mu.Lock()
	t.Logf("Redis was down %s; %d activities returned meanwhile", time.Since(killedAt).Round(time.Millisecond), finishedInOutage)
	mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 25*time.Second)
	defer cancel()
	for k, id := range ids {
		st, err := c.Wait(wctx, id)
		want := 0
		for i := range width {
			want += k*100 + i
		}
		if err != nil || st.Output != fmt.Sprint(want) {
			t.Fatalf("%s: state %s output %s err %v (%v)", id, st.State, st.Output, st.Err, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(rerun) > 0 {
		t.Fatalf("%d activities ran again after returning their result: %v", len(rerun), rerun)
	}
}
