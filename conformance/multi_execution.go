package conformance

import (
	"fmt"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("multi_execution",
		test{"test_execution_isolation", ExecutionIsolation},
		test{"test_latest_execution_detection", LatestExecutionDetection},
		test{"test_execution_id_sequencing", ExecutionIDSequencing},
		test{"test_continue_as_new_creates_new_execution", ContinueAsNewCreatesNewExecution},
		test{"test_execution_history_persistence", ExecutionHistoryPersistence},
	)
}

// meStart is start_item with the given execution id.
func meStart(instance string, executionID uint64) provider.WorkItem {
	it := startItem(instance)
	s := it.Kind.(provider.StartOrchestration)
	s.ExecutionID = executionID
	return provider.WorkItem{Kind: s}
}

// meStarted is OrchestrationStarted (TestOrch 1.0.0, event_id 1) for an execution with the given input.
func meStarted(instance string, executionID uint64, input string) provider.Event {
	return evExec(instance, executionID, 1, provider.OrchestrationStartedEvent{Name: "TestOrch", Version: "1.0.0", Input: input})
}

// meTurn enqueues item, fetches it (30 s lock) and acks it into execution executionID with delta and meta.
// It returns the fetched item.
func meTurn(t *testing.T, p provider.Provider, item provider.WorkItem, executionID uint64, delta []provider.Event, meta provider.ExecutionMetadata) *provider.LockedOrchestrationItem {
	t.Helper()
	mustEnqueueOrch(t, p, item)
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: executionID, HistoryDelta: delta, Metadata: meta})
	return it
}

// meReadExec reads one execution's history. duroxide reads an error as empty (unwrap_or_default)
// and then fails on the count; failing on the error itself says why.
func meReadExec(t *testing.T, p provider.Provider, instance string, executionID uint64) []provider.Event {
	t.Helper()
	h, err := p.ReadWithExecution(ctx(t), instance, executionID)
	if err != nil {
		t.Fatalf("read_with_execution(%q, %d): %v", instance, executionID, err)
	}
	return h
}

// meTypes returns the event types of a history.
func meTypes(h []provider.Event) []string {
	out := make([]string, len(h))
	for i, e := range h {
		out[i] = e.EventType()
	}
	return out
}

// meWantTypes fails the test unless h has exactly the given event types.
func meWantTypes(t *testing.T, what string, h []provider.Event, want ...string) {
	t.Helper()
	got := meTypes(h)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: got events %v, want %v", what, got, want)
	}
}

// meWantActivity fails the test unless h is exactly one ActivityScheduled named name.
func meWantActivity(t *testing.T, what string, h []provider.Event, name string) {
	t.Helper()
	if len(h) != 1 {
		t.Fatalf("%s: got %d events, want 1", what, len(h))
	}
	a, ok := h[0].Kind.(provider.ActivityScheduledEvent)
	if !ok {
		t.Fatalf("%s: got %s, want ActivityScheduled", what, h[0].EventType())
	}
	if a.Name != name {
		t.Fatalf("%s: got activity %q, want %q", what, a.Name, name)
	}
}

// ExecutionIsolation proves each execution keeps its own history and read returns the latest one.
func ExecutionIsolation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	meTurn(t, p, meStart(inst, 1), 1, []provider.Event{
		meStarted(inst, 1, "{}"),
		evExec(inst, 1, 2, provider.ActivityScheduledEvent{Name: "Activity1", Input: "input1"}),
		evExec(inst, 1, 3, provider.OrchestrationCompletedEvent{Output: "result1"}),
	}, provider.ExecutionMetadata{})
	meTurn(t, p, meStart(inst, 2), 2, []provider.Event{
		meStarted(inst, 2, "{}"),
		evExec(inst, 2, 2, provider.OrchestrationCompletedEvent{Output: "result2"}),
	}, provider.ExecutionMetadata{})

	meWantTypes(t, "execution 1", meReadExec(t, p, inst, 1), "OrchestrationStarted", "ActivityScheduled", "OrchestrationCompleted")
	meWantTypes(t, "execution 2", meReadExec(t, p, inst, 2), "OrchestrationStarted", "OrchestrationCompleted")
	meWantTypes(t, "read (latest)", mustRead(t, p, inst), "OrchestrationStarted", "OrchestrationCompleted")
}

// LatestExecutionDetection proves read returns the highest execution's history, even without OrchestrationStarted events.
func LatestExecutionDetection(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	meTurn(t, p, meStart(inst, 1), 1, []provider.Event{
		evExec(inst, 1, 1, provider.ActivityScheduledEvent{Name: "A"}),
	}, provider.ExecutionMetadata{})
	meTurn(t, p, meStart(inst, 2), 2, []provider.Event{
		evExec(inst, 2, 1, provider.ActivityScheduledEvent{Name: "B"}),
	}, provider.ExecutionMetadata{})

	meWantActivity(t, "read (latest)", mustRead(t, p, inst), "B")
	meWantActivity(t, "execution 1", meReadExec(t, p, inst, 1), "A")
}

// ExecutionIDSequencing proves a fetch reports the instance's current (highest acked) execution id.
func ExecutionIDSequencing(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	it := meTurn(t, p, meStart(inst, 1), 1, []provider.Event{meStarted(inst, 1, "{}")}, testMeta())
	if it.Item.ExecutionID != 1 {
		t.Fatalf("first fetch: got execution %d, want 1", it.Item.ExecutionID)
	}
	meTurn(t, p, meStart(inst, 2), 2, []provider.Event{meStarted(inst, 2, "{}")}, testMeta())

	mustEnqueueOrch(t, p, meStart(inst, 3))
	if it3 := mustFetchOrch(t, p, longLock); it3.Item.ExecutionID != 2 {
		t.Fatalf("fetch after ack of execution 2: got execution %d, want 2", it3.Item.ExecutionID)
	}
}

// ContinueAsNewCreatesNewExecution proves acking a ContinueAsNew turn into execution 2 succeeds and makes it current.
func ContinueAsNewCreatesNewExecution(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	meTurn(t, p, meStart(inst, 1), 1, []provider.Event{meStarted(inst, 1, "{}")}, provider.ExecutionMetadata{})
	meTurn(t, p, provider.WorkItem{Kind: provider.ContinueAsNew{
		Instance: inst, Orchestration: "TestOrch", Input: "new-input", Version: ptr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{},
	}}, 2, []provider.Event{meStarted(inst, 2, "new-input")}, provider.ExecutionMetadata{})

	if it := fetchOrch(t, p, longLock); it != nil && it.Item.ExecutionID != 2 {
		t.Fatalf("fetch after continue-as-new: got execution %d, want 2", it.Item.ExecutionID)
	}
}

// ExecutionHistoryPersistence proves the histories of three executions stay independent.
func ExecutionHistoryPersistence(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	for exec := uint64(1); exec <= 3; exec++ {
		meTurn(t, p, meStart(inst, exec), exec, []provider.Event{evExec(inst, exec, 1, provider.ActivityScheduledEvent{
			Name: fmt.Sprintf("Activity-%d", exec), Input: fmt.Sprintf("input-%d", exec),
		})}, provider.ExecutionMetadata{})
	}
	for exec := uint64(1); exec <= 3; exec++ {
		meWantActivity(t, fmt.Sprintf("execution %d", exec), meReadExec(t, p, inst, exec), fmt.Sprintf("Activity-%d", exec))
	}
	meWantActivity(t, "read (latest)", mustRead(t, p, inst), "Activity-3")
}
