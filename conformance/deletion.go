package conformance

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("deletion",
		test{"test_delete_terminal_instances", DeleteTerminalInstances},
		test{"test_delete_running_rejected_force_succeeds", DeleteRunningRejectedForceSucceeds},
		test{"test_delete_nonexistent_instance", DeleteNonexistentInstance},
		test{"test_delete_cleans_queues_and_locks", DeleteCleansQueuesAndLocks},
		test{"test_cascade_delete_hierarchy", CascadeDeleteHierarchy},
		test{"test_force_delete_prevents_ack_recreation", ForceDeletePreventsAckRecreation},
		test{"test_list_children", ListChildren},
		test{"test_delete_get_parent_id", DeleteGetParentID},
		test{"test_delete_get_instance_tree", DeleteGetInstanceTree},
		test{"test_delete_instances_atomic", DeleteInstancesAtomic},
		test{"test_delete_instances_atomic_force", DeleteInstancesAtomicForce},
		test{"test_delete_instances_atomic_orphan_detection", DeleteInstancesAtomicOrphanDetection},
		test{"test_stale_activity_after_delete_recreate", StaleActivityAfterDeleteRecreate},
	)
}

// delFinishedInstance creates instance id in one turn ending with status/output (TestOrch 1.0.0).
// With a parent, the start item, the OrchestrationStarted event (parent_id 1) and the metadata
// name it (duroxide's create_completed_instance_with_parent, also used by bulk_deletion).
func delFinishedInstance(t *testing.T, p provider.Provider, id, parent, status, output string) {
	t.Helper()
	item := startItem(id)
	startedEv := started(id)
	meta := provider.ExecutionMetadata{Status: status, Output: ptr(output), OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0"}
	if parent != "" {
		s := item.Kind.(provider.StartOrchestration)
		s.ParentInstance, s.ParentID = ptr(parent), ptr(uint64(1))
		item.Kind = s
		k := startedEv.Kind.(provider.OrchestrationStartedEvent)
		k.ParentInstance, k.ParentID = ptr(parent), ptr(uint64(1))
		startedEv.Kind = k
		meta.ParentInstanceID = parent
	}
	mustEnqueueOrch(t, p, item)
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{startedEv}, Metadata: meta})
}

// delCompleted is create_completed_instance: Completed with output "done", no parent.
func delCompleted(t *testing.T, p provider.Provider, id string) {
	t.Helper()
	delFinishedInstance(t, p, id, "", provider.StatusCompleted, "done")
}

// delChildInstance is deletion.rs's create_child_instance: a completed ChildOrch whose parent is
// parent (start item without parent_id, fetched with a 5 s lock).
func delChildInstance(t *testing.T, p provider.Provider, id, parent string) {
	t.Helper()
	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: id, Orchestration: "TestOrch", Version: ptr("1.0.0"), Input: "{}", ParentInstance: ptr(parent), ExecutionID: 1,
	}})
	it := mustFetchOrch(t, p, 5*time.Second)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1,
		HistoryDelta: []provider.Event{ev(id, 1, provider.OrchestrationStartedEvent{
			Name: "ChildOrch", Version: "1.0.0", Input: "{}", ParentInstance: ptr(parent),
		})},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: ptr("done"),
			OrchestrationName: "ChildOrch", OrchestrationVersion: "1.0.0", ParentInstanceID: parent},
	})
}

// delExists fails the test unless get_instance_info finds every id.
func delExists(t *testing.T, a provider.Admin, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := a.GetInstanceInfo(ctx(t), id); err != nil {
			t.Fatalf("get_instance_info(%q): %v, want the instance to exist", id, err)
		}
	}
}

// delGone fails the test unless get_instance_info errors for every id.
func delGone(t *testing.T, a provider.Admin, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if info, err := a.GetInstanceInfo(ctx(t), id); err == nil {
			t.Fatalf("get_instance_info(%q): got %+v, want an error (instance deleted)", id, info)
		}
	}
}

// delErrContains fails the test unless err's text, lowercased, contains one of words.
func delErrContains(t *testing.T, err error, what string, words ...string) {
	t.Helper()
	msg := strings.ToLower(err.Error())
	for _, w := range words {
		if strings.Contains(msg, w) {
			return
		}
	}
	t.Fatalf("%s: error %q mentions none of %q", what, err, words)
}

// delMustDelete calls delete_instance and fails the test on error.
func delMustDelete(t *testing.T, a provider.Admin, id string, force bool) provider.DeleteInstanceResult {
	t.Helper()
	r, err := a.DeleteInstance(ctx(t), id, force)
	if err != nil {
		t.Fatalf("delete_instance(%q, force=%v): %v", id, force, err)
	}
	return r
}

// DeleteTerminalInstances proves Completed, Failed and cancelled (Failed) instances are deleted without force.
func DeleteTerminalInstances(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	delFinishedInstance(t, p, "delete-term-completed", "", provider.StatusCompleted, "done")
	delFinishedInstance(t, p, "delete-term-failed", "", provider.StatusFailed, "error: something went wrong")
	delFinishedInstance(t, p, "delete-term-cancelled", "", provider.StatusFailed, "cancelled: user requested cancellation")
	delExists(t, a, "delete-term-completed", "delete-term-failed", "delete-term-cancelled")

	r := delMustDelete(t, a, "delete-term-completed", false)
	if r.InstancesDeleted < 1 || r.ExecutionsDeleted < 1 || r.EventsDeleted < 1 {
		t.Fatalf("delete completed: got %+v, want at least 1 instance, execution and event", r)
	}
	delGone(t, a, "delete-term-completed")
	for _, id := range []string{"delete-term-failed", "delete-term-cancelled"} {
		if r := delMustDelete(t, a, id, false); r.InstancesDeleted < 1 {
			t.Fatalf("delete %s: got %+v, want at least 1 instance deleted", id, r)
		}
		delGone(t, a, id)
	}
}

// DeleteRunningRejectedForceSucceeds proves a running instance is refused (permanent, "running") without force and deleted with it.
func DeleteRunningRejectedForceSucceeds(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "delete-running-force"
	createInstance(t, p, id)
	_, err := a.DeleteInstance(ctx(t), id, false)
	wantErr(t, err, "delete_instance of a running instance without force")
	if provider.IsRetryable(err) {
		t.Fatalf("delete_instance of a running instance: error %v is retryable, want permanent", err)
	}
	delErrContains(t, err, "delete_instance of a running instance", "running")
	delExists(t, a, id)
	if r := delMustDelete(t, a, id, true); r.InstancesDeleted < 1 {
		t.Fatalf("force delete: got %+v, want at least 1 instance deleted", r)
	}
	delGone(t, a, id)
}

// DeleteNonexistentInstance proves deleting an unknown instance is a permanent "not found" error.
func DeleteNonexistentInstance(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	_, err := a.DeleteInstance(ctx(t), "does-not-exist-12345", false)
	wantErr(t, err, "delete_instance of an unknown instance")
	if provider.IsRetryable(err) {
		t.Fatalf("delete_instance of an unknown instance: error %v is retryable, want permanent", err)
	}
	delErrContains(t, err, "delete_instance of an unknown instance", "not found")
}

// DeleteCleansQueuesAndLocks proves delete removes queued messages and locks so the id can be reused with new data.
func DeleteCleansQueuesAndLocks(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "delete-queues-locks"
	mustEnqueueOrch(t, p, startItem(id))
	mustEnqueueWorker(t, p, activityItem(id, 1))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started(id)},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0"}})

	if r := delMustDelete(t, a, id, false); r.QueueMessagesDeleted < 1 {
		t.Fatalf("delete_instance: got %+v, want at least 1 queue message deleted", r)
	}

	const newName, newInput = "ReusedOrch", `{"reused": true}`
	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: id, Orchestration: newName, Version: ptr("2.0.0"), Input: newInput, ExecutionID: 1,
	}})
	it = mustFetchOrch(t, p, longLock)
	if it.Item.OrchestrationName != newName {
		t.Fatalf("fetch after recreate: orchestration name %q, want %q", it.Item.OrchestrationName, newName)
	}
	err := p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{ev(id, 1, provider.OrchestrationStartedEvent{Name: newName, Version: "2.0.0", Input: newInput})},
		Metadata:     provider.ExecutionMetadata{OrchestrationName: newName, OrchestrationVersion: "2.0.0"},
	})
	wantNoErr(t, err, "ack recreating the deleted instance (no stale lock may block it)")
	info, err := a.GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info")
	if info.OrchestrationName != newName {
		t.Fatalf("recreated instance: orchestration name %q, want %q (not stale data)", info.OrchestrationName, newName)
	}
	delMustDelete(t, a, id, true)
}

// CascadeDeleteHierarchy proves sub-orchestrations cannot be deleted directly and deleting the root removes the whole tree.
func CascadeDeleteHierarchy(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const root, child1, child2, grandchild = "cascade-root", "cascade-child1", "cascade-child2", "cascade-grandchild"
	delFinishedInstance(t, p, root, "", provider.StatusCompleted, "done")
	delFinishedInstance(t, p, child1, root, provider.StatusCompleted, "done")
	delFinishedInstance(t, p, child2, root, provider.StatusCompleted, "done")
	delFinishedInstance(t, p, grandchild, child1, provider.StatusCompleted, "done")
	delExists(t, a, root, child1, child2, grandchild)

	_, err := a.DeleteInstance(ctx(t), child1, false)
	wantErr(t, err, "delete_instance of a sub-orchestration")
	delErrContains(t, err, "delete_instance of a sub-orchestration", "sub-orchestration", "root", "parent")
	_, err = a.DeleteInstance(ctx(t), child1, true)
	wantErr(t, err, "force delete_instance of a sub-orchestration")
	_, err = a.DeleteInstance(ctx(t), grandchild, false)
	wantErr(t, err, "delete_instance of a nested sub-orchestration")

	r := delMustDelete(t, a, root, false)
	if r.InstancesDeleted < 1 || r.ExecutionsDeleted < 4 {
		t.Fatalf("delete root: got %+v, want at least 1 instance and 4 executions deleted", r)
	}
	delGone(t, a, root, child1, child2, grandchild)
}

// ForceDeletePreventsAckRecreation proves an ack after a force delete of the locked instance fails and does not recreate it.
func ForceDeletePreventsAckRecreation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "zombie-prevention"
	createInstance(t, p, id)
	mustEnqueueOrch(t, p, externalRaised(id, "test-event", "{}"))
	it := mustFetchOrch(t, p, longLock)

	if r := delMustDelete(t, a, id, true); r.InstancesDeleted < 1 {
		t.Fatalf("force delete: got %+v, want at least 1 instance deleted", r)
	}
	err := p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{ev(id, 2, provider.ExternalEventEvent{Name: "test-event", Data: "{}"})},
	})
	wantErr(t, err, "ack after force delete (must fail to prevent zombie recreation)")
	delGone(t, a, id)
}

// ListChildren proves list_children returns direct children only, and an empty list for leaves and unknown ids.
func ListChildren(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const root = "list-children-root"
	child1, child2 := root+"::sub::2", root+"::sub::3"
	grandchild := child2 + "::sub::4"
	delCompleted(t, p, root)
	delChildInstance(t, p, child1, root)
	delChildInstance(t, p, child2, root)
	delChildInstance(t, p, grandchild, child2)

	for _, c := range []struct {
		id   string
		want []string
	}{
		{root, []string{child1, child2}},
		{child2, []string{grandchild}},
		{grandchild, nil},
		{"non-existent", nil},
	} {
		got, err := a.ListChildren(ctx(t), c.id)
		wantNoErr(t, err, "list_children("+c.id+")")
		got = slices.Sorted(slices.Values(got))
		if !slices.Equal(got, c.want) {
			t.Fatalf("list_children(%q): got %q, want %q (any order)", c.id, got, c.want)
		}
	}
	delMustDelete(t, a, root, true)
}

// DeleteGetParentID proves get_parent_id is None for a root, the parent for a child and an error for unknown ids.
func DeleteGetParentID(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const root = "parent-id-root"
	child := root + "::sub::2"
	delCompleted(t, p, root)
	delChildInstance(t, p, child, root)

	parent, ok, err := a.GetParentID(ctx(t), root)
	wantNoErr(t, err, "get_parent_id(root)")
	if ok {
		t.Fatalf("get_parent_id(root): got %q, want None", parent)
	}
	parent, ok, err = a.GetParentID(ctx(t), child)
	wantNoErr(t, err, "get_parent_id(child)")
	if !ok || parent != root {
		t.Fatalf("get_parent_id(child): got (%q, %v), want %q", parent, ok, root)
	}
	_, _, err = a.GetParentID(ctx(t), "non-existent")
	wantErr(t, err, "get_parent_id of an unknown instance")
	delMustDelete(t, a, root, true)
}

// DeleteGetInstanceTree proves get_instance_tree returns the root and all descendants, and a leaf alone.
func DeleteGetInstanceTree(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const root = "tree-root"
	child1, child2 := root+"::sub::2", root+"::sub::3"
	grandchild := child2 + "::sub::4"
	delCompleted(t, p, root)
	delChildInstance(t, p, child1, root)
	delChildInstance(t, p, child2, root)
	delChildInstance(t, p, grandchild, child2)

	tree, err := a.GetInstanceTree(ctx(t), root)
	wantNoErr(t, err, "get_instance_tree(root)")
	if tree.RootID != root || len(tree.AllIDs) != 4 {
		t.Fatalf("get_instance_tree(root): got %+v, want root %q and 4 instances", tree, root)
	}
	for _, id := range []string{root, child1, child2, grandchild} {
		if !slices.Contains(tree.AllIDs, id) {
			t.Fatalf("get_instance_tree(root): %q lacks %q", tree.AllIDs, id)
		}
	}
	leaf, err := a.GetInstanceTree(ctx(t), grandchild)
	wantNoErr(t, err, "get_instance_tree(leaf)")
	if len(leaf.AllIDs) != 1 {
		t.Fatalf("get_instance_tree(leaf): got %q, want a single instance", leaf.AllIDs)
	}
	delMustDelete(t, a, root, true)
}

// DeleteInstancesAtomic proves delete_instances_atomic deletes several instances in one call.
func DeleteInstancesAtomic(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	ids := []string{"atomic-del-1", "atomic-del-2", "atomic-del-3"}
	for _, id := range ids {
		delCompleted(t, p, id)
	}
	delExists(t, a, ids...)
	r, err := a.DeleteInstancesAtomic(ctx(t), ids, false)
	wantNoErr(t, err, "delete_instances_atomic")
	if r.InstancesDeleted < 1 || r.ExecutionsDeleted < 3 {
		t.Fatalf("delete_instances_atomic: got %+v, want at least 1 instance and 3 executions deleted", r)
	}
	delGone(t, a, ids...)
}

// DeleteInstancesAtomicForce proves a running instance makes delete_instances_atomic fail, deleting nothing, unless forced.
func DeleteInstancesAtomicForce(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const completed, running = "atomic-force-completed", "atomic-force-running"
	delCompleted(t, p, completed)
	createInstance(t, p, running)
	ids := []string{completed, running}

	_, err := a.DeleteInstancesAtomic(ctx(t), ids, false)
	wantErr(t, err, "delete_instances_atomic with a running instance and no force")
	delExists(t, a, completed, running)

	r, err := a.DeleteInstancesAtomic(ctx(t), ids, true)
	wantNoErr(t, err, "delete_instances_atomic with force")
	if r.InstancesDeleted < 1 {
		t.Fatalf("delete_instances_atomic with force: got %+v, want at least 1 instance deleted", r)
	}
	delGone(t, a, completed, running)
}

// DeleteInstancesAtomicOrphanDetection proves deleting a parent without its child fails (child/orphan/tree) and deletes nothing.
func DeleteInstancesAtomicOrphanDetection(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const root = "orphan-detect-root"
	child := root + "::sub::2"
	delCompleted(t, p, root)
	delChildInstance(t, p, child, root)
	delExists(t, a, root, child)

	_, err := a.DeleteInstancesAtomic(ctx(t), []string{root}, false)
	wantErr(t, err, "delete_instances_atomic of a parent without its child (must not orphan it)")
	delErrContains(t, err, "delete_instances_atomic orphan check", "child", "orphan", "tree")
	delExists(t, a, root, child)

	_, err = a.DeleteInstancesAtomic(ctx(t), []string{root, child}, false)
	wantNoErr(t, err, "delete_instances_atomic of the complete tree")
	delGone(t, a, root, child)
}

// StaleActivityAfterDeleteRecreate proves a worker's lock from before a force delete cannot ack into the recreated instance.
func StaleActivityAfterDeleteRecreate(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "stale-activity-recreate"
	mustEnqueueOrch(t, p, startItem(id))
	it := mustFetchOrch(t, p, longLock)
	scheduled := ev(id, 2, provider.ActivityScheduledEvent{Name: "OldActivity", Input: "old-input"})
	scheduled.SourceEventID = ptr(uint64(2))
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{started(id), scheduled},
		WorkerItems: []provider.WorkItem{{Kind: provider.ActivityExecute{
			Instance: id, ExecutionID: 1, ID: 2, Name: "OldActivity", Input: "old-input",
		}}},
		Metadata: testMeta(),
	})
	work := mustFetchWork(t, p, longLock)

	if r := delMustDelete(t, a, id, true); r.InstancesDeleted < 1 {
		t.Fatalf("force delete: got %+v, want at least 1 instance deleted", r)
	}
	delGone(t, a, id)

	createInstance(t, p, id)
	info, err := a.GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info of the recreated instance")
	if info.OrchestrationName != "TestOrch" {
		t.Fatalf("recreated instance: orchestration name %q, want TestOrch", info.OrchestrationName)
	}

	stale := activityCompleted(id, 2, "stale-result-from-old-instance")
	wantErr(t, p.AckWorkItem(ctx(t), work.LockToken, &stale), "ack_work_item with the lock token from before the delete")

	mustEnqueueOrch(t, p, externalRaised(id, "probe-event", "{}"))
	it = mustFetchOrch(t, p, longLock)
	for _, m := range it.Item.Messages {
		if c, ok := m.Kind.(provider.ActivityCompleted); ok && strings.Contains(c.Result, "stale-result") {
			t.Fatalf("recreated instance received the stale completion: messages %+v", it.Item.Messages)
		}
	}
	_ = p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted},
	})
	_, _ = a.DeleteInstance(ctx(t), id, true)
}
