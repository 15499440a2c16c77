package dx_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// ackGate is a redisprovider whose single activity acks (ack-and-fetch) wait at a gate while it
// is closed, and which records the sizes of its batched acks.
type ackGate struct {
	*redisprovider.Provider
	hold    func() // called by each single ack before it runs (nil: none)
	mu      sync.Mutex
	singles int
	batches []int
}

func (g *ackGate) AckWorkItemAndFetch(ctx context.Context, token string, c *provider.WorkItem, lock time.Duration,
	s *provider.SessionFetchConfig, tags provider.TagFilter, opts provider.FetchOptions) (*provider.LockedWorkItem, error) {
	g.mu.Lock()
	g.singles++
	hold := g.hold
	g.hold = nil // only the first waits
	g.mu.Unlock()
	if hold != nil {
		hold()
	}
	return g.Provider.AckWorkItemAndFetch(ctx, token, c, lock, s, tags, opts)
}

func (g *ackGate) AckWorkItems(ctx context.Context, acks []provider.WorkAck, fetch *provider.WorkFetch) ([]error, []*provider.LockedWorkItem) {
	g.mu.Lock()
	g.batches = append(g.batches, len(acks))
	g.mu.Unlock()
	return g.Provider.AckWorkItems(ctx, acks, fetch)
}

// TestActivityAcksBatchOnlyWhatWaits: a lone activity is acknowledged alone (ack-and-fetch, no
// batch); results that become ready while an ack is in flight go together in one batched ack when
// it returns, and the orchestration gets every result.
func TestActivityAcksBatchOnlyWhatWaits(t *testing.T) {
	t.Parallel()
	g := &ackGate{Provider: newProvider(t)}
	rt := fanRuntime(g, 8, 32)
	startRuntime(t, rt)
	c := dx.NewClient(g)

	// One activity: acknowledged alone.
	runWant(t, c, "Fan", 1, 1)
	g.mu.Lock()
	if g.singles != 1 || len(g.batches) != 0 {
		t.Fatalf("a lone activity: %d single acks and batches %v, want 1 single ack and no batch", g.singles, g.batches)
	}
	g.singles = 0
	g.mu.Unlock()
	fanGated(t, g, rt, c)
}

// fanGated runs Fan(8) on rt, whose first single ack waits until the seven other results are
// ready and queued behind it, and checks that they went in one batch.
func fanGated(t *testing.T, g *ackGate, rt *dx.Runtime, c *dx.Client) {
	t.Helper()
	ctx := waitCtx(t)
	g.mu.Lock()
	g.hold = func() {
		for dx.AckQueueLen(rt) < 7 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	g.mu.Unlock()
	runWant(t, c, "Fan", 8, 204)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.singles != 1 || !slices.Equal(g.batches, []int{7}) {
		t.Fatalf("%d single acks and batches %v, want 1 single ack and one batch of 7", g.singles, g.batches)
	}
}

// TestActivityAcksBatchedByDefaultWithManySlots: ActivityAckBatch's default batches from 32
// activity slots (WorkerConcurrency's default).
func TestActivityAcksBatchedByDefaultWithManySlots(t *testing.T) {
	t.Parallel()
	g := &ackGate{Provider: newProvider(t)}
	rt := fanRuntime(g, 0, 0)
	startRuntime(t, rt)
	fanGated(t, g, rt, dx.NewClient(g))
}

// TestBatchActivityAcksStillBatches: the deprecated BatchActivityAcks still turns batches on
// where the default would not (8 slots).
func TestBatchActivityAcksStillBatches(t *testing.T) {
	t.Parallel()
	g := &ackGate{Provider: newProvider(t)}
	rt := fanRuntime(g, 8, 0, func(o *dx.Options) { o.BatchActivityAcks = true })
	startRuntime(t, rt)
	fanGated(t, g, rt, dx.NewClient(g))
}

// fanRuntime is a runtime of slots worker slots on p, with ActivityAckBatch ackBatch, running
// Fan(n): the sum of the squares of 1..n, each squared by an activity, all at once.
func fanRuntime(p provider.Provider, slots, ackBatch int, more ...func(*dx.Options)) *dx.Runtime {
	opts := testOptions()
	opts.WorkerConcurrency, opts.ActivityAckBatch = slots, ackBatch
	for _, f := range more {
		f(&opts)
	}
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Sq", func(ctx context.Context, n int) (int, error) { return n * n, nil })
	dx.Register(rt, "Fan", sumOfCalls("Sq"))
	return rt
}

// TestActivityAcksUnbatchedWithFewSlots: with ActivityAckBatch's default and fewer than 32
// activity slots every activity is acknowledged on its own.
func TestActivityAcksUnbatchedWithFewSlots(t *testing.T) {
	t.Parallel()
	g := &ackGate{Provider: newProvider(t)}
	rt := fanRuntime(g, 8, 0)
	startRuntime(t, rt)
	runWant(t, dx.NewClient(g), "Fan", 8, 204)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.singles != 8 || len(g.batches) != 0 {
		t.Fatalf("%d single acks and batches %v, want 8 single acks", g.singles, g.batches)
	}
}
