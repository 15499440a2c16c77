package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("tag_filtering",
		test{"test_default_only_fetches_untagged", DefaultOnlyFetchesUntagged},
		test{"test_tags_fetches_only_matching", TagsFetchesOnlyMatching},
		test{"test_default_and_fetches_untagged_and_matching", DefaultAndFetchesUntaggedAndMatching},
		test{"test_none_filter_returns_nothing", NoneFilterReturnsNothing},
		test{"test_multi_tag_filter", MultiTagFilter},
		test{"test_tag_round_trip_preservation", TagRoundTripPreservation},
		test{"test_any_filter_fetches_everything", AnyFilterFetchesEverything},
		test{"test_tag_survives_abandon_and_refetch", TagSurvivesAbandonAndRefetch},
		test{"test_multi_runtime_tag_isolation", MultiRuntimeTagIsolation},
		test{"test_tag_preserved_through_ack_orchestration_item", TagPreservedThroughAckOrchestrationItem},
	)
}

// tagItemLock is the work item lock most tag tests fetch with (duroxide uses 5 s).
const tagItemLock = 5 * time.Second

// tagActivity is an ActivityExecute "Activity<id>" of instance/execution 1 with the given tag ("" = untagged).
func tagActivity(instance string, id uint64, tag string) provider.WorkItem {
	a := provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id, Name: fmt.Sprintf("Activity%d", id), Input: "{}"}
	if tag != "" {
		a.Tag = ptr(tag)
	}
	return provider.WorkItem{Kind: a}
}

// tagFilterOf builds TagFilterTags(tags...), failing the test if it is invalid.
func tagFilterOf(t *testing.T, tags ...string) provider.TagFilter {
	t.Helper()
	f, err := provider.TagFilterTags(tags...)
	wantNoErr(t, err, "TagFilterTags")
	return f
}

// tagMustFetch fetches a worker item (poll 0, no session) with filter and fails the test when
// nothing is returned.
func tagMustFetch(t *testing.T, p provider.Provider, lock time.Duration, filter provider.TagFilter) *provider.LockedWorkItem {
	t.Helper()
	it := fetchWork(t, p, lock, filter)
	if it == nil {
		t.Fatalf("fetch_work_item(%v): got nothing, want an item", filter)
	}
	return it
}

// tagOf returns the ActivityExecute of a fetched worker item.
func tagOf(t *testing.T, it *provider.LockedWorkItem) provider.ActivityExecute {
	t.Helper()
	a, ok := it.Item.Kind.(provider.ActivityExecute)
	if !ok {
		t.Fatalf("fetch_work_item: got %s, want ActivityExecute", it.Item.Variant())
	}
	return a
}

// tagWant fails the test unless the fetched item has activity id (when id > 0) and tag ("" = untagged).
func tagWant(t *testing.T, it *provider.LockedWorkItem, id uint64, tag string) {
	t.Helper()
	a := tagOf(t, it)
	if id > 0 && a.ID != id {
		t.Fatalf("fetched activity id = %d, want %d", a.ID, id)
	}
	switch {
	case tag == "" && a.Tag != nil:
		t.Fatalf("fetched activity %d has tag %q, want untagged", a.ID, *a.Tag)
	case tag != "" && (a.Tag == nil || *a.Tag != tag):
		t.Fatalf("fetched activity %d tag = %v, want %q", a.ID, sessionStr(a.Tag), tag)
	}
}

// tagWantNone fails the test when a fetch returned an item.
func tagWantNone(t *testing.T, it *provider.LockedWorkItem, why string) {
	t.Helper()
	if it != nil {
		a := tagOf(t, it)
		t.Fatalf("fetch_work_item: got activity %d (tag %s), want nothing: %s", a.ID, sessionStr(a.Tag), why)
	}
}

// tagEnqueue enqueues items to the worker queue in order.
func tagEnqueue(t *testing.T, p provider.Provider, items ...provider.WorkItem) {
	t.Helper()
	for _, it := range items {
		mustEnqueueWorker(t, p, it)
	}
}

// DefaultOnlyFetchesUntagged proves DefaultOnly returns only untagged items, in order.
func DefaultOnlyFetchesUntagged(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-1", 2, "gpu"), tagActivity("inst-1", 3, ""))
	def := provider.TagFilterDefaultOnly()
	tagWant(t, tagMustFetch(t, p, tagItemLock, def), 1, "")
	tagWant(t, tagMustFetch(t, p, tagItemLock, def), 3, "")
	tagWantNone(t, fetchWork(t, p, tagItemLock, def), "no untagged items left")
}

// TagsFetchesOnlyMatching proves Tags{gpu} returns only gpu-tagged items, in order.
func TagsFetchesOnlyMatching(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-1", 2, "gpu"),
		tagActivity("inst-1", 3, "cpu"), tagActivity("inst-1", 4, "gpu"))
	gpu := tagFilterOf(t, "gpu")
	tagWant(t, tagMustFetch(t, p, tagItemLock, gpu), 2, "gpu")
	tagWant(t, tagMustFetch(t, p, tagItemLock, gpu), 4, "gpu")
	tagWantNone(t, fetchWork(t, p, tagItemLock, gpu), "no gpu items left")
}

// DefaultAndFetchesUntaggedAndMatching proves DefaultAnd{gpu} returns untagged and gpu items but not cpu ones.
func DefaultAndFetchesUntaggedAndMatching(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-1", 2, "gpu"), tagActivity("inst-1", 3, "cpu"))
	filter, err := provider.TagFilterDefaultAnd("gpu")
	wantNoErr(t, err, "TagFilterDefaultAnd")
	if id := tagOf(t, tagMustFetch(t, p, tagItemLock, filter)).ID; id != 1 {
		t.Fatalf("fetched activity id = %d, want 1", id)
	}
	tagWant(t, tagMustFetch(t, p, tagItemLock, filter), 2, "gpu")
	tagWantNone(t, fetchWork(t, p, tagItemLock, filter), "cpu-tagged item must not match DefaultAnd[gpu]")
}

// NoneFilterReturnsNothing proves the None filter never returns items.
func NoneFilterReturnsNothing(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-1", 2, "gpu"))
	tagWantNone(t, fetchWork(t, p, tagItemLock, provider.TagFilterNone()), "TagFilter None never returns items")
}

// MultiTagFilter proves Tags{gpu,tpu} returns items of either tag, and not cpu or untagged ones.
func MultiTagFilter(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, "gpu"), tagActivity("inst-1", 2, "tpu"),
		tagActivity("inst-1", 3, "cpu"), tagActivity("inst-1", 4, ""))
	filter := tagFilterOf(t, "gpu", "tpu")
	tagWant(t, tagMustFetch(t, p, tagItemLock, filter), 0, "gpu")
	tagWant(t, tagMustFetch(t, p, tagItemLock, filter), 0, "tpu")
	tagWantNone(t, fetchWork(t, p, tagItemLock, filter), "cpu and untagged items must not match")
}

// TagRoundTripPreservation proves an item's tag and name survive enqueue and fetch.
func TagRoundTripPreservation(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, "gpu"))
	it := tagMustFetch(t, p, tagItemLock, tagFilterOf(t, "gpu"))
	tagWant(t, it, 0, "gpu")
	if name := tagOf(t, it).Name; name != "Activity1" {
		t.Fatalf("fetched activity name = %q, want \"Activity1\"", name)
	}
}

// AnyFilterFetchesEverything proves Any returns every item regardless of tag.
func AnyFilterFetchesEverything(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-2", 2, "gpu"), tagActivity("inst-3", 3, "cpu"))
	anyF := provider.TagFilterAny()
	for range 3 {
		tagMustFetch(t, p, tagItemLock, anyF)
	}
	tagWantNone(t, fetchWork(t, p, tagItemLock, anyF), "queue should be empty")
}

// TagSurvivesAbandonAndRefetch proves a tagged item keeps its tag through abandon and refetch.
func TagSurvivesAbandonAndRefetch(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, "gpu"), tagActivity("inst-1", 2, ""))
	gpu := tagFilterOf(t, "gpu")
	first := tagMustFetch(t, p, tagItemLock, gpu)
	tagWant(t, first, 1, "gpu")
	wantNoErr(t, p.AbandonWorkItem(ctx(t), first.LockToken, 0, false), "abandon_work_item")

	again := tagMustFetch(t, p, tagItemLock, gpu)
	tagWant(t, again, 1, "gpu")
	if again.AttemptCount < 2 {
		t.Fatalf("refetch attempt_count = %d, want >= 2", again.AttemptCount)
	}
	if again.LockToken == first.LockToken {
		t.Fatal("refetch returned the same lock token, want a new one")
	}
	tagWant(t, tagMustFetch(t, p, tagItemLock, provider.TagFilterDefaultOnly()), 2, "")
}

// MultiRuntimeTagIsolation proves overlapping filters take only matching, unlocked items in FIFO order.
func MultiRuntimeTagIsolation(t *testing.T, f Factory) {
	const lock = 30 * time.Second
	p := f.CreateProvider(t)
	tagEnqueue(t, p, tagActivity("inst-1", 1, ""), tagActivity("inst-2", 2, "gpu"), tagActivity("inst-3", 3, "cpu"),
		tagActivity("inst-4", 4, "fpga"), tagActivity("inst-5", 5, "gpu"))

	def := provider.TagFilterDefaultOnly()
	tagWant(t, tagMustFetch(t, p, lock, def), 1, "")
	tagWantNone(t, fetchWork(t, p, lock, def), "no more untagged items")

	gpuCPU := tagFilterOf(t, "gpu", "cpu")
	ids := []uint64{tagOf(t, tagMustFetch(t, p, lock, gpuCPU)).ID, tagOf(t, tagMustFetch(t, p, lock, gpuCPU)).ID}
	slices.Sort(ids)
	if !slices.Equal(ids, []uint64{2, 3}) {
		t.Fatalf("gpu+cpu filter fetched %v, want [2 3]", ids)
	}

	cpuFPGA := tagFilterOf(t, "cpu", "fpga")
	tagWant(t, tagMustFetch(t, p, lock, cpuFPGA), 4, "fpga")
	tagWantNone(t, fetchWork(t, p, lock, cpuFPGA), "cpu item is locked and fpga item is taken")

	anyF := provider.TagFilterAny()
	tagWant(t, tagMustFetch(t, p, lock, anyF), 5, "gpu")
	tagWantNone(t, fetchWork(t, p, lock, anyF), "every item is locked")
}

// TagPreservedThroughAckOrchestrationItem proves tags of worker items enqueued by ack_orchestration_item are stored and filterable.
func TagPreservedThroughAckOrchestrationItem(t *testing.T, f Factory) {
	const instance = "tag-ack-inst"
	const lock = 30 * time.Second
	p := f.CreateProvider(t)
	mustEnqueueOrch(t, p, startItem(instance))
	orch := mustFetchOrch(t, p, lock)
	mustAck(t, p, orch.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{started(instance)},
		WorkerItems: []provider.WorkItem{
			{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: 10, Name: "GpuWork", Input: `"model-v3"`, Tag: ptr("gpu")}},
			{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: 11, Name: "CpuWork", Input: `"data"`}},
		},
	})

	def := tagMustFetch(t, p, lock, provider.TagFilterDefaultOnly())
	tagWant(t, def, 0, "")
	if name := tagOf(t, def).Name; name != "CpuWork" {
		t.Fatalf("DefaultOnly fetched %q, want \"CpuWork\"", name)
	}
	wantNoErr(t, p.AckWorkItem(ctx(t), def.LockToken, nil), "ack_work_item")
	tagWantNone(t, fetchWork(t, p, lock, provider.TagFilterDefaultOnly()), "only the gpu-tagged item remains")

	gpu := tagMustFetch(t, p, lock, tagFilterOf(t, "gpu"))
	tagWant(t, gpu, 0, "gpu")
	if name := tagOf(t, gpu).Name; name != "GpuWork" {
		t.Fatalf("Tags[gpu] fetched %q, want \"GpuWork\"", name)
	}
}
