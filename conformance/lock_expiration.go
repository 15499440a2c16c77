package conformance

import (
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("lock_expiration",
		test{"test_lock_expires_after_timeout", LockExpiresAfterTimeout},
		test{"test_abandon_releases_lock_immediately", AbandonReleasesLockImmediately},
		test{"test_lock_renewal_on_ack", LockRenewalOnAck},
		test{"test_concurrent_lock_attempts_respect_expiration", ConcurrentLockAttemptsRespectExpiration},
		test{"test_worker_lock_renewal_success", WorkerLockRenewalSuccess},
		test{"test_worker_lock_renewal_invalid_token", WorkerLockRenewalInvalidToken},
		test{"test_worker_lock_renewal_after_expiration", WorkerLockRenewalAfterExpiration},
		test{"test_worker_lock_renewal_extends_timeout", WorkerLockRenewalExtendsTimeout},
		test{"test_worker_lock_renewal_after_ack", WorkerLockRenewalAfterAck},
		test{"test_abandon_work_item_releases_lock", AbandonWorkItemReleasesLock},
		test{"test_abandon_work_item_with_delay", AbandonWorkItemWithDelay},
		test{"test_worker_ack_fails_after_lock_expiry", WorkerAckFailsAfterLockExpiry},
		test{"test_orchestration_lock_renewal_after_expiration", OrchestrationLockRenewalAfterExpiration},
	)
}

// leActivity is an ActivityExecute of instance/execution 1 with the given id, name and input.
func leActivity(instance string, id uint64, name, input string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id, Name: name, Input: input}}
}

// leAckWork acks a worker item with an ActivityCompleted(result "done") for instance/id and fails the test on error.
func leAckWork(t *testing.T, p provider.Provider, token, instance string, id uint64) {
	t.Helper()
	c := activityCompleted(instance, id, "done")
	wantNoErr(t, p.AckWorkItem(ctx(t), token, &c), "ack_work_item")
}

// leNoWork fails the test when a worker fetch (default tags) returns an item.
func leNoWork(t *testing.T, p provider.Provider, lock time.Duration, why string) {
	t.Helper()
	if w := fetchWork(t, p, lock, provider.TagFilterDefaultOnly()); w != nil {
		t.Fatalf("fetch_work_item: got %+v, want nothing (%s)", w.Item, why)
	}
}

// LockExpiresAfterTimeout proves an expired lock lets the instance be refetched with a new token and voids the old one.
func LockExpiresAfterTimeout(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("instance-A"))
	it := mustFetchOrch(t, p, l)
	mustNoOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	it2 := mustFetchOrch(t, p, l)
	if it2.Item.Instance != "instance-A" {
		t.Fatalf("refetch: got %q, want instance-A", it2.Item.Instance)
	}
	if it2.LockToken == it.LockToken {
		t.Fatalf("refetch reused lock token %q", it.LockToken)
	}
	wantErr(t, p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{ExecutionID: 1}), "ack with the expired token")
}

// AbandonReleasesLockImmediately proves abandon makes the instance fetchable at once.
func AbandonReleasesLockImmediately(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("instance-A"))
	it := mustFetchOrch(t, p, l)
	mustNoOrch(t, p, l)

	wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), it.LockToken, 0, false), "abandon_orchestration_item")
	if it2 := mustFetchOrch(t, p, l); it2.Item.Instance != "instance-A" {
		t.Fatalf("refetch: got %q, want instance-A", it2.Item.Instance)
	}
}

// LockRenewalOnAck proves a message arriving during a lock becomes fetchable right after a successful ack.
func LockRenewalOnAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, l)
	mustNoOrch(t, p, l)
	mustEnqueueOrch(t, p, startItem(inst))
	mustNoOrch(t, p, l)

	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started(inst)}})
	if it2 := mustFetchOrch(t, p, l); it2.Item.Instance != inst {
		t.Fatalf("fetch after ack: got %q, want %q", it2.Item.Instance, inst)
	}
}

// ConcurrentLockAttemptsRespectExpiration proves concurrent fetchers are refused until the lock expires.
func ConcurrentLockAttemptsRespectExpiration(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("instance-A"))
	mustFetchOrch(t, p, l)

	results := make([]*provider.LockedOrchestrationItem, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond)
			it, err := p.FetchOrchestrationItem(ctx(t), l, 0, nil)
			if err != nil {
				t.Errorf("fetcher %d: %v", i, err)
			}
			results[i] = it
		}()
	}
	time.Sleep(200 * time.Millisecond)
	wg.Wait()
	for i, it := range results {
		if it != nil {
			t.Fatalf("fetcher %d: got instance %q while locked, want nothing", i, it.Item.Instance)
		}
	}

	time.Sleep(max(l-200*time.Millisecond, 0) + 100*time.Millisecond)
	if it := mustFetchOrch(t, p, l); it.Item.Instance != "instance-A" {
		t.Fatalf("fetch after expiry: got %q, want instance-A", it.Item.Instance)
	}
}

// WorkerLockRenewalSuccess proves a held worker lock can be renewed and stays held.
func WorkerLockRenewalSuccess(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueWorker(t, p, leActivity("test-instance", 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, l)
	leNoWork(t, p, l, "item is locked")

	time.Sleep(100 * time.Millisecond)
	wantNoErr(t, p.RenewWorkItemLock(ctx(t), w.LockToken, l), "renew_work_item_lock")
	leNoWork(t, p, l, "item is still locked after renewal")
}

// WorkerLockRenewalInvalidToken proves renewing an unknown worker token fails.
func WorkerLockRenewalInvalidToken(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	wantErr(t, p.RenewWorkItemLock(ctx(t), "invalid-token-123", 30*time.Second), "renew with invalid token")
}

// WorkerLockRenewalAfterExpiration proves an expired worker lock cannot be renewed.
func WorkerLockRenewalAfterExpiration(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, leActivity("test-instance", 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, time.Second)

	time.Sleep(f.LockTimeout() + 100*time.Millisecond)
	wantErr(t, p.RenewWorkItemLock(ctx(t), w.LockToken, f.LockTimeout()), "renew of an expired worker lock")
}

// WorkerLockRenewalExtendsTimeout proves a renewal pushes the worker lock past its original expiry.
func WorkerLockRenewalExtendsTimeout(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "test-lock-renewal-extends"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{started(inst)},
		WorkerItems:  []provider.WorkItem{leActivity(inst, 1, "TestActivity", "test")},
		Metadata:     provider.ExecutionMetadata{OrchestrationName: "TestOrch", Status: provider.StatusRunning},
	})

	w := mustFetchWork(t, p, l)
	pre := time.Duration(float64(l) * 0.6)
	time.Sleep(pre)
	wantNoErr(t, p.RenewWorkItemLock(ctx(t), w.LockToken, l), "renew_work_item_lock")
	time.Sleep(l - pre)
	leNoWork(t, p, l, "renewal at 0.6 L extended the lock to 1.6 L")
}

// WorkerLockRenewalAfterAck proves a worker lock cannot be renewed once the item is acked.
func WorkerLockRenewalAfterAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueWorker(t, p, leActivity("test-instance", 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, l)
	leAckWork(t, p, w.LockToken, "test-instance", 1)
	wantErr(t, p.RenewWorkItemLock(ctx(t), w.LockToken, l), "renew after ack")
}

// AbandonWorkItemReleasesLock proves abandoning a worker item makes it fetchable at once with a new token.
func AbandonWorkItemReleasesLock(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "test-abandon-work"
	mustEnqueueWorker(t, p, leActivity(inst, 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, l)
	if _, ok := w.Item.Kind.(provider.ActivityExecute); !ok {
		t.Fatalf("fetched %s, want ActivityExecute", w.Item.Variant())
	}
	leNoWork(t, p, l, "item is locked")

	wantNoErr(t, p.AbandonWorkItem(ctx(t), w.LockToken, 0, false), "abandon_work_item")
	w2 := mustFetchWork(t, p, l)
	if _, ok := w2.Item.Kind.(provider.ActivityExecute); !ok {
		t.Fatalf("refetched %s, want ActivityExecute", w2.Item.Variant())
	}
	if w2.LockToken == w.LockToken {
		t.Fatalf("refetch reused lock token %q", w.LockToken)
	}
	leAckWork(t, p, w2.LockToken, inst, 1)
}

// AbandonWorkItemWithDelay proves an abandon delay hides the worker item until it elapses.
func AbandonWorkItemWithDelay(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "test-abandon-delay"
	mustEnqueueWorker(t, p, leActivity(inst, 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, l)

	const delay = 500 * time.Millisecond
	wantNoErr(t, p.AbandonWorkItem(ctx(t), w.LockToken, delay, false), "abandon_work_item with delay")
	leNoWork(t, p, l, "item is delayed")

	time.Sleep(delay + 100*time.Millisecond)
	w2 := mustFetchWork(t, p, l)
	if _, ok := w2.Item.Kind.(provider.ActivityExecute); !ok {
		t.Fatalf("refetched %s, want ActivityExecute", w2.Item.Variant())
	}
	leAckWork(t, p, w2.LockToken, inst, 1)
}

// WorkerAckFailsAfterLockExpiry proves a worker ack with an expired lock fails and leaves the item queued.
func WorkerAckFailsAfterLockExpiry(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "ack-expiry-test"
	mustEnqueueWorker(t, p, leActivity(inst, 1, "TestActivity", "test"))
	w := mustFetchWork(t, p, time.Second)

	time.Sleep(time.Second + 200*time.Millisecond)
	c := activityCompleted(inst, 1, "done")
	wantErr(t, p.AckWorkItem(ctx(t), w.LockToken, &c), "ack_work_item after lock expiry")
	if fetchWork(t, p, 5*time.Second, provider.TagFilterDefaultOnly()) == nil {
		t.Fatal("item is gone after the rejected ack, want it still queued and refetchable")
	}
}

// OrchestrationLockRenewalAfterExpiration proves an expired orchestration lock cannot be renewed.
func OrchestrationLockRenewalAfterExpiration(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("orch-renewal-expiry"))
	it := mustFetchOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	wantErr(t, p.RenewOrchestrationItemLock(ctx(t), it.LockToken, l), "renew of an expired orchestration lock")
}
