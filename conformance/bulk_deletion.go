package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("bulk_deletion",
		test{"test_delete_instance_bulk_filter_combinations", DeleteInstanceBulkFilterCombinations},
		test{"test_delete_instance_bulk_safety_and_limits", DeleteInstanceBulkSafetyAndLimits},
		test{"test_delete_instance_bulk_completed_before_filter", DeleteInstanceBulkCompletedBeforeFilter},
		test{"test_delete_instance_bulk_cascades_to_children", DeleteInstanceBulkCascadesToChildren},
	)
}

// bulkDelete calls delete_instance_bulk and fails the test on error.
func bulkDelete(t *testing.T, a provider.Admin, filter provider.InstanceFilter) provider.DeleteInstanceResult {
	t.Helper()
	r, err := a.DeleteInstanceBulk(ctx(t), filter)
	if err != nil {
		t.Fatalf("delete_instance_bulk(%+v): %v", filter, err)
	}
	return r
}

// bulkWantDeleted fails the test unless r reports exactly want instances deleted.
func bulkWantDeleted(t *testing.T, r provider.DeleteInstanceResult, want uint64, what string) {
	t.Helper()
	if r.InstancesDeleted != want {
		t.Fatalf("%s: instances_deleted %d, want %d", what, r.InstancesDeleted, want)
	}
}

// DeleteInstanceBulkFilterCombinations proves bulk delete by ids, by unknown ids (0) and with an empty filter (every terminal root).
func DeleteInstanceBulkFilterCombinations(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	for i := range 5 {
		delCompleted(t, p, fmt.Sprintf("bulk-del-filter-%d", i))
	}
	r := bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: []string{"bulk-del-filter-0", "bulk-del-filter-1"}})
	bulkWantDeleted(t, r, 2, "delete by 2 ids")
	delGone(t, a, "bulk-del-filter-0", "bulk-del-filter-1")
	delExists(t, a, "bulk-del-filter-2")

	r = bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: []string{"does-not-exist-1", "does-not-exist-2"}})
	bulkWantDeleted(t, r, 0, "delete by unknown ids")

	if r = bulkDelete(t, a, provider.InstanceFilter{}); r.InstancesDeleted < 3 {
		t.Fatalf("delete with an empty filter: instances_deleted %d, want at least 3", r.InstancesDeleted)
	}
	delGone(t, a, "bulk-del-filter-2", "bulk-del-filter-3", "bulk-del-filter-4")
}

// DeleteInstanceBulkSafetyAndLimits proves bulk delete skips running instances and honours limit across batches.
func DeleteInstanceBulkSafetyAndLimits(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	delCompleted(t, p, "bulk-del-safe-completed-1")
	delCompleted(t, p, "bulk-del-safe-completed-2")
	createInstance(t, p, "bulk-del-safe-running-1")
	createInstance(t, p, "bulk-del-safe-running-2")

	r := bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: []string{
		"bulk-del-safe-completed-1", "bulk-del-safe-completed-2", "bulk-del-safe-running-1", "bulk-del-safe-running-2",
	}})
	bulkWantDeleted(t, r, 2, "delete of 2 completed + 2 running ids")
	delExists(t, a, "bulk-del-safe-running-1", "bulk-del-safe-running-2")

	for i := range 4 {
		delCompleted(t, p, fmt.Sprintf("bulk-del-batch-%d", i))
	}
	for i, want := range []uint64{2, 2, 0} {
		r := bulkDelete(t, a, provider.InstanceFilter{Limit: 2})
		bulkWantDeleted(t, r, want, fmt.Sprintf("batch %d with limit 2", i+1))
	}
}

// DeleteInstanceBulkCompletedBeforeFilter proves completed_before selects only instances completed before the cutoff.
func DeleteInstanceBulkCompletedBeforeFilter(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	nowMs := func() uint64 { return uint64(time.Now().UnixMilli()) }
	ids := []string{"bulk-del-time-1", "bulk-del-time-2"}

	before := nowMs()
	time.Sleep(10 * time.Millisecond)
	for _, id := range ids {
		delCompleted(t, p, id)
	}
	time.Sleep(10 * time.Millisecond)
	after := nowMs()

	r := bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: ids, CompletedBeforeMs: before})
	bulkWantDeleted(t, r, 0, "delete with completed_before = a time before the completions")
	delExists(t, a, ids...)

	r = bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: ids, CompletedBeforeMs: after})
	bulkWantDeleted(t, r, 2, "delete with completed_before = a time after the completions")
	delGone(t, a, ids...)
}

// DeleteInstanceBulkCascadesToChildren proves bulk delete of roots also deletes their children and counts them.
func DeleteInstanceBulkCascadesToChildren(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const parent1, child1 = "bulk-del-cascade-parent1", "bulk-del-cascade-child1"
	const parent2, standalone = "bulk-del-cascade-parent2", "bulk-del-cascade-standalone"
	children2 := []string{"bulk-del-cascade-child2a", "bulk-del-cascade-child2b", "bulk-del-cascade-child2c"}

	delCompleted(t, p, parent1)
	delFinishedInstance(t, p, child1, parent1, provider.StatusCompleted, "done")
	delCompleted(t, p, parent2)
	for _, c := range children2 {
		delFinishedInstance(t, p, c, parent2, provider.StatusCompleted, "done")
	}
	delCompleted(t, p, standalone)
	all := append([]string{parent1, child1, parent2, standalone}, children2...)
	delExists(t, a, all...)

	r := bulkDelete(t, a, provider.InstanceFilter{InstanceIDs: []string{parent1, parent2, standalone}})
	bulkWantDeleted(t, r, 7, "delete of 3 roots with 4 children")
	delGone(t, a, all...)
}
