package dx_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// extProvider adds provider's optional extensions (ack-and-fetch on both queues, lite fetch) on top
// of a plain provider the simple, non-atomic way: enough to run the runtime's code paths for them
// against any provider. Tags are kept in memory, chosen when a fetch begins an execution.
type extProvider struct {
	provider.Provider
	mu         sync.Mutex
	tags       map[string]string // instance + "/" + execution -> tag
	ackFetches atomic.Int64
	lite       atomic.Int64
	reads      atomic.Int64
}

func newExtProvider(p provider.Provider) *extProvider {
	return &extProvider{Provider: p, tags: map[string]string{}}
}

func (x *extProvider) AckOrchestrationItemAndFetch(ctx context.Context, token string, ack provider.OrchestrationAck,
	lockTimeout time.Duration, filter *provider.DispatcherCapabilityFilter, opts provider.FetchOptions) (*provider.LockedOrchestrationItem, error) {
	if err := x.AckOrchestrationItem(ctx, token, ack); err != nil {
		return nil, err
	}
	x.ackFetches.Add(1)
	if opts.Lite {
		return x.FetchOrchestrationItemLite(ctx, lockTimeout, 0, filter)
	}
	return x.FetchOrchestrationItem(ctx, lockTimeout, 0, filter)
}

func (x *extProvider) AckWorkItemAndFetch(ctx context.Context, token string, completion *provider.WorkItem, lockTimeout time.Duration,
	session *provider.SessionFetchConfig, tags provider.TagFilter, _ provider.FetchOptions) (*provider.LockedWorkItem, error) {
	if err := x.AckWorkItem(ctx, token, completion); err != nil {
		return nil, err
	}
	x.ackFetches.Add(1)
	return x.FetchWorkItem(ctx, lockTimeout, 0, session, tags)
}

func (x *extProvider) FetchOrchestrationItemLite(ctx context.Context, lockTimeout, pollTimeout time.Duration,
	filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	it, err := x.FetchOrchestrationItem(ctx, lockTimeout, pollTimeout, filter)
	if err != nil || it == nil {
		return it, err
	}
	x.lite.Add(1)
	item := &it.Item
	exec := item.ExecutionID
	begins := len(item.History) == 0
	for _, m := range item.Messages {
		if _, ok := m.Kind.(provider.ContinueAsNew); ok {
			exec, begins = exec+1, true
		}
	}
	x.mu.Lock()
	key := fmt.Sprintf("%s/%d", item.Instance, exec)
	if begins || x.tags[key] == "" {
		x.tags[key] = fmt.Sprintf("tag-%d", time.Now().UnixNano())
	}
	item.ExecutionTag = x.tags[key]
	x.mu.Unlock()
	item.HistoryLen, item.History, item.KVSnapshot = len(item.History), nil, nil
	return it, nil
}

func (x *extProvider) ReadForReplay(ctx context.Context, instance string, exec uint64) ([]provider.Event, map[string]provider.KVEntry, string, error) {
	x.reads.Add(1)
	h, err := x.ReadWithExecution(ctx, instance, exec)
	if err != nil {
		return nil, nil, "", err
	}
	all, err := x.GetKVAllValues(ctx, instance)
	if err != nil {
		return nil, nil, "", err
	}
	kv := map[string]provider.KVEntry{}
	for k, v := range all {
		kv[k] = provider.KVEntry{Value: v}
	}
	x.mu.Lock()
	tag := x.tags[fmt.Sprintf("%s/%d", instance, exec)]
	x.mu.Unlock()
	return h, kv, tag, nil
}

var (
	_ provider.OrchestrationAckFetcher = (*extProvider)(nil)
	_ provider.WorkAckFetcher          = (*extProvider)(nil)
	_ provider.LiteFetcher             = (*extProvider)(nil)
)

// TestRuntimeUsesExtensions: with a provider that offers them, the runtime acknowledges and fetches
// in one call, fetches without histories, and reads a history only when it does not hold it.
func TestRuntimeUsesExtensions(t *testing.T) {
	t.Parallel()
	p := newExtProvider(newProvider(t))
	opts := testOptions()
	// One orchestration dispatcher: with two, the other one may fetch an instance's next turn
	// between this fake's ack and its fetch (two calls here, one script in redisprovider), before
	// the engine is back in the cache, and rightly read the history.
	opts.OrchestrationConcurrency = 1
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Inc", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	dx.Register(rt, "Count", func(ctx dx.Context, n int) (int, error) {
		for range 5 {
			var err error
			if n, err = dx.Call[int](ctx, "Inc", n).Await(ctx); err != nil {
				return 0, err
			}
		}
		return n, nil
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	var ids []string
	for i := range 20 {
		id, err := c.Start(ctx, "Count", i*10)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		if out, err := dx.Result[int](ctx, c, id); err != nil || out != i*10+5 {
			t.Fatalf("%s: %d %v", id, out, err)
		}
	}
	if p.ackFetches.Load() == 0 || p.lite.Load() == 0 {
		t.Fatalf("extensions unused: %d ack-and-fetch, %d lite fetches", p.ackFetches.Load(), p.lite.Load())
	}
	// Every turn after the first is served from the kept engine: no history is read.
	if n := p.reads.Load(); n != 0 {
		t.Fatalf("%d histories read; a kept engine needs none", n)
	}
}

// TestLiteFetchWithoutCacheReadsHistory: with the executor cache off, every turn of an existing
// execution reads its history (and still produces the same result).
func TestLiteFetchWithoutCacheReadsHistory(t *testing.T) {
	t.Parallel()
	p := newExtProvider(newProvider(t))
	opts := testOptions()
	opts.ExecutorCacheSize = -1
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Inc", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	dx.Register(rt, "Count", func(ctx dx.Context, n int) (int, error) {
		for range 3 {
			var err error
			if n, err = dx.Call[int](ctx, "Inc", n).Await(ctx); err != nil {
				return 0, err
			}
		}
		if err := ctx.Sleep(10 * time.Millisecond); err != nil {
			return 0, err
		}
		if n < 10 {
			return 0, dx.ContinueAsNew(ctx, n)
		}
		return n, nil
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id := mustStart(t, c, ctx, "Count", 0)
	if out, err := dx.Result[int](ctx, c, id); err != nil || out != 12 {
		t.Fatalf("%d %v", out, err)
	}
	if p.reads.Load() == 0 {
		t.Fatal("no history read although the engine is not kept")
	}
}
