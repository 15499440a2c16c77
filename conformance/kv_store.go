package conformance

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("kv_store",
		test{"test_kv_set_and_get", KVSetAndGet},
		test{"test_kv_overwrite", KVOverwrite},
		test{"test_kv_clear_single", KVClearSingle},
		test{"test_kv_clear_all", KVClearAll},
		test{"test_kv_get_nonexistent", KVGetNonexistent},
		test{"test_kv_snapshot_in_fetch", KVSnapshotInFetch},
		test{"test_kv_snapshot_after_clear_single", KVSnapshotAfterClearSingle},
		test{"test_kv_snapshot_after_clear_all", KVSnapshotAfterClearAll},
		test{"test_kv_execution_id_tracking", KVExecutionIDTracking},
		test{"test_kv_cross_execution_overwrite", KVCrossExecutionOverwrite},
		test{"test_kv_cross_execution_remove_readd", KVCrossExecutionRemoveReadd},
		test{"test_kv_prune_preserves_overwritten", KVPrunePreservesOverwritten},
		test{"test_kv_prune_preserves_all_keys", KVPrunePreservesAllKeys},
		test{"test_kv_instance_isolation", KVInstanceIsolation},
		test{"test_kv_delete_instance_cascades", KVDeleteInstanceCascades},
		test{"test_kv_clear_nonexistent_key", KVClearNonexistentKey},
		test{"test_kv_get_unknown_instance", KVGetUnknownInstance},
		test{"test_kv_set_after_clear", KVSetAfterClear},
		test{"test_kv_empty_value", KVEmptyValue},
		test{"test_kv_large_value", KVLargeValue},
		test{"test_kv_special_chars_in_key", KVSpecialCharsInKey},
		test{"test_kv_snapshot_empty", KVSnapshotEmpty},
		test{"test_kv_snapshot_cross_execution", KVSnapshotCrossExecution},
		test{"test_kv_prune_current_execution_protected", KVPruneCurrentExecutionProtected},
		test{"test_kv_delete_instance_with_children", KVDeleteInstanceWithChildren},
		test{"test_kv_clear_isolation", KVClearIsolation},
		test{"test_kv_delta_snapshot_excludes_current_execution", KVDeltaSnapshotExcludesCurrentExecution},
		test{"test_kv_delta_snapshot_includes_completed_execution", KVDeltaSnapshotIncludesCompletedExecution},
		test{"test_kv_delta_client_reads_merged", KVDeltaClientReadsMerged},
		test{"test_kv_delta_tombstone_overrides_store", KVDeltaTombstoneOverridesStore},
		test{"test_kv_delta_clear_all_tombstones_store", KVDeltaClearAllTombstonesStore},
		test{"test_kv_delta_merged_on_completion", KVDeltaMergedOnCompletion},
		test{"test_kv_delta_merged_on_can", KVDeltaMergedOnCAN},
		test{"test_kv_delta_delete_instance_cascades", KVDeltaDeleteInstanceCascades},
		test{"test_kv_delta_prune_untouched_key_survives", KVDeltaPruneUntouchedKeySurvives},
	)
}

// kvPoke is the ExternalRaised "poke" that gives a fetch something to return.
func kvPoke(instance string) provider.WorkItem { return externalRaised(instance, "poke", "{}") }

// kvSet is a KeyValueSet event of instance/execution with the given event id.
func kvSet(instance string, exec, id uint64, key, value string, ms uint64) provider.Event {
	return evExec(instance, exec, id, provider.KeyValueSetEvent{Key: key, Value: value, LastUpdatedAtMs: ms})
}

// kvCleared is a KeyValueCleared event.
func kvCleared(instance string, exec, id uint64, key string) provider.Event {
	return evExec(instance, exec, id, provider.KeyValueClearedEvent{Key: key})
}

// kvClearedAll is a KeyValuesCleared event.
func kvClearedAll(instance string, exec, id uint64) provider.Event {
	return evExec(instance, exec, id, provider.KeyValuesClearedEvent{})
}

// kvPokeFetch enqueues a poke for instance and fetches (30 s lock), failing when nothing comes back.
func kvPokeFetch(t *testing.T, p provider.Provider, instance string) *provider.LockedOrchestrationItem {
	t.Helper()
	mustEnqueueOrch(t, p, kvPoke(instance))
	return mustFetchOrch(t, p, longLock)
}

// kvAckWithDelta is duroxide's ack_with_delta: poke, fetch, ack the delta with default metadata.
func kvAckWithDelta(t *testing.T, p provider.Provider, instance string, exec uint64, delta ...provider.Event) {
	t.Helper()
	pokeTurn(t, p, instance, provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: delta})
}

// kvAckEmpty acks a turn without changes (the tests' clean-up after a snapshot fetch).
func kvAckEmpty(t *testing.T, p provider.Provider, token string, exec uint64) {
	t.Helper()
	mustAck(t, p, token, provider.OrchestrationAck{ExecutionID: exec})
}

// kvComplete is duroxide's complete_instance: poke, fetch, ack OrchestrationCompleted (event 9999)
// with status Completed and output "done".
func kvComplete(t *testing.T, p provider.Provider, instance string, exec uint64) {
	t.Helper()
	it := kvPokeFetch(t, p, instance)
	meta := testMeta()
	meta.Status, meta.Output = provider.StatusCompleted, ptr("done")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID:  exec,
		HistoryDelta: []provider.Event{evExec(instance, exec, 9999, provider.OrchestrationCompletedEvent{Output: "done"})},
		Metadata:     meta,
	})
}

// kvContinueAsNew is duroxide's continue_as_new helper: it marks execution newExec-1 ContinuedAsNew,
// then enqueues, fetches and acks a ContinueAsNew item with execution newExec's OrchestrationStarted.
func kvContinueAsNew(t *testing.T, p provider.Provider, instance string, newExec uint64) {
	t.Helper()
	it := kvPokeFetch(t, p, instance)
	meta := testMeta()
	meta.Status = provider.StatusContinuedAsNew
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: newExec - 1, Metadata: meta})

	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.ContinueAsNew{
		Instance: instance, Orchestration: "TestOrch", Input: "{}", Version: ptr("1.0.0"),
	}})
	it = mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: newExec,
		HistoryDelta: []provider.Event{evExec(instance, newExec, 1, provider.OrchestrationStartedEvent{
			Name: "TestOrch", Version: "1.0.0", Input: "{}"})},
		Metadata: testMeta(),
	})
}

// kvWant asserts get_kv_value(instance, key): want nil means None.
func kvWant(t *testing.T, p provider.Provider, instance, key string, want *string, msg string) {
	t.Helper()
	got, ok, err := p.GetKVValue(ctx(t), instance, key)
	if err != nil {
		t.Fatalf("get_kv_value(%q, %q): %v", instance, key, err)
	}
	switch {
	case want == nil && ok:
		t.Fatalf("get_kv_value(%q, %q) = Some(%q), want None: %s", instance, key, got, msg)
	case want != nil && !ok:
		t.Fatalf("get_kv_value(%q, %q) = None, want Some(%q): %s", instance, key, *want, msg)
	case want != nil && got != *want:
		t.Fatalf("get_kv_value(%q, %q) = Some(%q), want Some(%q): %s", instance, key, got, *want, msg)
	}
}

// kvSnapWant asserts one kv_snapshot entry's value: want nil means absent.
func kvSnapWant(t *testing.T, snap map[string]provider.KVEntry, key string, want *string, msg string) {
	t.Helper()
	e, ok := snap[key]
	switch {
	case want == nil && ok:
		t.Fatalf("kv_snapshot[%q] = %q, want absent: %s", key, e.Value, msg)
	case want != nil && !ok:
		t.Fatalf("kv_snapshot[%q] absent, want %q (snapshot %v): %s", key, *want, snap, msg)
	case want != nil && e.Value != *want:
		t.Fatalf("kv_snapshot[%q] = %q, want %q: %s", key, e.Value, *want, msg)
	}
}

// kvSnapLen asserts the number of kv_snapshot entries.
func kvSnapLen(t *testing.T, snap map[string]provider.KVEntry, want int, msg string) {
	t.Helper()
	if len(snap) != want {
		t.Fatalf("kv_snapshot has %d entries %v, want %d: %s", len(snap), slices.Sorted(maps.Keys(snap)), want, msg)
	}
}

// kvPrune prunes instance with keep_last 1.
func kvPrune(t *testing.T, p provider.Provider, instance string) {
	t.Helper()
	_, err := mustAdmin(t, p).PruneExecutions(ctx(t), instance, provider.PruneOptions{KeepLast: 1})
	wantNoErr(t, err, "prune_executions(keep_last 1)")
}

// kvDelete deletes instance through the management capability.
func kvDelete(t *testing.T, p provider.Provider, instance string, force bool) {
	t.Helper()
	_, err := mustAdmin(t, p).DeleteInstance(ctx(t), instance, force)
	wantNoErr(t, err, "delete_instance")
}

// KVSetAndGet proves a KeyValueSet in an ack delta is returned by get_kv_value.
func KVSetAndGet(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-set"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "counter", "42", 0))
	kvWant(t, p, i, "counter", ptr("42"), "set value")
}

// KVOverwrite proves a KeyValueSet for an existing key overwrites it.
func KVOverwrite(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-over"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "status", "old", 0))
	kvWant(t, p, i, "status", ptr("old"), "initial value should be 'old'")
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 101, "status", "new", 0))
	kvWant(t, p, i, "status", ptr("new"), "overwritten value")
}

// KVClearSingle proves KeyValueCleared removes the key.
func KVClearSingle(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-clr1"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "remove_me", "x", 0))
	kvWant(t, p, i, "remove_me", ptr("x"), "value should be set before clearing")
	kvAckWithDelta(t, p, i, 1, kvCleared(i, 1, 101, "remove_me"))
	kvWant(t, p, i, "remove_me", nil, "cleared key")
}

// KVClearAll proves KeyValuesCleared removes every key of the instance.
func KVClearAll(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-clra"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "a", "1", 0), kvSet(i, 1, 101, "b", "2", 0))
	kvWant(t, p, i, "a", ptr("1"), "key 'a' should be set")
	kvWant(t, p, i, "b", ptr("2"), "key 'b' should be set")
	kvAckWithDelta(t, p, i, 1, kvClearedAll(i, 1, 102))
	kvWant(t, p, i, "a", nil, "after clear all")
	kvWant(t, p, i, "b", nil, "after clear all")
}

// KVGetNonexistent proves get_kv_value returns None for a key never set.
func KVGetNonexistent(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	createInstance(t, p, "kv-none")
	kvWant(t, p, "kv-none", "nope", nil, "missing key")
}

// KVSnapshotInFetch proves values of a completed execution appear in the next fetch's kv_snapshot.
func KVSnapshotInFetch(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-fetch"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "x", "10", 0), kvSet(i, 1, 101, "y", "20", 0))
	kvComplete(t, p, i, 1)

	it := kvPokeFetch(t, p, i)
	snap := it.Item.KVSnapshot
	kvSnapLen(t, snap, 2, "snapshot of the completed execution")
	kvSnapWant(t, snap, "x", ptr("10"), "x")
	kvSnapWant(t, snap, "y", ptr("20"), "y")
	kvAckEmpty(t, p, it.LockToken, 1)
}

// KVSnapshotAfterClearSingle proves a key cleared before completion is absent from the snapshot.
func KVSnapshotAfterClearSingle(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-fclr1"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "keep", "yes", 0), kvSet(i, 1, 101, "remove", "bye", 0))
	kvAckWithDelta(t, p, i, 1, kvCleared(i, 1, 102, "remove"))
	kvComplete(t, p, i, 1)

	it := kvPokeFetch(t, p, i)
	snap := it.Item.KVSnapshot
	kvSnapLen(t, snap, 1, "one key left")
	kvSnapWant(t, snap, "keep", ptr("yes"), "kept key")
	kvSnapWant(t, snap, "remove", nil, "cleared key")
	kvAckEmpty(t, p, it.LockToken, 1)
}

// KVSnapshotAfterClearAll proves the snapshot is empty after a clear-all.
func KVSnapshotAfterClearAll(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-fclra"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "a", "1", 0), kvSet(i, 1, 101, "b", "2", 0))
	kvAckWithDelta(t, p, i, 1, kvClearedAll(i, 1, 102))

	it := kvPokeFetch(t, p, i)
	kvSnapLen(t, it.Item.KVSnapshot, 0, "expected empty snapshot")
	kvAckEmpty(t, p, it.LockToken, 1)
}

// KVExecutionIDTracking proves a key overwritten by execution 2 survives pruning of execution 1.
func KVExecutionIDTracking(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-exec"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "shared", "from_exec_1", 0))
	kvWant(t, p, i, "shared", ptr("from_exec_1"), "exec 1 value")

	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "shared", "from_exec_2", 0))
	kvWant(t, p, i, "shared", ptr("from_exec_2"), "should reflect exec 2 value")

	kvPrune(t, p, i)
	kvWant(t, p, i, "shared", ptr("from_exec_2"), "key must survive pruning because last-writer (exec 2) is not pruned")
}

// KVCrossExecutionOverwrite proves execution 2 overwrites execution 1's value.
func KVCrossExecutionOverwrite(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-xexec"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "k", "v1", 0))
	kvWant(t, p, i, "k", ptr("v1"), "should see value from exec 1")

	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "k", "v2", 0))
	kvWant(t, p, i, "k", ptr("v2"), "exec 2 should overwrite exec 1 value")
}

// KVCrossExecutionRemoveReadd proves set (exec 1), clear (exec 2), set (exec 3) yields exec 3's value.
func KVCrossExecutionRemoveReadd(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-xrm"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "cycle", "exec1", 0))
	kvWant(t, p, i, "cycle", ptr("exec1"), "exec 1 value")

	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvCleared(i, 2, 200, "cycle"))
	kvWant(t, p, i, "cycle", nil, "key should be cleared in exec 2")

	kvContinueAsNew(t, p, i, 3)
	kvAckWithDelta(t, p, i, 3, kvSet(i, 3, 300, "cycle", "exec3", 0))
	kvWant(t, p, i, "cycle", ptr("exec3"), "key should be re-set from exec 3")
}

// KVPrunePreservesOverwritten proves pruning execution 1 keeps a key execution 2 overwrote.
func KVPrunePreservesOverwritten(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-prn1"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "survive", "v1", 0))
	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "survive", "v2", 0))

	kvPrune(t, p, i)
	kvWant(t, p, i, "survive", ptr("v2"), "overwritten key must survive pruning of old execution")
}

// KVPrunePreservesAllKeys proves KV is instance-scoped: pruning executions never deletes keys.
func KVPrunePreservesAllKeys(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-prn2"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "orphan", "survives", 0))
	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "keeper", "alive", 0))
	kvWant(t, p, i, "orphan", ptr("survives"), "before prune")
	kvWant(t, p, i, "keeper", ptr("alive"), "before prune")

	kvPrune(t, p, i)
	kvWant(t, p, i, "orphan", ptr("survives"), "KV entries must survive execution pruning (instance-scoped lifetime)")
	kvWant(t, p, i, "keeper", ptr("alive"), "exec 2 key must survive")
}

// KVInstanceIsolation proves two instances keep independent values under the same key.
func KVInstanceIsolation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const a, b = "kv-iso-a", "kv-iso-b"
	createInstance(t, p, a)
	createInstance(t, p, b)
	kvAckWithDelta(t, p, a, 1, kvSet(a, 1, 100, "shared_name", "from_a", 0))
	kvAckWithDelta(t, p, b, 1, kvSet(b, 1, 100, "shared_name", "from_b", 0))
	kvWant(t, p, a, "shared_name", ptr("from_a"), "instance a")
	kvWant(t, p, b, "shared_name", ptr("from_b"), "instance b")
}

// KVDeleteInstanceCascades proves deleting a completed instance removes its KV.
func KVDeleteInstanceCascades(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-del"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "doomed", "bye", 0))
	kvComplete(t, p, i, 1)
	kvWant(t, p, i, "doomed", ptr("bye"), "value should exist before deletion")

	kvDelete(t, p, i, false)
	kvWant(t, p, i, "doomed", nil, "KV should be gone after instance deletion")
}

// KVClearNonexistentKey proves clearing a key that was never set is not an error.
func KVClearNonexistentKey(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-clrne"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvCleared(i, 1, 100, "never_existed"))
	kvWant(t, p, i, "never_existed", nil, "never set")
}

// KVGetUnknownInstance proves get_kv_value returns None, not an error, for an unknown instance.
func KVGetUnknownInstance(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	kvWant(t, p, "no-such-instance", "key", nil, "unknown instance")
}

// KVSetAfterClear proves KeyValuesCleared then KeyValueSet in one ack leaves only the new key.
func KVSetAfterClear(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-sac"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "old_a", "1", 0), kvSet(i, 1, 101, "old_b", "2", 0))
	kvAckWithDelta(t, p, i, 1, kvClearedAll(i, 1, 102), kvSet(i, 1, 103, "new_x", "fresh", 0))
	kvWant(t, p, i, "old_a", nil, "cleared")
	kvWant(t, p, i, "old_b", nil, "cleared")
	kvWant(t, p, i, "new_x", ptr("fresh"), "set after clear")
}

// KVEmptyValue proves "" is stored as Some(""), not None.
func KVEmptyValue(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-empty"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "blank", "", 0))
	kvWant(t, p, i, "blank", ptr(""), "empty string is a valid value, not None")
}

// KVLargeValue proves a 16 KiB value round-trips.
func KVLargeValue(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-big"
	createInstance(t, p, i)
	big := strings.Repeat("x", 16*1024)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "payload", big, 0))
	kvWant(t, p, i, "payload", &big, "16 KiB value")
}

// KVSpecialCharsInKey proves keys with spaces, unicode, dots, slashes and emoji work.
func KVSpecialCharsInKey(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-chars"
	createInstance(t, p, i)
	keys := [][2]string{
		{"key with spaces", "v1"}, {"日本語キー", "v2"}, {"dotted.key.name", "v3"}, {"path/like/key", "v4"}, {"emoji🎉key", "v5"},
	}
	var delta []provider.Event
	for n, kv := range keys {
		delta = append(delta, kvSet(i, 1, 100+uint64(n), kv[0], kv[1], 0))
	}
	kvAckWithDelta(t, p, i, 1, delta...)
	for _, kv := range keys {
		kvWant(t, p, i, kv[0], ptr(kv[1]), "key '"+kv[0]+"' should be retrievable")
	}
}

// KVSnapshotEmpty proves a fresh instance's fetch has an empty kv_snapshot.
func KVSnapshotEmpty(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-sempty"
	createInstance(t, p, i)
	it := kvPokeFetch(t, p, i)
	kvSnapLen(t, it.Item.KVSnapshot, 0, "expected empty snapshot for fresh instance")
	kvAckEmpty(t, p, it.LockToken, 1)
}

// KVSnapshotCrossExecution proves the snapshot holds execution 1's key (merged at CAN) but not
// the current execution's.
func KVSnapshotCrossExecution(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-scross"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "A", "from_exec1", 0))
	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "B", "from_exec2", 0))

	it := kvPokeFetch(t, p, i)
	snap := it.Item.KVSnapshot
	kvSnapLen(t, snap, 1, "snapshot should only contain prior-execution state")
	kvSnapWant(t, snap, "A", ptr("from_exec1"), "prior execution key")
	kvSnapWant(t, snap, "B", nil, "current-execution key should not be in snapshot")
	kvAckEmpty(t, p, it.LockToken, 2)
}

// KVPruneCurrentExecutionProtected proves pruning a single-execution instance keeps its KV.
func KVPruneCurrentExecutionProtected(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-prncur"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "alive", "yes", 0))
	kvPrune(t, p, i)
	kvWant(t, p, i, "alive", ptr("yes"), "current execution KV must survive pruning")
}

// KVDeleteInstanceWithChildren proves deleting a parent removes its child's KV too.
func KVDeleteInstanceWithChildren(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const parent, child = "kv-parent", "kv-child"
	createInstance(t, p, parent)
	kvAckWithDelta(t, p, parent, 1, kvSet(parent, 1, 100, "parent_key", "parent_val", 0))

	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: child, Orchestration: "TestOrch", Version: ptr("1.0.0"), Input: "{}",
		ParentInstance: ptr(parent), ParentID: ptr(uint64(1)), ExecutionID: 1,
	}})
	it := mustFetchOrch(t, p, longLock)
	meta := testMeta()
	meta.ParentInstanceID = parent
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1,
		HistoryDelta: []provider.Event{ev(child, 1, provider.OrchestrationStartedEvent{
			Name: "TestOrch", Version: "1.0.0", Input: "{}", ParentInstance: ptr(parent), ParentID: ptr(uint64(1)),
		})},
		Metadata: meta,
	})
	kvAckWithDelta(t, p, child, 1, kvSet(child, 1, 100, "child_key", "child_val", 0))

	kvComplete(t, p, child, 1)
	kvComplete(t, p, parent, 1)
	kvDelete(t, p, parent, false)
	kvWant(t, p, parent, "parent_key", nil, "parent KV should be removed")
	kvWant(t, p, child, "child_key", nil, "child KV should be removed when parent is deleted")
}

// KVClearIsolation proves a clear-all on one instance leaves another's KV alone.
func KVClearIsolation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const a, b = "kv-ciso-a", "kv-ciso-b"
	createInstance(t, p, a)
	createInstance(t, p, b)
	kvAckWithDelta(t, p, a, 1, kvSet(a, 1, 100, "shared", "from_a", 0))
	kvAckWithDelta(t, p, b, 1, kvSet(b, 1, 100, "shared", "from_b", 0))
	kvAckWithDelta(t, p, a, 1, kvClearedAll(a, 1, 101))
	kvWant(t, p, a, "shared", nil, "instance A cleared")
	kvWant(t, p, b, "shared", ptr("from_b"), "clearing instance A must not affect instance B")
}

// KVDeltaSnapshotExcludesCurrentExecution proves clients see a current-execution value while the
// fetch snapshot does not.
func KVDeltaSnapshotExcludesCurrentExecution(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-ds1"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "counter", "1", 100))
	kvWant(t, p, i, "counter", ptr("1"), "client read should see current-execution value")

	it := kvPokeFetch(t, p, i)
	kvSnapLen(t, it.Item.KVSnapshot, 0,
		"snapshot must be empty — counter was set in current execution (not completed), should not be in snapshot")
	kvAckEmpty(t, p, it.LockToken, 1)
}

// KVDeltaSnapshotIncludesCompletedExecution proves execution 1's values are in the snapshot after CAN.
func KVDeltaSnapshotIncludesCompletedExecution(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-ds2"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "counter", "5", 100))
	kvContinueAsNew(t, p, i, 2)

	it := kvPokeFetch(t, p, i)
	kvSnapWant(t, it.Item.KVSnapshot, "counter", ptr("5"), "snapshot must contain prior-execution value after CAN")
	kvAckEmpty(t, p, it.LockToken, 2)
}

// KVDeltaClientReadsMerged proves client reads merge store and delta, the delta winning.
func KVDeltaClientReadsMerged(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-dm"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "color", "red", 100), kvSet(i, 1, 101, "size", "large", 101))
	kvComplete(t, p, i, 1)
	// Like duroxide, execution 2 is acked directly (no ContinueAsNew turn).
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "color", "blue", 200), kvSet(i, 2, 201, "shape", "circle", 201))

	kvWant(t, p, i, "color", ptr("blue"), "delta should override kv_store value")
	kvWant(t, p, i, "size", ptr("large"), "kv_store value should be visible when no delta exists")
	kvWant(t, p, i, "shape", ptr("circle"), "delta-only key should be visible")
}

// KVDeltaTombstoneOverridesStore proves a current-execution clear hides a stored value.
func KVDeltaTombstoneOverridesStore(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-dt"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "temp", "exists", 100))
	kvComplete(t, p, i, 1)
	kvAckWithDelta(t, p, i, 2, kvCleared(i, 2, 200, "temp"))
	kvWant(t, p, i, "temp", nil, "tombstone in delta must override kv_store value")
}

// KVDeltaClearAllTombstonesStore proves a current-execution clear-all hides every stored key while
// a later set in the same ack stays visible.
func KVDeltaClearAllTombstonesStore(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-dca"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "a", "1", 100), kvSet(i, 1, 101, "b", "2", 101))
	kvComplete(t, p, i, 1)
	kvAckWithDelta(t, p, i, 2, kvClearedAll(i, 2, 200), kvSet(i, 2, 201, "c", "3", 201))
	kvWant(t, p, i, "a", nil, "clear_all must tombstone kv_store key 'a'")
	kvWant(t, p, i, "b", nil, "clear_all must tombstone kv_store key 'b'")
	kvWant(t, p, i, "c", ptr("3"), "key set after clear_all should be visible")
}

// KVDeltaMergedOnCompletion proves a value stays readable after completion merges the delta.
func KVDeltaMergedOnCompletion(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-dmc"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "result", "42", 100))
	kvComplete(t, p, i, 1)
	kvWant(t, p, i, "result", ptr("42"), "value should be in kv_store after completion merge")
}

// KVDeltaMergedOnCAN proves execution 2's snapshot holds execution 1's last values.
func KVDeltaMergedOnCAN(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const i = "kv-dmc2"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "version", "1", 100), kvSet(i, 1, 101, "progress", "50%", 101))
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 102, "progress", "100%", 102))
	kvContinueAsNew(t, p, i, 2)

	it := kvPokeFetch(t, p, i)
	kvSnapWant(t, it.Item.KVSnapshot, "version", ptr("1"), "version should carry over via kv_store after CAN merge")
	kvSnapWant(t, it.Item.KVSnapshot, "progress", ptr("100%"), "latest progress value should carry over")
	kvAckEmpty(t, p, it.LockToken, 2)
}

// KVDeltaDeleteInstanceCascades proves a forced delete removes current-execution (delta) values.
func KVDeltaDeleteInstanceCascades(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-ddel"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "data", "important", 100))
	kvWant(t, p, i, "data", ptr("important"), "before delete")
	kvDelete(t, p, i, true)
	kvWant(t, p, i, "data", nil, "KV delta must be cleaned up on instance deletion")
}

// KVDeltaPruneUntouchedKeySurvives proves keys written only by pruned executions survive pruning,
// for client reads and for the snapshot.
func KVDeltaPruneUntouchedKeySurvives(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	mustAdmin(t, p)
	const i = "kv-dprn"
	createInstance(t, p, i)
	kvAckWithDelta(t, p, i, 1, kvSet(i, 1, 100, "stale_config", "from_exec_1", 100))
	kvContinueAsNew(t, p, i, 2)
	kvAckWithDelta(t, p, i, 2, kvSet(i, 2, 200, "other", "unrelated", 200))
	kvContinueAsNew(t, p, i, 3)
	kvWant(t, p, i, "stale_config", ptr("from_exec_1"), "before prune")
	kvWant(t, p, i, "other", ptr("unrelated"), "before prune")

	kvPrune(t, p, i)
	kvWant(t, p, i, "stale_config", ptr("from_exec_1"), "KV key from pruned execution must survive — KV lifetime is instance-scoped")
	kvWant(t, p, i, "other", ptr("unrelated"), "KV key from pruned execution 2 must also survive")

	it := kvPokeFetch(t, p, i)
	kvSnapWant(t, it.Item.KVSnapshot, "stale_config", ptr("from_exec_1"), "snapshot must include untouched key from pruned execution")
	kvSnapWant(t, it.Item.KVSnapshot, "other", ptr("unrelated"), "snapshot must include key from pruned execution 2")
	kvAckEmpty(t, p, it.LockToken, 3)
}
