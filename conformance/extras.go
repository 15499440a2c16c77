package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// Tests duroxide's suite lacks, for what a Redis store gets wrong most easily: key construction
// from arbitrary instance ids, atomicity under concurrent dispatchers, multi-range capability
// filters and validation of malformed input.
func init() {
	register("redis_extras",
		test{"test_adversarial_instance_ids", AdversarialInstanceIDs},
		test{"test_concurrency_invariant", ConcurrencyInvariant},
		test{"test_multi_range_capability_filter", MultiRangeCapabilityFilter},
		test{"test_bad_input_rejected", BadInputRejected},
	)
}

var errExPanicked = errors.New("provider call panicked")

// exCall runs fn, turning a panic into a test error.
func exCall(t *testing.T, what string, fn func() error) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
			err = errExPanicked
		}
	}()
	return fn()
}

// exRejected runs fn and reports a test error unless it returns a permanent
// *provider.ProviderError matching one of kinds. It does not stop the test, so that one run lists
// every input a provider accepts; the callers check right after that nothing changed.
func exRejected(t *testing.T, what string, fn func() error, kinds ...error) {
	t.Helper()
	err := exCall(t, what, fn)
	if errors.Is(err, errExPanicked) {
		return
	}
	if err == nil {
		t.Errorf("%s: got no error, want a permanent %v error", what, kinds)
		return
	}
	pe, ok := provider.AsProviderError(err)
	if !ok {
		t.Errorf("%s: error %v (%T) is not a *provider.ProviderError", what, err, err)
		return
	}
	if pe.Retryable {
		t.Errorf("%s: error %v is retryable, want permanent", what, err)
		return
	}
	for _, k := range kinds {
		if errors.Is(err, k) {
			return
		}
	}
	t.Errorf("%s: error %v is none of %v", what, err, kinds)
}

// exDepths asserts the unlocked queue depths.
func exDepths(t *testing.T, p provider.Provider, orch, work uint64, what string) {
	t.Helper()
	d, err := mustAdmin(t, p).GetQueueDepths(ctx(t))
	wantNoErr(t, err, "get_queue_depths")
	if d.OrchestratorQueue != orch || d.WorkerQueue != work {
		t.Fatalf("%s: queue depths orchestrator %d worker %d, want %d and %d", what, d.OrchestratorQueue, d.WorkerQueue, orch, work)
	}
}

// exNoWork fails the test when a worker fetch (any tag) returns an item.
func exNoWork(t *testing.T, p provider.Provider, what string) {
	t.Helper()
	if it := fetchWork(t, p, longLock, provider.TagFilterAny()); it != nil {
		t.Fatalf("%s: fetch_work_item returned %v of %q, want nothing", what, it.Item.Variant(), it.Item.TargetInstance())
	}
}

// exAdversarialIDs are instance ids that break naive key construction.
func exAdversarialIDs() []string {
	return []string{
		"{a}", "}{", "{", "a:b", "a::b:", ":", "with space", " padded ", "日本語のインスタンス", "emoji🎉🚀",
		strings.Repeat("L", 1024), "x", "x:1", "x:1:h", "x*", "x?", "[x]", `a\b`, `a"b`, "p|q",
	}
}

// exCheckInstance verifies everything AdversarialInstanceIDs wrote for id.
func exCheckInstance(t *testing.T, p provider.Provider, id string, hist []provider.Event) {
	t.Helper()
	rrSameEvents(t, mustRead(t, p, id), hist, fmt.Sprintf("read(%q)", id))
	rrSameEvents(t, rrReadExec(t, p, id, 1), hist, fmt.Sprintf("read_with_execution(%q, 1)", id))
	kvWant(t, p, id, "owner", ptr(id), "own KV value")
	kvWant(t, p, id, id, ptr("self"), "KV key equal to the id")
	all, err := p.GetKVAllValues(ctx(t), id)
	wantNoErr(t, err, "get_kv_all_values")
	if want := map[string]string{"owner": id, id: "self"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("get_kv_all_values(%q) = %v, want %v", id, all, want)
	}
	cs, err := p.GetCustomStatus(ctx(t), id, 0)
	wantNoErr(t, err, "get_custom_status")
	if cs == nil || cs.Status == nil || *cs.Status != "cs-"+id || cs.Version != 1 {
		t.Fatalf("get_custom_status(%q) = %+v, want status %q version 1", id, cs, "cs-"+id)
	}
	st, err := p.GetInstanceStats(ctx(t), id)
	wantNoErr(t, err, "get_instance_stats")
	if st == nil || st.HistoryEventCount != uint64(len(hist)) || st.KVUserKeyCount != 2 {
		t.Fatalf("get_instance_stats(%q) = %+v, want %d events and 2 KV keys", id, st, len(hist))
	}
	a := mustAdmin(t, p)
	info, err := a.GetInstanceInfo(ctx(t), id)
	wantNoErr(t, err, "get_instance_info")
	if info.InstanceID != id || info.Status != provider.StatusCompleted || info.Output == nil || *info.Output != "o-"+id {
		t.Fatalf("get_instance_info(%q) = %+v, want Completed with output %q", id, info, "o-"+id)
	}
	execs, err := a.ListExecutions(ctx(t), id)
	wantNoErr(t, err, "list_executions")
	if !reflect.DeepEqual(execs, []uint64{1}) {
		t.Fatalf("list_executions(%q) = %v, want [1]", id, execs)
	}
}

// exSameSet asserts that got holds exactly want's strings, in any order.
func exSameSet(t *testing.T, got, want []string, what string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Fatalf("%s: got %q, want %q", what, g, w)
	}
}

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

// exConcPlan computes the turn a minimal runtime would take for a fetched item: start ->
// schedule 3 activities; apply each completion; complete when all 3 are applied. Protocol
// violations visible in the item are returned as problems.
func exConcPlan(it *provider.LockedOrchestrationItem) (ack provider.OrchestrationAck, completes bool, problems []string) {
	inst := it.Item.Instance
	hist := it.Item.History
	ack = provider.OrchestrationAck{ExecutionID: 1, Metadata: testMeta()}
	for n, e := range hist {
		if e.EventID != uint64(n+1) {
			problems = append(problems, fmt.Sprintf("%s: history position %d has event id %d", inst, n, e.EventID))
		}
		if e.IsTerminal() {
			problems = append(problems, fmt.Sprintf("%s: fetched after completion with %v", inst, rrVariants(it.Item.Messages)))
		}
	}
	if len(hist) == 0 {
		if len(it.Item.Messages) != 1 || it.Item.Messages[0].Variant() != "StartOrchestration" {
			problems = append(problems, fmt.Sprintf("%s: first batch %v, want [StartOrchestration]", inst, rrVariants(it.Item.Messages)))
		}
		ack.HistoryDelta = append(ack.HistoryDelta, started(inst))
		for _, id := range exConcActivities {
			ack.HistoryDelta = append(ack.HistoryDelta, ev(inst, id, provider.ActivityScheduledEvent{Name: "act", Input: fmt.Sprint(id)}))
			ack.WorkerItems = append(ack.WorkerItems, provider.WorkItem{Kind: provider.ActivityExecute{
				Instance: inst, ExecutionID: 1, ID: id, Name: "act", Input: fmt.Sprint(id)}})
		}
		return ack, false, problems
	}
	applied := map[uint64]bool{}
	for _, e := range hist {
		if _, ok := e.Kind.(provider.ActivityCompletedEvent); ok && e.SourceEventID != nil {
			applied[*e.SourceEventID] = true
		}
	}
	next := uint64(len(hist)) + 1
	for _, m := range it.Item.Messages {
		c, ok := m.Kind.(provider.ActivityCompleted)
		if !ok || c.Instance != inst {
			problems = append(problems, fmt.Sprintf("%s: unexpected message %s for %q", inst, m.Variant(), m.TargetInstance()))
			continue
		}
		if applied[c.ID] {
			problems = append(problems, fmt.Sprintf("%s: completion of activity %d delivered again after it was applied", inst, c.ID))
			continue
		}
		applied[c.ID] = true
		ack.HistoryDelta = append(ack.HistoryDelta, provider.Event{EventID: next, SourceEventID: ptr(c.ID), InstanceID: inst,
			ExecutionID: 1, TimestampMs: uint64(time.Now().UnixMilli()), DuroxideVersion: "0.1.29",
			Kind: provider.ActivityCompletedEvent{Result: c.Result}})
		next++
	}
	if len(applied) == len(exConcActivities) {
		ack.HistoryDelta = append(ack.HistoryDelta, ev(inst, next, provider.OrchestrationCompletedEvent{Output: "done"}))
		ack.Metadata.Status, ack.Metadata.Output = provider.StatusCompleted, ptr("done")
		completes = true
	}
	return ack, completes, problems
}

// exConcMode picks what a dispatcher does with its next fetch: "ack" (72%), "abandon" (20%) or
// "expire" (8%, while budget lasts, else "ack").
func exConcMode(rng *rand.Rand, budget *atomic.Int32) string {
	switch r := rng.IntN(100); {
	case r < 8:
		if budget.Add(-1) >= 0 {
			return "expire"
		}
		return "ack"
	case r < 28:
		return "abandon"
	default:
		return "ack"
	}
}

// ConcurrencyInvariant proves that 4 orchestration and 4 worker dispatchers running 30 short
// orchestrations (start -> 3 activities -> complete) with random abandons (with and without
// ignore_attempt) and deliberately expired locks lose and duplicate nothing: every instance
// completes, every activity is acked exactly once and its completion applied exactly once,
// histories are exactly the events acked, with contiguous ids, and both queues end empty.
func ConcurrencyInvariant(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const (
		instances  = 30
		dispatch   = 4
		normalLock = 10 * time.Second
		shortLock  = 300 * time.Millisecond
		pastExpiry = shortLock + 150*time.Millisecond
	)
	c, cancel := context.WithTimeout(ctx(t), 18*time.Second)
	defer cancel()

	s := &exConc{written: map[string]map[uint64]provider.Event{}, workerFetches: map[string]int{}, workerAcks: map[string]int{}}
	s.orchExpire.Store(4)
	s.workExpire.Store(4)
	var ids []string
	for n := range instances {
		id := fmt.Sprintf("ci-%02d", n)
		ids = append(ids, id)
		s.written[id] = map[uint64]provider.Event{}
		mustEnqueueOrch(t, p, startItem(id))
	}
	var failures atomic.Int32 // the dispatchers stop at the first failure
	done := func() bool { return s.completed.Load() == instances || failures.Load() > 0 || c.Err() != nil }
	failed := func(format string, args ...any) {
		if c.Err() == nil {
			failures.Add(1)
			t.Errorf(format, args...)
		}
	}
	// The first fetch of dispatchers 0, 1 and 2 deterministically expires, abandons with
	// ignore_attempt, and abandons with a delay.
	firstMode := []string{"expire", "abandon-ignore", "abandon-delay", ""}

	orchestrator := func(k int) {
		rng := rand.New(rand.NewPCG(42, uint64(k)))
		first := firstMode[k]
		for !done() {
			mode := exConcMode(rng, &s.orchExpire)
			if first != "" {
				mode, first = first, ""
			}
			lock := normalLock
			if mode == "expire" {
				lock = shortLock
			}
			it, err := p.FetchOrchestrationItem(c, lock, 0, nil)
			if err != nil {
				failed("orchestrator %d: fetch: %v", k, err)
				return
			}
			if it == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if it.AttemptCount < 1 {
				failed("orchestrator %d: %s fetched with attempt count %d", k, it.Item.Instance, it.AttemptCount)
			}
			ack, completes, problems := exConcPlan(it)
			for _, pr := range problems {
				failed("orchestrator %d: %s", k, pr)
			}
			switch mode {
			case "abandon", "abandon-ignore", "abandon-delay":
				delay := time.Duration(rng.IntN(2)) * 20 * time.Millisecond
				ignore := rng.IntN(2) == 0
				if mode == "abandon-ignore" {
					ignore = true
				} else if mode == "abandon-delay" {
					delay, ignore = 50*time.Millisecond, false
				}
				s.abandons.Add(1)
				if err := p.AbandonOrchestrationItem(c, it.LockToken, delay, ignore); err != nil {
					failed("orchestrator %d: abandon %s: %v", k, it.Item.Instance, err)
				}
			case "expire":
				s.expiries.Add(1)
				time.Sleep(pastExpiry)
				err := p.AckOrchestrationItem(c, it.LockToken, ack)
				if err == nil {
					failed("orchestrator %d: ack of %s after its %v lock expired succeeded", k, it.Item.Instance, shortLock)
				} else if !errors.Is(err, provider.ErrInvalidLockToken) {
					failed("orchestrator %d: ack of %s with an expired lock: %v, want ErrInvalidLockToken", k, it.Item.Instance, err)
				}
			default:
				if err := p.AckOrchestrationItem(c, it.LockToken, ack); err != nil {
					failed("orchestrator %d: ack %s: %v", k, it.Item.Instance, err)
					continue
				}
				s.mu.Lock()
				for _, e := range ack.HistoryDelta {
					if _, dup := s.written[it.Item.Instance][e.EventID]; dup {
						failed("orchestrator %d: %s: event id %d acked twice", k, it.Item.Instance, e.EventID)
					}
					s.written[it.Item.Instance][e.EventID] = e
				}
				s.mu.Unlock()
				if completes {
					s.completed.Add(1)
				}
			}
		}
	}

	worker := func(k int) {
		rng := rand.New(rand.NewPCG(7, uint64(k)))
		first := firstMode[k]
		for !done() {
			mode := exConcMode(rng, &s.workExpire)
			if first != "" {
				mode, first = first, ""
			}
			lock := normalLock
			if mode == "expire" {
				lock = shortLock
			}
			it, err := p.FetchWorkItem(c, lock, 0, nil, provider.TagFilterDefaultOnly())
			if err != nil {
				failed("worker %d: fetch: %v", k, err)
				return
			}
			if it == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			ae, ok := it.Item.Kind.(provider.ActivityExecute)
			if !ok {
				failed("worker %d: fetched %s, want ActivityExecute", k, it.Item.Variant())
				continue
			}
			key := fmt.Sprintf("%s/%d", ae.Instance, ae.ID)
			s.mu.Lock()
			s.workerFetches[key]++
			s.mu.Unlock()
			completion := activityCompleted(ae.Instance, ae.ID, "r:"+key)
			switch mode {
			case "abandon", "abandon-ignore", "abandon-delay":
				delay := time.Duration(rng.IntN(2)) * 20 * time.Millisecond
				ignore := rng.IntN(2) == 0
				if mode == "abandon-ignore" {
					ignore = true
				} else if mode == "abandon-delay" {
					delay, ignore = 50*time.Millisecond, false
				}
				s.abandons.Add(1)
				if err := p.AbandonWorkItem(c, it.LockToken, delay, ignore); err != nil {
					failed("worker %d: abandon %s: %v", k, key, err)
				}
			case "expire":
				s.expiries.Add(1)
				time.Sleep(pastExpiry)
				err := p.AckWorkItem(c, it.LockToken, &completion)
				if err == nil {
					failed("worker %d: ack of %s after its %v lock expired succeeded", k, key, shortLock)
					s.mu.Lock()
					s.workerAcks[key]++
					s.mu.Unlock()
				} else if pe, ok := provider.AsProviderError(err); !ok || pe.Retryable {
					failed("worker %d: ack of %s with an expired lock: %v, want a permanent error", k, key, err)
				}
			default:
				if err := p.AckWorkItem(c, it.LockToken, &completion); err != nil {
					failed("worker %d: ack %s: %v", k, key, err)
					continue
				}
				s.mu.Lock()
				s.workerAcks[key]++
				s.mu.Unlock()
			}
		}
	}

	var wg sync.WaitGroup
	for k := range dispatch {
		wg.Go(func() { orchestrator(k) })
		wg.Go(func() { worker(k) })
	}
	wg.Wait()
	t.Logf("abandons %d, expired locks %d", s.abandons.Load(), s.expiries.Load())
	if t.Failed() {
		t.FailNow()
	}
	if n := s.completed.Load(); n != instances {
		t.Fatalf("%d of %d instances completed before the time bound", n, instances)
	}

	a := mustAdmin(t, p)
	for _, id := range ids {
		hist := mustRead(t, p, id)
		want := make([]provider.Event, 0, len(s.written[id]))
		for n := uint64(1); n <= uint64(len(s.written[id])); n++ {
			e, ok := s.written[id][n]
			if !ok {
				t.Fatalf("%s: the acked event ids are not contiguous: %d missing", id, n)
			}
			want = append(want, e)
		}
		rrSameEvents(t, hist, want, id+": history versus acked events")
		if len(hist) != 8 || !hist[len(hist)-1].IsTerminal() {
			t.Fatalf("%s: history has %d events, want 8 ending with OrchestrationCompleted", id, len(hist))
		}
		for _, act := range exConcActivities {
			key := fmt.Sprintf("%s/%d", id, act)
			if s.workerFetches[key] < 1 || s.workerAcks[key] != 1 {
				t.Fatalf("%s: delivered %d times, acked %d times; want >= 1 and exactly 1", key, s.workerFetches[key], s.workerAcks[key])
			}
			var applied []string
			for _, e := range hist {
				if c, ok := e.Kind.(provider.ActivityCompletedEvent); ok && e.SourceEventID != nil && *e.SourceEventID == act {
					applied = append(applied, c.Result)
				}
			}
			if len(applied) != 1 || applied[0] != "r:"+key {
				t.Fatalf("%s: completion applied %q, want exactly once", key, applied)
			}
		}
		info, err := a.GetInstanceInfo(ctx(t), id)
		wantNoErr(t, err, "get_instance_info")
		if info.Status != provider.StatusCompleted {
			t.Fatalf("%s: status %q, want Completed", id, info.Status)
		}
	}
	mustNoOrch(t, p, longLock)
	exNoWork(t, p, "after every instance completed")
	exDepths(t, p, 0, 0, "after every instance completed")
}

// MultiRangeCapabilityFilter proves a filter with ranges [1.0.0, 1.5.0] and [3.0.0, 3.5.0]
// returns instances pinned to 1.2.0 and 3.1.0 but never 2.0.0, that an empty range list
// returns nothing, and that without a filter the oldest message (2.0.0's) comes first.
func MultiRangeCapabilityFilter(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	order := []string{"pin-2.0.0", "pin-1.2.0", "pin-3.1.0"}
	for _, id := range order {
		mustEnqueueOrch(t, p, startItem(id))
		it := mustFetchOrch(t, p, longLock)
		meta := testMeta()
		meta.PinnedDuroxideVersion = semver.MustParse(strings.TrimPrefix(id, "pin-"))
		mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started(id)}, Metadata: meta})
	}
	for _, id := range order {
		mustEnqueueOrch(t, p, externalRaised(id, "poke", "{}"))
	}
	r1, err := provider.NewSemverRange("1.0.0", "1.5.0")
	wantNoErr(t, err, "range 1")
	r2, err := provider.NewSemverRange("3.0.0", "3.5.0")
	wantNoErr(t, err, "range 2")
	filter := &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r1, r2}}
	fetch := func(filter *provider.DispatcherCapabilityFilter) *provider.LockedOrchestrationItem {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx(t), longLock, 0, filter)
		wantNoErr(t, err, "fetch_orchestration_item with filter")
		return it
	}

	var got []string
	var tokens []string
	for range 2 {
		it := fetch(filter)
		if it == nil {
			t.Fatalf("multi-range fetch returned nothing after %q, want the 1.2.0 and 3.1.0 instances", got)
		}
		got = append(got, it.Item.Instance)
		tokens = append(tokens, it.LockToken)
	}
	exSameSet(t, got, []string{"pin-1.2.0", "pin-3.1.0"}, "multi-range fetches")
	if it := fetch(filter); it != nil {
		t.Fatalf("multi-range fetch returned %q, want nothing (2.0.0 is in no range)", it.Item.Instance)
	}
	for _, tok := range tokens {
		wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), tok, 0, true), "abandon")
	}
	for _, empty := range []*provider.DispatcherCapabilityFilter{{}, {SupportedDuroxideVersions: []provider.SemverRange{}}} {
		if it := fetch(empty); it != nil {
			t.Fatalf("fetch with an empty range list returned %q, want nothing", it.Item.Instance)
		}
	}
	it := fetch(nil)
	if it == nil {
		t.Fatal("unfiltered fetch returned nothing, want pin-2.0.0")
	}
	if it.Item.Instance != "pin-2.0.0" {
		t.Fatalf("unfiltered fetch returned %q, want pin-2.0.0 (oldest message)", it.Item.Instance)
	}
}

// BadInputRejected proves malformed input (event_id 0, nil kinds, wrong work item variants for a
// queue or a completion, empty or foreign lock tokens, an empty session owner) is rejected with a
// permanent *provider.ProviderError of the right kind, without a panic and without changing
// anything: the held locks stay held and the history and queues stay as they were.
func BadInputRejected(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "bad-input"
	createInstance(t, p, inst)
	mustEnqueueOrch(t, p, externalRaised(inst, "poke", "{}"))
	oit := mustFetchOrch(t, p, longLock)
	mustEnqueueWorker(t, p, activityItem(inst, 2))
	wit := mustFetchWork(t, p, longLock)
	otok, wtok := oit.LockToken, wit.LockToken
	before := mustRead(t, p, inst)

	unchanged := func(what string) {
		t.Helper()
		rrSameEvents(t, mustRead(t, p, inst), before, what+": history")
		mustNoOrch(t, p, longLock)
		exNoWork(t, p, what)
		exDepths(t, p, 0, 0, what)
	}
	invalid := []error{provider.ErrInvalidInput}
	scheduled := ev(inst, 2, provider.ActivityScheduledEvent{Name: "TestActivity", Input: "{}"})
	zero := ev(inst, 0, provider.ActivityScheduledEvent{Name: "TestActivity", Input: "{}"})
	noKind := ev(inst, 3, nil)
	goodAck := provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled}}

	badAcks := []struct {
		what string
		ack  provider.OrchestrationAck
	}{
		{"event_id 0", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{zero}}},
		{"valid event then event_id 0", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled, zero}}},
		{"event with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled, noKind}}},
		{"orchestrator item with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			OrchestratorItems: []provider.WorkItem{{}}}},
		{"worker item with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			WorkerItems: []provider.WorkItem{{}}}},
		{"worker item that is not ActivityExecute", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			WorkerItems: []provider.WorkItem{activityCompleted(inst, 2, "x")}}},
		{"orchestrator item that is ActivityExecute", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			OrchestratorItems: []provider.WorkItem{activityItem(inst, 2)}}},
	}
	for _, b := range badAcks {
		exRejected(t, "ack_orchestration_item with "+b.what, func() error {
			return p.AckOrchestrationItem(ctx(t), otok, b.ack)
		}, invalid...)
		unchanged("after rejected ack with " + b.what)
	}

	calls := []struct {
		what string
		call func() error
	}{
		{"enqueue_for_worker(ExternalRaised)", func() error { return p.EnqueueForWorker(ctx(t), externalRaised(inst, "e", "d")) }},
		{"enqueue_for_worker(ActivityCompleted)", func() error { return p.EnqueueForWorker(ctx(t), activityCompleted(inst, 2, "x")) }},
		{"enqueue_for_worker(nil kind)", func() error { return p.EnqueueForWorker(ctx(t), provider.WorkItem{}) }},
		{"enqueue_for_orchestrator(ActivityExecute)", func() error { return p.EnqueueForOrchestrator(ctx(t), activityItem(inst, 2), 0) }},
		{"enqueue_for_orchestrator(nil kind)", func() error { return p.EnqueueForOrchestrator(ctx(t), provider.WorkItem{}, 0) }},
		{"ack_work_item(ExternalRaised completion)", func() error {
			return p.AckWorkItem(ctx(t), wtok, ptr(externalRaised(inst, "e", "d")))
		}},
		{"ack_work_item(ActivityExecute completion)", func() error { return p.AckWorkItem(ctx(t), wtok, ptr(activityItem(inst, 2))) }},
		{"ack_work_item(nil-kind completion)", func() error { return p.AckWorkItem(ctx(t), wtok, &provider.WorkItem{}) }},
		{"renew_session_lock([\"\"])", func() error {
			_, err := p.RenewSessionLock(ctx(t), []string{""}, time.Second, time.Second)
			return err
		}},
	}
	for _, e := range calls {
		exRejected(t, e.what, e.call, invalid...)
		unchanged("after rejected " + e.what)
	}

	// Unknown, empty and foreign (the other queue's) tokens for every token-taking method.
	tokenCalls := []struct {
		what    string
		foreign string
		call    func(tok string) error
	}{
		{"ack_orchestration_item", wtok, func(tok string) error { return p.AckOrchestrationItem(ctx(t), tok, goodAck) }},
		{"abandon_orchestration_item", wtok, func(tok string) error { return p.AbandonOrchestrationItem(ctx(t), tok, 0, false) }},
		{"renew_orchestration_item_lock", wtok, func(tok string) error { return p.RenewOrchestrationItemLock(ctx(t), tok, time.Second) }},
		{"ack_work_item", otok, func(tok string) error {
			return p.AckWorkItem(ctx(t), tok, ptr(activityCompleted(inst, 2, "x")))
		}},
		{"renew_work_item_lock", otok, func(tok string) error { return p.RenewWorkItemLock(ctx(t), tok, time.Second) }},
		{"abandon_work_item", otok, func(tok string) error { return p.AbandonWorkItem(ctx(t), tok, 0, false) }},
	}
	for _, c := range tokenCalls {
		for _, tok := range []struct {
			name, token string
			kinds       []error
		}{
			{"unknown token", "no-such-lock-token", []error{provider.ErrInvalidLockToken}},
			{"foreign token", c.foreign, []error{provider.ErrInvalidLockToken}},
			{"empty token", "", []error{provider.ErrInvalidLockToken, provider.ErrInvalidInput}},
		} {
			what := fmt.Sprintf("%s with %s", c.what, tok.name)
			exRejected(t, what, func() error { return c.call(tok.token) }, tok.kinds...)
			unchanged("after " + what)
		}
	}

	// The locks survived everything: the real tokens still work.
	mustAck(t, p, otok, goodAck)
	wantNoErr(t, p.AckWorkItem(ctx(t), wtok, ptr(activityCompleted(inst, 2, "ok"))), "ack_work_item with the held token")
	it := mustFetchOrch(t, p, longLock)
	if want := []provider.WorkItem{activityCompleted(inst, 2, "ok")}; !reflect.DeepEqual(it.Item.Messages, want) {
		t.Fatalf("final fetch: messages %+v, want only the completion", it.Item.Messages)
	}
	rrSameEvents(t, it.Item.History, append(before, scheduled), "final history")
}
