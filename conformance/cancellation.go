package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("cancellation",
		test{"test_fetch_returns_running_state_for_active_orchestration", FetchReturnsRunningStateForActiveOrchestration},
		test{"test_fetch_returns_terminal_state_when_orchestration_completed", FetchReturnsTerminalStateWhenOrchestrationCompleted},
		test{"test_fetch_returns_terminal_state_when_orchestration_failed", FetchReturnsTerminalStateWhenOrchestrationFailed},
		test{"test_fetch_returns_terminal_state_when_orchestration_continued_as_new", FetchReturnsTerminalStateWhenOrchestrationContinuedAsNew},
		test{"test_fetch_returns_missing_state_when_instance_deleted", FetchReturnsMissingStateWhenInstanceDeleted},
		test{"test_renew_returns_running_when_orchestration_active", RenewReturnsRunningWhenOrchestrationActive},
		test{"test_renew_returns_terminal_when_orchestration_completed", RenewReturnsTerminalWhenOrchestrationCompleted},
		test{"test_renew_returns_missing_when_instance_deleted", RenewReturnsMissingWhenInstanceDeleted},
		test{"test_ack_work_item_none_deletes_without_enqueue", AckWorkItemNoneDeletesWithoutEnqueue},
		test{"test_cancelled_activities_deleted_from_worker_queue", CancelledActivitiesDeletedFromWorkerQueue},
		test{"test_ack_work_item_fails_when_entry_deleted", AckWorkItemFailsWhenEntryDeleted},
		test{"test_renew_fails_when_entry_deleted", RenewFailsWhenEntryDeleted},
		test{"test_cancelling_nonexistent_activities_is_idempotent", CancellingNonexistentActivitiesIsIdempotent},
		test{"test_batch_cancellation_deletes_multiple_activities", BatchCancellationDeletesMultipleActivities},
		test{"test_same_activity_in_worker_items_and_cancelled_is_noop", SameActivityInWorkerItemsAndCancelledIsNoop},
		test{"test_orphan_activity_after_instance_force_deletion", OrphanActivityAfterInstanceForceDeletion},
	)
}

// cancelActivity is an ActivityExecute of instance/execution 1 with input "{}".
func cancelActivity(instance string, id uint64, name string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id, Name: name, Input: "{}"}}
}

// cancelStarted is the OrchestrationStarted (event 1) the cancellation tests ack, of TestOrch at version.
func cancelStarted(instance, version string) provider.Event {
	return ev(instance, 1, provider.OrchestrationStartedEvent{Name: "TestOrch", Version: version, Input: "{}"})
}

// cancelRunningMeta is the metadata the cancellation tests ack their first turn with: name only, status Running.
func cancelRunningMeta() provider.ExecutionMetadata {
	return provider.ExecutionMetadata{OrchestrationName: "TestOrch", Status: provider.StatusRunning}
}

// cancelFirstTurn enqueues instance's start item, fetches it and acks OrchestrationStarted (version
// "1.0") followed by extra events, with meta, workerItems and cancelled.
func cancelFirstTurn(t *testing.T, p provider.Provider, instance string, meta provider.ExecutionMetadata,
	workerItems []provider.WorkItem, cancelled []provider.ScheduledActivityIdentifier, extra ...provider.Event) error {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	it := mustFetchOrch(t, p, longLock)
	return p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID:         1,
		HistoryDelta:        append([]provider.Event{cancelStarted(instance, "1.0")}, extra...),
		WorkerItems:         workerItems,
		Metadata:            meta,
		CancelledActivities: cancelled,
	})
}

// cancelTriggerTurn enqueues an ExternalRaised "Trigger", fetches it and acks events on execution 1
// with meta and cancelled.
func cancelTriggerTurn(t *testing.T, p provider.Provider, instance string, meta provider.ExecutionMetadata,
	cancelled []provider.ScheduledActivityIdentifier, events ...provider.Event) {
	t.Helper()
	mustEnqueueOrch(t, p, externalRaised(instance, "Trigger", "{}"))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: events, Metadata: meta, CancelledActivities: cancelled,
	})
}

// cancelIDs lists activities of instance/execution 1 to cancel.
func cancelIDs(instance string, ids ...uint64) []provider.ScheduledActivityIdentifier {
	out := make([]provider.ScheduledActivityIdentifier, len(ids))
	for i, id := range ids {
		out[i] = provider.ScheduledActivityIdentifier{Instance: instance, ExecutionID: 1, ActivityID: id}
	}
	return out
}

// cancelActivityOf returns the ActivityExecute a worker fetch returned.
func cancelActivityOf(t *testing.T, it *provider.LockedWorkItem) provider.ActivityExecute {
	t.Helper()
	a, ok := it.Item.Kind.(provider.ActivityExecute)
	if !ok {
		t.Fatalf("fetch_work_item: got %s, want ActivityExecute", it.Item.Variant())
	}
	return a
}

// cancelWorkerFetchesAfterTerminalAck acks a first turn that schedules an activity while ending the
// execution with status (and terminal event), then checks the activity is still fetchable.
func cancelWorkerFetchesAfterTerminalAck(t *testing.T, f Factory, instance string, meta provider.ExecutionMetadata, terminal ...provider.Event) {
	t.Helper()
	p := f.CreateProvider(t)
	wantNoErr(t, cancelFirstTurn(t, p, instance, meta,
		[]provider.WorkItem{cancelActivity(instance, 1, "TestActivity")}, nil, terminal...), "ack_orchestration_item")
	if it := fetchWork(t, p, longLock, provider.TagFilterDefaultOnly()); it == nil {
		t.Fatal("fetch_work_item: got nothing, want the activity")
	}
}

// FetchReturnsRunningStateForActiveOrchestration proves an activity scheduled by a Running turn is fetchable.
func FetchReturnsRunningStateForActiveOrchestration(t *testing.T, f Factory) {
	cancelWorkerFetchesAfterTerminalAck(t, f, "inst-running", cancelRunningMeta())
}

// FetchReturnsTerminalStateWhenOrchestrationCompleted proves an activity enqueued by a Completed ack is still fetchable.
func FetchReturnsTerminalStateWhenOrchestrationCompleted(t *testing.T, f Factory) {
	const instance = "inst-completed"
	cancelWorkerFetchesAfterTerminalAck(t, f, instance,
		provider.ExecutionMetadata{OrchestrationName: "TestOrch", Status: provider.StatusCompleted, Output: ptr("done")},
		ev(instance, 2, provider.OrchestrationCompletedEvent{Output: "done"}))
}

// FetchReturnsTerminalStateWhenOrchestrationFailed proves an activity enqueued by the ack that fails the orchestration is still fetchable.
func FetchReturnsTerminalStateWhenOrchestrationFailed(t *testing.T, f Factory) {
	const instance = "inst-failed"
	cancelWorkerFetchesAfterTerminalAck(t, f, instance,
		provider.ExecutionMetadata{OrchestrationName: "TestOrch", Status: provider.StatusFailed},
		ev(instance, 2, provider.OrchestrationFailedEvent{Details: provider.ErrorDetails{Kind: provider.ApplicationError{
			Kind: provider.AppErrorKind{Name: provider.AppOrchestrationFailed}, Message: "boom", Retryable: false,
		}}}))
}

// FetchReturnsTerminalStateWhenOrchestrationContinuedAsNew proves an activity enqueued by a ContinuedAsNew ack is still fetchable.
func FetchReturnsTerminalStateWhenOrchestrationContinuedAsNew(t *testing.T, f Factory) {
	const instance = "inst-can"
	cancelWorkerFetchesAfterTerminalAck(t, f, instance,
		provider.ExecutionMetadata{OrchestrationName: "TestOrch", Status: provider.StatusContinuedAsNew, Output: ptr("new-input")},
		ev(instance, 2, provider.OrchestrationContinuedAsNewEvent{Input: "new-input"}))
}

// FetchReturnsMissingStateWhenInstanceDeleted proves an activity of a never-created instance is fetchable.
func FetchReturnsMissingStateWhenInstanceDeleted(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, activityItem("inst-missing", 1))
	if it := fetchWork(t, p, longLock, provider.TagFilterDefaultOnly()); it == nil {
		t.Fatal("fetch_work_item: got nothing, want the activity")
	}
}

// RenewReturnsRunningWhenOrchestrationActive proves a worker lock of a running orchestration's activity renews.
func RenewReturnsRunningWhenOrchestrationActive(t *testing.T, f Factory) {
	const instance = "inst-renew-run"
	p := f.CreateProvider(t)
	wantNoErr(t, cancelFirstTurn(t, p, instance, cancelRunningMeta(),
		[]provider.WorkItem{cancelActivity(instance, 1, "TestActivity")}, nil), "ack_orchestration_item")
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.RenewWorkItemLock(ctx(t), it.LockToken, longLock), "renew_work_item_lock")
}

// RenewReturnsTerminalWhenOrchestrationCompleted proves a worker lock still renews after a later turn completed the orchestration.
func RenewReturnsTerminalWhenOrchestrationCompleted(t *testing.T, f Factory) {
	const instance = "inst-renew-term"
	p := f.CreateProvider(t)
	wantNoErr(t, cancelFirstTurn(t, p, instance, cancelRunningMeta(),
		[]provider.WorkItem{cancelActivity(instance, 1, "TestActivity")}, nil), "ack_orchestration_item")
	it := mustFetchWork(t, p, longLock)
	cancelTriggerTurn(t, p, instance, provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: ptr("done")}, nil,
		ev(instance, 2, provider.OrchestrationCompletedEvent{Output: "done"}))
	wantNoErr(t, p.RenewWorkItemLock(ctx(t), it.LockToken, longLock), "renew_work_item_lock")
}

// RenewReturnsMissingWhenInstanceDeleted proves a worker lock of an activity of a nonexistent instance renews.
func RenewReturnsMissingWhenInstanceDeleted(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, activityItem("inst-renew-missing", 1))
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.RenewWorkItemLock(ctx(t), it.LockToken, longLock), "renew_work_item_lock")
}

// AckWorkItemNoneDeletesWithoutEnqueue proves ack_work_item without a completion removes the item and enqueues nothing for the orchestrator.
func AckWorkItemNoneDeletesWithoutEnqueue(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, activityItem("inst-ack-none", 1))
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, nil), "ack_work_item")
	if it := fetchWork(t, p, 100*time.Millisecond, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatal("fetch_work_item: worker queue should be empty")
	}
	mustNoOrch(t, p, 100*time.Millisecond)
}

// CancelledActivitiesDeletedFromWorkerQueue proves an ack's cancelled_activities removes exactly those activities from the worker queue.
func CancelledActivitiesDeletedFromWorkerQueue(t *testing.T, f Factory) {
	const instance = "inst-cancel-delete"
	p := f.CreateProvider(t)
	wantNoErr(t, cancelFirstTurn(t, p, instance, cancelRunningMeta(), []provider.WorkItem{
		cancelActivity(instance, 1, "Activity1"), cancelActivity(instance, 2, "Activity2"), cancelActivity(instance, 3, "Activity3"),
	}, nil), "ack_orchestration_item")
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.AbandonWorkItem(ctx(t), it.LockToken, 0, false), "abandon_work_item")

	cancelTriggerTurn(t, p, instance, provider.ExecutionMetadata{}, cancelIDs(instance, 1, 2))

	rest := mustFetchWork(t, p, longLock)
	if id := cancelActivityOf(t, rest).ID; id != 3 {
		t.Fatalf("remaining activity id = %d, want 3 (1 and 2 were cancelled)", id)
	}
	if it := fetchWork(t, p, 100*time.Millisecond, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("fetch_work_item: got activity %d, want nothing", cancelActivityOf(t, it).ID)
	}
}

// AckWorkItemFailsWhenEntryDeleted proves acking a work item whose entry is gone fails permanently.
func AckWorkItemFailsWhenEntryDeleted(t *testing.T, f Factory) {
	const instance = "inst-ack-stolen"
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, activityItem(instance, 1))
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, nil), "ack_work_item")

	completion := activityCompleted(instance, 1, "done")
	err := p.AckWorkItem(ctx(t), it.LockToken, &completion)
	wantErr(t, err, "ack_work_item after the entry was deleted")
	pe, ok := provider.AsProviderError(err)
	if !ok {
		t.Fatalf("ack_work_item: error %v is not a *ProviderError", err)
	}
	if pe.Retryable {
		t.Fatalf("ack_work_item: error %v is retryable, want permanent", err)
	}
}

// RenewFailsWhenEntryDeleted proves renewing a work item lock whose entry is gone fails.
func RenewFailsWhenEntryDeleted(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustEnqueueWorker(t, p, activityItem("inst-renew-stolen", 1))
	it := mustFetchWork(t, p, longLock)
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, nil), "ack_work_item")
	wantErr(t, p.RenewWorkItemLock(ctx(t), it.LockToken, longLock), "renew_work_item_lock after the entry was deleted")
}

// CancellingNonexistentActivitiesIsIdempotent proves cancelling activities that are not queued is not an error.
func CancellingNonexistentActivitiesIsIdempotent(t *testing.T, f Factory) {
	const instance = "inst-cancel-idempotent"
	p := f.CreateProvider(t)
	err := cancelFirstTurn(t, p, instance, provider.ExecutionMetadata{OrchestrationName: "TestOrch"}, nil,
		cancelIDs(instance, 999, 1))
	wantNoErr(t, err, "ack_orchestration_item cancelling non-existent activities")
}

// BatchCancellationDeletesMultipleActivities proves one ack can cancel several activities.
func BatchCancellationDeletesMultipleActivities(t *testing.T, f Factory) {
	const instance = "inst-batch-cancel"
	p := f.CreateProvider(t)
	var acts []provider.WorkItem
	for i := uint64(1); i <= 5; i++ {
		acts = append(acts, cancelActivity(instance, i, fmt.Sprintf("Activity%d", i)))
	}
	wantNoErr(t, cancelFirstTurn(t, p, instance, cancelRunningMeta(), acts, nil), "ack_orchestration_item")
	cancelTriggerTurn(t, p, instance, provider.ExecutionMetadata{}, cancelIDs(instance, 1, 2, 3, 4, 5))
	if it := fetchWork(t, p, 100*time.Millisecond, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("fetch_work_item: got activity %d, want an empty worker queue", cancelActivityOf(t, it).ID)
	}
}

// SameActivityInWorkerItemsAndCancelledIsNoop proves an activity scheduled and cancelled in one ack ends up absent.
func SameActivityInWorkerItemsAndCancelledIsNoop(t *testing.T, f Factory) {
	const instance = "inst-schedule-then-cancel"
	p := f.CreateProvider(t)
	wantNoErr(t, cancelFirstTurn(t, p, instance, cancelRunningMeta(), []provider.WorkItem{
		cancelActivity(instance, 2, "DroppedActivity"), cancelActivity(instance, 3, "NormalActivity"),
	}, cancelIDs(instance, 2)), "ack_orchestration_item")

	it := mustFetchWork(t, p, longLock)
	a := cancelActivityOf(t, it)
	if a.ID != 3 || a.Name != "NormalActivity" {
		t.Fatalf("remaining activity = %d %q, want 3 \"NormalActivity\" (2 was scheduled and cancelled)", a.ID, a.Name)
	}
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, nil), "ack_work_item")
	if it := fetchWork(t, p, 100*time.Millisecond, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("fetch_work_item: got activity %d, want nothing", cancelActivityOf(t, it).ID)
	}
}

// OrphanActivityAfterInstanceForceDeletion proves a queued activity of a force-deleted instance is gone or can still be completed.
func OrphanActivityAfterInstanceForceDeletion(t *testing.T, f Factory) {
	const instance = "inst-orphan-activity"
	p := f.CreateProvider(t)
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: 1, Name: "TestActivity", Input: "test-input"}}
	mustEnqueueOrch(t, p, startItem(instance))
	orch := mustFetchOrch(t, p, longLock)
	mustAck(t, p, orch.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{cancelStarted(instance, "1.0.0")},
		WorkerItems:  []provider.WorkItem{act},
		Metadata: provider.ExecutionMetadata{
			OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0", Status: provider.StatusRunning,
		},
	})

	admin := mustAdmin(t, p)
	res, err := admin.DeleteInstance(ctx(t), instance, true)
	wantNoErr(t, err, "delete_instance(force)")
	if res.InstancesDeleted == 0 {
		t.Fatal("delete_instance(force): instances_deleted = 0, want > 0")
	}
	if _, err := admin.GetInstanceInfo(ctx(t), instance); err == nil {
		t.Fatal("get_instance_info after force delete: got no error, want one")
	}

	it := fetchWork(t, p, 5*time.Second, provider.TagFilterDefaultOnly())
	if it == nil {
		return // the delete also removed the queued activity: valid
	}
	completion := activityCompleted(instance, 1, "orphan-result")
	wantNoErr(t, p.AckWorkItem(ctx(t), it.LockToken, &completion), "ack_work_item of the orphaned activity")
}
