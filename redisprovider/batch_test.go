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
	wWantIDs(t, "fetched with the acks", wIDs(t, next), 3, 4)
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
	first, err := p.FetchWorkItems(ctx, fetch, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "first batch", wIDs(t, first), 1, 2, 3)
	// Fewer wait than asked for: both come at once, and the fetch registers no wait.
	rest, err := p.FetchWorkItems(ctx, fetch, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "second batch", wIDs(t, rest), 4, 5)
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
		wWantIDs(t, "woken fetch", wIDs(t, items), 6)
		if err := p.AckWorkItem(ctx, items[0].LockToken, nil); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting fetch was not woken by the enqueue")
	}
	if got := bStored(t, p, "m"); got != 5 {
		t.Fatalf("%d completions stored, want 5", got)
	}
	// An item delayed (abandoned with a delay) is not taken; with a session config and session
	// items the fetch takes one at a time (work_fetch's general path), in queue order all the same.
	wEnqueue(t, p, wAct("m", 7, "", ""), wAct("m", 8, "", "s1"), wAct("m", 9, "", ""), wAct("m", 10, "", "s1"))
	seven := wFetch(t, p, wLongLock, nil, tags)
	if err := p.AbandonWorkItem(ctx, seven.LockToken, 300*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	sess := fetch
	sess.N, sess.Session = 5, wSess("A", time.Minute)
	got, err := p.FetchWorkItems(ctx, sess, 0)
	if err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "with sessions", wIDs(t, got), 8, 9, 10)
	for _, it := range got {
		if err := p.AckWorkItem(ctx, it.LockToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Once its delay is over, the delayed item is taken (its second delivery).
	again, err := p.FetchWorkItems(ctx, fetch, 5*time.Second)
	if err != nil || len(again) != 1 || wID(t, again[0]) != 7 || again[0].AttemptCount != 2 {
		t.Fatalf("after the delay: %d items (%v), want item 7's second delivery", len(again), err)
	}
	if err := p.AckWorkItem(ctx, again[0].LockToken, nil); err != nil {
		t.Fatal(err)
	}
	wNoQueueKeys(t, p)
}

// TestAckWorkItemsGroupsCompletions: a batched ack enqueues each instance's completions together
// (work_ack_many gathers them): an idle instance gets them in ack order in one ready turn; one
// locked by a turn keeps them for its next turn; an instance that does not exist gets the orphan
// rules as one ack would give them; the outcome stats count each.
func TestAckWorkItemsGroupsCompletions(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	admCreate(t, p, "g", "", []int{2}, "")
	admCreate(t, p, "h", "", []int{2}, "")
	// h is in a turn while its completions arrive.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "h", Name: "e", Data: "1"}}, 0); err != nil {
		t.Fatal(err)
	}
	turn, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
	if err != nil || turn == nil || turn.Item.Instance != "h" {
		t.Fatalf("fetch of h's turn: %+v, %v", turn, err)
	}
	before := outSum(t, p, 2)
	// Activities 1-3 of g, 4-5 of h, 6 of o (no such instance); acked in the order 3, 1, 4, 6, 2, 5.
	insts := map[uint64]string{1: "g", 2: "g", 3: "g", 4: "h", 5: "h", 6: "o"}
	tokens := map[uint64]string{}
	for id := uint64(1); id <= 6; id++ {
		wEnqueue(t, p, wAct(insts[id], id, "", ""))
		tokens[id] = wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()).LockToken
	}
	var acks []provider.WorkAck
	for _, id := range []uint64{3, 1, 4, 6, 2, 5} {
		c := bCompleted(insts[id], id)
		if id == 1 {
			c = &provider.WorkItem{Kind: provider.ActivityFailed{Instance: "g", ExecutionID: 1, ID: 1, Details: provider.ErrorDetails{
				Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppActivityFailed}, Message: "boom"}}}}
		}
		acks = append(acks, provider.WorkAck{LockToken: tokens[id], Completion: c})
	}
	errs, _ := p.AckWorkItems(ctx, acks, nil)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	after := outSum(t, p, 2)
	if after[2]-before[2] != 5 || after[3]-before[3] != 1 {
		t.Fatalf("stats counted %d completed and %d failed activities, want 5 and 1", after[2]-before[2], after[3]-before[3])
	}
	// completionIDs are the activity ids of a turn's completions, in message order.
	completionIDs := func(it *provider.LockedOrchestrationItem) []uint64 {
		var ids []uint64
		for _, m := range it.Item.Messages {
			switch k := m.Kind.(type) {
			case provider.ActivityCompleted:
				ids = append(ids, k.ID)
			case provider.ActivityFailed:
				ids = append(ids, k.ID)
			}
		}
		return ids
	}
	g, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
	if err != nil || g == nil || g.Item.Instance != "g" {
		t.Fatalf("fetch of g: %+v, %v", g, err)
	}
	wWantIDs(t, "g's turn", completionIDs(g), 3, 1, 2)
	if next, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil); err != nil || next != nil {
		t.Fatalf("another turn is ready while h is locked and o does not exist: %+v, %v", next, err)
	}
	if err := p.AckOrchestrationItem(ctx, turn.LockToken, provider.OrchestrationAck{ExecutionID: 1}); err != nil {
		t.Fatal(err)
	}
	h, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
	if err != nil || h == nil || h.Item.Instance != "h" {
		t.Fatalf("fetch of h after its turn: %+v, %v", h, err)
	}
	wWantIDs(t, "h's next turn", completionIDs(h), 4, 5)
	// o: what one ack leaves for an instance that does not exist (the orphan rules), the same.
	wEnqueue(t, p, wAct("o2", 7, "", ""))
	if err := p.AckWorkItem(ctx, wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()).LockToken, bCompleted("o2", 7)); err != nil {
		t.Fatal(err)
	}
	if got, want := bStored(t, p, "o"), bStored(t, p, "o2"); got != want {
		t.Fatalf("%d messages kept for o, want %d as one ack keeps for o2", got, want)
	}
	wNoQueueKeys(t, p)
}
