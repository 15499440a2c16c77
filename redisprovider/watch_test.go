package redisprovider_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// watchTurn starts instance id and commits its first turn with the given status and history.
func watchTurn(t *testing.T, p *redisprovider.Provider, id string, status string, extra ...provider.Event) {
	t.Helper()
	ctx := context.Background()
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "W", Input: "{}", ExecutionID: 1}}
	if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatal(err)
	}
	item, err := p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || item == nil {
		t.Fatalf("fetch: %v %v", item, err)
	}
	hist := []provider.Event{{EventID: 1, InstanceID: id, ExecutionID: 1, Kind: provider.OrchestrationStartedEvent{Name: "W", Version: "1.0.0", Input: "{}"}}}
	hist = append(hist, extra...)
	ack := provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: hist,
		Metadata: provider.ExecutionMetadata{OrchestrationName: "W", OrchestrationVersion: "1.0.0", Status: status}}
	if err := p.AckOrchestrationItem(ctx, item.LockToken, ack); err != nil {
		t.Fatal(err)
	}
}

func woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestWatchStatusWakesOnFinishAndCustomStatus: the ack that finishes an instance, and the one
// that changes its custom status, wake its watchers; an ack that changes neither does not.
func TestWatchStatusWakesOnFinishAndCustomStatus(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	done, stopDone := p.WatchStatus("w-done")
	defer stopDone()
	cs, stopCS := p.WatchStatus("w-cs")
	defer stopCS()
	quiet, stopQuiet := p.WatchStatus("w-quiet")
	defer stopQuiet()

	out := "1"
	watchTurn(t, p, "w-done", "Completed", provider.Event{EventID: 2, InstanceID: "w-done", ExecutionID: 1,
		Kind: provider.OrchestrationCompletedEvent{Output: out}})
	if !woken(done, 5*time.Second) {
		t.Fatal("watcher of a completed instance not woken")
	}
	status := "half way"
	watchTurn(t, p, "w-cs", "", provider.Event{EventID: 2, InstanceID: "w-cs", ExecutionID: 1,
		Kind: provider.CustomStatusUpdatedEvent{Status: &status}})
	if !woken(cs, 5*time.Second) {
		t.Fatal("watcher of a custom status change not woken")
	}
	watchTurn(t, p, "w-quiet", "")
	if woken(quiet, 300*time.Millisecond) {
		t.Fatal("watcher woken by an ack that changed neither status nor custom status")
	}
}

// TestWatchStatusSharesOneConnection: many watches, one subscriber connection per provider.
func TestWatchStatusSharesOneConnection(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	for i := range 50 {
		_, stop := p.WatchStatus(fmt.Sprintf("many-%d", i))
		defer stop()
	}
	ch := p.Keyspace().StatusChannel(0)
	var n map[string]int64
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		n, err = p.Client().PubSubNumSub(context.Background(), ch).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[ch] >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n[ch] != 1 {
		t.Fatalf("%d subscribers on %s, want 1", n[ch], ch)
	}
}
