package conformance

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("poison_message",
		test{"orchestration_attempt_count_starts_at_one", OrchestrationAttemptCountStartsAtOne},
		test{"orchestration_attempt_count_increments_on_refetch", OrchestrationAttemptCountIncrementsOnRefetch},
		test{"worker_attempt_count_starts_at_one", WorkerAttemptCountStartsAtOne},
		test{"worker_attempt_count_increments_on_lock_expiry", WorkerAttemptCountIncrementsOnLockExpiry},
		test{"attempt_count_is_per_message", AttemptCountIsPerMessage},
		test{"abandon_work_item_ignore_attempt_decrements", AbandonWorkItemIgnoreAttemptDecrements},
		test{"abandon_orchestration_item_ignore_attempt_decrements", AbandonOrchestrationItemIgnoreAttemptDecrements},
		test{"ignore_attempt_never_goes_negative", IgnoreAttemptNeverGoesNegative},
		test{"max_attempt_count_across_message_batch", MaxAttemptCountAcrossMessageBatch},
		test{"orchestration_ignore_attempt_preserves_hidden_start", OrchestrationIgnoreAttemptPreservesHiddenStart},
		test{"orchestration_delayed_abandon_preserves_unlocked_rows", OrchestrationDelayedAbandonPreservesUnlockedRows},
	)
}

// pmFetchOrch fetches an orchestration item (lock l) and checks its attempt count.
func pmFetchOrch(t *testing.T, p provider.Provider, l time.Duration, wantAttempt uint32, what string) *provider.LockedOrchestrationItem {
	t.Helper()
	it := mustFetchOrch(t, p, l)
	if it.AttemptCount != wantAttempt {
		t.Fatalf("%s: got attempt_count %d, want %d", what, it.AttemptCount, wantAttempt)
	}
	return it
}

// pmFetchWork fetches a worker item (lock l) and checks its attempt count.
func pmFetchWork(t *testing.T, p provider.Provider, l time.Duration, wantAttempt uint32, what string) *provider.LockedWorkItem {
	t.Helper()
	w := mustFetchWork(t, p, l)
	if w.AttemptCount != wantAttempt {
		t.Fatalf("%s: got attempt_count %d, want %d", what, w.AttemptCount, wantAttempt)
	}
	return w
}

// pmAbandonOrch abandons an orchestration item and fails the test on error.
func pmAbandonOrch(t *testing.T, p provider.Provider, token string, delay time.Duration, ignoreAttempt bool) {
	t.Helper()
	wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), token, delay, ignoreAttempt), "abandon_orchestration_item")
}

// pmAbandonWork abandons a worker item (no delay) and fails the test on error.
func pmAbandonWork(t *testing.T, p provider.Provider, token string, ignoreAttempt bool) {
	t.Helper()
	wantNoErr(t, p.AbandonWorkItem(ctx(t), token, 0, ignoreAttempt), "abandon_work_item")
}

// pmAckEmpty acks an orchestration turn with nothing (execution 1, default metadata).
func pmAckEmpty(t *testing.T, p provider.Provider, token string) {
	t.Helper()
	mustAck(t, p, token, provider.OrchestrationAck{ExecutionID: 1})
}

// OrchestrationAttemptCountStartsAtOne proves the first orchestration fetch reports attempt 1.
func OrchestrationAttemptCountStartsAtOne(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueOrch(t, p, startItem("poison-test-1"))
	it := pmFetchOrch(t, p, f.LockTimeout(), 1, "first fetch")
	pmAckEmpty(t, p, it.LockToken)
}

// OrchestrationAttemptCountIncrementsOnRefetch proves each refetch after an abandon increments the attempt count.
func OrchestrationAttemptCountIncrementsOnRefetch(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("poison-test-2"))
	it := pmFetchOrch(t, p, l, 1, "first fetch")
	pmAbandonOrch(t, p, it.LockToken, 0, false)
	it = pmFetchOrch(t, p, l, 2, "second fetch")
	pmAbandonOrch(t, p, it.LockToken, 0, false)
	it = pmFetchOrch(t, p, l, 3, "third fetch")
	pmAckEmpty(t, p, it.LockToken)
}

// WorkerAttemptCountStartsAtOne proves the first worker fetch reports attempt 1.
func WorkerAttemptCountStartsAtOne(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "poison-test-3"
	mustEnqueueWorker(t, p, activityItem(inst, 1))
	w := pmFetchWork(t, p, f.LockTimeout(), 1, "first fetch")
	leAckWork(t, p, w.LockToken, inst, 1)
	if _, ok := w.Item.Kind.(provider.ActivityExecute); !ok {
		t.Fatalf("fetched %s, want ActivityExecute", w.Item.Variant())
	}
}

// WorkerAttemptCountIncrementsOnLockExpiry proves a worker item refetched after its lock expired reports attempt 2.
func WorkerAttemptCountIncrementsOnLockExpiry(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "poison-test-4"
	mustEnqueueWorker(t, p, activityItem(inst, 1))
	pmFetchWork(t, p, time.Second, 1, "first fetch")
	time.Sleep(1100 * time.Millisecond)
	w := pmFetchWork(t, p, time.Second, 2, "fetch after lock expiry")
	leAckWork(t, p, w.LockToken, inst, 1)
}

// AttemptCountIsPerMessage proves two worker items keep independent attempt counts.
func AttemptCountIsPerMessage(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueWorker(t, p, leActivity("poison-test-5a", 1, "Activity1", "{}"))
	mustEnqueueWorker(t, p, leActivity("poison-test-5b", 2, "Activity2", "{}"))
	w1 := pmFetchWork(t, p, l, 1, "first item")
	w2 := pmFetchWork(t, p, l, 1, "second item")
	a1, ok1 := w1.Item.Kind.(provider.ActivityExecute)
	a2, ok2 := w2.Item.Kind.(provider.ActivityExecute)
	if !ok1 || !ok2 {
		t.Fatalf("fetched %s and %s, want ActivityExecute", w1.Item.Variant(), w2.Item.Variant())
	}
	if a1.ID == a2.ID {
		t.Fatalf("both fetches returned activity %d, want different items", a1.ID)
	}
	leAckWork(t, p, w1.LockToken, "poison-test-5a", a1.ID)
	leAckWork(t, p, w2.LockToken, "poison-test-5b", a2.ID)
}

// AbandonWorkItemIgnoreAttemptDecrements proves abandon with ignore_attempt undoes the fetch's increment.
func AbandonWorkItemIgnoreAttemptDecrements(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "poison-test-ignore-1"
	mustEnqueueWorker(t, p, activityItem(inst, 1))
	w := pmFetchWork(t, p, l, 1, "first fetch")
	pmAbandonWork(t, p, w.LockToken, false)
	w = pmFetchWork(t, p, l, 2, "second fetch")
	pmAbandonWork(t, p, w.LockToken, true)
	w = pmFetchWork(t, p, l, 2, "third fetch (decremented then re-incremented)")
	leAckWork(t, p, w.LockToken, inst, 1)
}

// AbandonOrchestrationItemIgnoreAttemptDecrements proves orchestration abandon with ignore_attempt undoes the fetch's increment.
func AbandonOrchestrationItemIgnoreAttemptDecrements(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	mustEnqueueOrch(t, p, startItem("poison-test-ignore-2"))
	it := pmFetchOrch(t, p, l, 1, "first fetch")
	pmAbandonOrch(t, p, it.LockToken, 0, false)
	it = pmFetchOrch(t, p, l, 2, "second fetch")
	pmAbandonOrch(t, p, it.LockToken, 0, true)
	it = pmFetchOrch(t, p, l, 2, "third fetch (decremented then re-incremented)")
	pmAckEmpty(t, p, it.LockToken)
}

// IgnoreAttemptNeverGoesNegative proves repeated ignore_attempt abandons floor the stored count at 0.
func IgnoreAttemptNeverGoesNegative(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "poison-test-never-neg"
	mustEnqueueWorker(t, p, activityItem(inst, 1))
	w := pmFetchWork(t, p, l, 1, "first fetch")
	pmAbandonWork(t, p, w.LockToken, true)
	w = pmFetchWork(t, p, l, 1, "second fetch")
	pmAbandonWork(t, p, w.LockToken, true)
	w = pmFetchWork(t, p, l, 1, "third fetch (count must not go below 0)")
	leAckWork(t, p, w.LockToken, inst, 1)
}

// MaxAttemptCountAcrossMessageBatch proves a batch reports the highest attempt count among its messages.
func MaxAttemptCountAcrossMessageBatch(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "poison-batch-test"
	mustEnqueueOrch(t, p, startItem(inst))
	it := pmFetchOrch(t, p, l, 1, "first fetch")
	if len(it.Item.Messages) != 1 {
		t.Fatalf("first fetch: got %d messages, want 1", len(it.Item.Messages))
	}
	pmAbandonOrch(t, p, it.LockToken, 0, false)
	it = pmFetchOrch(t, p, l, 2, "second fetch")
	mustEnqueueOrch(t, p, activityCompleted(inst, 1, "activity result"))
	pmAbandonOrch(t, p, it.LockToken, 0, false)

	it = mustFetchOrch(t, p, l)
	if len(it.Item.Messages) != 2 {
		t.Fatalf("third fetch: got %d messages, want 2", len(it.Item.Messages))
	}
	if it.AttemptCount != 3 {
		t.Fatalf("third fetch: got attempt_count %d, want 3 (max over the batch)", it.AttemptCount)
	}
	pmAckEmpty(t, p, it.LockToken)
}

// OrchestrationIgnoreAttemptPreservesHiddenStart proves ignore_attempt decrements only the rows its fetch locked.
//
// Written from duroxide 0.1.31's description (its source was not available): the instance is
// created first so that a batch without a start item is fetchable.
func OrchestrationIgnoreAttemptPreservesHiddenStart(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "poison-hidden-start"
	createInstance(t, p, inst)

	mustEnqueueOrch(t, p, startItem(inst))
	it := pmFetchOrch(t, p, l, 1, "first fetch of the start item")
	pmAbandonOrch(t, p, it.LockToken, 0, false)
	it = pmFetchOrch(t, p, l, 2, "second fetch of the start item")
	pmAbandonOrch(t, p, it.LockToken, time.Second, false) // hidden for 1 s, 2 attempts recorded

	mustEnqueueOrch(t, p, externalRaised(inst, "other", "x"))
	it = mustFetchOrch(t, p, l)
	if len(it.Item.Messages) != 1 || it.Item.Messages[0].Variant() != "ExternalRaised" {
		t.Fatalf("fetch while the start is hidden: got %d messages, want only the ExternalRaised", len(it.Item.Messages))
	}
	pmAbandonOrch(t, p, it.LockToken, 0, true) // must not touch the hidden start's count

	time.Sleep(1100 * time.Millisecond)
	it = mustFetchOrch(t, p, l)
	if len(it.Item.Messages) != 2 {
		t.Fatalf("combined fetch: got %d messages, want 2", len(it.Item.Messages))
	}
	if it.AttemptCount != 3 {
		t.Fatalf("combined fetch: got attempt_count %d, want 3 (the hidden start kept its 2 attempts)", it.AttemptCount)
	}
	pmAckEmpty(t, p, it.LockToken)
}

// OrchestrationDelayedAbandonPreservesUnlockedRows proves an abandon delay applies only to the rows its fetch locked.
//
// Written from duroxide 0.1.31's description (its source was not available): the instance is
// created first so that the late message alone is fetchable.
func OrchestrationDelayedAbandonPreservesUnlockedRows(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "poison-delayed-abandon"
	createInstance(t, p, inst)

	mustEnqueueOrch(t, p, activityCompleted(inst, 1, "fetched"))
	it := mustFetchOrch(t, p, l)
	if len(it.Item.Messages) != 1 {
		t.Fatalf("first fetch: got %d messages, want 1", len(it.Item.Messages))
	}
	mustEnqueueOrch(t, p, activityCompleted(inst, 2, "arrived during lock"))
	pmAbandonOrch(t, p, it.LockToken, 5*time.Second, false)

	it = fetchOrch(t, p, l)
	if it == nil {
		t.Fatal("fetch after delayed abandon: got nothing, want the message that arrived during the lock")
	}
	if ids := ilCompletionIDs(it.Item.Messages); len(it.Item.Messages) != 1 || len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("fetch after delayed abandon: got completions %v in %d messages, want only id 2", ids, len(it.Item.Messages))
	}
	pmAckEmpty(t, p, it.LockToken)
}
