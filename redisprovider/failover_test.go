package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/internal/testwait"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// loadRun drives a provider like a small deployment: enqueuers start orchestrations and
// dispatchers run one turn of each (fetch, then an ack completing it). It records what the
// provider acknowledged, to check after a crash that none of it was lost.
type loadRun struct {
	p         *redisprovider.Provider
	started   sync.Map // instance id -> true: EnqueueForOrchestrator returned nil
	completed sync.Map // instance id -> true: AckOrchestrationItem returned nil
	okCalls   atomic.Int64
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// loadLock is the load's lock timeout: a turn interrupted by a crash is fetchable again after it.
const loadLock = time.Second

func startLoad(p *redisprovider.Provider, prefix string) *loadRun {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loadRun{p: p, cancel: cancel}
	var next atomic.Int64
	for range 3 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				id := fmt.Sprintf("%s-%d", prefix, next.Add(1))
				err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
					Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0)
				if err == nil {
					l.started.Store(id, true)
					l.okCalls.Add(1)
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	for range 2 {
		l.wg.Go(func() {
			for ctx.Err() == nil {
				it, err := p.FetchOrchestrationItem(ctx, loadLock, 200*time.Millisecond, nil)
				if err != nil || it == nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				id := it.Item.Instance
				err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
					HistoryDelta: []provider.Event{{EventID: 1, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.30",
						Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}},
					Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}})
				if err == nil {
					l.completed.Store(id, true)
					l.okCalls.Add(1)
				}
			}
		})
	}
	return l
}

func (l *loadRun) stop() { l.cancel(); l.wg.Wait() }

// waitCalls waits until the load made n more successful calls (the provider works again).
func (l *loadRun) waitCalls(t *testing.T, n int64, within time.Duration) time.Duration {
	t.Helper()
	start, from := time.Now(), l.okCalls.Load()
	for l.okCalls.Load() < from+n {
		if time.Since(start) > within {
			t.Fatalf("the provider made no progress within %v", within)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// verify checks that every acknowledged start and completion survived: a completed instance has
// its history; a started one has a history or its start item is still queued (fetchable once the
// locks of turns the crash interrupted expired).
func (l *loadRun) verify(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	queued := map[string]bool{}
	for tries := 0; ; {
		it, err := l.p.FetchOrchestrationItem(ctx, time.Minute, 2*loadLock, nil)
		if err != nil && provider.IsRetryable(err) && tries < 10 {
			tries++ // a connection the failover closed: retryable, as the contract says
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if it == nil {
			break
		}
		queued[it.Item.Instance] = true
	}
	hasHistory := func(id string) bool {
		h, err := l.p.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return len(h) > 0
	}
	var starts, completions, lost int
	l.completed.Range(func(k, _ any) bool {
		completions++
		if !hasHistory(k.(string)) {
			lost++
			t.Errorf("acknowledged completion of %s lost", k)
		}
		return lost < 10
	})
	l.started.Range(func(k, _ any) bool {
		starts++
		if id := k.(string); !queued[id] && !hasHistory(id) {
			lost++
			t.Errorf("acknowledged start of %s lost", id)
		}
		return lost < 10
	})
	t.Logf("checked %d acknowledged starts and %d completions", starts, completions)
	if completions == 0 {
		t.Error("the load completed nothing")
	}
}

// TestRestartLosesNothingAcknowledged (DESIGN.md S10): Redis with appendfsync always is
// SIGKILLed under load and restarted from its directory. Nothing the provider acknowledged is
// lost, and the same provider goes on by itself (no restart of the process, no reconnect call).
func TestRestartLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	ctx := context.Background()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Namespace: "restart", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	load := startLoad(p, "r")
	kills := 1
	if longTests() {
		kills = 10
	}
	for i := range kills {
		load.waitCalls(t, 200, 20*time.Second)
		srv.Kill()
		time.Sleep(100 * time.Millisecond) // deliberate: the server stays down a while
		srv.Restart()
		took := load.waitCalls(t, 1, 20*time.Second)
		t.Logf("kill %d: first successful call %v after the restart", i+1, took.Round(time.Millisecond))
	}
	load.waitCalls(t, 100, 20*time.Second)
	load.stop()
	load.verify(t)
	checkFsck(t, p)
}

// TestSentinelFailoverWithWaitReplicas (DESIGN.md S10): a primary, a replica and a Sentinel on
// loopback. With Options.WaitReplicas 1, a write the replica did not acknowledge fails with
// ErrNotReplicated; after the primary is SIGKILLed and Sentinel promotes the replica, the same
// provider goes on by itself and nothing it acknowledged is lost.
func TestSentinelFailoverWithWaitReplicas(t *testing.T) {
	t.Parallel()
	fast := []string{"--repl-diskless-sync-delay", "0"} // a new replica syncs at once
	primary := redistest.Start(t, fast...)
	replica := redistest.Start(t, append(fast, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))...)
	sentinel := redistest.StartSentinel(t,
		fmt.Sprintf("sentinel monitor dx 127.0.0.1 %d 1", primary.Port),
		"sentinel down-after-milliseconds dx 300",
		"sentinel failover-timeout dx 2000")
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the replica to sync", func() bool {
		info := redis.NewClient(&redis.Options{Addr: replica.Addr()})
		defer info.Close()
		return strings.Contains(info.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	client := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "dx", SentinelAddrs: []string{sentinel.Addr()},
		ReadTimeout: 5 * time.Second})
	defer client.Close()
	p, err := redisprovider.NewFromClient(ctx, client, redisprovider.Options{Namespace: "failover", Logger: quietLogger,
		WaitReplicas: 1, WaitTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	// A frozen replica acknowledges nothing: the write is refused as not replicated.
	replica.Stop()
	err = p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "unreplicated", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0)
	replica.Resume()
	if !errors.Is(err, redisprovider.ErrNotReplicated) || provider.IsRetryable(err) {
		t.Fatalf("write while the replica is frozen: got %v, want a permanent ErrNotReplicated", err)
	}
	t.Logf("while the replica was frozen: %v", err)

	load := startLoad(p, "f")
	load.waitCalls(t, 100, 20*time.Second)
	primary.Kill()
	killed := time.Now()
	waitFor(t, 20*time.Second, "Sentinel to promote the replica", func() bool {
		s := redis.NewSentinelClient(&redis.Options{Addr: sentinel.Addr()})
		defer s.Close()
		addr, err := s.GetMasterAddrByName(ctx, "dx").Result()
		return err == nil && len(addr) == 2 && addr[1] == fmt.Sprint(replica.Port)
	})
	t.Logf("Sentinel promoted the replica %v after the primary was killed", time.Since(killed).Round(time.Millisecond))
	// The promoted replica has no replica of its own: writes wait for none from now on, so the
	// load's writes fail as not replicated; reads and fetches work. Give it a replica back.
	old := primary
	old.Args = append(fast, "--replicaof", "127.0.0.1", fmt.Sprint(replica.Port))
	old.Dir = t.TempDir()
	old.Restart()
	took := load.waitCalls(t, 50, 30*time.Second)
	t.Logf("first successful writes %v after the promotion", took.Round(time.Millisecond))
	load.stop()
	load.verify(t)
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, within, what, cond)
}

// BenchmarkWaitReplicas measures what Options.WaitReplicas costs: one orchestration turn (enqueue
// a start, fetch it, ack it completed: two waited writes) against a throw-away primary with one
// replica on loopback, without and with waiting for the replica.
func BenchmarkWaitReplicas(b *testing.B) {
	fast := []string{"--repl-diskless-sync-delay", "0"}
	primary := redistest.Start(b, fast...)
	replica := redistest.Start(b, append(fast, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))...)
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c := redis.NewClient(&redis.Options{Addr: replica.Addr()})
		up := strings.Contains(c.Info(ctx, "replication").Val(), "master_link_status:up")
		_ = c.Close()
		if up {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the replica did not sync")
		}
	}
	for _, cross := range []bool{false, true} {
		for _, replicas := range []int{0, 1} {
			benchWaitReplicas(b, primary.Addr(), replicas, cross)
		}
	}
}

// benchWaitReplicas is one case of BenchmarkWaitReplicas; with cross, in a namespace of 12
// partitions, the ack also starts a child in another partition (forwarded: two more waits).
func benchWaitReplicas(b *testing.B, addr string, replicas int, cross bool) {
	ctx := context.Background()
	b.Run(fmt.Sprintf("cross=%v/replicas=%d", cross, replicas), func(b *testing.B) {
		parts := 1
		if cross {
			parts = 12
		}
		p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Logger: quietLogger, Partitions: parts,
			Namespace: fmt.Sprintf("wait%d-%d", replicas, time.Now().UnixNano()), WaitReplicas: replicas})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		b.ResetTimer()
		{
			for i := range b.N {
				id := fmt.Sprint("w-", i)
				var kids []provider.WorkItem
				if cross {
					kid := id + "-kid"
					for j := 0; p.Keyspace().PartitionOf(kid) == p.Keyspace().PartitionOf(id); j++ {
						kid = fmt.Sprintf("%s-kid%d", id, j)
					}
					kids = []provider.WorkItem{{Kind: provider.StartOrchestration{Instance: kid, Orchestration: "O", Input: "{}",
						ParentInstance: &id, ParentID: ptrU64(2), ExecutionID: 1}}}
				}
				if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
					Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
					b.Fatal(err)
				}
				it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
				if err != nil || it == nil {
					b.Fatalf("fetch: %v %v", it, err)
				}
				if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
					HistoryDelta: []provider.Event{{EventID: 1, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.30",
						Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}}, OrchestratorItems: kids,
					Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// TestForwardWaitsForReplicas: with Options.WaitReplicas, a cross-partition message is forwarded
// only once a replica has the commit that wrote it, and trimmed only once a replica has its apply.
// A primary and a replica (SIGSTOPped to hold back its acknowledgements), 12 partitions on the one
// primary. Not parallel: it sets the package's forwarding hooks.
func TestForwardWaitsForReplicas(t *testing.T) {
	fast := []string{"--repl-diskless-sync-delay", "0"}
	primary := redistest.Start(t, fast...)
	replica := redistest.Start(t, append(fast, "--replicaof", "127.0.0.1", fmt.Sprint(primary.Port))...)
	ctx := context.Background()
	waitFor(t, 10*time.Second, "the replica to sync", func() bool {
		info := redis.NewClient(&redis.Options{Addr: replica.Addr()})
		defer info.Close()
		return strings.Contains(info.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	waitFor(t, 10*time.Second, "the replica to acknowledge a write", func() bool {
		c := redis.NewClient(&redis.Options{Addr: primary.Addr()})
		defer c.Close()
		c.Set(ctx, "fwdwait-probe", "1", time.Minute)
		n, _ := c.Do(ctx, "WAIT", 1, 200).Int()
		return n == 1
	})
	// 2 s: a loaded CI machine once took over 300 ms to acknowledge (each frozen-replica case
	// below waits it out once).
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: primary.Addr(), Namespace: "fwdwait", Partitions: 12,
		Logger: quietLogger, WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Cleanup(func() { redisprovider.SetForwardHooks(nil, nil); redisprovider.SetApplyHook(nil) })
	queued := func(kids []string) (n int) {
		for _, k := range kids {
			if p.Keyspace().PartitionOf(k) != p.Keyspace().PartitionOf(kids[0][:strings.Index(kids[0], "-kid-")]) {
				n += int(p.Client().Exists(ctx, p.Keyspace().Messages(k)).Val())
			}
		}
		return n
	}

	// The replica acknowledges: the children are started when the parent's ack returns.
	kids := partTree(t, p, "acked", 8)
	if n := outboxEntries(t, p); n != 0 {
		t.Fatalf("%d outbox entries left after an acknowledged turn", n)
	}
	finishKids(t, p, "acked", kids)

	// A commit no replica acknowledged: the ack fails, and no forward sends its messages until a
	// replica has it.
	layoutEnqueue(t, p, layoutStart("unacked"))
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v %v", it, err)
	}
	kids = nil
	var items []provider.WorkItem
	for i := range 8 {
		root := "unacked"
		kids = append(kids, fmt.Sprintf("%s-kid-%d", root, i))
		items = append(items, provider.WorkItem{Kind: provider.StartOrchestration{Instance: kids[i], Orchestration: "O", Input: "{}",
			ParentInstance: &root, ParentID: ptrU64(uint64(i + 2)), ExecutionID: 1}})
	}
	replica.Stop()
	err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{layoutStarted("unacked", 1)}, OrchestratorItems: items, Metadata: layoutRunning()})
	if !errors.Is(err, redisprovider.ErrNotReplicated) {
		replica.Resume()
		t.Fatalf("ack while the replica is frozen: %v, want ErrNotReplicated", err)
	}
	err = p.ForwardAll(ctx)
	if !errors.Is(err, redisprovider.ErrNotReplicated) || queued(kids) != 0 {
		replica.Resume()
		t.Fatalf("forward while the replica is frozen: %v with %d children started, want ErrNotReplicated and none", err, queued(kids))
	}
	replica.Resume()
	if err := p.ForwardAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outboxEntries(t, p); n != 0 || queued(kids) == 0 {
		t.Fatalf("after the replica came back: %d outbox entries, %d children started", n, queued(kids))
	}
	finishKids(t, p, "unacked", kids)

	// An apply no replica acknowledged: applied on the primary, but not trimmed until a replica has
	// it; the next forward trims without applying again.
	redisprovider.SetForwardHooks(func(int) bool { return false }, nil) // the ack leaves its entries
	kids = partTree(t, p, "applied", 8)
	redisprovider.SetForwardHooks(nil, nil)
	var once sync.Once
	redisprovider.SetApplyHook(func(int, int) { once.Do(replica.Stop) })
	err = p.ForwardAll(ctx)
	replica.Resume()
	redisprovider.SetApplyHook(nil)
	if !errors.Is(err, redisprovider.ErrNotReplicated) || outboxEntries(t, p) == 0 {
		t.Fatalf("forward whose apply was not replicated: %v with %d outbox entries, want ErrNotReplicated and entries kept", err, outboxEntries(t, p))
	}
	if err := p.ForwardAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outboxEntries(t, p); n != 0 {
		t.Fatalf("%d outbox entries left", n)
	}
	finishKids(t, p, "applied", kids)
	checkFsck(t, p)
}
