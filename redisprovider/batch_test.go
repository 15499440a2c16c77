package redisprovider_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// bCompleted is an ActivityCompleted for activity id of instance/execution 1.
func bCompleted(inst string, id uint64) *provider.WorkItem {
	return &provider.WorkItem{Kind: provider.ActivityCompleted{Instance: inst, ExecutionID: 1, ID: id, Result: fmt.Sprint(id)}}
}

// bStored counts the messages queued for inst's orchestrator.
func bStored(t *testing.T, p *redisprovider.Provider, inst string) int {
	t.Helper()
	msgs, err := p.Client().HGetAll(t.Context(), p.Keyspace().Messages(inst)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k := range msgs {
		if strings.HasPrefix(k, "m") {
			n++
		}
	}
	return n
}

// TestAckWorkItemsEachItsOwn: a batched ack commits each ack on its own: acks of instances in
// several partitions, one token twice in the same call (the second fails), an unknown token, a
// refused completion; the failures are reported per ack and change nothing else.
func TestAckWorkItemsEachItsOwn(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	const n = 6
	var acks []provider.WorkAck
	for i := uint64(1); i <= n; i++ {
		wEnqueue(t, p, wAct(fmt.Sprint("b", i), i, "", ""))
	}
	for range n {
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		id := wID(t, it)
		acks = append(acks, provider.WorkAck{LockToken: it.LockToken, Completion: bCompleted(fmt.Sprint("b", id), id)})
	}
	bad := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "b1", ExecutionID: 1, ID: 9, Name: "A", Input: "{}"}}
	acks = append(acks,
		provider.WorkAck{LockToken: acks[0].LockToken, Completion: acks[0].Completion}, // the same token again: DX_INVALID_TOKEN
		provider.WorkAck{LockToken: strings.Repeat("z", 40), Completion: acks[1].Completion},
		provider.WorkAck{LockToken: acks[2].LockToken, Completion: &bad}, // not a completion: ErrInvalidInput
	)
	errs, _ := p.AckWorkItems(ctx, acks, nil)
	if len(errs) != len(acks) {
		t.Fatalf("%d errors for %d acks", len(errs), len(acks))
	}
	for i := range n {
		if errs[i] != nil {
			t.Errorf("ack %d: %v", i, errs[i])
		}
	}
	wWantKind(t, errs[n], provider.ErrInvalidLockToken, "the same token again")
	wWantKind(t, errs[n+1], provider.ErrInvalidLockToken, "an unknown token")
	wWantKind(t, errs[n+2], provider.ErrInvalidInput, "a bad completion")
	for i := 1; i <= n; i++ {
		if got := bStored(t, p, fmt.Sprint("b", i)); got != 1 {
			t.Errorf("instance b%d has %d messages, want its one completion", i, got)
		}
	}
	if it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("an acked item is still queued: %v", wID(t, it))
	}
	if errs, next := p.AckWorkItems(ctx, nil, nil); len(errs) != 0 || len(next) != 0 {
		t.Fatalf("no acks: %v", errs)
	}
	wNoQueueKeys(t, p)
}

// TestAckWorkItemsLostReply: a batched ack whose reply is lost is retried with the same attempt
// ids: every ack reports success and each completion is stored once; a caller that sends the same
// acks again with the same ids gets the same answer, with new ids ErrInvalidLockToken.
func TestAckWorkItemsLostReply(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p, direct, proxy := newProxiedProvider(t)
	var acks []provider.WorkAck
	for i := uint64(1); i <= 3; i++ {
		wEnqueue(t, p, wAct("lost", i, "", ""))
	}
	for range 3 {
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		acks = append(acks, provider.WorkAck{LockToken: it.LockToken, Completion: bCompleted("lost", wID(t, it)),
			AttemptID: "att-" + it.LockToken[:8], FirstAttempt: true})
	}
	proxy.dropReplies(1, acks[0].LockToken)
	errs, _ := p.AckWorkItems(ctx, acks, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ack %d with a lost reply: %v", i, err)
		}
	}
	if proxy.dropped.Load() != 1 {
		t.Fatalf("the proxy dropped %d replies, want 1", proxy.dropped.Load())
	}
	if got := bStored(t, direct, "lost"); got != 3 {
		t.Fatalf("%d completions stored, want 3", got)
	}
	again := make([]provider.WorkAck, len(acks))
	for i, a := range acks {
		a.FirstAttempt = false
		again[i] = a
	}
	errs, _ = p.AckWorkItems(ctx, again, nil)
	for i, err := range errs {
		if err != nil {
			t.Errorf("ack %d sent again with its attempt id: %v", i, err)
		}
	}
	for i := range again {
		again[i].AttemptID = ""
	}
	errs, _ = p.AckWorkItems(ctx, again, nil)
	for i, err := range errs {
		wWantKind(t, err, provider.ErrInvalidLockToken, fmt.Sprint("ack ", i, " sent again with a new attempt id"))
	}
	if got := bStored(t, direct, "lost"); got != 3 {
		t.Fatalf("%d completions stored after the resends, want 3", got)
	}
}

// TestAckWorkItemsFetches: a batched ack fetches up to N items in the same call (a namespace of
// one partition), in queue order, whatever the acks' outcomes; fewer when fewer wait; an invalid
// fetch fails every ack before anything is written.
func TestAckWorkItemsFetches(t *testing.T) {
	t.Parallel()
	onePartitionOnly(t, "a namespace of several partitions fetches nothing in the batched call")
	p := newTestProvider(t)
	ctx := t.Context()
	tags := provider.TagFilterDefaultOnly()
	for i := uint64(1); i <= 5; i++ {
		wEnqueue(t, p, wAct("f", i, "", ""))
	}
	a := wFetch(t, p, wLongLock, nil, tags)
	b := wFetch(t, p, wLongLock, nil, tags)
	acks := []provider.WorkAck{{LockToken: a.LockToken, Completion: bCompleted("f", wID(t, a))},
		{LockToken: strings.Repeat("z", 40), Completion: bCompleted("f", 9)},
		{LockToken: b.LockToken, Completion: bCompleted("f", wID(t, b))}}
	badTags, _ := provider.TagFilterTags()
	if errs, next := p.AckWorkItems(ctx, acks, &provider.WorkFetch{N: 2, LockTimeout: wLongLock, Tags: badTags}); len(next) != 0 {
		t.Fatalf("an invalid fetch fetched %d items", len(next))
	} else {
		for i, err := range errs {
			wWantKind(t, err, provider.ErrInvalidInput, fmt.Sprint("ack ", i, " with an invalid fetch"))
		}
	}
	errs, next := p.AckWorkItems(ctx, acks, &provider.WorkFetch{N: 2, LockTimeout: wLongLock, Tags: tags})
	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("acks: %v", errs)
	}
	wWantKind(t, errs[1], provider.ErrInvalidLockToken, "an unknown token")
	var ids []uint64
	for _, it := range next {
		ids = append(ids, wID(t, it))
	}
	wWantIDs(t, "fetched with the acks", ids, 3, 4)
	// Fewer wait than asked for: one comes, and its token acks.
	errs, next = p.AckWorkItems(ctx, []provider.WorkAck{{LockToken: next[0].LockToken}, {LockToken: next[1].LockToken}},
		&provider.WorkFetch{N: 2, LockTimeout: wLongLock, Tags: tags})
	if errs[0] != nil || errs[1] != nil || len(next) != 1 || wID(t, next[0]) != 5 {
		t.Fatalf("acks %v, fetched %d, want item 5", errs, len(next))
	}
	if errs, _ := p.AckWorkItems(ctx, []provider.WorkAck{{LockToken: next[0].LockToken}}, nil); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := bStored(t, p, "f"); got != 2 {
		t.Fatalf("%d completions stored, want 2", got)
	}
	wNoQueueKeys(t, p)
}

// TestFetchWorkItems: a batched fetch locks up to N items in one call (a namespace of one
// partition), in queue order, each with its own token; fewer when fewer wait, without registering
// a wait once it has some; with none it waits and wakes on an enqueue as FetchWorkItem does.
func TestFetchWorkItems(t *testing.T) {
	t.Parallel()
	onePartitionOnly(t, "a namespace of several partitions fetches one item at a time")
	p := newTestProvider(t)
	ctx := t.Context()
	tags := provider.TagFilterDefaultOnly()
	fetch := provider.WorkFetch{N: 3, LockTimeout: wLongLock, Tags: tags}
	if _, err := p.FetchWorkItems(ctx, provider.WorkFetch{LockTimeout: wLongLock, Tags: tags}, 0); err == nil {
		t.Fatal("a fetch of 0 items was accepted")
	} else {
		wWantKind(t, err, provider.ErrInvalidInput, "N 0")
	}
	for i := uint64(1); i <= 5; i++ {
		wEnqueue(t, p, wAct("m", i, "", ""))
	}
	ids := func(items []*provider.LockedWorkItem) []uint64 {
		var ids []uint64
		for _, it := range items {
			ids = append(ids, wID(t, it))
		}
		return ids
	}
	first, err := p.FetchWorkItems(ctx, fetch, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "first batch", ids(first), 1, 2, 3)
	// Fewer wait than asked for: both come at once, and the fetch registers no wait.
	rest, err := p.FetchWorkItems(ctx, fetch, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "second batch", ids(rest), 4, 5)
	if n, err := p.Client().Exists(ctx, p.Keyspace().WorkWaiting(0)).Result(); err != nil || n != 0 {
		t.Fatalf("a fetch that found items registered a wait (%d, %v)", n, err)
	}
	for _, it := range append(first, rest...) {
		if err := p.AckWorkItem(ctx, it.LockToken, bCompleted("m", wID(t, it))); err != nil {
			t.Fatalf("ack of item %d: %v", wID(t, it), err)
		}
	}
	// None waits: the fetch waits for one and returns it.
	done := make(chan []*provider.LockedWorkItem, 1)
	go func() {
		items, err := p.FetchWorkItems(ctx, fetch, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- items
	}()
	waitFor(t, 5*time.Second, "the fetch registers its wait", func() bool {
		n, _ := p.Client().Exists(ctx, p.Keyspace().WorkWaiting(0)).Result()
		return n == 1
	})
	wEnqueue(t, p, wAct("m", 6, "", ""))
	select {
	case items := <-done:
		wWantIDs(t, "woken fetch", ids(items), 6)
		if err := p.AckWorkItem(ctx, items[0].LockToken, nil); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting fetch was not woken by the enqueue")
	}
	if got := bStored(t, p, "m"); got != 5 {
		t.Fatalf("%d completions stored, want 5", got)
	}
	wNoQueueKeys(t, p)
}
