package conformance

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("instance_locking",
		test{"test_exclusive_instance_lock", ExclusiveInstanceLock},
		test{"test_lock_token_uniqueness", LockTokenUniqueness},
		test{"test_invalid_lock_token_rejection", InvalidLockTokenRejection},
		test{"test_concurrent_instance_fetching", ConcurrentInstanceFetching},
		test{"test_completions_arriving_during_lock_blocked", CompletionsArrivingDuringLockBlocked},
		test{"test_cross_instance_lock_isolation", CrossInstanceLockIsolation},
		test{"test_message_tagging_during_lock", MessageTaggingDuringLock},
		test{"test_ack_only_affects_locked_messages", AckOnlyAffectsLockedMessages},
		test{"test_multi_threaded_lock_contention", MultiThreadedLockContention},
		test{"test_multi_threaded_no_duplicate_processing", MultiThreadedNoDuplicateProcessing},
		test{"test_multi_threaded_lock_expiration_recovery", MultiThreadedLockExpirationRecovery},
	)
}

// ilCompletionIDs returns the ids of the ActivityCompleted messages of a batch, in order.
func ilCompletionIDs(msgs []provider.WorkItem) []uint64 {
	var ids []uint64
	for _, m := range msgs {
		if c, ok := m.Kind.(provider.ActivityCompleted); ok {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// ilConcurrentFetch starts n goroutines; goroutine i sleeps delay(i) and then fetches with
// lock and poll timeout 0. It returns the fetched items (nil for None) indexed by goroutine and
// reports fetch errors as test errors.
func ilConcurrentFetch(t *testing.T, p provider.Provider, n int, delay func(i int) time.Duration, lock time.Duration) []*provider.LockedOrchestrationItem {
	t.Helper()
	out := make([]*provider.LockedOrchestrationItem, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay(i))
			it, err := p.FetchOrchestrationItem(ctx(t), lock, 0, nil)
			if err != nil {
				t.Errorf("fetcher %d: fetch_orchestration_item: %v", i, err)
			}
			out[i] = it
		}()
	}
	wg.Wait()
	return out
}

// ExclusiveInstanceLock proves a locked instance cannot be fetched again until its lock expires, then with a new token.
func ExclusiveInstanceLock(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("instance-A"))
	it1 := mustFetchOrch(t, p, l)
	mustNoOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	it2 := mustFetchOrch(t, p, l)
	if it2.LockToken == it1.LockToken {
		t.Fatalf("refetch after expiry reused lock token %q", it1.LockToken)
	}
}

// LockTokenUniqueness proves every fetch hands out a distinct lock token.
func LockTokenUniqueness(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	for i := range 5 {
		mustEnqueueOrch(t, p, startItem(fmt.Sprintf("inst-%d", i)))
	}
	tokens := map[string]bool{}
	for range 5 {
		tokens[mustFetchOrch(t, p, longLock).LockToken] = true
	}
	if len(tokens) != 5 {
		t.Fatalf("got %d distinct lock tokens for 5 fetches, want 5", len(tokens))
	}
}

// InvalidLockTokenRejection proves ack and abandon reject an unknown token and leave the real lock held.
func InvalidLockTokenRejection(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueOrch(t, p, startItem("instance-A"))
	mustFetchOrch(t, p, longLock)

	wantErr(t, p.AckOrchestrationItem(ctx(t), "invalid-token", provider.OrchestrationAck{ExecutionID: 1}), "ack with invalid token")
	wantErr(t, p.AbandonOrchestrationItem(ctx(t), "invalid-token", 0, false), "abandon with invalid token")
	mustNoOrch(t, p, longLock)
}

// ConcurrentInstanceFetching proves staggered concurrent fetchers get all 10 instances, each once.
func ConcurrentInstanceFetching(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	for i := range 10 {
		mustEnqueueOrch(t, p, startItem(fmt.Sprintf("inst-%d", i)))
	}
	results := ilConcurrentFetch(t, p, 10, func(i int) time.Duration { return time.Duration(i) * 30 * time.Millisecond }, longLock)
	seen := map[string]bool{}
	for _, it := range results {
		if it != nil {
			seen[it.Item.Instance] = true
		}
	}
	if len(seen) != 10 {
		t.Fatalf("got %d distinct instances from 10 concurrent fetches, want 10", len(seen))
	}
}

// CompletionsArrivingDuringLockBlocked proves messages arriving during a lock wait for it and are then delivered with the start.
func CompletionsArrivingDuringLockBlocked(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	if it := mustFetchOrch(t, p, l); it.Item.Instance != inst {
		t.Fatalf("fetch: got %q, want %q", it.Item.Instance, inst)
	}
	for i := uint64(1); i <= 3; i++ {
		mustEnqueueOrch(t, p, activityCompleted(inst, i, fmt.Sprintf("result-%d", i)))
	}
	mustNoOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	it := mustFetchOrch(t, p, l)
	if it.Item.Instance != inst {
		t.Fatalf("refetch: got %q, want %q", it.Item.Instance, inst)
	}
	if len(it.Item.Messages) != 4 {
		t.Fatalf("refetch: got %d messages, want 4 (StartOrchestration + 3 completions)", len(it.Item.Messages))
	}
	if ids := ilCompletionIDs(it.Item.Messages); !slices.Equal(ids, []uint64{1, 2, 3}) {
		t.Fatalf("completion ids: got %v, want [1 2 3]", ids)
	}
}

// CrossInstanceLockIsolation proves a lock on one instance does not block fetching another.
func CrossInstanceLockIsolation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	createInstance(t, p, "instance-A")
	createInstance(t, p, "instance-B")
	mustEnqueueOrch(t, p, startItem("instance-A"))
	mustEnqueueOrch(t, p, startItem("instance-B"))

	a := mustFetchOrch(t, p, longLock)
	if a.Item.Instance != "instance-A" {
		t.Fatalf("first fetch: got %q, want instance-A", a.Item.Instance)
	}
	b := mustFetchOrch(t, p, longLock)
	if b.Item.Instance != "instance-B" {
		t.Fatalf("second fetch: got %q, want instance-B", b.Item.Instance)
	}
	mustAck(t, p, b.LockToken, provider.OrchestrationAck{ExecutionID: 1, Metadata: testMeta()})

	mustEnqueueOrch(t, p, activityCompleted("instance-B", 1, "done"))
	if b2 := mustFetchOrch(t, p, longLock); b2.Item.Instance != "instance-B" {
		t.Fatalf("fetch while A is locked: got %q, want instance-B", b2.Item.Instance)
	}
}

// MessageTaggingDuringLock proves an ack deletes only the messages fetched under its token.
func MessageTaggingDuringLock(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	createInstance(t, p, inst)
	mustEnqueueOrch(t, p, activityCompleted(inst, 1, "msg1"))
	mustEnqueueOrch(t, p, activityCompleted(inst, 2, "msg2"))

	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != inst || len(it.Item.Messages) != 2 {
		t.Fatalf("fetch: got instance %q with %d messages, want %q with 2", it.Item.Instance, len(it.Item.Messages), inst)
	}
	mustEnqueueOrch(t, p, activityCompleted(inst, 3, "msg3"))
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1})

	it2 := mustFetchOrch(t, p, longLock)
	if it2.Item.Instance != inst || len(it2.Item.Messages) != 1 {
		t.Fatalf("refetch: got instance %q with %d messages, want %q with 1", it2.Item.Instance, len(it2.Item.Messages), inst)
	}
	if c, ok := it2.Item.Messages[0].Kind.(provider.ActivityCompleted); !ok || c.ID != 3 {
		t.Fatalf("refetch: got %+v, want ActivityCompleted id 3", it2.Item.Messages[0].Kind)
	}
}

// AckOnlyAffectsLockedMessages proves messages arriving during a lock survive the ack and form the next batch.
func AckOnlyAffectsLockedMessages(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	createInstance(t, p, inst)
	mustEnqueueOrch(t, p, activityCompleted(inst, 1, "msg1"))
	it := mustFetchOrch(t, p, longLock)
	if len(it.Item.Messages) != 1 {
		t.Fatalf("fetch: got %d messages, want 1", len(it.Item.Messages))
	}
	mustEnqueueOrch(t, p, activityCompleted(inst, 2, "msg2"))
	mustEnqueueOrch(t, p, activityCompleted(inst, 3, "msg3"))
	mustNoOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1})

	it2 := mustFetchOrch(t, p, longLock)
	if it2.Item.Instance != inst || len(it2.Item.Messages) != 2 {
		t.Fatalf("refetch: got instance %q with %d messages, want %q with 2", it2.Item.Instance, len(it2.Item.Messages), inst)
	}
	if ids := ilCompletionIDs(it2.Item.Messages); !slices.Equal(ids, []uint64{2, 3}) {
		t.Fatalf("refetch completion ids: got %v, want [2 3]", ids)
	}
}

// MultiThreadedLockContention proves only one of many concurrent fetchers locks a single instance.
func MultiThreadedLockContention(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "contention-instance"
	mustEnqueueOrch(t, p, startItem(inst))
	results := ilConcurrentFetch(t, p, 10, func(i int) time.Duration { return time.Duration(i) * 5 * time.Millisecond }, longLock)
	var won []*provider.LockedOrchestrationItem
	for _, it := range results {
		if it != nil {
			won = append(won, it)
		}
	}
	if len(won) != 1 {
		t.Fatalf("%d of 10 concurrent fetchers got the instance, want exactly 1", len(won))
	}
	if won[0].Item.Instance != inst {
		t.Fatalf("winner fetched %q, want %q", won[0].Item.Instance, inst)
	}
	mustNoOrch(t, p, longLock)
}

// MultiThreadedNoDuplicateProcessing proves 40 contending fetchers never get the same instance twice.
func MultiThreadedNoDuplicateProcessing(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const instances = 20
	for i := range instances {
		mustEnqueueOrch(t, p, startItem(fmt.Sprintf("dup-test-%d", i)))
	}
	fetched := make([]string, instances*2)
	var wg sync.WaitGroup
	for i := range instances * 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration((i*3)%50) * time.Millisecond)
			for attempt := range 3 {
				it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, nil)
				if err != nil {
					if provider.IsRetryable(err) && attempt < 2 {
						time.Sleep(time.Duration(10*(attempt+1)) * time.Millisecond)
						continue
					}
					return // duroxide ignores fetchers that end with an error
				}
				if it != nil {
					fetched[i] = it.Item.Instance
				}
				return
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	n := 0
	for _, inst := range fetched {
		if inst == "" {
			continue
		}
		n++
		if seen[inst] {
			t.Errorf("instance %q fetched more than once", inst)
		}
		seen[inst] = true
	}
	if n > instances {
		t.Fatalf("fetched %d instances, but only %d exist", n, instances)
	}
}

// MultiThreadedLockExpirationRecovery proves a lock held by a stalled fetcher blocks others until it expires.
func MultiThreadedLockExpirationRecovery(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "expiration-instance"
	mustEnqueueOrch(t, p, startItem(inst))

	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var got2, got3 *provider.LockedOrchestrationItem
	run := func(fn func()) {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start // all three start together, like duroxide's barrier
			fn()
		}()
	}
	run(func() { // holds the lock and never acks
		it, err := p.FetchOrchestrationItem(ctx(t), l, 0, nil)
		switch {
		case err != nil:
			t.Errorf("holder: fetch: %v", err)
		case it == nil:
			t.Errorf("holder: fetch got nothing, want %q", inst)
		case it.Item.Instance != inst:
			t.Errorf("holder: fetch got %q, want %q", it.Item.Instance, inst)
		}
		time.Sleep(l + 200*time.Millisecond)
	})
	run(func() { // tries while the lock is held
		time.Sleep(200 * time.Millisecond)
		it, err := p.FetchOrchestrationItem(ctx(t), l, 0, nil)
		if err != nil {
			t.Errorf("contender: fetch: %v", err)
		}
		got2 = it
	})
	run(func() { // tries after the lock expired
		time.Sleep(l + 100*time.Millisecond)
		it, err := p.FetchOrchestrationItem(ctx(t), l, 0, nil)
		if err != nil {
			t.Errorf("recoverer: fetch: %v", err)
		}
		got3 = it
	})
	ready.Wait()
	close(start)
	done.Wait()

	if got2 != nil {
		t.Errorf("contender: got instance %q while locked, want nothing", got2.Item.Instance)
	}
	if got3 == nil {
		t.Fatal("recoverer: got nothing after lock expiry, want the instance")
	}
	if got3.Item.Instance != inst || got3.LockToken == "expired-token" {
		t.Fatalf("recoverer: got instance %q token %q, want %q with a new token", got3.Item.Instance, got3.LockToken, inst)
	}
}
