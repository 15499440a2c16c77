package conformance

import (
	"fmt"
	"slices"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("prune",
		test{"test_prune_options_combinations", PruneOptionsCombinations},
		test{"test_prune_safety", PruneSafety},
		test{"test_prune_bulk", PruneBulk},
		test{"test_prune_bulk_includes_running_instances", PruneBulkIncludesRunningInstances},
	)
}

// pruneMultiExecInstance creates instance id with n executions, one turn each: execution 1 from
// start_item, the next ones from a ContinueAsNew item; every execution but the last ends
// ContinuedAsNew, the last gets lastStatus. orch names the orchestration in events and metadata.
func pruneMultiExecInstance(t *testing.T, p provider.Provider, id string, n uint64, orch, lastStatus string) {
	t.Helper()
	for exec := uint64(1); exec <= n; exec++ {
		status := provider.StatusContinuedAsNew
		if exec == n {
			status = lastStatus
		}
		item := startItem(id)
		if exec > 1 {
			item = provider.WorkItem{Kind: provider.ContinueAsNew{
				Instance: id, Orchestration: orch, Input: "{}", Version: ptr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{},
			}}
		}
		mustEnqueueOrch(t, p, item)
		it := mustFetchOrch(t, p, longLock)
		mustAck(t, p, it.LockToken, provider.OrchestrationAck{
			ExecutionID:  exec,
			HistoryDelta: []provider.Event{evExec(id, exec, 1, provider.OrchestrationStartedEvent{Name: orch, Version: "1.0.0", Input: "{}"})},
			Metadata:     provider.ExecutionMetadata{Status: status, OrchestrationName: orch, OrchestrationVersion: "1.0.0"},
		})
	}
}

// pruneCompletedInstance is prune.rs's create_multi_execution_instance (TestOrch, last execution Completed).
func pruneCompletedInstance(t *testing.T, p provider.Provider, id string, n uint64) {
	t.Helper()
	pruneMultiExecInstance(t, p, id, n, "TestOrch", provider.StatusCompleted)
}

// pruneExecutions returns list_executions(id) or fails the test.
func pruneExecutions(t *testing.T, a provider.Admin, id string) []uint64 {
	t.Helper()
	execs, err := a.ListExecutions(ctx(t), id)
	wantNoErr(t, err, "list_executions("+id+")")
	return execs
}

// pruneInfo returns get_instance_info(id) or fails the test.
func pruneInfo(t *testing.T, a provider.Admin, id string) provider.InstanceInfo {
	t.Helper()
	info, err := a.GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info("+id+")")
	return info
}

// PruneOptionsCombinations proves keep_last keeps the newest executions and empty options keep only the current one.
func PruneOptionsCombinations(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "prune-options-test"
	pruneCompletedInstance(t, p, id, 4)
	if execs := pruneExecutions(t, a, id); len(execs) != 4 {
		t.Fatalf("list_executions: got %v, want 4 executions", execs)
	}
	r, err := a.PruneExecutions(ctx(t), id, provider.PruneOptions{KeepLast: 2})
	wantNoErr(t, err, "prune_executions(keep_last=2)")
	if r.InstancesProcessed != 1 {
		t.Fatalf("prune_executions(keep_last=2): instances_processed %d, want 1", r.InstancesProcessed)
	}
	execs := pruneExecutions(t, a, id)
	if len(execs) != 2 || !(slices.Contains(execs, 3) || slices.Contains(execs, 4)) {
		t.Fatalf("after prune(keep_last=2): executions %v, want 2 of them, the latest ones", execs)
	}

	const id2 = "prune-options-empty"
	pruneCompletedInstance(t, p, id2, 3)
	current := pruneInfo(t, a, id2).CurrentExecutionID
	_, err = a.PruneExecutions(ctx(t), id2, provider.PruneOptions{})
	wantNoErr(t, err, "prune_executions(empty options)")
	if execs := pruneExecutions(t, a, id2); len(execs) != 1 || execs[0] != current {
		t.Fatalf("after prune(empty options): executions %v, want only the current one [%d]", execs, current)
	}
}

// PruneSafety proves pruning never deletes the current execution, and errors for an unknown instance.
func PruneSafety(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "prune-safety-current"
	pruneCompletedInstance(t, p, id, 3)
	_, err := a.PruneExecutions(ctx(t), id, provider.PruneOptions{KeepLast: 0})
	wantNoErr(t, err, "prune_executions(keep_last=0)")
	if cur := pruneInfo(t, a, id).CurrentExecutionID; cur != 3 {
		t.Fatalf("after prune(keep_last=0): current execution %d, want 3", cur)
	}

	_, err = a.PruneExecutions(ctx(t), "does-not-exist-prune", provider.PruneOptions{KeepLast: 1})
	wantErr(t, err, "prune_executions of an unknown instance")

	// Go's PruneOptions has no separate None: KeepLast 0 stands for both None and Some(0), so the
	// "None" and "Some(0)" cases send the same options, as duroxide says they are equivalent.
	for _, c := range []struct {
		label, id string
		keepLast  uint32
	}{{"None", "prune-terminal-none", 0}, {"Some(0)", "prune-terminal-some0", 0}, {"Some(1)", "prune-terminal-some1", 1}} {
		id := c.id
		pruneCompletedInstance(t, p, id, 4)
		info := pruneInfo(t, a, id)
		if info.Status != "Completed" {
			t.Fatalf("%s: status %q, want Completed", id, info.Status)
		}
		r, err := a.PruneExecutions(ctx(t), id, provider.PruneOptions{KeepLast: c.keepLast})
		wantNoErr(t, err, "prune_executions(keep_last="+c.label+")")
		execs := pruneExecutions(t, a, id)
		if len(execs) != 1 || execs[0] != info.CurrentExecutionID {
			t.Fatalf("keep_last=%s: executions %v, want only the current one [%d]", c.label, execs, info.CurrentExecutionID)
		}
		if r.ExecutionsDeleted < 3 {
			t.Fatalf("keep_last=%s: executions_deleted %d, want at least 3", c.label, r.ExecutionsDeleted)
		}
	}
}

// PruneBulk proves prune_executions_bulk prunes exactly the selected instances.
func PruneBulk(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	for i := range 3 {
		pruneCompletedInstance(t, p, fmt.Sprintf("prune-bulk-%d", i), 4)
	}
	r, err := a.PruneExecutionsBulk(ctx(t),
		provider.InstanceFilter{InstanceIDs: []string{"prune-bulk-0", "prune-bulk-1"}},
		provider.PruneOptions{KeepLast: 1})
	wantNoErr(t, err, "prune_executions_bulk")
	if r.InstancesProcessed != 2 || r.ExecutionsDeleted < 4 {
		t.Fatalf("prune_executions_bulk: got %+v, want 2 instances processed and at least 4 executions deleted", r)
	}
	for id, want := range map[string]int{"prune-bulk-0": 1, "prune-bulk-1": 1, "prune-bulk-2": 4} {
		if execs := pruneExecutions(t, a, id); len(execs) != want {
			t.Errorf("%s: executions %v, want %d", id, execs, want)
		}
	}
}

// PruneBulkIncludesRunningInstances proves bulk prune handles a Running instance, deleting its old executions only.
func PruneBulkIncludesRunningInstances(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	const id = "prune-running-inst"
	pruneMultiExecInstance(t, p, id, 3, "LongRunning", provider.StatusRunning)
	if execs := pruneExecutions(t, a, id); len(execs) != 3 {
		t.Fatalf("list_executions: got %v, want 3 executions", execs)
	}
	if info := pruneInfo(t, a, id); info.Status != "Running" || info.CurrentExecutionID != 3 {
		t.Fatalf("get_instance_info: status %q, current execution %d; want Running, 3", info.Status, info.CurrentExecutionID)
	}
	r, err := a.PruneExecutionsBulk(ctx(t), provider.InstanceFilter{InstanceIDs: []string{id}}, provider.PruneOptions{KeepLast: 1})
	wantNoErr(t, err, "prune_executions_bulk")
	if r.InstancesProcessed != 1 || r.ExecutionsDeleted != 2 {
		t.Fatalf("prune_executions_bulk: got %+v, want 1 instance processed and exactly 2 executions deleted", r)
	}
	if execs := pruneExecutions(t, a, id); len(execs) != 1 || execs[0] != 3 {
		t.Fatalf("after bulk prune: executions %v, want [3]", execs)
	}
	if info := pruneInfo(t, a, id); info.Status != "Running" {
		t.Fatalf("after bulk prune: status %q, want Running", info.Status)
	}
}
