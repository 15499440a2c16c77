package conformance

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// AdversarialInstanceIDs proves instance ids with braces, colons, spaces, glob and quote
// characters, unicode, 1 KiB length and shared prefixes are stored and locked in isolation
// (history, queues, worker items, KV, custom status, management, deletion), and that an empty id
// is rejected by enqueue without changing anything.
func AdversarialInstanceIDs(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	a := mustAdmin(t, p)

	exRejected(t, "enqueue_for_orchestrator(start of \"\")", func() error {
		return p.EnqueueForOrchestrator(ctx(t), startItem(""), 0)
	}, provider.ErrInvalidInput)
	exRejected(t, "enqueue_for_orchestrator(event for \"\")", func() error {
		return p.EnqueueForOrchestrator(ctx(t), externalRaised("", "e", "d"), 0)
	}, provider.ErrInvalidInput)
	exRejected(t, "enqueue_for_worker(activity of \"\")", func() error {
		return p.EnqueueForWorker(ctx(t), activityItem("", 1))
	}, provider.ErrInvalidInput)
	mustNoOrch(t, p, longLock)
	exNoWork(t, p, "after rejected empty-id enqueues")
	exDepths(t, p, 0, 0, "after rejected empty-id enqueues")
	ids, err := a.ListInstances(ctx(t))
	wantNoErr(t, err, "list_instances")
	if len(ids) != 0 {
		t.Fatalf("list_instances after rejected enqueues = %q, want none", ids)
	}

	all := exAdversarialIDs()
	hist := map[string][]provider.Event{}
	for _, id := range all {
		createInstance(t, p, id)
		hist[id] = mustRead(t, p, id)
		if len(hist[id]) != 1 || hist[id][0].EventType() != "OrchestrationStarted" || hist[id][0].InstanceID != id {
			t.Fatalf("read(%q) after create_instance: %v, want its OrchestrationStarted", id, hist[id])
		}
	}

	// Turn 2 of every instance, all locked at once: schedule an activity, set KV and custom status.
	for _, id := range all {
		mustEnqueueOrch(t, p, externalRaised(id, "poke", id))
	}
	tokens := map[string]string{}
	for range all {
		it := mustFetchOrch(t, p, longLock)
		id := it.Item.Instance
		if _, known := hist[id]; !known || tokens[id] != "" {
			t.Fatalf("fetch returned instance %q: unknown or already locked", id)
		}
		tokens[id] = it.LockToken
		if want := []provider.WorkItem{externalRaised(id, "poke", id)}; !reflect.DeepEqual(it.Item.Messages, want) {
			t.Fatalf("instance %q: fetched messages %+v, want only its own poke", id, it.Item.Messages)
		}
		rrSameEvents(t, it.Item.History, hist[id], fmt.Sprintf("fetched history of %q", id))
	}
	mustNoOrch(t, p, longLock)
	for _, id := range all {
		delta := []provider.Event{
			ev(id, 2, provider.ActivityScheduledEvent{Name: "act", Input: id}),
			ev(id, 3, provider.KeyValueSetEvent{Key: "owner", Value: id}),
			ev(id, 4, provider.KeyValueSetEvent{Key: id, Value: "self"}),
			ev(id, 5, provider.CustomStatusUpdatedEvent{Status: ptr("cs-" + id)}),
		}
		mustAck(t, p, tokens[id], provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta,
			WorkerItems: []provider.WorkItem{{Kind: provider.ActivityExecute{Instance: id, ExecutionID: 1, ID: 2, Name: "act", Input: id}}}})
		hist[id] = append(hist[id], delta...)
	}

	// Every worker item, all locked at once, then completed.
	wtokens := map[string]string{}
	for range all {
		it := mustFetchWork(t, p, longLock)
		ae, ok := it.Item.Kind.(provider.ActivityExecute)
		if !ok || ae.Input != ae.Instance || ae.ID != 2 || wtokens[ae.Instance] != "" {
			t.Fatalf("fetch_work_item returned %+v: not the one activity of its instance", it.Item.Kind)
		}
		wtokens[ae.Instance] = it.LockToken
	}
	exNoWork(t, p, "after fetching every activity")
	for _, id := range all {
		wantNoErr(t, p.AckWorkItem(ctx(t), wtokens[id], ptr(activityCompleted(id, 2, "r-"+id))), "ack_work_item of "+id)
	}

	// Turn 3: apply the completion and complete.
	clear(tokens)
	for range all {
		it := mustFetchOrch(t, p, longLock)
		id := it.Item.Instance
		if _, known := hist[id]; !known || tokens[id] != "" {
			t.Fatalf("fetch returned instance %q: unknown or already locked", id)
		}
		tokens[id] = it.LockToken
		if want := []provider.WorkItem{activityCompleted(id, 2, "r-"+id)}; !reflect.DeepEqual(it.Item.Messages, want) {
			t.Fatalf("instance %q: fetched messages %+v, want only its own completion", id, it.Item.Messages)
		}
		rrSameEvents(t, it.Item.History, hist[id], fmt.Sprintf("fetched history of %q", id))
	}
	for _, id := range all {
		delta := []provider.Event{
			{EventID: 6, SourceEventID: ptr(uint64(2)), InstanceID: id, ExecutionID: 1, TimestampMs: uint64(time.Now().UnixMilli()),
				DuroxideVersion: "0.1.29", Kind: provider.ActivityCompletedEvent{Result: "r-" + id}},
			ev(id, 7, provider.OrchestrationCompletedEvent{Output: "o-" + id}),
		}
		meta := testMeta()
		meta.Status, meta.Output = provider.StatusCompleted, ptr("o-"+id)
		mustAck(t, p, tokens[id], provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta, Metadata: meta})
		hist[id] = append(hist[id], delta...)
	}
	mustNoOrch(t, p, longLock)
	exNoWork(t, p, "after completing every instance")

	for _, id := range all {
		exCheckInstance(t, p, id, hist[id])
	}
	ids, err = a.ListInstances(ctx(t))
	wantNoErr(t, err, "list_instances")
	exSameSet(t, ids, all, "list_instances")
	ids, err = a.ListInstancesByStatus(ctx(t), provider.StatusCompleted)
	wantNoErr(t, err, "list_instances_by_status(Completed)")
	exSameSet(t, ids, all, "list_instances_by_status(Completed)")

	// Deleting ids that prefix (or glob-match) others deletes exactly those instances.
	deleted := []string{"x", "x*", "{a}", ":"}
	for _, id := range deleted {
		res, err := a.DeleteInstance(ctx(t), id, false)
		wantNoErr(t, err, fmt.Sprintf("delete_instance(%q)", id))
		if res.InstancesDeleted != 1 || res.EventsDeleted != uint64(len(hist[id])) {
			t.Fatalf("delete_instance(%q) = %+v, want 1 instance and %d events", id, res, len(hist[id]))
		}
	}
	var kept []string
	for _, id := range all {
		if slices.Contains(deleted, id) {
			if evs := mustRead(t, p, id); len(evs) != 0 {
				t.Fatalf("read(%q) after delete: %d events, want none", id, len(evs))
			}
			kvWant(t, p, id, "owner", nil, "KV after delete")
			if cs, err := p.GetCustomStatus(ctx(t), id, 0); err != nil || cs != nil {
				t.Fatalf("get_custom_status(%q) after delete = %+v, %v; want nil", id, cs, err)
			}
			if _, err := a.GetInstanceInfo(ctx(t), id); !errors.Is(err, provider.ErrNotFound) {
				t.Fatalf("get_instance_info(%q) after delete: %v, want ErrNotFound", id, err)
			}
			continue
		}
		kept = append(kept, id)
		exCheckInstance(t, p, id, hist[id])
	}
	ids, err = a.ListInstances(ctx(t))
	wantNoErr(t, err, "list_instances after delete")
	exSameSet(t, ids, kept, "list_instances after delete")
}

// exConc is the shared state of ConcurrencyInvariant's dispatchers.
type exConc struct {
	mu            sync.Mutex
	written       map[string]map[uint64]provider.Event // instance -> event id -> event, from successful acks
	workerFetches map[string]int                       // "instance/activity" -> deliveries
	workerAcks    map[string]int                       // "instance/activity" -> successful acks
	completed     atomic.Int32
	orchExpire    atomic.Int32 // expiry budget left
	workExpire    atomic.Int32
	abandons      atomic.Int32
	expiries      atomic.Int32
}

// exConcActivities are the activity ids (event ids of their ActivityScheduled events) of every
// instance in ConcurrencyInvariant.
var exConcActivities = []uint64{2, 3, 4}
