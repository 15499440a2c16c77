package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("queue_semantics",
		test{"test_worker_queue_fifo_ordering", WorkerQueueFIFOOrdering},
		test{"test_worker_peek_lock_semantics", WorkerPeekLockSemantics},
		test{"test_worker_ack_atomicity", WorkerAckAtomicity},
		test{"test_timer_delayed_visibility", TimerDelayedVisibility},
		test{"test_lost_lock_token_handling", LostLockTokenHandling},
		test{"test_worker_item_immediate_visibility", WorkerItemImmediateVisibility},
		test{"test_worker_delayed_visibility_skips_future_items", WorkerDelayedVisibilitySkipsFutureItems},
		test{"test_orphan_queue_messages_dropped", OrphanQueueMessagesDropped},
	)
}

// qsActivityID returns the id of a fetched ActivityExecute, failing the test for other variants.
func qsActivityID(t *testing.T, w *provider.LockedWorkItem) uint64 {
	t.Helper()
	a, ok := w.Item.Kind.(provider.ActivityExecute)
	if !ok {
		t.Fatalf("fetched %s, want ActivityExecute", w.Item.Variant())
	}
	return a.ID
}

// WorkerQueueFIFOOrdering proves worker items are dequeued in enqueue order.
func WorkerQueueFIFOOrdering(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	for i := range uint64(5) {
		mustEnqueueWorker(t, p, leActivity("instance-A", i, fmt.Sprintf("Activity%d", i), fmt.Sprintf("input%d", i)))
	}
	for i := range uint64(5) {
		w := mustFetchWork(t, p, longLock)
		a, ok := w.Item.Kind.(provider.ActivityExecute)
		if !ok || a.ID != i || a.Name != fmt.Sprintf("Activity%d", i) {
			t.Fatalf("fetch %d: got %+v, want ActivityExecute id %d Activity%d", i, w.Item.Kind, i, i)
		}
	}
	leNoWork(t, p, longLock, "queue drained")
}

// WorkerPeekLockSemantics proves a fetched worker item stays invisible until acked and is gone afterwards.
func WorkerPeekLockSemantics(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, leActivity("instance-A", 1, "Activity1", "input1"))
	w := mustFetchWork(t, p, longLock)
	qsActivityID(t, w)
	leNoWork(t, p, longLock, "item is locked")

	c := activityCompleted("instance-A", 1, "result1")
	wantNoErr(t, p.AckWorkItem(ctx(t), w.LockToken, &c), "ack_work_item")
	leNoWork(t, p, longLock, "item was acked")
}

// WorkerAckAtomicity proves a worker ack removes the item and enqueues its completion for the instance.
func WorkerAckAtomicity(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	atomStartAck(t, p, inst)
	mustEnqueueWorker(t, p, leActivity(inst, 1, "Activity1", "input1"))
	w := mustFetchWork(t, p, longLock)
	c := activityCompleted(inst, 1, "result1")
	wantNoErr(t, p.AckWorkItem(ctx(t), w.LockToken, &c), "ack_work_item")

	leNoWork(t, p, longLock, "item was acked")
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != inst || len(it.Item.Messages) != 1 {
		t.Fatalf("orchestrator fetch: got instance %q with %d messages, want %q with 1", it.Item.Instance, len(it.Item.Messages), inst)
	}
	if _, ok := it.Item.Messages[0].Kind.(provider.ActivityCompleted); !ok {
		t.Fatalf("orchestrator message: got %s, want ActivityCompleted", it.Item.Messages[0].Variant())
	}
}

// TimerDelayedVisibility proves an orchestrator item enqueued with a delay stays invisible until the delay elapses.
func TimerDelayedVisibility(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	atomStartAck(t, p, inst)
	err := p.EnqueueForOrchestrator(ctx(t), provider.WorkItem{Kind: provider.TimerFired{
		Instance: inst, ExecutionID: 1, ID: 1, FireAtMs: 0,
	}}, 5*time.Second)
	wantNoErr(t, err, "enqueue_for_orchestrator with 5 s delay")
	mustNoOrch(t, p, longLock)

	time.Sleep(5100 * time.Millisecond)
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != inst || len(it.Item.Messages) != 1 {
		t.Fatalf("fetch after delay: got instance %q with %d messages, want %q with 1", it.Item.Instance, len(it.Item.Messages), inst)
	}
	if _, ok := it.Item.Messages[0].Kind.(provider.TimerFired); !ok {
		t.Fatalf("fetch after delay: got %s, want TimerFired", it.Item.Messages[0].Variant())
	}
}

// LostLockTokenHandling proves an unacked worker item is redelivered after its lock expires.
func LostLockTokenHandling(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueWorker(t, p, leActivity("instance-A", 1, "Activity1", "input1"))
	mustFetchWork(t, p, l)
	leNoWork(t, p, l, "item is locked")

	time.Sleep(l + 100*time.Millisecond)
	qsActivityID(t, mustFetchWork(t, p, l))
}

// WorkerItemImmediateVisibility proves a newly enqueued worker item is fetchable at once.
func WorkerItemImmediateVisibility(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "test-immediate-vis"
	mustEnqueueWorker(t, p, leActivity(inst, 1, "TestActivity", "test"))
	w := fetchWork(t, p, l, provider.TagFilterDefaultOnly())
	if w == nil {
		t.Fatal("newly enqueued worker item is not immediately visible")
	}
	if a, ok := w.Item.Kind.(provider.ActivityExecute); !ok || a.Name != "TestActivity" {
		t.Fatalf("fetched %+v, want ActivityExecute TestActivity", w.Item.Kind)
	}
	leAckWork(t, p, w.LockToken, inst, 1)
}

// WorkerDelayedVisibilitySkipsFutureItems proves a worker item abandoned with a delay is skipped until the delay elapses.
func WorkerDelayedVisibilitySkipsFutureItems(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "test-delayed-vis"
	mustEnqueueWorker(t, p, leActivity(inst, 1, "Activity1", "first"))
	mustEnqueueWorker(t, p, leActivity(inst, 2, "Activity2", "second"))

	w1 := mustFetchWork(t, p, l)
	if id := qsActivityID(t, w1); id != 1 {
		t.Fatalf("first fetch: got activity %d, want 1", id)
	}
	const delay = 500 * time.Millisecond
	wantNoErr(t, p.AbandonWorkItem(ctx(t), w1.LockToken, delay, false), "abandon_work_item with delay")

	w2 := mustFetchWork(t, p, l)
	if id := qsActivityID(t, w2); id != 2 {
		t.Fatalf("second fetch: got activity %d, want 2 (1 is delayed)", id)
	}
	leNoWork(t, p, l, "1 is delayed and 2 is locked")

	time.Sleep(delay + 100*time.Millisecond)
	w3 := mustFetchWork(t, p, l)
	if id := qsActivityID(t, w3); id != 1 {
		t.Fatalf("fetch after delay: got activity %d, want 1", id)
	}
	leAckWork(t, p, w2.LockToken, inst, 2)
	leAckWork(t, p, w3.LockToken, inst, 1)
}

// OrphanQueueMessagesDropped proves QueueMessages for a nonexistent instance are deleted and those for an existing one delivered.
func OrphanQueueMessagesDropped(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	qm := func(instance, data string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.QueueMessage{Instance: instance, Name: "ConfigUpdate", Data: data}}
	}
	mustEnqueueOrch(t, p, qm("orphan-test", "v1"))
	mustEnqueueOrch(t, p, qm("orphan-test", "v2"))
	if it := fetchOrch(t, p, 5*time.Second); it != nil {
		t.Fatalf("fetch of orphan queue messages: got instance %q, want nothing", it.Item.Instance)
	}
	if it := fetchOrch(t, p, 5*time.Second); it != nil {
		t.Fatalf("second fetch: got instance %q, want nothing (orphan messages must be deleted)", it.Item.Instance)
	}

	const inst = "orphan-test-existing"
	createInstance(t, p, inst)
	mustEnqueueOrch(t, p, qm(inst, "v3"))
	it := fetchOrch(t, p, 5*time.Second)
	if it == nil {
		t.Fatal("fetch: got nothing, want the existing instance with its queued message")
	}
	if it.Item.Instance != inst {
		t.Fatalf("fetch: got instance %q, want %q", it.Item.Instance, inst)
	}
	found := false
	for _, m := range it.Item.Messages {
		if q, ok := m.Kind.(provider.QueueMessage); ok && q.Name == "ConfigUpdate" && q.Data == "v3" {
			found = true
		}
	}
	if !found {
		t.Fatalf("batch %+v lacks QueueMessage ConfigUpdate/v3", it.Item.Messages)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: it.Item.ExecutionID})
}
