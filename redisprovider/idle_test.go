package redisprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Idle (the virtual clock's view of a partition): idle while nothing is locked, ready or already
// due, with the earliest delayed item as its next due time.
func TestIdle(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	want := func(when string, idle bool, due bool) redisprovider.IdleState {
		t.Helper()
		st, err := p.Idle(ctx)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if st.Idle != idle || st.NextDue.IsZero() == due {
			t.Fatalf("%s: %+v, want idle %v, a next due time %v", when, st, idle, due)
		}
		return st
	}
	want("empty", true, false)
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "i1", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatal(err)
	}
	want("a start queued", false, false)
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v, %v", it, err)
	}
	want("a turn locked", false, false)
	before := time.Now()
	ev := provider.Event{EventID: 1, InstanceID: "i1", ExecutionID: 1, DuroxideVersion: "0.1.30",
		Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}
	timer := provider.WorkItem{Kind: provider.TimerFired{Instance: "i1", ExecutionID: 1, ID: 2,
		FireAtMs: uint64(before.Add(time.Hour).UnixMilli())}}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{ev}, Metadata: provider.ExecutionMetadata{OrchestrationName: "O", OrchestrationVersion: "1.0.0"},
		OrchestratorItems: []provider.WorkItem{timer}}); err != nil {
		t.Fatal(err)
	}
	st := want("a timer pending", true, true)
	if st.NextDue.Before(before.Add(time.Hour-time.Second)) || st.NextDue.After(time.Now().Add(time.Hour+time.Second)) {
		t.Fatalf("next due %v, want about an hour from %v", st.NextDue, before)
	}
	if err := p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "i1", ExecutionID: 1, ID: 3, Name: "A", Input: "{}"}}); err != nil {
		t.Fatal(err)
	}
	want("an activity queued", false, false)
}

// TestIdleSeesAnEntryBetweenPartitions: Idle reads the partitions one after another, so an outbox
// entry forwarded between two of its reads (applied at a partition read before it came, trimmed
// at its source read after) is in no partition it read. It must still say "not idle": its
// source wrote more entries than the others applied (the state here is what such reads see).
func TestIdleSeesAnEntryBetweenPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 4})
	ks := p.Keyspace()
	if st, err := p.Idle(ctx); err != nil || !st.Idle {
		t.Fatalf("empty: %+v %v", st, err)
	}
	p.Client().HSet(ctx, ks.Prefix(1)+"ob:seq", "2", "1") // partition 1 wrote an entry for 2 ...
	if st, err := p.Idle(ctx); err != nil || st.Idle {
		t.Fatalf("an entry written, trimmed, not seen applied: %+v %v, want not idle", st, err)
	}
	p.Client().HSet(ctx, ks.Prefix(2)+"ib:hwm", "1", "1") // ... which 2 applied
	if st, err := p.Idle(ctx); err != nil || !st.Idle {
		t.Fatalf("the entry applied: %+v %v, want idle", st, err)
	}
}
