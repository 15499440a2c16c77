package redisprovider_test

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// capFetch fetches one item of tag (poll 0): nil when none may start.
func capFetch(t *testing.T, p *redisprovider.Provider, tag string, lock time.Duration) *provider.LockedWorkItem {
	t.Helper()
	return wFetch(t, p, lock, nil, wFilter(t, provider.TagFilterTags, tag))
}

// TestTagConcurrencyCap: at most K items of a capped tag are locked at once; an ack, an abandon
// and an expired lock free a slot; other tags are not limited; removing the cap lifts it.
func TestTagConcurrencyCap(t *testing.T) { // not parallel: it waits for a short lock to expire
	p := newTestProvider(t)
	ctx := t.Context()
	if err := p.SetTagLimits(ctx, "api", redisprovider.TagLimits{Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		wEnqueue(t, p, wAct("capped", uint64(i+1), "api", ""))
	}
	wEnqueue(t, p, wAct("free", 1, "other", ""), wAct("free", 2, "other", ""), wAct("free", 3, "other", ""))
	a := capFetch(t, p, "api", wLongLock)
	b := capFetch(t, p, "api", 300*time.Millisecond)
	if a == nil || b == nil {
		t.Fatal("the first two items of the capped tag did not start")
	}
	if it := capFetch(t, p, "api", wLongLock); it != nil {
		t.Fatalf("a third item started under a cap of 2: %d", wID(t, it))
	}
	for range 3 { // another tag is not limited
		if it := capFetch(t, p, "other", wLongLock); it == nil {
			t.Fatal("an item of an uncapped tag waits")
		}
	}
	ls, err := p.GetTagLimits(ctx)
	if err != nil || len(ls) != 1 || ls[0].Tag != "api" || ls[0].Concurrency != 2 || ls[0].Running != 2 {
		t.Fatalf("GetTagLimits: %+v, %v", ls, err)
	}
	// An ack frees a slot.
	if err := p.AckWorkItem(ctx, a.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	c := capFetch(t, p, "api", wLongLock)
	if c == nil {
		t.Fatal("no item started after an ack freed a slot")
	}
	if it := capFetch(t, p, "api", wLongLock); it != nil {
		t.Fatal("over the cap after the ack")
	}
	// An abandon frees one.
	if err := p.AbandonWorkItem(ctx, c.LockToken, 0, false); err != nil {
		t.Fatal(err)
	}
	d := capFetch(t, p, "api", wLongLock)
	if d == nil || wID(t, d) != wID(t, c) {
		t.Fatalf("after the abandon: %v, want the abandoned item again", d)
	}
	// b's lock expires: its slot comes back (to the next item in line: b itself is due again, behind
	// the items enqueued before its lock expired).
	var e *provider.LockedWorkItem
	waitFor(t, 5*time.Second, "an item to start after b's lock expired", func() bool {
		e = capFetch(t, p, "api", wLongLock)
		return e != nil
	})
	if it := capFetch(t, p, "api", wLongLock); it != nil {
		t.Fatal("over the cap after the expiry")
	}
	// Removing the cap lifts it.
	if err := p.SetTagLimits(ctx, "api", redisprovider.TagLimits{}); err != nil {
		t.Fatal(err)
	}
	if it := capFetch(t, p, "api", wLongLock); it == nil {
		t.Fatal("still capped after the cap was removed")
	}
	if ls, err := p.GetTagLimits(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("GetTagLimits after the removal: %+v, %v", ls, err)
	}
	for _, bad := range []redisprovider.TagLimits{{Concurrency: -1}, {Rate: -1}, {Burst: 3}} {
		if err := p.SetTagLimits(ctx, "api", bad); err == nil {
			t.Fatalf("%+v accepted", bad)
		}
	}
}

// TestTagRateLimit: a rate limit lets a burst start at once, then one item per 1/rate; the
// fetch that finds none says when to look again.
func TestTagRateLimit(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	if err := p.SetTagLimits(ctx, "api", redisprovider.TagLimits{Rate: 5, Burst: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		wEnqueue(t, p, wAct("rated", uint64(i+1), "api", ""))
	}
	for i := range 2 {
		if it := capFetch(t, p, "api", wLongLock); it == nil {
			t.Fatalf("burst item %d did not start", i+1)
		}
	}
	if it := capFetch(t, p, "api", wLongLock); it != nil {
		t.Fatal("a third start within the burst")
	}
	// A long poll waits until a token comes (about 200 ms at 5/s) instead of the poll timeout.
	start := time.Now()
	it, err := p.FetchWorkItem(ctx, wLongLock, 10*time.Second, nil, wFilter(t, provider.TagFilterTags, "api"))
	if err != nil || it == nil {
		t.Fatalf("long poll: %v, %v", it, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the rate-limited long poll took %v", took)
	}
}

// TestDeadLetterSurvivesRepartition: a dead letter moves with its item to its new partition and
// can be redriven there; the caps are dropped (set them again).
func TestDeadLetterSurvivesRepartition(t *testing.T) {
	t.Parallel()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
	ctx := t.Context()
	if err := p.SetTagLimits(ctx, "api", redisprovider.TagLimits{Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	wEnqueue(t, p, wAct("parked", 1, "api", ""))
	it := capFetch(t, p, "api", wLongLock)
	if it == nil {
		t.Fatal("nothing fetched")
	}
	if err := p.ParkWorkItem(ctx, it.LockToken, provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 2, MaxAttempts: 1,
		MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: "parked", ExecutionID: 1, ActivityName: "A1", ActivityID: 1}}}}); err != nil {
		t.Fatal(err)
	}
	q := repartitionTo(t, p, 12)
	ds, err := q.ListDeadLetters(ctx, 10)
	if err != nil || len(ds) != 1 || ds[0].Instance != "parked" || ds[0].Attempts != 1 {
		t.Fatalf("dead letters after the move: %+v %v", ds, err)
	}
	if ls, err := q.GetTagLimits(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("caps after the move: %+v %v", ls, err)
	}
	checkFsck(t, q)
	if err := q.RedriveDeadLetter(ctx, ds[0].ID); err != nil {
		t.Fatal(err)
	}
	if it := capFetch(t, q, "api", wLongLock); it == nil || it.AttemptCount != 1 {
		t.Fatalf("after the redrive: %+v", it)
	}
}
