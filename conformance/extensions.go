package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The optional runtime extensions of provider/extensions.go. Each test is skipped when the provider
// does not implement the extension it checks.
func init() {
	register("extensions",
		test{"ack_and_fetch_next_returns_the_next_turn", AckAndFetchNextReturnsNextTurn},
		test{"ack_and_fetch_next_failed_ack_fetches_nothing", AckAndFetchNextFailedAckFetchesNothing},
		test{"work_ack_and_fetch_next", WorkAckAndFetchNext},
		test{"lite_fetch_history_len_and_tag", LiteFetchHistoryLenAndTag},
		test{"execution_tag_changes_when_recreated", ExecutionTagChangesWhenRecreated},
		test{"start_if_absent", StartIfAbsent},
		test{"start_if_absent_bad_input", StartIfAbsentBadInput},
	)
}

func orchAckFetcher(t *testing.T, p provider.Provider) provider.OrchestrationAckFetcher {
	t.Helper()
	af, ok := p.(provider.OrchestrationAckFetcher)
	if !ok {
		t.Skip("provider does not implement provider.OrchestrationAckFetcher")
	}
	return af
}

func liteFetcher(t *testing.T, p provider.Provider) provider.LiteFetcher {
	t.Helper()
	lf, ok := p.(provider.LiteFetcher)
	if !ok {
		t.Skip("provider does not implement provider.LiteFetcher")
	}
	return lf
}

// AckAndFetchNextReturnsNextTurn: the ack commits as AckOrchestrationItem does and returns the
// next available turn, locked; with nothing left it returns nil at once, NextPoll or not, and the
// next fetch sees work enqueued after it.
func AckAndFetchNextReturnsNextTurn(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	af := orchAckFetcher(t, p)
	mustEnqueueOrch(t, p, startItem("ext-a"))
	mustEnqueueOrch(t, p, startItem("ext-b"))
	first := mustFetchOrch(t, p, longLock)
	next, err := af.AckOrchestrationItemAndFetch(ctx(t), first.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started(first.Item.Instance)}, Metadata: testMeta(),
	}, longLock, nil, provider.FetchOptions{})
	wantNoErr(t, err, "ack_and_fetch")
	if next == nil || next.Item.Instance == first.Item.Instance {
		t.Fatalf("ack_and_fetch returned %+v, want the other instance's turn", next)
	}
	if h := mustRead(t, p, first.Item.Instance); len(h) != 1 {
		t.Fatalf("acked instance has %d events, want 1", len(h))
	}
	mustNoOrch(t, p, longLock) // the next turn is locked by the ack-and-fetch
	began := time.Now()
	last, err := af.AckOrchestrationItemAndFetch(ctx(t), next.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started(next.Item.Instance)}, Metadata: testMeta(),
	}, longLock, nil, provider.FetchOptions{NextPoll: 5 * time.Second})
	wantNoErr(t, err, "second ack_and_fetch")
	if last != nil {
		t.Fatalf("nothing queued, but ack_and_fetch returned %q", last.Item.Instance)
	}
	if waited := time.Since(began); waited > 2*time.Second {
		t.Fatalf("ack_and_fetch with NextPoll took %v: it never waits", waited)
	}
	// NextPoll is a hint: work enqueued now is what the caller's next fetch returns.
	mustEnqueueOrch(t, p, startItem("ext-a2"))
	it, err := p.FetchOrchestrationItem(ctx(t), longLock, 5*time.Second, nil)
	wantNoErr(t, err, "fetch after ack_and_fetch with NextPoll")
	if it == nil || it.Item.Instance != "ext-a2" {
		t.Fatalf("fetch after ack_and_fetch with NextPoll: %+v, want ext-a2", it)
	}
}

// AckAndFetchNextFailedAckFetchesNothing: an ack that fails returns its error and locks nothing.
func AckAndFetchNextFailedAckFetchesNothing(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	af := orchAckFetcher(t, p)
	mustEnqueueOrch(t, p, startItem("ext-c"))
	next, err := af.AckOrchestrationItemAndFetch(ctx(t), "no-such-token", provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started("ext-c")}, Metadata: testMeta(),
	}, longLock, nil, provider.FetchOptions{})
	wantErr(t, err, "ack_and_fetch with an invalid token")
	if next != nil {
		t.Fatal("a failed ack fetched a turn")
	}
	if it := mustFetchOrch(t, p, longLock); it.Item.Instance != "ext-c" {
		t.Fatalf("fetched %q, want ext-c", it.Item.Instance)
	}
}

// WorkAckAndFetchNext: the worker ack delivers the completion and returns the next activity.
func WorkAckAndFetchNext(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	wf, ok := p.(provider.WorkAckFetcher)
	if !ok {
		t.Skip("provider does not implement provider.WorkAckFetcher")
	}
	createInstance(t, p, "ext-w")
	mustEnqueueWorker(t, p, activityItem("ext-w", 1))
	mustEnqueueWorker(t, p, activityItem("ext-w", 2))
	first := mustFetchWork(t, p, longLock)
	done := activityCompleted("ext-w", first.Item.Kind.(provider.ActivityExecute).ID, "ok")
	next, err := wf.AckWorkItemAndFetch(ctx(t), first.LockToken, &done, longLock, nil, provider.TagFilterDefaultOnly(), provider.FetchOptions{})
	wantNoErr(t, err, "work ack_and_fetch")
	if next == nil || next.Item.Kind.(provider.ActivityExecute).ID == first.Item.Kind.(provider.ActivityExecute).ID {
		t.Fatalf("work ack_and_fetch returned %+v, want the other activity", next)
	}
	it := mustFetchOrch(t, p, longLock)
	if len(it.Item.Messages) != 1 {
		t.Fatalf("the completion was not delivered: %d messages", len(it.Item.Messages))
	}
	wantNoErr(t, p.AckWorkItem(ctx(t), next.LockToken, nil), "ack of the fetched activity")
}

// LiteFetchHistoryLenAndTag: a lite fetch has no history but its length and the execution's tag,
// the same tag the fetch that began the execution announced; ReadForReplay returns the rest. (A
// provider may return the item whole instead: then its History holds exactly HistoryLen events.)
func LiteFetchHistoryLenAndTag(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	lf := liteFetcher(t, p)
	mustEnqueueOrch(t, p, startItem("ext-l"))
	first, err := lf.FetchOrchestrationItemLite(ctx(t), longLock, 0, nil)
	wantNoErr(t, err, "lite fetch")
	if first == nil || first.Item.ExecutionTag == "" || first.Item.HistoryLen != 0 {
		t.Fatalf("first lite fetch: %+v, want a tag and no history", first)
	}
	mustAck(t, p, first.LockToken, provider.OrchestrationAck{ExecutionID: 1, Metadata: testMeta(),
		HistoryDelta: []provider.Event{started("ext-l"), ev("ext-l", 2, provider.ExternalSubscribedEvent{Name: "go"})}})
	mustEnqueueOrch(t, p, externalRaised("ext-l", "go", "{}"))
	it, err := lf.FetchOrchestrationItemLite(ctx(t), longLock, 0, nil)
	wantNoErr(t, err, "second lite fetch")
	if it == nil || (it.Item.History != nil && len(it.Item.History) != 2) || it.Item.HistoryLen != 2 ||
		it.Item.ExecutionTag != first.Item.ExecutionTag {
		t.Fatalf("lite fetch: %+v; want no history (or all of it), HistoryLen 2 and the tag %q", it, first.Item.ExecutionTag)
	}
	if len(it.Item.Messages) != 1 {
		t.Fatalf("lite fetch has %d messages, want 1", len(it.Item.Messages))
	}
	h, kv, tag, err := lf.ReadForReplay(ctx(t), "ext-l", 1)
	wantNoErr(t, err, "read_for_replay")
	if len(h) != 2 || tag != first.Item.ExecutionTag || kv == nil {
		t.Fatalf("read_for_replay: %d events, tag %q, kv %v; want 2 events and tag %q", len(h), tag, kv, first.Item.ExecutionTag)
	}
	full := mustFetchOrchAfterAbandon(t, p, it.LockToken)
	if full.Item.HistoryLen != 2 || full.Item.ExecutionTag != first.Item.ExecutionTag || len(full.Item.History) != 2 {
		t.Fatalf("full fetch: HistoryLen %d, tag %q, %d events", full.Item.HistoryLen, full.Item.ExecutionTag, len(full.Item.History))
	}
}

// mustFetchOrchAfterAbandon abandons a turn and fetches it again (full fetch).
func mustFetchOrchAfterAbandon(t *testing.T, p provider.Provider, token string) *provider.LockedOrchestrationItem {
	t.Helper()
	wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), token, 0, true), "abandon")
	return mustFetchOrch(t, p, longLock)
}

// ExecutionTagChangesWhenRecreated: a deleted and re-created instance gets a new tag.
func ExecutionTagChangesWhenRecreated(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	lf := liteFetcher(t, p)
	createInstance(t, p, "ext-r")
	_, _, tag1, err := lf.ReadForReplay(ctx(t), "ext-r", 1)
	wantNoErr(t, err, "read_for_replay")
	if tag1 == "" {
		t.Fatal("no tag after the first turn")
	}
	_, err = mustAdmin(t, p).DeleteInstance(ctx(t), "ext-r", true)
	wantNoErr(t, err, "delete")
	createInstance(t, p, "ext-r")
	_, _, tag2, err := lf.ReadForReplay(ctx(t), "ext-r", 1)
	wantNoErr(t, err, "read_for_replay after re-creation")
	if tag2 == "" || tag2 == tag1 {
		t.Fatalf("tag after re-creation %q, before %q: want a new one", tag2, tag1)
	}
}

func startIfAbsentEnqueuer(t *testing.T, p provider.Provider) provider.StartIfAbsentEnqueuer {
	t.Helper()
	se, ok := p.(provider.StartIfAbsentEnqueuer)
	if !ok {
		t.Skip("provider does not implement provider.StartIfAbsentEnqueuer")
	}
	return se
}

// mustStartIfAbsent calls EnqueueStartIfAbsent for startItem(instance) and fails the test unless
// it succeeds with started == want.
func mustStartIfAbsent(t *testing.T, se provider.StartIfAbsentEnqueuer, instance string, want bool, when string) {
	t.Helper()
	started, err := se.EnqueueStartIfAbsent(ctx(t), startItem(instance))
	wantNoErr(t, err, "enqueue_start_if_absent "+when)
	if started != want {
		t.Fatalf("enqueue_start_if_absent %s: started %v, want %v", when, started, want)
	}
}

// StartIfAbsent: a start is enqueued only when the instance has neither a record nor a queued
// start: a queued start (fetched or not), a running and a completed instance refuse it; events
// raised before the start do not count; after a delete the id starts again.
func StartIfAbsent(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	se := startIfAbsentEnqueuer(t, p)
	mustEnqueueOrch(t, p, externalRaised("sia-a", "early", "{}")) // not a start: does not count
	mustStartIfAbsent(t, se, "sia-a", true, "on a new id")
	mustStartIfAbsent(t, se, "sia-a", false, "with a start queued")
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != "sia-a" || len(it.Item.Messages) != 2 {
		t.Fatalf("fetched %q with %d messages, want sia-a with the event and one start", it.Item.Instance, len(it.Item.Messages))
	}
	mustStartIfAbsent(t, se, "sia-a", false, "with the start fetched and not acknowledged")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started("sia-a")}, Metadata: testMeta()})
	mustStartIfAbsent(t, se, "sia-a", false, "on a running instance")
	mustNoOrch(t, p, longLock) // the refused starts enqueued nothing

	delCompleted(t, p, "sia-b")
	mustStartIfAbsent(t, se, "sia-b", false, "on a completed instance")
	mustNoOrch(t, p, longLock)
	_, err := mustAdmin(t, p).DeleteInstance(ctx(t), "sia-b", false)
	wantNoErr(t, err, "delete_instance")
	mustStartIfAbsent(t, se, "sia-b", true, "after the instance was deleted")
	if it := mustFetchOrch(t, p, longLock); it.Item.Instance != "sia-b" || len(it.Item.Messages) != 1 {
		t.Fatalf("fetched %q with %d messages, want the new start of sia-b", it.Item.Instance, len(it.Item.Messages))
	}
}

// StartIfAbsentBadInput: anything but a StartOrchestration is ErrInvalidInput and writes nothing.
func StartIfAbsentBadInput(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	se := startIfAbsentEnqueuer(t, p)
	for _, item := range []provider.WorkItem{externalRaised("sia-c", "e", "{}"), {}} {
		started, err := se.EnqueueStartIfAbsent(ctx(t), item)
		if !errors.Is(err, provider.ErrInvalidInput) || started {
			t.Fatalf("enqueue_start_if_absent(%T): started %v, err %v; want ErrInvalidInput", item.Kind, started, err)
		}
	}
	mustNoOrch(t, p, longLock)
	mustStartIfAbsent(t, se, "sia-c", true, "after refused items")
}
