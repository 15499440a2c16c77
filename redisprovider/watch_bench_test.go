package redisprovider_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// BenchmarkClientWaitLatency measures, at low load (one instance at a time), how long after the
// ack that finishes an instance returns dx.Client.Wait returns (it uses the provider's
// StatusWatcher). Reports wait_p50_ms and wait_p99_ms. Against real Redis:
//
//	DXREDIS_TEST_ADDR=127.0.0.1:6379 go test ./redisprovider -run '^$' -bench ClientWaitLatency -benchtime 300x
func BenchmarkClientWaitLatency(b *testing.B) {
	p := newTestProvider(b)
	c := dx.NewClient(p)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("wait-%d", i)
		start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "W", Input: "{}", ExecutionID: 1}}
		if err := p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
			b.Fatal(err)
		}
		item, err := p.FetchOrchestrationItem(ctx, 30*time.Second, time.Second, nil)
		if err != nil || item == nil {
			b.Fatalf("fetch: %v %v", item, err)
		}
		returned := make(chan time.Time, 1)
		go func() {
			if _, err := c.Wait(ctx, id); err != nil {
				b.Error(err)
			}
			returned <- time.Now()
		}()
		time.Sleep(5 * time.Millisecond) // the waiter has subscribed and read the status
		out := "1"
		ack := provider.OrchestrationAck{ExecutionID: 1, Metadata: provider.ExecutionMetadata{
			OrchestrationName: "W", OrchestrationVersion: "1.0.0", Status: "Completed", Output: &out},
			HistoryDelta: []provider.Event{
				{EventID: 1, InstanceID: id, ExecutionID: 1, Kind: provider.OrchestrationStartedEvent{Name: "W", Version: "1.0.0", Input: "{}"}},
				{EventID: 2, InstanceID: id, ExecutionID: 1, Kind: provider.OrchestrationCompletedEvent{Output: out}}}}
		if err := p.AckOrchestrationItem(ctx, item.LockToken, ack); err != nil {
			b.Fatal(err)
		}
		finished := time.Now()
		lat = append(lat, (<-returned).Sub(finished))
	}
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "wait_p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "wait_p99_ms")
	}
}
