package redisprovider_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// A hold abandons the turn without counting an attempt and notes why, until the next ack; a bad
// reason is refused and changes nothing (the turn stays locked).
func TestHoldNotedUntilTheNextAck(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	layoutEnqueue(t, p, layoutStart("h"))
	it, err := p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v, %v", it, err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 1025), "bad \xff"} {
		if err := p.HoldOrchestrationItem(ctx, it.LockToken, 0, bad); !errors.Is(err, provider.ErrInvalidInput) {
			t.Fatalf("hold with reason of %d bytes: %v, want ErrInvalidInput", len(bad), err)
		}
	}
	if r, _, err := p.HeldReason(ctx, "h"); err != nil || r != "" {
		t.Fatalf("before the hold: %q, %v", r, err)
	}
	before := time.Now().Add(-time.Minute)
	if err := p.HoldOrchestrationItem(ctx, it.LockToken, 0, "nondeterminism at event 2"); err != nil {
		t.Fatal(err)
	}
	r, since, err := p.HeldReason(ctx, "h")
	if err != nil || r != "nondeterminism at event 2" || since.Before(before) {
		t.Fatalf("held: %q since %v, %v", r, since, err)
	}
	it, err = p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil || it.AttemptCount != 1 {
		t.Fatalf("fetch after the hold: %+v, %v; want the turn again, attempt 1 (a hold counts none)", it, err)
	}
	if r, _, _ := p.HeldReason(ctx, "h"); r == "" {
		t.Fatal("the note went before an ack")
	}
	// A message that arrives under the lock stays queued after the ack (which deletes only the
	// messages it took): the note goes all the same.
	layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "h", Name: "e", Data: "1"}})
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{layoutStarted("h", 1)}, Metadata: layoutRunning()}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := p.HeldReason(ctx, "h"); err != nil || r != "" {
		t.Fatalf("after the ack: %q, %v", r, err)
	}
	if it, err := p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil); err != nil || it == nil || len(it.Item.Messages) != 1 {
		t.Fatalf("the message that arrived under the lock: %+v, %v", it, err)
	}
}
