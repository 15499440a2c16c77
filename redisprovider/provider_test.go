package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// withPolicy makes a miniredis answer CONFIG GET maxmemory-policy with policy.
func withPolicy(t *testing.T, policy string) *miniredis.Miniredis {
	mr := miniredis.RunT(t)
	err := mr.Server().Register("CONFIG", func(c *server.Peer, _ string, args []string) {
		c.WriteLen(2)
		c.WriteBulk("maxmemory-policy")
		c.WriteBulk(policy)
	})
	if err != nil {
		t.Fatal(err)
	}
	return mr
}

func TestNewRefusesEvictingPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := withPolicy(t, "allkeys-lru")
	_, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Logger: quietLogger})
	if !errors.Is(err, provider.ErrInvalidInput) || provider.IsRetryable(err) {
		t.Fatalf("New with allkeys-lru: got %v, want a permanent invalid-input error", err)
	}
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Logger: quietLogger, AllowEvictingMaxmemoryPolicy: true})
	if err != nil {
		t.Fatalf("New with the explicit option: %v", err)
	}
	_ = p.Close()
	ok := withPolicy(t, "noeviction")
	p, err = redisprovider.New(ctx, redisprovider.Options{Addr: ok.Addr(), Logger: quietLogger})
	if err != nil {
		t.Fatalf("New with noeviction: %v", err)
	}
	_ = p.Close()
}

func TestNewRejectsBadNamespaceAndUnreachableServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := redisprovider.New(ctx, redisprovider.Options{Namespace: "a{b}"}); !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("bad namespace: got %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := redisprovider.New(cctx, redisprovider.Options{Addr: "127.0.0.1:1", Logger: quietLogger})
	if err == nil || !provider.IsRetryable(err) {
		t.Fatalf("unreachable server: got %v, want a retryable error", err)
	}
}

// TestScriptsRecoverAfterFlush: a server restart (or SCRIPT FLUSH) forgets loaded scripts; the
// provider must go on working without help.
func TestScriptsRecoverAfterFlush(t *testing.T) { // not parallel: it flushes the scripts of a server other tests may share
	p := newTestProvider(t)
	ctx := context.Background()
	if err := p.Client().ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Redis 7 forgets the library (unknown to miniredis). Only this build's library is deleted:
	// the test server may be shared with other builds.
	forEachServer(t, p.Client(), func(c *redis.Client) { _ = c.FunctionDelete(ctx, luascripts.LibraryName()).Err() })
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatalf("enqueue after SCRIPT FLUSH: %v", err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch after SCRIPT FLUSH: %v %v", it, err)
	}
}

func TestClosedProviderFailsPermanently(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	_ = p.Close()
	_, err := p.FetchOrchestrationItem(context.Background(), time.Second, 0, nil)
	if err == nil || provider.IsRetryable(err) {
		t.Fatalf("fetch on a closed provider: got %v, want a permanent error", err)
	}
}

func TestContextCancelledIsNotRetryable(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil)
	if err == nil || provider.IsRetryable(err) {
		t.Fatalf("cancelled context: got %v, want a permanent error", err)
	}
}

// TestLongPollOrchestration: a waiting fetch returns as soon as work is enqueued, returns nothing
// after its poll timeout, ends when its delayed work comes due, and ends on Close.
func TestLongPollOrchestration(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}
	got := make(chan *provider.LockedOrchestrationItem, 1)
	go func() {
		it, _ := p.FetchOrchestrationItem(ctx, time.Second, 10*time.Second, nil)
		got <- it
	}()
	waitOrchWaiters(t, p, 1)
	if err := p.EnqueueForOrchestrator(ctx, start("woken"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-got:
		if it == nil || it.Item.Instance != "woken" {
			t.Fatalf("woken fetch returned %+v", it)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("enqueue did not wake the waiting fetch")
	}

	if err := p.EnqueueForOrchestrator(ctx, start("delayed"), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Second, 10*time.Second, nil)
	if err != nil || it == nil || it.Item.Instance != "delayed" {
		t.Fatalf("delayed work did not end the wait: %+v %v", it, err)
	}

	done := make(chan struct{})
	go func() {
		_, _ = p.FetchOrchestrationItem(ctx, time.Second, 30*time.Second, nil)
		close(done)
	}()
	// Deliberate: lets the fetch block (the filter the first fetch registered is still there, so
	// there is nothing new to observe; a Close that comes first ends the fetch just the same).
	time.Sleep(100 * time.Millisecond)
	_ = p.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the waiting fetch")
	}
}

// TestDelayedEnqueueWakesWaiters: fetchers already blocked (with timeouts computed before the
// delayed work existed) must learn the new due time; otherwise a 300 ms timer would wait out the
// 20 s poll.
func TestDelayedEnqueueWakesWaiters(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	got := make(chan *provider.LockedOrchestrationItem, 2)
	for range 2 {
		go func() {
			it, _ := p.FetchOrchestrationItem(ctx, time.Second, 20*time.Second, nil)
			got <- it
		}()
	}
	waitOrchWaiters(t, p, 1)
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "t", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case it := <-got:
		if it == nil || it.Item.Instance != "t" {
			t.Fatalf("got %+v", it)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the delayed item did not end the wait of blocked fetchers")
	}
}

// TestIdleFetcherCostsOneCommandPerPoll: an idle fetcher's repeated polls cost one BLPOP each
// (after the first poll's script), and work arriving between polls is still found at once.
func TestIdleFetcherCostsOneCommandPerPoll(t *testing.T) { // not parallel: idle polls skip the script only within a time window
	ctx := context.Background()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "idle", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tags := provider.TagFilterDefaultOnly()
	for _, fetch := range []func() (bool, error){
		func() (bool, error) {
			it, err := p.FetchOrchestrationItem(ctx, time.Second, 100*time.Millisecond, nil)
			return it != nil, err
		},
		func() (bool, error) {
			it, err := p.FetchWorkItem(ctx, time.Second, 100*time.Millisecond, nil, tags)
			return it != nil, err
		},
	} {
		if got, err := fetch(); got || err != nil { // first poll: script + BLPOP
			t.Fatalf("first poll: %v %v", got, err)
		}
		before := mr.CommandCount()
		const polls = 5
		for range polls {
			if got, err := fetch(); got || err != nil {
				t.Fatalf("idle poll: %v %v", got, err)
			}
		}
		if n := mr.CommandCount() - before; n > polls {
			t.Errorf("%d idle polls issued %d commands, want at most one each", polls, n)
		}
	}

	// Work that arrives between two polls is found by the next one, skip or not.
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "late", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Second, 5*time.Second, nil)
	if err != nil || it == nil || it.Item.Instance != "late" {
		t.Fatalf("work enqueued between polls: %+v %v", it, err)
	}
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "late", ExecutionID: 1, ID: 2, Name: "A", Input: "{}"}}
	if err := p.EnqueueForWorker(ctx, act); err != nil {
		t.Fatal(err)
	}
	w, err := p.FetchWorkItem(ctx, time.Second, 5*time.Second, nil, tags)
	if err != nil || w == nil {
		t.Fatalf("worker item enqueued between polls: %+v %v", w, err)
	}
}

// TestAckFetchPreparesTheNextWait: an ack-and-fetch that finds nothing, told the caller's next
// poll (FetchOptions.NextPoll), registers that wait in its script, so the next fetch starts with
// its BLPOP; work enqueued in between still ends that wait at once (no lost wake-up). Both queues;
// each case runs on a server of its own, so that no earlier registration or token helps.
func TestAckFetchPreparesTheNextWait(t *testing.T) { // not parallel: the prepared wait holds only within a time window
	ctx := context.Background()
	tags := provider.TagFilterDefaultOnly()
	// One queue's calls: enqueue item n, fetch (the lock token, "" when nothing came), and
	// ack-and-fetch (whether it fetched something).
	type queue struct {
		enqueue  func(p *redisprovider.Provider, n uint64) error
		fetch    func(p *redisprovider.Provider, poll time.Duration) (string, error)
		ackFetch func(p *redisprovider.Provider, token string, n uint64, opts provider.FetchOptions) (bool, error)
	}
	orch := queue{
		enqueue: func(p *redisprovider.Provider, n uint64) error {
			return p.EnqueueForOrchestrator(ctx, layoutStart(fmt.Sprint("i", n)), 0)
		},
		fetch: func(p *redisprovider.Provider, poll time.Duration) (string, error) {
			it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, poll, nil)
			if it == nil {
				return "", err
			}
			return it.LockToken, err
		},
		ackFetch: func(p *redisprovider.Provider, token string, n uint64, opts provider.FetchOptions) (bool, error) {
			next, err := p.AckOrchestrationItemAndFetch(ctx, token, provider.OrchestrationAck{ExecutionID: 1,
				HistoryDelta: []provider.Event{layoutStarted(fmt.Sprint("i", n), 1)}, Metadata: layoutRunning()}, 5*time.Second, nil, opts)
			return next != nil, err
		},
	}
	work := queue{
		enqueue: func(p *redisprovider.Provider, n uint64) error {
			return p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "w", ExecutionID: 1, ID: n, Name: "A", Input: "{}"}})
		},
		fetch: func(p *redisprovider.Provider, poll time.Duration) (string, error) {
			it, err := p.FetchWorkItem(ctx, 5*time.Second, poll, nil, tags)
			if it == nil {
				return "", err
			}
			return it.LockToken, err
		},
		ackFetch: func(p *redisprovider.Provider, token string, _ uint64, opts provider.FetchOptions) (bool, error) {
			next, err := p.AckWorkItemAndFetch(ctx, token, nil, 5*time.Second, nil, tags, opts)
			return next != nil, err
		},
	}
	for name, c := range map[string]struct{ q, other queue }{"orchestrator": {orch, work}, "worker": {work, orch}} {
		t.Run(name, func(t *testing.T) {
			start := func(nextPoll time.Duration) (*redisprovider.Provider, *miniredis.Miniredis) {
				t.Helper()
				mr := miniredis.RunT(t)
				p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "prep", Logger: quietLogger})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				// An item, acked with nothing left to fetch.
				if err := c.q.enqueue(p, 1); err != nil {
					t.Fatal(err)
				}
				token, err := c.q.fetch(p, 0)
				if err != nil || token == "" {
					t.Fatalf("fetch: %q %v", token, err)
				}
				if got, err := c.q.ackFetch(p, token, 1, provider.FetchOptions{NextPoll: nextPoll}); err != nil || got {
					t.Fatalf("ack-and-fetch: %v %v", got, err)
				}
				// The blocking connection's handshake (a wait on the other queue), out of the counts below.
				if token, err := c.other.fetch(p, 10*time.Millisecond); token != "" || err != nil {
					t.Fatalf("fetch of the other queue: %q %v", token, err)
				}
				return p, mr
			}
			idleFetch := func(p *redisprovider.Provider, mr *miniredis.Miniredis) int { // commands of a fetch that finds nothing
				t.Helper()
				before := mr.CommandCount()
				if token, err := c.q.fetch(p, 100*time.Millisecond); err != nil || token != "" {
					t.Fatalf("idle fetch: %q %v", token, err)
				}
				return mr.CommandCount() - before
			}
			if n := idleFetch(start(0)); n < 2 {
				t.Errorf("without NextPoll the next fetch issued %d commands, want its script and its wait", n)
			}
			if n := idleFetch(start(5 * time.Second)); n != 1 {
				t.Errorf("after an ack-and-fetch that prepared it, the next fetch issued %d commands, want only its wait", n)
			}

			p, _ := start(5 * time.Second)
			if err := c.q.enqueue(p, 2); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			token, err := c.q.fetch(p, 5*time.Second)
			if err != nil || token == "" {
				t.Fatalf("work enqueued after a prepared ack-and-fetch: %q %v", token, err)
			}
			if waited := time.Since(began); waited > 2*time.Second {
				t.Errorf("the prepared wait ended %v after work was enqueued before it", waited)
			}
			if _, err := c.q.ackFetch(p, token, 2, provider.FetchOptions{NextPoll: -time.Second}); !errors.Is(err, provider.ErrInvalidInput) {
				t.Errorf("negative NextPoll: %v, want ErrInvalidInput", err)
			}
		})
	}
}

// TestStatusIndexFollowsInstances: ListInstancesByStatus sees an instance under exactly its
// current status, from its first ack on.
func TestStatusIndexFollowsInstances(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	byStatus := func(status string) []string {
		ids, err := p.ListInstancesByStatus(ctx, status)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	turn := func(status string) {
		it, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %v %v", it, err)
		}
		n := uint64(len(it.Item.History) + 1)
		err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{{EventID: n, InstanceID: "s", ExecutionID: 1, DuroxideVersion: "0.1.30",
				Kind: provider.ExternalEventEvent{Name: "e", Data: "{}"}}},
			Metadata: provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{Instance: "s", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	turn("")
	if got := byStatus(provider.StatusRunning); len(got) != 1 || got[0] != "s" {
		t.Fatalf("after the first turn, Running lists %v", got)
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "s", Name: "e", Data: "{}"}}, 0); err != nil {
		t.Fatal(err)
	}
	turn(provider.StatusCompleted)
	if got := byStatus(provider.StatusRunning); len(got) != 0 {
		t.Fatalf("after completion, Running still lists %v", got)
	}
	if got := byStatus(provider.StatusCompleted); len(got) != 1 {
		t.Fatalf("after completion, Completed lists %v", got)
	}
}

type countingObserver struct {
	mu    sync.Mutex
	calls map[string]int
	errs  int
}

func (o *countingObserver) ObserveCall(_ context.Context, op string, _ time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[op]++
	if err != nil {
		o.errs++
	}
}

// TestObserverSeesEveryScriptCall: Options.Observer is told about each call, with its error.
func TestObserverSeesEveryScriptCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obs := &countingObserver{calls: map[string]int{}}
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: miniredis.RunT(t).Addr(), Logger: quietLogger, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "o", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatal(err)
	}
	if it, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); err != nil || it == nil {
		t.Fatalf("fetch: %v %v", it, err)
	}
	_ = p.AckOrchestrationItem(ctx, "bogus", provider.OrchestrationAck{ExecutionID: 1})
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.calls["enqueue_for_orchestrator"] != 1 || obs.calls["fetch_orchestration_item"] != 1 ||
		obs.calls["ack_orchestration_item"] != 1 || obs.errs != 1 {
		t.Fatalf("observed %v with %d errors", obs.calls, obs.errs)
	}
}

// TestNegativeDurationsRejected: a negative delay, extension or poll timeout is bad input, with
// nothing written, on the orchestration side as on the worker side.
func TestNegativeDurationsRejected(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "n", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	_, fetchErr := p.FetchOrchestrationItem(ctx, time.Second, -time.Second, nil)
	for name, err := range map[string]error{
		"enqueue delay": p.EnqueueForOrchestrator(ctx, start, -time.Second),
		"fetch poll":    fetchErr,
		"abandon delay": p.AbandonOrchestrationItem(ctx, "t", -time.Second, false),
		"renew extend":  p.RenewOrchestrationItemLock(ctx, "t", -time.Second),
		"worker renew":  p.RenewWorkItemLock(ctx, "t", -time.Second),
	} {
		if !errors.Is(err, provider.ErrInvalidInput) || provider.IsRetryable(err) {
			t.Errorf("%s: got %v, want a permanent invalid-input error", name, err)
		}
	}
	if it, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); it != nil || err != nil {
		t.Fatalf("a rejected enqueue wrote something: %+v %v", it, err)
	}
}

// TestDropNamespaceDeletesOnlyItsKeys: DropNamespace removes every key of its namespace and none
// of another's on the same server.
func TestDropNamespaceDeletesOnlyItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addr := miniredis.RunT(t).Addr()
	if backend() == "redis" {
		addr = os.Getenv("DXREDIS_TEST_ADDR")
	}
	var ps []*redisprovider.Provider
	for _, ns := range []string{"drop-a" + strconv.FormatInt(time.Now().UnixNano(), 36), "drop-b" + strconv.FormatInt(time.Now().UnixNano(), 36)} {
		p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: ns, Logger: quietLogger})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}
		if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	n, err := redisprovider.DropNamespace(ctx, ps[0].Client(), ps[0].Keyspace().Namespace())
	if err != nil || n == 0 {
		t.Fatalf("DropNamespace: %d keys, %v", n, err)
	}
	if it, err := ps[0].FetchOrchestrationItem(ctx, time.Second, 0, nil); it != nil || err != nil {
		t.Fatalf("dropped namespace still has work: %+v %v", it, err)
	}
	if it, err := ps[1].FetchOrchestrationItem(ctx, time.Second, 0, nil); it == nil || err != nil {
		t.Fatalf("the other namespace lost its work: %+v %v", it, err)
	}
	_, _ = redisprovider.DropNamespace(ctx, ps[1].Client(), ps[1].Keyspace().Namespace())
}
