package redisprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestNudgeAfterClockJump: a fetch waiting for a timer due in an hour returns at once when the
// server's clock jumps past it and the provider is nudged (a test's virtual clock).
func TestNudgeAfterClockJump(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	now := time.Now()
	mr.SetTime(now)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "nudge", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "i", Orchestration: "O", Input: "{}", ExecutionID: 1}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	got := make(chan *provider.LockedOrchestrationItem, 1)
	go func() {
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 30*time.Second, nil)
		if err != nil {
			t.Error(err)
		}
		got <- it
	}()
	// The fetch is waiting. A sleep on purpose: Nudge reaches a fetch only once it blocks, after it
	// registered its filter, and nothing shows that moment (a nudge just before it is missed).
	waitOrchWaiters(t, p, 1)
	time.Sleep(200 * time.Millisecond)
	mr.SetTime(now.Add(2 * time.Hour))
	began := time.Now()
	p.Nudge()
	select {
	case it := <-got:
		if it == nil || it.Item.Instance != "i" {
			t.Fatalf("fetch returned %+v", it)
		}
		t.Logf("fetch returned %v after the nudge", time.Since(began))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting fetch did not look again after the nudge")
	}
}
