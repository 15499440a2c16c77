package conformance

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("atomicity",
		test{"test_atomicity_failure_rollback", AtomicityFailureRollback},
		test{"test_multi_operation_atomic_ack", MultiOperationAtomicAck},
		test{"test_lock_released_only_on_successful_ack", LockReleasedOnlyOnSuccessfulAck},
		test{"test_concurrent_ack_prevention", ConcurrentAckPrevention},
	)
}

// atomStartAck enqueues and fetches a start item for instance (30 s lock) and acks
// [OrchestrationStarted#1] with default metadata.
func atomStartAck(t *testing.T, p provider.Provider, instance string) {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started(instance)}})
}

// AtomicityFailureRollback proves a failed ack (duplicate event id) changes nothing and keeps the instance locked.
func AtomicityFailureRollback(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	atomStartAck(t, p, inst)
	if n := len(mustRead(t, p, inst)); n != 1 {
		t.Fatalf("initial history: got %d events, want 1", n)
	}

	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)
	err := p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started(inst)},
	})
	wantErr(t, err, "ack reusing event_id 1")

	if n := len(mustRead(t, p, inst)); n != 1 {
		t.Fatalf("history after failed ack: got %d events, want 1 (unchanged)", n)
	}
	mustNoOrch(t, p, longLock) // the lock survives the failed ack
}

// MultiOperationAtomicAck proves one ack commits history, worker items and orchestrator items together.
func MultiOperationAtomicAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)

	delta := []provider.Event{started(inst)}
	var workers []provider.WorkItem
	for i := uint64(1); i <= 3; i++ {
		name, input := fmt.Sprintf("Activity%d", i), fmt.Sprintf("input%d", i)
		delta = append(delta, ev(inst, i+1, provider.ActivityScheduledEvent{Name: name, Input: input}))
		workers = append(workers, provider.WorkItem{Kind: provider.ActivityExecute{
			Instance: inst, ExecutionID: 1, ID: i, Name: name, Input: input,
		}})
	}
	delta = append(delta, ev(inst, 5, provider.TimerCreatedEvent{FireAtMs: 1234567890}))
	orch := []provider.WorkItem{
		{Kind: provider.TimerFired{Instance: inst, ExecutionID: 1, ID: 1, FireAtMs: 1234567890}},
		externalRaised(inst, "TestEvent", "test-data"),
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: delta, WorkerItems: workers, OrchestratorItems: orch,
	})

	if n := len(mustRead(t, p, inst)); n != 5 {
		t.Fatalf("history: got %d events, want 5", n)
	}
	for i := 0; i < 3; i++ {
		if fetchWork(t, p, longLock, provider.TagFilterDefaultOnly()) == nil {
			t.Fatalf("worker fetch %d: got nothing, want an item", i+1)
		}
	}
	if w := fetchWork(t, p, longLock, provider.TagFilterDefaultOnly()); w != nil {
		t.Fatalf("worker fetch 4: got %+v, want nothing", w.Item)
	}
	it2 := mustFetchOrch(t, p, longLock)
	if len(it2.Item.Messages) != 2 {
		t.Fatalf("orchestrator batch: got %d messages, want 2 (TimerFired, ExternalRaised)", len(it2.Item.Messages))
	}
	if _, ok := it2.Item.Messages[0].Kind.(provider.TimerFired); !ok {
		t.Errorf("message 0: got %s, want TimerFired", it2.Item.Messages[0].Variant())
	}
	if _, ok := it2.Item.Messages[1].Kind.(provider.ExternalRaised); !ok {
		t.Errorf("message 1: got %s, want ExternalRaised", it2.Item.Messages[1].Variant())
	}
}

// LockReleasedOnlyOnSuccessfulAck proves an ack with a bogus token leaves the lock held until it expires.
func LockReleasedOnlyOnSuccessfulAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	mustFetchOrch(t, p, l)
	mustNoOrch(t, p, l)

	err := p.AckOrchestrationItem(ctx(t), "invalid-lock-token", provider.OrchestrationAck{
		ExecutionID: 1,
		HistoryDelta: []provider.Event{ev(inst, 2, provider.OrchestrationStartedEvent{
			Name: "TestOrch", Version: "1.0.0", Input: "{}",
		})},
	})
	wantErr(t, err, "ack with invalid lock token")
	mustNoOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	if it := mustFetchOrch(t, p, l); it.Item.Instance != inst {
		t.Fatalf("refetch: got %q, want %q", it.Item.Instance, inst)
	}
}

// ConcurrentAckPrevention proves two concurrent acks with the same token cannot both succeed.
func ConcurrentAckPrevention(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
				ExecutionID: 1, HistoryDelta: []provider.Event{started(inst)},
			})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("concurrent acks: %d succeeded, want exactly 1 (errors: %v)", ok, errs)
	}
}
