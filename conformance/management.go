package conformance

import (
	"slices"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("management",
		test{"test_list_instances", ListInstances},
		test{"test_list_instances_by_status", ListInstancesByStatus},
		test{"test_list_executions", ListExecutions},
		test{"test_get_instance_info", GetInstanceInfo},
		test{"test_get_execution_info", GetExecutionInfo},
		test{"test_get_system_metrics", GetSystemMetrics},
		test{"test_get_queue_depths", GetQueueDepths},
		test{"test_get_instance_stats_nonexistent", GetInstanceStatsNonexistent},
		test{"test_get_instance_stats_history", GetInstanceStatsHistory},
		test{"test_get_instance_stats_kv", GetInstanceStatsKV},
		test{"test_get_instance_stats_carry_forward", GetInstanceStatsCarryForward},
		test{"test_get_instance_stats_kv_delta_only", GetInstanceStatsKVDeltaOnly},
		test{"test_get_instance_stats_kv_merged", GetInstanceStatsKVMerged},
	)
}

// mgmtStartTurn enqueues start_item(instance), fetches the turn and acks it for execution 1 with
// delta and meta.
func mgmtStartTurn(t *testing.T, p provider.Provider, instance string, delta []provider.Event, meta provider.ExecutionMetadata) {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta, Metadata: meta})
}

// mgmtStats returns get_instance_stats for an instance that must exist.
func mgmtStats(t *testing.T, p provider.Provider, instance string) provider.SystemStats {
	t.Helper()
	s, err := p.GetInstanceStats(ctx(t), instance)
	wantNoErr(t, err, "get_instance_stats")
	if s == nil {
		t.Fatalf("get_instance_stats(%q): got None, want stats", instance)
	}
	return *s
}

// mgmtKVSet is a KeyValueSet event of execution 1.
func mgmtKVSet(instance string, eventID uint64, key, value string, at uint64) provider.Event {
	return ev(instance, eventID, provider.KeyValueSetEvent{Key: key, Value: value, LastUpdatedAtMs: at})
}

// ListInstances proves list_instances returns every created instance.
func ListInstances(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	for _, id := range []string{"mgmt-inst-0", "mgmt-inst-1", "mgmt-inst-2"} {
		createInstance(t, p, id)
	}
	ids, err := a.ListInstances(ctx(t))
	wantNoErr(t, err, "list_instances")
	if len(ids) < 3 {
		t.Fatalf("list_instances: got %v, want at least 3 instances", ids)
	}
	for _, id := range []string{"mgmt-inst-0", "mgmt-inst-1", "mgmt-inst-2"} {
		if !slices.Contains(ids, id) {
			t.Errorf("list_instances: %v lacks %q", ids, id)
		}
	}
}

// ListInstancesByStatus proves an instance acked with status Completed is listed under "Completed".
func ListInstancesByStatus(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	mgmtStartTurn(t, p, "mgmt-completed", []provider.Event{started("mgmt-completed")}, provider.ExecutionMetadata{
		Status: provider.StatusCompleted, Output: ptr("done"), OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0",
	})
	ids, err := a.ListInstancesByStatus(ctx(t), "Completed")
	wantNoErr(t, err, "list_instances_by_status")
	if !slices.Contains(ids, "mgmt-completed") {
		t.Fatalf("list_instances_by_status(Completed): %v lacks mgmt-completed", ids)
	}
}

// ListExecutions proves execution 1 is listed after an ack with default metadata.
func ListExecutions(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	mgmtStartTurn(t, p, "mgmt-multi-exec", []provider.Event{started("mgmt-multi-exec")}, provider.ExecutionMetadata{})
	execs, err := a.ListExecutions(ctx(t), "mgmt-multi-exec")
	wantNoErr(t, err, "list_executions")
	if !slices.Contains(execs, 1) {
		t.Fatalf("list_executions: got %v, want execution 1 listed", execs)
	}
}

// GetInstanceInfo proves get_instance_info reports the name, version and execution from the ack metadata.
func GetInstanceInfo(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	mgmtStartTurn(t, p, "mgmt-info", []provider.Event{
		ev("mgmt-info", 1, provider.OrchestrationStartedEvent{Name: "InfoOrch", Version: "2.0.0", Input: "test"}),
	}, provider.ExecutionMetadata{OrchestrationName: "InfoOrch", OrchestrationVersion: "2.0.0"})
	info, err := a.GetInstanceInfo(ctx(t), "mgmt-info")
	wantNoErr(t, err, "get_instance_info")
	if info.InstanceID != "mgmt-info" || info.OrchestrationName != "InfoOrch" ||
		info.OrchestrationVersion != "2.0.0" || info.CurrentExecutionID != 1 {
		t.Fatalf("get_instance_info: got %+v, want mgmt-info / InfoOrch / 2.0.0 / execution 1", info)
	}
}

// GetExecutionInfo proves get_execution_info reports the status and output acked for execution 1.
func GetExecutionInfo(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	// duroxide builds this event with instance id "mgmt-bulk-del": providers must not check it.
	mgmtStartTurn(t, p, "mgmt-exec-info", []provider.Event{started("mgmt-bulk-del")},
		provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: ptr("result")})
	info, err := a.GetExecutionInfo(ctx(t), "mgmt-exec-info", 1)
	wantNoErr(t, err, "get_execution_info")
	if info.ExecutionID != 1 || info.Status != "Completed" || info.Output == nil || *info.Output != "result" {
		t.Fatalf("get_execution_info: got %+v (output %v), want execution 1 Completed with output \"result\"", info, info.Output)
	}
}

// GetSystemMetrics proves total_instances grows when an instance is created and total_events is positive.
func GetSystemMetrics(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	before, err := a.GetSystemMetrics(ctx(t))
	wantNoErr(t, err, "get_system_metrics")
	// duroxide builds this event with instance id "mgmt-cancel": providers must not check it.
	mgmtStartTurn(t, p, "mgmt-metrics", []provider.Event{started("mgmt-cancel")}, testMeta())
	after, err := a.GetSystemMetrics(ctx(t))
	wantNoErr(t, err, "get_system_metrics")
	if after.TotalInstances <= before.TotalInstances {
		t.Errorf("total_instances: got %d after creating an instance, want more than %d", after.TotalInstances, before.TotalInstances)
	}
	if after.TotalEvents == 0 {
		t.Errorf("total_events: got 0, want > 0")
	}
}

// GetQueueDepths proves orchestrator_queue grows after an enqueue.
func GetQueueDepths(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)
	before, err := a.GetQueueDepths(ctx(t))
	wantNoErr(t, err, "get_queue_depths")
	mustEnqueueOrch(t, p, startItem("mgmt-queue"))
	after, err := a.GetQueueDepths(ctx(t))
	wantNoErr(t, err, "get_queue_depths")
	if after.OrchestratorQueue <= before.OrchestratorQueue {
		t.Fatalf("orchestrator_queue: got %d after an enqueue, want more than %d", after.OrchestratorQueue, before.OrchestratorQueue)
	}
}

// GetInstanceStatsNonexistent proves get_instance_stats returns None for an unknown instance.
func GetInstanceStatsNonexistent(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	s, err := p.GetInstanceStats(ctx(t), "no-such-instance")
	wantNoErr(t, err, "get_instance_stats")
	if s != nil {
		t.Fatalf("get_instance_stats(no-such-instance): got %+v, want None", *s)
	}
}

// GetInstanceStatsHistory proves get_instance_stats counts the history and reports no KV and no carry-forward.
func GetInstanceStatsHistory(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	createInstance(t, p, "stats-hist")
	s := mgmtStats(t, p, "stats-hist")
	if s.HistoryEventCount < 1 || s.HistorySizeBytes == 0 || s.KVUserKeyCount != 0 ||
		s.KVTotalValueBytes != 0 || s.QueuePendingCount != 0 {
		t.Fatalf("get_instance_stats: got %+v, want >=1 event, size > 0, 0 KV keys/bytes, 0 pending", s)
	}
}

// GetInstanceStatsKV proves KV keys and value bytes are counted after a completing turn.
func GetInstanceStatsKV(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "stats-kv"
	createInstance(t, p, id)
	pokeTurn(t, p, id, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		mgmtKVSet(id, 100, "k1", "aaa", 0),
		mgmtKVSet(id, 101, "k2", "bbbbb", 0),
		ev(id, 102, provider.OrchestrationCompletedEvent{Output: "done"}),
	}, Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: ptr("done")}})
	s := mgmtStats(t, p, id)
	if s.KVUserKeyCount != 2 || s.KVTotalValueBytes != 8 {
		t.Fatalf("get_instance_stats: got %d keys / %d bytes, want 2 / 8", s.KVUserKeyCount, s.KVTotalValueBytes)
	}
}

// GetInstanceStatsCarryForward proves queue_pending_count is the number of carry_forward_events on OrchestrationStarted.
func GetInstanceStatsCarryForward(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "cf-stats"
	mgmtStartTurn(t, p, id, []provider.Event{ev(id, 1, provider.OrchestrationStartedEvent{
		Name: "TestOrch", Version: "1.0.0", Input: "{}",
		CarryForwardEvents: []provider.CarriedEvent{
			{Name: "raised-1", Data: `{"data":"a"}`},
			{Name: "raised-2", Data: `{"data":"b"}`},
			{Name: "raised-3", Data: `{"data":"c"}`},
		},
	})}, testMeta())
	s := mgmtStats(t, p, id)
	if s.QueuePendingCount != 3 || s.HistoryEventCount < 1 || s.HistorySizeBytes == 0 || s.KVUserKeyCount != 0 {
		t.Fatalf("get_instance_stats: got %+v, want 3 pending, >=1 event, size > 0, 0 KV keys", s)
	}
}

// GetInstanceStatsKVDeltaOnly proves KV values written by a non-terminal turn are counted.
func GetInstanceStatsKVDeltaOnly(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "kv-delta-stats"
	createInstance(t, p, id)
	pokeTurn(t, p, id, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		mgmtKVSet(id, 100, "dk1", "xxx", 0),
		mgmtKVSet(id, 101, "dk2", "yyyyyy", 0),
		ev(id, 102, provider.ActivityScheduledEvent{Name: "Noop", Input: "{}"}),
	}})
	s := mgmtStats(t, p, id)
	if s.KVUserKeyCount != 2 || s.KVTotalValueBytes != 9 || s.QueuePendingCount != 0 {
		t.Fatalf("get_instance_stats: got %+v, want 2 keys, 9 bytes, 0 pending", s)
	}
}

// GetInstanceStatsKVMerged proves KV stats stay right when a completing turn overwrites a key written earlier.
func GetInstanceStatsKVMerged(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const id = "kv-merged-stats"
	createInstance(t, p, id)
	pokeTurn(t, p, id, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		mgmtKVSet(id, 100, "mk1", "aaa", 0),
		mgmtKVSet(id, 101, "mk2", "bb", 0),
		ev(id, 102, provider.ActivityScheduledEvent{Name: "Noop", Input: "{}"}),
	}})
	s := mgmtStats(t, p, id)
	if s.KVUserKeyCount != 2 || s.KVTotalValueBytes != 5 {
		t.Fatalf("get_instance_stats after turn 1: got %d keys / %d bytes, want 2 / 5", s.KVUserKeyCount, s.KVTotalValueBytes)
	}
	pokeTurn(t, p, id, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		mgmtKVSet(id, 200, "mk1", "zzzzz", 1),
		ev(id, 201, provider.OrchestrationCompletedEvent{Output: "done"}),
	}, Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: ptr("done")}})
	s = mgmtStats(t, p, id)
	if s.KVUserKeyCount != 2 || s.KVTotalValueBytes != 7 || s.QueuePendingCount != 0 {
		t.Fatalf("get_instance_stats after completion: got %+v, want 2 keys, 7 bytes, 0 pending", s)
	}
}
