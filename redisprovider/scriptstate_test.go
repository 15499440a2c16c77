package redisprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Under FUNCTION the library keeps the keys it derived from the last call's prefix: calls of two
// namespaces on one server, interleaved, must each see only their own keys.
func TestInterleavedNamespacesKeepTheirKeys(t *testing.T) {
	ctx := context.Background()
	a, b := newTestProvider(t), newTestProvider(t) // on Redis: one server, two namespaces
	ns := map[*redisprovider.Provider]string{a: "a", b: "b"}
	for i := 0; i < 3; i++ {
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			layoutEnqueue(t, p, layoutStart(id))
		}
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
			if err != nil || it == nil || it.Item.Instance != id {
				t.Fatalf("fetch of %s: %+v, %v", id, it, err)
			}
			if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			if err := layoutTurn(t, p, id, 1, []provider.Event{
				layoutStarted(id, 1),
			}, layoutRunning()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []*redisprovider.Provider{a, b} {
		for other, name := range ns {
			for i := 0; i < 3; i++ {
				id := fmt.Sprintf("%s%d", name, i)
				got := p.Client().Exists(ctx, p.Keyspace().Instance(id)).Val() == 1
				if want := other == p; got != want {
					t.Errorf("namespace %s: instance %s present %v, want %v", ns[p], id, got, want)
				}
			}
		}
		if it, _ := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); it != nil {
			t.Errorf("namespace %s: an item left: %+v", ns[p], it.Item)
		}
	}
}

// A worker item alone in its activity's instance-index entry drops the entry when acked, without
// reading it; an activity queued twice keeps the entry of the item not acked, so that cancelling
// the activity still finds it.
func TestWorkerActivityIndexAfterAck(t *testing.T) {
	p := newTestProvider(t)
	ctx := t.Context()
	ks := p.Keyspace()
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""), wAct("i", 2, "", ""))
	for range 2 { // activity 1, then the first item of activity 2 (FIFO)
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		if err := p.AckWorkItem(ctx, it.LockToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	fields, err := p.Client().HKeys(ctx, ks.WorkInstance("i")).Result()
	if err != nil || len(fields) != 1 || fields[0] != "1:2" {
		t.Fatalf("instance index after two acks: %v, %v; want only 1:2", fields, err)
	}
	if n := wEval(t, p, `return wq_cancel(ARGV[2], ARGV[3], ARGV[4])`, "i", 1, 2).(int64); n != 1 {
		t.Fatalf("cancel of the activity queued twice deleted %d items, want 1", n)
	}
	if it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("an item survived its cancellation: %+v", it)
	}
	wNoQueueKeys(t, p)
}

// An append outside a turn that adds an execution under a fetch's lock makes the lock's note of
// the current execution stale: the ack must see the appended execution (here its event id 1).
func TestAppendUnderLockThenAck(t *testing.T) {
	ctx := context.Background()
	p := newTestProvider(t)
	const id = "appended"
	layoutEnqueue(t, p, layoutStart(id))
	it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v, %v", it, err)
	}
	started := layoutStarted(id, 1)
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{started}); err != nil {
		t.Fatal(err)
	}
	err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started},
		Metadata: layoutRunning()})
	if err == nil {
		t.Fatal("an ack repeating an event id appended under its lock was accepted")
	}
	events, err := p.ReadWithExecution(ctx, id, 1)
	if err != nil || len(events) != 1 {
		t.Fatalf("history: %d events, %v; want the appended one", len(events), err)
	}
}

// A fetch writes no attempt count (an ack deletes the messages anyway): a lock that expires
// counts its delivery when it is reclaimed, an abandon unless it ignores the attempt. A message
// that arrived during the lock was not delivered by it.
func TestOrchestrationAttemptsCountedWhenTheLockEnds(t *testing.T) {
	ctx := context.Background()
	p := newTestProvider(t)
	const id = "attempts"
	layoutEnqueue(t, p, layoutStart(id))
	fetch := func(want uint32, lock time.Duration) *provider.LockedOrchestrationItem {
		t.Helper()
		var it *provider.LockedOrchestrationItem
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for it == nil && err == nil && time.Now().Before(deadline) {
			if it, err = p.FetchOrchestrationItem(ctx, lock, 0, nil); it == nil && err == nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err != nil || it == nil || it.AttemptCount != want {
			t.Fatalf("fetch: %+v, %v; want attempt %d", it, err, want)
		}
		return it
	}
	fetch(1, 100*time.Millisecond) // expires unacked
	fetch(2, 100*time.Millisecond) // expires too
	layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}})
	it := fetch(3, time.Minute) // the start's third delivery, the event's first
	if len(it.Item.Messages) != 2 {
		t.Fatalf("batch of %d messages, want 2", len(it.Item.Messages))
	}
	if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true); err != nil {
		t.Fatal(err)
	}
	it = fetch(3, time.Minute) // ignored: still the third
	if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, false); err != nil {
		t.Fatal(err)
	}
	fetch(4, time.Minute)
}

// A session-aware fetch takes plain items with one command while no session has items, and
// still finds session items, in FIFO order with the plain ones, once some exist.
func TestWorkerSessionAwareFetchOrder(t *testing.T) {
	p := newTestProvider(t)
	owner := wSess("A", time.Minute)
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""))
	wWantIDs(t, "no session items", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 1, 2)
	wEnqueue(t, p, wAct("i", 3, "", ""), wAct("i", 4, "", "s"), wAct("i", 5, "", ""))
	wWantIDs(t, "a session item between plain ones", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 3, 4, 5)
	wEnqueue(t, p, wAct("i", 6, "", "s"))
	wWantIDs(t, "a session-less fetcher", wDrain(t, p, nil, provider.TagFilterDefaultOnly()))
	wWantIDs(t, "the session's owner", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 6)
}
