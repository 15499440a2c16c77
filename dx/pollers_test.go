package dx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// fetchCounter is a redisprovider that counts the plain fetches (the pollers' long polls) in
// flight at once, and the most seen; and the most activities one batched fetch returned.
type fetchCounter struct {
	*redisprovider.Provider
	orch, work       atomic.Int32
	maxOrch, maxWork atomic.Int32
	maxBatch, maxN   atomic.Int32 // the most items one batched fetch returned, and asked for (of those that returned some)
}

func raise(n, most *atomic.Int32) func() {
	atLeast(most, n.Add(1))
	return func() { n.Add(-1) }
}

// atLeast raises most to v.
func atLeast(most *atomic.Int32, v int32) {
	for m := most.Load(); v > m && !most.CompareAndSwap(m, v); m = most.Load() {
	}
}

func (f *fetchCounter) FetchWorkItem(ctx context.Context, lock, poll time.Duration, s *provider.SessionFetchConfig, tags provider.TagFilter) (*provider.LockedWorkItem, error) {
	defer raise(&f.work, &f.maxWork)()
	return f.Provider.FetchWorkItem(ctx, lock, poll, s, tags)
}

func (f *fetchCounter) FetchWorkItems(ctx context.Context, fetch provider.WorkFetch, poll time.Duration) ([]*provider.LockedWorkItem, error) {
	defer raise(&f.work, &f.maxWork)()
	items, err := f.Provider.FetchWorkItems(ctx, fetch, poll)
	if len(items) > 0 {
		atLeast(&f.maxN, int32(fetch.N))
	}
	atLeast(&f.maxBatch, int32(len(items)))
	return items, err
}

func (f *fetchCounter) FetchOrchestrationItemLite(ctx context.Context, lock, poll time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	defer raise(&f.orch, &f.maxOrch)()
	return f.Provider.FetchOrchestrationItemLite(ctx, lock, poll, filter)
}

func (f *fetchCounter) FetchOrchestrationItem(ctx context.Context, lock, poll time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	defer raise(&f.orch, &f.maxOrch)()
	return f.Provider.FetchOrchestrationItem(ctx, lock, poll, filter)
}

// TestPollersAreNotSlots: WorkerPollers goroutines wait for activities while WorkerConcurrency of
// them run: with 8 slots and one poller, eight activities that each wait until all eight run
// complete (they run at once), and the runtime never long-polls from more goroutines than its
// pollers.
func TestPollersAreNotSlots(t *testing.T) {
	t.Parallel()
	f := &fetchCounter{Provider: newProvider(t)}
	opts := testOptions()
	opts.WorkerConcurrency, opts.WorkerPollers = 8, 1
	opts.OrchestrationConcurrency, opts.OrchestrationPollers = 4, 1
	rt := dx.NewRuntime(f, opts)
	var running atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	dx.RegisterActivity(rt, "Meet", func(actx context.Context, n int) (int, error) {
		if running.Add(1) == 8 {
			once.Do(func() { close(all) })
		}
		select { // every activity waits until all eight run: only eight slots at once pass
		case <-all:
			return n, nil
		case <-actx.Done():
			return 0, actx.Err()
		}
	})
	dx.Register(rt, "Meet8", sumOfCalls("Meet"))
	startRuntime(t, rt)
	runWant(t, dx.NewClient(f), "Meet8", 8, 36) // (only eight activities running at once pass)
	if w, o := f.maxWork.Load(), f.maxOrch.Load(); w != 1 || o != 1 {
		t.Fatalf("at most %d worker and %d orchestration fetches at once, want 1 and 1 (the pollers)", w, o)
	}
}

// TestPollersAtMostConcurrency: more pollers than slots is refused at Start, as is a negative
// ActivityAckBatch.
func TestPollersAtMostConcurrency(t *testing.T) {
	t.Parallel()
	for _, o := range []dx.Options{{WorkerConcurrency: 2, WorkerPollers: 3}, {OrchestrationPollers: 3}, {ActivityAckBatch: -1}} {
		rt := dx.NewRuntime(newProvider(t), o)
		err := rt.Start(t.Context())
		if !errors.Is(err, dx.ErrInvalidInput) {
			_ = rt.Shutdown(t.Context())
			t.Fatalf("%+v: Start = %v, want ErrInvalidInput", o, err)
		}
	}
}

// TestPollerFetchesForFreeSlots: a poller with several free slots fetches an activity for each in
// one call (provider.WorkBatchFetcher): the eight activities a turn schedules reach the one poller
// of eight slots in one fetch (redisprovider: in a namespace of one partition; of several, one
// item per fetch).
func TestPollerFetchesForFreeSlots(t *testing.T) {
	t.Parallel()
	f := &fetchCounter{Provider: newProvider(t)}
	want := int32(8)
	if f.Keyspace().Partitions() > 1 {
		want = 1
	}
	rt := double8(f, 8)
	startRuntime(t, rt)
	runWant(t, dx.NewClient(f), "Double8", 8, 72)
	if n := f.maxBatch.Load(); n != want {
		t.Fatalf("at most %d activities in one fetch, want %d (the 8 the turn scheduled, in one partition)", n, want)
	}
}

// TestBatchFetchWithinSessionRoom: once a runtime has run an activity of a session, a batched
// fetch asks for no more activities than it may still take sessions for (each may claim one), so
// that none is fetched only to go back; before, it asks for every free slot.
func TestBatchFetchWithinSessionRoom(t *testing.T) {
	t.Parallel()
	f := &fetchCounter{Provider: newProvider(t)}
	rt := double8(f, 3)
	dx.Register(rt, "InSession", func(ctx dx.Context, _ int) (int, error) {
		return dx.Call[int](ctx, "Double", 1, dx.OnSession("s1")).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(f)
	runWant(t, c, "Double8", 8, 72)
	if n := f.maxN.Load(); n != 8 {
		t.Fatalf("before any session, fetches asked for at most %d activities, want the 8 free slots", n)
	}
	runWant(t, c, "InSession", 0, 2)
	f.maxN.Store(0)
	runWant(t, c, "Double8", 8, 72)
	if n := f.maxN.Load(); n > 3 || n == 0 {
		t.Fatalf("after a session, a fetch asked for %d activities with room for at most 3 sessions", n)
	}
}

// double8 is a runtime of 8 activity slots and one poller on f, room for sessions sessions,
// running Double8: eight activities at once, the sum of their doubles.
func double8(f *fetchCounter, sessions int) *dx.Runtime {
	opts := testOptions()
	opts.WorkerConcurrency, opts.WorkerPollers, opts.MaxSessionsPerRuntime = 8, 1, sessions
	rt := dx.NewRuntime(f, opts)
	dx.RegisterActivity(rt, "Double", func(_ context.Context, n int) (int, error) { return 2 * n, nil })
	dx.Register(rt, "Double8", sumOfCalls("Double"))
	return rt
}

// sumOfCalls is an orchestration that calls activity with 1..n, all at once, and returns the sum
// of their results.
func sumOfCalls(activity string) func(dx.Context, int) (int, error) {
	return func(ctx dx.Context, n int) (int, error) {
		var fs []dx.Future[int]
		for i := 1; i <= n; i++ {
			fs = append(fs, dx.Call[int](ctx, activity, i))
		}
		vs, err := dx.All(ctx, fs...)
		sum := 0
		for _, v := range vs {
			sum += v
		}
		return sum, err
	}
}

// runWant starts orchestration name with input in and fails unless it returns want.
func runWant(t *testing.T, c *dx.Client, name string, in, want int) {
	t.Helper()
	ctx := waitCtx(t)
	id, err := c.Start(ctx, name, in)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[int](ctx, c, id); err != nil || out != want {
		t.Fatalf("%s(%d) = %d, %v, want %d", name, in, out, err, want)
	}
}
