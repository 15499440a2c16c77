package redisprovider_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// peerProvider returns a second provider on p's server and namespace (another process of the
// same deployment), with opts' other fields.
func peerProvider(t testing.TB, p *redisprovider.Provider, opts redisprovider.Options) *redisprovider.Provider {
	t.Helper()
	ctx := context.Background()
	opts.Namespace = p.Keyspace().Namespace()
	if opts.Logger == nil {
		opts.Logger = quietLogger
	}
	var (
		q   *redisprovider.Provider
		err error
	)
	if backend() == "cluster" {
		client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv("DXREDIS_TEST_CLUSTER"), ",")})
		t.Cleanup(func() { _ = client.Close() })
		q, err = redisprovider.NewFromClient(ctx, client, opts)
	} else {
		opts.Addr = p.Client().(*redis.Client).Options().Addr
		q, err = redisprovider.New(ctx, opts)
	}
	if err != nil {
		t.Fatalf("peer provider: %v", err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// TestIdleSurvivorTakesOverCrashedHoldersWork (DESIGN.md S5): providers A and B share a
// namespace; A is idle, looping on fetch with a 1 s poll; B fetches an item (orchestration, then
// activity) and dies without acking. A must get the item soon after B's 1 s lock expires, although
// nothing wakes it: an idle fetcher that skips its script must still learn about locks taken since.
func TestIdleSurvivorTakesOverCrashedHoldersWork(t *testing.T) {
	t.Parallel()
	const lock, poll, bound = time.Second, time.Second, 5 * time.Second
	ctx := context.Background()
	tags := provider.TagFilterDefaultOnly()
	cases := []struct {
		name    string
		enqueue func(p *redisprovider.Provider) error
		fetch   func(p *redisprovider.Provider, poll time.Duration) (bool, error)
	}{
		{"orchestration",
			func(p *redisprovider.Provider) error {
				return p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
					Instance: "crashed", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0)
			},
			func(p *redisprovider.Provider, poll time.Duration) (bool, error) {
				it, err := p.FetchOrchestrationItem(ctx, lock, poll, nil)
				return it != nil, err
			}},
		{"activity",
			func(p *redisprovider.Provider) error {
				return p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{
					Instance: "crashed", ExecutionID: 1, ID: 1, Name: "A", Input: "{}"}})
			},
			func(p *redisprovider.Provider, poll time.Duration) (bool, error) {
				it, err := p.FetchWorkItem(ctx, lock, poll, nil, tags)
				return it != nil, err
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newTestProvider(t)
			b := peerProvider(t, a, redisprovider.Options{})
			// A goes idle: a poll that times out lets its next polls skip the script.
			if got, err := c.fetch(a, 200*time.Millisecond); got || err != nil {
				t.Fatalf("A's first poll: %v %v", got, err)
			}
			// B is waiting when the work arrives, so the wake-up is B's; B then crashes.
			taken := make(chan error, 1)
			go func() {
				got, err := c.fetch(b, 5*time.Second)
				if err == nil && !got {
					err = errors.New("B got nothing")
				}
				taken <- err
			}()
			time.Sleep(100 * time.Millisecond) // B is blocked
			if err := c.enqueue(a); err != nil {
				t.Fatal(err)
			}
			if err := <-taken; err != nil {
				t.Fatalf("B's fetch: %v", err)
			}
			start := time.Now()
			for time.Since(start) < lock+bound {
				got, err := c.fetch(a, poll)
				if err != nil {
					t.Fatal(err)
				}
				if got {
					t.Logf("A took the work over %v after B's fetch", time.Since(start).Round(time.Millisecond))
					return
				}
			}
			t.Fatalf("A did not take over the work within %v of B's lock expiry", bound)
		})
	}
}

// callCounter is an Observer counting script calls.
type callCounter struct{ n atomic.Int64 }

func (c *callCounter) ObserveCall(context.Context, string, time.Duration, error) { c.n.Add(1) }

// refuseBlocking fails every command on the client it hooks, as an ACL without BLPOP would.
type refuseBlocking struct{}

func (refuseBlocking) DialHook(next redis.DialHook) redis.DialHook { return next }
func (refuseBlocking) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(_ context.Context, cmd redis.Cmder) error {
		err := errors.New("NOPERM this user has no permissions to run the '" + cmd.Name() + "' command")
		cmd.SetErr(err)
		return err
	}
}
func (refuseBlocking) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFailingBlockingWaitDoesNotSpin (DESIGN.md S6): when the blocking wait itself fails (an
// ACL forbidding BLPOP, a full maxclients, a dial failure on the blocking pool only), a fetch must
// not loop on its script: it returns a retryable error after a bounded number of calls.
func TestFailingBlockingWaitDoesNotSpin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	refused := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	refused.AddHook(refuseBlocking{})
	t.Cleanup(func() { _ = refused.Close() })
	calls := &callCounter{}
	q := peerProvider(t, p, redisprovider.Options{BlockingClient: refused, Observer: calls})
	for _, fetch := range []struct {
		name string
		call func() error
	}{
		{"orchestration", func() error {
			_, err := q.FetchOrchestrationItem(ctx, time.Second, time.Second, nil)
			return err
		}},
		{"activity", func() error {
			_, err := q.FetchWorkItem(ctx, time.Second, time.Second, nil, provider.TagFilterDefaultOnly())
			return err
		}},
	} {
		calls.n.Store(0)
		err := fetch.call()
		if n := calls.n.Load(); n > 3*int64(q.Keyspace().Partitions()) { // a look at each partition
			t.Errorf("%s: one fetch with a failing wait ran its script %d times", fetch.name, n)
		}
		if err == nil || !provider.IsRetryable(err) {
			t.Errorf("%s: got %v, want a retryable error saying the wait failed", fetch.name, err)
		}
	}
}

// TestGivenBackWakeTokenExpires (DESIGN.md S6): a token handed back by a waiter that left
// re-creates the wake list; the list must keep its TTL, so that a token nobody takes cannot stay
// forever (every later waiter would wake once for nothing).
func TestGivenBackWakeTokenExpires(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if it, err := p.FetchOrchestrationItem(wctx, time.Second, 3*time.Second, nil); it != nil || err != nil {
		t.Fatalf("fetch: %v %v", it, err)
	}
	// The waiter left; its BLPOP is still pending and takes the next token, then gives it back.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	key := p.Keyspace().WakeOrch(0)
	for start := time.Now(); time.Since(start) < 3*time.Second; time.Sleep(10 * time.Millisecond) {
		if p.Client().LLen(ctx, key).Val() > 0 {
			if ttl := p.Client().PTTL(ctx, key).Val(); ttl <= 0 {
				t.Fatalf("wake list re-created by a given-back token has TTL %v, want one", ttl)
			}
			return
		}
	}
	t.Fatal("the token was not given back")
}

// TestWakeReachesCompatibleFetcher (DESIGN.md S6): two orchestration fetchers with disjoint
// capability filters wait; work for one of them arrives. The wake-up must reach the fetcher that
// can take it, every time, not whichever waited longest.
func TestWakeReachesCompatibleFetcher(t *testing.T) {
	t.Parallel()
	const rounds, poll, bound = 20, 10 * time.Second, 3 * time.Second
	p := newTestProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	filter := func(lo, hi string) *provider.DispatcherCapabilityFilter {
		r, err := provider.NewSemverRange(lo, hi)
		if err != nil {
			t.Fatal(err)
		}
		return &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r}}
	}
	v1, v2 := filter("1.0.0", "1.9.9"), filter("2.0.0", "2.9.9")
	meta := provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
	event := func(id uint64) provider.Event {
		return provider.Event{EventID: id, InstanceID: "pinned", ExecutionID: 1, DuroxideVersion: "1.0.0",
			Kind: provider.ExternalEventEvent{Name: "e", Data: "{}"}}
	}
	raise := provider.WorkItem{Kind: provider.ExternalRaised{Instance: "pinned", Name: "e", Data: "{}"}}

	// The instance is pinned to 1.0.0: only the v1 fetcher may take its turns.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "pinned", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("first turn: %v %v", it, err)
	}
	first := meta
	first.PinnedDuroxideVersion = v1.SupportedDuroxideVersions[0].Min
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{event(1)}, Metadata: first}); err != nil {
		t.Fatal(err)
	}

	// The incompatible fetcher waits all along and must never get anything.
	other := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if it, err := p.FetchOrchestrationItem(ctx, time.Minute, poll, v2); it != nil {
				other <- errors.New("the v2 fetcher got the v1 instance")
				return
			} else if err != nil && ctx.Err() == nil {
				other <- err
				return
			}
		}
	}()
	for round := range rounds {
		got := make(chan *provider.LockedOrchestrationItem, 1)
		go func() {
			it, err := p.FetchOrchestrationItem(ctx, time.Minute, poll, v1)
			if err != nil {
				t.Error(err)
			}
			got <- it
		}()
		time.Sleep(50 * time.Millisecond) // both wait
		if err := p.EnqueueForOrchestrator(ctx, raise, 0); err != nil {
			t.Fatal(err)
		}
		select {
		case it := <-got:
			if it == nil {
				t.Fatalf("round %d: the v1 fetcher got nothing", round)
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
				HistoryDelta: []provider.Event{event(uint64(round + 2))}, Metadata: meta}); err != nil {
				t.Fatal(err)
			}
		case err := <-other:
			t.Fatal(err)
		case <-time.After(bound):
			t.Fatalf("round %d: the compatible fetcher was not woken within %v", round, bound)
		}
	}
}
