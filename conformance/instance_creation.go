package conformance

import (
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("instance_creation",
		test{"test_instance_creation_via_metadata", InstanceCreationViaMetadata},
		test{"test_no_instance_creation_on_enqueue", NoInstanceCreationOnEnqueue},
		test{"test_null_version_handling", NullVersionHandling},
		test{"test_sub_orchestration_instance_creation", SubOrchestrationInstanceCreation},
	)
}

// icStarted is an OrchestrationStarted event (event_id 1, execution 1) with the given name and version.
func icStarted(instance, name, version string) provider.Event {
	return ev(instance, 1, provider.OrchestrationStartedEvent{Name: name, Version: version, Input: "{}"})
}

// icMeta is metadata naming the orchestration and its version.
func icMeta(name, version string) provider.ExecutionMetadata {
	return provider.ExecutionMetadata{OrchestrationName: name, OrchestrationVersion: version}
}

// icRefetchVersion enqueues item, fetches the instance, checks it reports version, and acks the
// turn with nothing.
func icRefetchVersion(t *testing.T, p provider.Provider, item provider.WorkItem, instance, version string) *provider.LockedOrchestrationItem {
	t.Helper()
	mustEnqueueOrch(t, p, item)
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != instance {
		t.Fatalf("refetch: got instance %q, want %q", it.Item.Instance, instance)
	}
	if it.Item.Version != version {
		t.Fatalf("refetch: got version %q, want %q (from ack metadata)", it.Item.Version, version)
	}
	return it
}

// InstanceCreationViaMetadata proves the instance record (its version) comes from the first ack's metadata.
func InstanceCreationViaMetadata(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != inst || it.Item.OrchestrationName != "TestOrch" || it.Item.ExecutionID != 1 || len(it.Item.History) != 0 {
		t.Fatalf("first fetch: got instance %q name %q execution %d history %d, want %q TestOrch 1 0",
			it.Item.Instance, it.Item.OrchestrationName, it.Item.ExecutionID, len(it.Item.History), inst)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{icStarted(inst, "TestOrch", "2.0.0")}, Metadata: icMeta("TestOrch", "2.0.0"),
	})

	it2 := icRefetchVersion(t, p, startItem(inst), inst, "2.0.0")
	if it2.Item.OrchestrationName != "TestOrch" || it2.Item.ExecutionID != 1 || len(it2.Item.History) != 1 {
		t.Fatalf("refetch: got name %q execution %d history %d, want TestOrch 1 1",
			it2.Item.OrchestrationName, it2.Item.ExecutionID, len(it2.Item.History))
	}
	mustAck(t, p, it2.LockToken, provider.OrchestrationAck{ExecutionID: 1})
}

// NoInstanceCreationOnEnqueue proves an instance that exists only as a queued start item is fetchable.
func NoInstanceCreationOnEnqueue(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-B"
	mustEnqueueOrch(t, p, startItem(inst))
	it := fetchOrch(t, p, longLock)
	if it == nil {
		t.Fatal("fetch: got nothing, want the start item even though the instance does not exist")
	}
	if it.Item.Instance != inst {
		t.Fatalf("fetch: got instance %q, want %q", it.Item.Instance, inst)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{icStarted(inst, "TestOrch", "1.0.0")}, Metadata: icMeta("TestOrch", "1.0.0"),
	})
}

// NullVersionHandling proves a start item without a version is fetchable and the ack metadata sets the version.
func NullVersionHandling(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-C"
	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: inst, Orchestration: "TestOrch", Input: "{}", ExecutionID: 1,
	}})
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != inst {
		t.Fatalf("fetch: got instance %q, want %q", it.Item.Instance, inst)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{icStarted(inst, "TestOrch", "3.0.0")}, Metadata: icMeta("TestOrch", "3.0.0"),
	})

	it2 := icRefetchVersion(t, p, startItem(inst), inst, "3.0.0")
	mustAck(t, p, it2.LockToken, provider.OrchestrationAck{ExecutionID: 1})
}

// SubOrchestrationInstanceCreation proves a child started through a parent's ack is created by its own first ack.
func SubOrchestrationInstanceCreation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const parent, child = "parent-instance", "parent-instance::child-instance"
	mustEnqueueOrch(t, p, startItem(parent))
	pit := mustFetchOrch(t, p, longLock)
	mustAck(t, p, pit.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{icStarted(parent, "ParentOrch", "1.0.0")},
		OrchestratorItems: []provider.WorkItem{{Kind: provider.StartOrchestration{
			Instance: child, Orchestration: "ChildOrch", Input: "{}",
			ParentInstance: ptr(parent), ParentID: ptr(uint64(1)), ExecutionID: 1,
		}}},
		Metadata: icMeta("ParentOrch", "1.0.0"),
	})

	cit := mustFetchOrch(t, p, longLock)
	if cit.Item.Instance != child || cit.Item.OrchestrationName != "ChildOrch" {
		t.Fatalf("child fetch: got instance %q name %q, want %q ChildOrch", cit.Item.Instance, cit.Item.OrchestrationName, child)
	}
	mustAck(t, p, cit.LockToken, provider.OrchestrationAck{
		ExecutionID: 1,
		HistoryDelta: []provider.Event{ev(child, 1, provider.OrchestrationStartedEvent{
			Name: "ChildOrch", Version: "1.5.0", Input: "{}", ParentInstance: ptr(parent), ParentID: ptr(uint64(1)),
		})},
		Metadata: icMeta("ChildOrch", "1.5.0"),
	})

	it2 := icRefetchVersion(t, p, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: child, Orchestration: "ChildOrch", Input: "{}", ExecutionID: 1,
	}}, child, "1.5.0")
	mustAck(t, p, it2.LockToken, provider.OrchestrationAck{ExecutionID: 1})
}
