package redisprovider_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestOrphanMessages: messages for instances that were never started stay out of the way of
// fetches, stay visible in the queue depths, expire after an hour, can be purged, and are
// delivered with a start that comes in time.
func TestOrphanMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	var logs strings.Builder
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "orph", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	raise := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}
	}
	const n = 1000
	for i := range n {
		item := raise(fmt.Sprintf("orphan-%d", i))
		if i%2 == 1 { // QueueMessages alone are dropped; the others are parked
			item = provider.WorkItem{Kind: provider.QueueMessage{Instance: fmt.Sprintf("orphan-%d", i), Name: "q", Data: "{}"}}
		}
		if err := p.EnqueueForOrchestrator(ctx, item, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EnqueueForOrchestrator(ctx, obStart("real"), 0); err != nil {
		t.Fatal(err)
	}

	if !strings.Contains(logs.String(), "instance=orphan-1\n") {
		t.Errorf("no warning for the dropped QueueMessage of orphan-1 in the log:\n%.500s", logs.String())
	}
	// The enqueues parked the orphans (and dropped the QueueMessages): the first fetch script
	// finds the real start.
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "real" {
		t.Fatalf("first fetch: %+v %v, want the real start", it, err)
	}

	// Visible and expiring.
	qs, err := p.GetQueueStats(ctx)
	if err != nil || qs.Orchestrator.Orphaned != n/2 || qs.Orchestrator.Visible != 0 {
		t.Fatalf("queue stats: %+v %v, want %d orphaned", qs.Orchestrator, err, n/2)
	}
	if d, _ := p.GetQueueDepths(ctx); d.OrchestratorQueue != n/2 {
		t.Fatalf("queue depth %d, want %d parked orphans", d.OrchestratorQueue, n/2)
	}
	if ttl := mr.TTL(p.Keyspace().Messages("orphan-0")); ttl <= 0 || ttl > time.Hour {
		t.Fatalf("orphan messages TTL %v, want at most an hour", ttl)
	}

	// A start in time receives the parked event, and its messages stop expiring.
	if err := p.EnqueueForOrchestrator(ctx, obStart("orphan-0"), 0); err != nil {
		t.Fatal(err)
	}
	it, err = p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "orphan-0" || len(it.Item.Messages) != 2 {
		t.Fatalf("start after the orphan: %+v %v, want the event and the start", it, err)
	}
	if ttl := mr.TTL(p.Keyspace().Messages("orphan-0")); ttl != 0 {
		t.Fatalf("adopted messages still expire in %v", ttl)
	}

	// Purge deletes the other parked orphans.
	if got, err := p.PurgeOrphanMessages(ctx); err != nil || got != n/2-1 {
		t.Fatalf("purge: %d %v, want %d", got, err, n/2-1)
	}
	if d, _ := p.GetQueueDepths(ctx); d.OrchestratorQueue != 0 {
		t.Fatalf("queue depth after purge %d", d.OrchestratorQueue)
	}

	// Expiry: a parked orphan is gone (and uncounted) after an hour.
	if err := p.EnqueueForOrchestrator(ctx, raise("late"), 0); err != nil {
		t.Fatal(err)
	}
	if it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil); err != nil || it != nil {
		t.Fatalf("fetch of a lone orphan: %+v %v", it, err)
	}
	mr.FastForward(time.Hour + time.Second)
	mr.SetTime(time.Now().Add(time.Hour + time.Second)) // scripts read TIME
	if _, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil); err != nil {
		t.Fatal(err)
	}
	if qs, _ := p.GetQueueStats(ctx); qs.Orchestrator.Orphaned != 0 {
		t.Fatalf("expired orphans still counted: %+v", qs.Orchestrator)
	}
	if n := mr.Exists(p.Keyspace().Messages("late")); n {
		t.Fatal("expired orphan messages still stored")
	}
}

// TestOrphanFloodParkedAtEnqueue (DESIGN.md S4): 20,000 messages for instances that do not exist
// (half for distinct ids, half for one id; 4,000 on miniredis, whose Lua is much slower: still
// twenty times a fetch's orphan batch) never enter the ready index: the enqueue parks them,
// so the first fetch script finds a real start behind them, in a handful of commands (a fetch
// took about a second behind such a flood). They stay countable, a start adopts them, a purge
// deletes them, and QueueMessages for instances that do not exist are dropped as before.
func TestOrphanFloodParkedAtEnqueue(t *testing.T) {
	t.Parallel()
	n := 10000 // per kind: distinct ids, one id
	if backend() == "miniredis" {
		n = 2000
	}
	ctx := t.Context()
	p, mr := newTestProviderWith(t, redisprovider.Options{})
	raise := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}
	}
	items := make(chan provider.WorkItem)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				if err := p.EnqueueForOrchestrator(ctx, it, 0); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		items <- raise(fmt.Sprintf("orphan-%d", i))
		items <- raise("orphan-one")
		if i%100 == 0 { // dropped: a QueueMessage waits for no start
			items <- provider.WorkItem{Kind: provider.QueueMessage{Instance: fmt.Sprintf("queue-%d", i), Name: "q", Data: "{}"}}
		}
	}
	close(items)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var ready, parked int64
	for part := range p.Keyspace().Partitions() {
		prefix := p.Keyspace().Prefix(part)
		ready += p.Client().ZCard(ctx, prefix+"oq:ready:-").Val()
		parked += p.Client().ZCard(ctx, prefix+"oq:parked").Val()
	}
	if ready != 0 {
		t.Fatalf("%d orphan instances in the ready index, want none (parked at enqueue)", ready)
	}
	if parked != int64(n)+1 {
		t.Fatalf("%d parked orphan instances, want %d", parked, n+1)
	}
	if keys := p.Client().Exists(ctx, p.Keyspace().Messages("queue-0")).Val(); keys != 0 {
		t.Fatal("a QueueMessage for an instance that does not exist was kept")
	}

	// The first fetch script (no poll) finds the real start.
	if err := p.EnqueueForOrchestrator(ctx, obStart("real"), 0); err != nil {
		t.Fatal(err)
	}
	var before int
	if mr != nil {
		before = mr.CommandCount()
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "real" {
		t.Fatalf("fetch behind the orphans: %+v %v, want the real start", it, err)
	}
	if mr != nil {
		if cost := mr.CommandCount() - before; cost > 50*p.Keyspace().Partitions() { // a look in each partition
			t.Fatalf("the fetch ran %d commands behind %d orphan messages, want a handful", cost, 2*n)
		}
	}

	// Counted, adopted by a start, purged.
	qs, err := p.GetQueueStats(ctx)
	if err != nil || qs.Orchestrator.Orphaned != uint64(2*n) {
		t.Fatalf("queue stats: %+v %v, want %d orphaned", qs.Orchestrator, err, 2*n)
	}
	// (A batch of the one id's n+1 messages is more than miniredis's Lua takes in one fetch.)
	if err := p.EnqueueForOrchestrator(ctx, obStart("orphan-7"), 0); err != nil {
		t.Fatal(err)
	}
	it, err = p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "orphan-7" || len(it.Item.Messages) != 2 {
		t.Fatalf("fetch of the adopting start: %+v %v, want orphan-7 with its event", it, err)
	}
	if purged, err := p.PurgeOrphanMessages(ctx); err != nil || purged != 2*n-1 {
		t.Fatalf("purge: %d %v, want %d", purged, err, 2*n-1)
	}
	if qs, err := p.GetQueueStats(ctx); err != nil || qs.Orchestrator.Orphaned != 0 {
		t.Fatalf("queue stats after the purge: %+v %v", qs.Orchestrator, err)
	}
}
