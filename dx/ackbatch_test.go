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
	rt := fanRuntime(g, true)
	startRuntime(t, rt)
	c := dx.NewClient(g)
	ctx := waitCtx(t)

	// One activity: acknowledged alone.
	id, err := c.Start(ctx, "Fan", 1)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[int](ctx, c, id); err != nil || out != 1 {
		t.Fatalf("Fan(1) = %d, %v", out, err)
	}
	g.mu.Lock()
	if g.singles != 1 || len(g.batches) != 0 {
		t.Fatalf("a lone activity: %d single acks and batches %v, want 1 single ack and no batch", g.singles, g.batches)
	}
	// Eight activities: the first ack waits until the seven others are ready and queued behind it.
	g.singles = 0
	g.hold = func() {
		for dx.AckQueueLen(rt) < 7 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	g.mu.Unlock()
	if id, err = c.Start(ctx, "Fan", 8); err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[int](ctx, c, id); err != nil || out != 204 {
		t.Fatalf("Fan(8) = %d, %v, want 204", out, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.singles != 1 || !slices.Equal(g.batches, []int{7}) {
		t.Fatalf("%d single acks and batches %v, want 1 single ack and one batch of 7", g.singles, g.batches)
	}
}

// fanRuntime is a runtime of 8 worker slots on p running Fan(n): the sum of the squares of 1..n,
// each squared by an activity, all at once.
func fanRuntime(p provider.Provider, batch bool) *dx.Runtime {
	opts := testOptions()
	opts.WorkerConcurrency = 8
	opts.BatchActivityAcks = batch
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Sq", func(ctx context.Context, n int) (int, error) { return n * n, nil })
	dx.Register(rt, "Fan", func(ctx dx.Context, n int) (int, error) {
		var fs []dx.Future[int]
		for i := 1; i <= n; i++ {
			fs = append(fs, dx.Call[int](ctx, "Sq", i))
		}
		sum := 0
		for _, f := range fs {
			v, err := f.Await(ctx)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	return rt
}

// TestActivityAcksUnbatchedByDefault: without Options.BatchActivityAcks every activity is
// acknowledged on its own.
func TestActivityAcksUnbatchedByDefault(t *testing.T) {
	t.Parallel()
	g := &ackGate{Provider: newProvider(t)}
	rt := fanRuntime(g, false)
	startRuntime(t, rt)
	c := dx.NewClient(g)
	ctx := waitCtx(t)
	id, err := c.Start(ctx, "Fan", 8)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := dx.Result[int](ctx, c, id); err != nil || out != 204 {
		t.Fatalf("Fan(8) = %d, %v, want 204", out, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.singles != 8 || len(g.batches) != 0 {
		t.Fatalf("%d single acks and batches %v, want 8 single acks", g.singles, g.batches)
	}
}
