package conformance

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// longLock is the lock duration tests use when they do not care about expiry (duroxide uses 30 s).
const longLock = 30 * time.Second

func ptr[T any](v T) *T { return &v }

// startItem is duroxide's start_item: StartOrchestration of "TestOrch" 1.0.0, input "{}", execution 1.
func startItem(instance string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: instance, Orchestration: "TestOrch", Input: "{}", Version: ptr("1.0.0"), ExecutionID: 1,
	}}
}

// ev builds an event of instance/execution 1 with the given id and kind.
func ev(instance string, eventID uint64, kind provider.EventKind) provider.Event {
	return provider.Event{EventID: eventID, InstanceID: instance, ExecutionID: 1,
		TimestampMs: uint64(time.Now().UnixMilli()), DuroxideVersion: "0.1.29", Kind: kind}
}

// evExec is ev for another execution.
func evExec(instance string, executionID, eventID uint64, kind provider.EventKind) provider.Event {
	e := ev(instance, eventID, kind)
	e.ExecutionID = executionID
	return e
}

// started is an OrchestrationStarted event (event_id 1) of TestOrch 1.0.0.
func started(instance string) provider.Event {
	return ev(instance, 1, provider.OrchestrationStartedEvent{Name: "TestOrch", Version: "1.0.0", Input: "{}"})
}

// testMeta is the metadata create_instance acks with.
func testMeta() provider.ExecutionMetadata {
	return provider.ExecutionMetadata{OrchestrationName: "TestOrch", OrchestrationVersion: "1.0.0"}
}

// activityItem is an ActivityExecute for instance/execution 1.
func activityItem(instance string, id uint64) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id, Name: "TestActivity", Input: "{}"}}
}

// activityCompleted is an ActivityCompleted for instance/execution 1.
func activityCompleted(instance string, id uint64, result string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityCompleted{Instance: instance, ExecutionID: 1, ID: id, Result: result}}
}

// externalRaised is an ExternalRaised event item.
func externalRaised(instance, name, data string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ExternalRaised{Instance: instance, Name: name, Data: data}}
}

// mustEnqueueOrch enqueues to the orchestrator queue with no delay.
func mustEnqueueOrch(t *testing.T, p provider.Provider, item provider.WorkItem) {
	t.Helper()
	if err := p.EnqueueForOrchestrator(ctx(t), item, 0); err != nil {
		t.Fatalf("enqueue_for_orchestrator: %v", err)
	}
}

// mustEnqueueWorker enqueues to the worker queue.
func mustEnqueueWorker(t *testing.T, p provider.Provider, item provider.WorkItem) {
	t.Helper()
	if err := p.EnqueueForWorker(ctx(t), item); err != nil {
		t.Fatalf("enqueue_for_worker: %v", err)
	}
}

// fetchOrch fetches with poll timeout 0 and fails the test on error.
func fetchOrch(t *testing.T, p provider.Provider, lock time.Duration) *provider.LockedOrchestrationItem {
	t.Helper()
	it, err := p.FetchOrchestrationItem(ctx(t), lock, 0, nil)
	if err != nil {
		t.Fatalf("fetch_orchestration_item: %v", err)
	}
	return it
}

// mustFetchOrch fetches and fails the test when nothing is returned.
func mustFetchOrch(t *testing.T, p provider.Provider, lock time.Duration) *provider.LockedOrchestrationItem {
	t.Helper()
	it := fetchOrch(t, p, lock)
	if it == nil {
		t.Fatal("fetch_orchestration_item: got nothing, want an item")
	}
	return it
}

// mustNoOrch fails the test when a fetch returns an item.
func mustNoOrch(t *testing.T, p provider.Provider, lock time.Duration) {
	t.Helper()
	if it := fetchOrch(t, p, lock); it != nil {
		t.Fatalf("fetch_orchestration_item: got instance %q, want nothing", it.Item.Instance)
	}
}

// fetchWork fetches a worker item (poll 0, no session) and fails the test on error.
func fetchWork(t *testing.T, p provider.Provider, lock time.Duration, tags provider.TagFilter) *provider.LockedWorkItem {
	t.Helper()
	it, err := p.FetchWorkItem(ctx(t), lock, 0, nil, tags)
	if err != nil {
		t.Fatalf("fetch_work_item: %v", err)
	}
	return it
}

// mustFetchWork fetches a worker item and fails the test when nothing is returned.
func mustFetchWork(t *testing.T, p provider.Provider, lock time.Duration) *provider.LockedWorkItem {
	t.Helper()
	it := fetchWork(t, p, lock, provider.TagFilterDefaultOnly())
	if it == nil {
		t.Fatal("fetch_work_item: got nothing, want an item")
	}
	return it
}

// mustAck acks and fails the test on error.
func mustAck(t *testing.T, p provider.Provider, token string, ack provider.OrchestrationAck) {
	t.Helper()
	if err := p.AckOrchestrationItem(ctx(t), token, ack); err != nil {
		t.Fatalf("ack_orchestration_item: %v", err)
	}
}

// createInstance is duroxide's create_instance: enqueue start, fetch, ack [OrchestrationStarted#1]
// with name TestOrch / version 1.0.0 (status left empty: Running).
func createInstance(t *testing.T, p provider.Provider, instance string) {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != instance {
		t.Fatalf("create_instance: fetched %q, want %q", it.Item.Instance, instance)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started(instance)}, Metadata: testMeta(),
	})
}

// pokeTurn is duroxide's ack_with_delta: enqueue an ExternalRaised "poke" so that the instance has
// something to fetch, fetch it and ack with ack.
func pokeTurn(t *testing.T, p provider.Provider, instance string, ack provider.OrchestrationAck) {
	t.Helper()
	mustEnqueueOrch(t, p, externalRaised(instance, "poke", "{}"))
	it := mustFetchOrch(t, p, longLock)
	mustAck(t, p, it.LockToken, ack)
}

// mustRead reads the latest execution's history.
func mustRead(t *testing.T, p provider.Provider, instance string) []provider.Event {
	t.Helper()
	evs, err := p.Read(ctx(t), instance)
	if err != nil {
		t.Fatalf("read(%q): %v", instance, err)
	}
	return evs
}

// mustAdmin returns the management capability or fails the test.
func mustAdmin(t *testing.T, p provider.Provider) provider.Admin {
	t.Helper()
	a, ok := p.Admin()
	if !ok || a == nil {
		t.Fatal("provider has no management capability")
	}
	return a
}

// wantErr fails the test unless err is non-nil.
func wantErr(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want one", what)
	}
}

// wantNoErr fails the test if err is non-nil.
func wantNoErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
