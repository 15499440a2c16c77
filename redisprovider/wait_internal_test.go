package redisprovider

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// TestTokenDeliveredAsWaiterLeavesIsGivenBack (DESIGN.md S6): a wake token that reaches a
// waiter's BLPOP just as the waiter gives up (its ctx ends) must go back to the list for another
// waiter, not vanish with the waiter.
func TestTokenDeliveredAsWaiterLeavesIsGivenBack(t *testing.T) {
	mr := miniredis.RunT(t)
	p, err := New(context.Background(), Options{Addr: mr.Addr(), Namespace: "tok", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	key := p.keys.WakeOrch(0)
	ctx, cancel := context.WithCancel(context.Background())
	// The token is on its way to the waiter when the waiter's ctx ends.
	testHookTokenDelivered = func() { cancel(); time.Sleep(100 * time.Millisecond) }
	defer func() { testHookTokenDelivered = nil }()
	go func() {
		// Once the fetch found nothing it registers its filter, then blocks: push the token then (a
		// push that beats the BLPOP is delivered by it all the same, through the same hook).
		for deadline := time.Now().Add(5 * time.Second); p.rdb.ZCard(context.Background(), p.keys.WakeFilters(0)).Val() == 0 &&
			time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		}
		p.rdb.LPush(context.Background(), key, "1")
	}()
	if it, err := p.FetchOrchestrationItem(ctx, time.Second, 5*time.Second, nil); it != nil || err != nil {
		t.Fatalf("fetch: %v %v", it, err)
	}
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(10 * time.Millisecond) {
		if p.rdb.LLen(context.Background(), key).Val() == 1 {
			return
		}
	}
	t.Fatal("the wake token delivered to a leaving waiter was lost")
}
