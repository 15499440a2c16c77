package redisprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestOrphanMessages: messages for instances that were never started are handled at most 100
// instances per fetch script (counted in commands), stay visible in the queue depths, expire
// after an hour, can be purged, and are delivered with a start that comes in time.
func TestOrphanMessages(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "orph", Logger: quietLogger})
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

	// One fetch script handles a bounded number of orphans: it returns nothing, cheaply.
	before := mr.CommandCount()
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it != nil {
		t.Fatalf("first fetch with no poll: %+v %v, want nothing (orphans handled in bounded batches)", it, err)
	}
	if cost := mr.CommandCount() - before; cost > 2*n {
		t.Fatalf("one fetch ran %d commands for %d orphan instances: not bounded", cost, n)
	}
	// A polling fetch goes on at once and reaches the real start.
	it, err = p.FetchOrchestrationItem(ctx, time.Minute, 5*time.Second, nil)
	if err != nil || it == nil || it.Item.Instance != "real" {
		t.Fatalf("polling fetch: %+v %v, want the real start", it, err)
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
