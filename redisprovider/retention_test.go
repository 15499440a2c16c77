package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// TestRetentionExpiresFinishedTrees: with Options.Retention, a finished root and its finished
// children expire together (listings drop them), while running instances keep their data.
func TestRetentionExpiresFinishedTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	opts := redisprovider.Options{Namespace: "ret", Logger: quietLogger, Retention: ttl}
	var mr *miniredis.Miniredis
	if addr := os.Getenv("DXREDIS_TEST_ADDR"); addr != "" && backend() == "redis" {
		opts.Addr, opts.Namespace = addr, "ret-"+time.Now().Format("150405.000000")
	} else {
		mr = miniredis.RunT(t)
		opts.Addr = mr.Addr()
	}
	p, err := redisprovider.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, p); _ = p.Close() })

	// turn runs one turn of whatever instance is next, acking with status.
	turn := func(want, status, parent string, orch ...provider.WorkItem) {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
		if err != nil || it == nil || it.Item.Instance != want {
			t.Fatalf("fetch: want %q, got %+v, %v", want, it, err)
		}
		id := uint64(len(it.Item.History) + 1)
		ev := provider.Event{EventID: id, InstanceID: want, ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}
		if id > 1 {
			ev.Kind = provider.ExternalEventEvent{Name: "e", Data: "{}"}
		}
		err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{ev}, OrchestratorItems: orch,
			Metadata: provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}})
		if err != nil {
			t.Fatalf("ack %s: %v", want, err)
		}
	}
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}
	raise := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}
	}
	for _, id := range []string{"root", "solo-running"} {
		if err := p.EnqueueForOrchestrator(ctx, start(id), 0); err != nil {
			t.Fatal(err)
		}
	}
	turn("root", provider.StatusCompleted, "", start("child"))
	turn("solo-running", provider.StatusRunning, "")
	turn("child", provider.StatusRunning, "root")

	ttlOf := func(id string) time.Duration {
		return p.Client().PTTL(ctx, p.Keyspace().History(id, 1)).Val()
	}
	// The root finished first, but its child was created later and runs: nothing expires yet.
	if ttlOf("root") > 0 || ttlOf("child") > 0 || ttlOf("solo-running") > 0 {
		t.Fatalf("TTL set while the tree still runs: root %v child %v", ttlOf("root"), ttlOf("child"))
	}
	if err := p.EnqueueForOrchestrator(ctx, raise("child"), 0); err != nil {
		t.Fatal(err)
	}
	turn("child", provider.StatusCompleted, "root")
	// The root carries the TTL; its descendants are reaped by fetches once it expired.
	if ttlOf("root") <= 0 || ttlOf("solo-running") > 0 {
		t.Fatalf("after the tree finished: TTL root %v child %v running %v", ttlOf("root"), ttlOf("child"), ttlOf("solo-running"))
	}

	time.Sleep(ttl + 100*time.Millisecond) // lets time pass: the retention TTL runs out
	if mr != nil {
		mr.FastForward(ttl + 100*time.Millisecond)
	}
	if _, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); err != nil { // sweeps the indexes
		t.Fatal(err)
	}
	ids, err := p.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{"solo-running"}) {
		t.Fatalf("instances after expiry: %v, want only the running one", ids)
	}
	if h, _ := p.Read(ctx, "root"); len(h) != 0 {
		t.Fatalf("root history still readable after expiry: %d events", len(h))
	}
	if h, _ := p.Read(ctx, "child"); len(h) != 0 {
		t.Fatalf("child history still readable after expiry: %d events", len(h))
	}
	if keys := p.Client().Keys(ctx, "{"+opts.Namespace+":0}:*child").Val(); len(keys) != 0 {
		t.Fatalf("child keys left after expiry: %v", keys)
	}
	if h, _ := p.Read(ctx, "solo-running"); len(h) != 1 {
		t.Fatalf("running instance lost its history: %d events", len(h))
	}
}

// TestAckDoesNotResurrectExpiredInstance (DESIGN.md S7): a finished instance with a retention
// TTL gets a message and is fetched; its TTL lapses during the turn. The ack must fail with nothing
// written, not re-create the instance as a Running fragment.
func TestAckDoesNotResurrectExpiredInstance(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const ttl = 500 * time.Millisecond
	opts := redisprovider.Options{Namespace: "res", Logger: quietLogger, Retention: ttl}
	var mr *miniredis.Miniredis
	if addr := os.Getenv("DXREDIS_TEST_ADDR"); addr != "" && backend() == "redis" {
		opts.Addr, opts.Namespace = addr, "res-"+time.Now().Format("150405.000000")
	} else {
		mr = miniredis.RunT(t)
		opts.Addr = mr.Addr()
	}
	p, err := redisprovider.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dropNamespace(t, p); _ = p.Close() })
	meta := provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
	event := func(id uint64, kind provider.EventKind) provider.Event {
		return provider.Event{EventID: id, InstanceID: "r", ExecutionID: 1, DuroxideVersion: "0.1.30", Kind: kind}
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "r", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, 10*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %v %v", it, err)
	}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, Metadata: meta,
		HistoryDelta: []provider.Event{event(1, provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"})}}); err != nil {
		t.Fatal(err)
	}
	// A late event for the finished instance is fetched; the retention TTL lapses mid-turn.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "r", Name: "e", Data: "{}"}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err = p.FetchOrchestrationItem(ctx, 10*time.Second, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "r" {
		t.Fatalf("fetch of the late event: %v %v", it, err)
	}
	time.Sleep(ttl + 200*time.Millisecond) // lets time pass: the retention TTL runs out
	if mr != nil {
		mr.FastForward(ttl + 200*time.Millisecond)
	}
	err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		Metadata:     provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: "1.0.0"},
		HistoryDelta: []provider.Event{event(2, provider.ExternalEventEvent{Name: "e", Data: "{}"})}})
	if !errors.Is(err, provider.ErrInvalidLockToken) || provider.IsRetryable(err) {
		t.Errorf("ack after the instance expired: got %v, want a permanent invalid-lock-token error", err)
	}
	if n := p.Client().Exists(ctx, p.Keyspace().Instance("r"), p.Keyspace().History("r", 1)).Val(); n != 0 {
		t.Errorf("the ack re-created %d keys of the expired instance", n)
	}
	if _, err := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); err != nil { // sweeps the indexes
		t.Fatal(err)
	}
	if ids, _ := p.ListInstances(ctx); len(ids) != 0 {
		t.Errorf("instances after the ack: %v, want none", ids)
	}
}

// TestRetentionAckCostIndependentOfTreeSize: with Retention on, a child's terminal ack costs the
// same number of Redis commands (counted by miniredis, Lua calls included) whatever the number of
// its siblings: it updates its ancestors' counts, it does not walk the tree.
func TestRetentionAckCostIndependentOfTreeSize(t *testing.T) {
	t.Parallel()
	costs := map[int][2]int{}
	for _, n := range []int{5, 200} {
		costs[n] = childCompletionCost(t, n)
	}
	small, big := costs[5], costs[200]
	t.Logf("commands per child terminal ack: 5 children %v, 200 children %v (first, last)", small, big)
	for i := range 2 {
		if big[i] > small[i]+2 {
			t.Fatalf("a child's terminal ack costs %d commands among 200 children, %d among 5: it grows with the tree", big[i], small[i])
		}
	}
}

// childCompletionCost builds a root with n running children, completes them all, and returns
// the commands the first and the last child's terminal ack cost.
func childCompletionCost(t *testing.T, n int) [2]int {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "cost", Logger: quietLogger, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}
	ack := func(it *provider.LockedOrchestrationItem, status, parent string, orch []provider.WorkItem) {
		t.Helper()
		id := it.Item.Instance
		eid := uint64(len(it.Item.History) + 1)
		ev := provider.Event{EventID: eid, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}
		if eid > 1 {
			ev.Kind = provider.ExternalEventEvent{Name: "e", Data: "{}"}
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{ev}, OrchestratorItems: orch,
			Metadata: provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}}); err != nil {
			t.Fatal(err)
		}
	}
	fetch := func() *provider.LockedOrchestrationItem {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %v %v", it, err)
		}
		return it
	}
	if err := p.EnqueueForOrchestrator(ctx, start("root"), 0); err != nil {
		t.Fatal(err)
	}
	var children []provider.WorkItem
	for i := range n {
		children = append(children, start(fmt.Sprintf("child-%d", i)))
	}
	ack(fetch(), provider.StatusRunning, "", children)
	for range n {
		ack(fetch(), provider.StatusRunning, "root", nil)
	}
	var cost [2]int
	for i := range n {
		id := fmt.Sprintf("child-%d", i)
		if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}, 0); err != nil {
			t.Fatal(err)
		}
		it := fetch()
		before := mr.CommandCount()
		ack(it, provider.StatusCompleted, "root", nil)
		switch i {
		case 0:
			cost[0] = mr.CommandCount() - before
		case n - 1:
			cost[1] = mr.CommandCount() - before
		}
	}
	if ttl := mr.TTL(p.Keyspace().Instance("root")); ttl != 0 {
		t.Fatalf("the running root has a TTL (%v)", ttl)
	}
	return cost
}

// TestRetentionDeepTreeAndDeletedChild: a root waits for its grandchild, and a running leaf
// deleted on its own (force) no longer holds its finished ancestors back.
func TestRetentionDeepTreeAndDeletedChild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "deep", Logger: quietLogger, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}
	turn := func(want, status, parent string, orch ...provider.WorkItem) {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil || it.Item.Instance != want {
			t.Fatalf("fetch: want %q, got %+v, %v", want, it, err)
		}
		ev := provider.Event{EventID: uint64(len(it.Item.History) + 1), InstanceID: want, ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{ev}, OrchestratorItems: orch,
			Metadata: provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EnqueueForOrchestrator(ctx, start("r"), 0); err != nil {
		t.Fatal(err)
	}
	turn("r", provider.StatusCompleted, "", start("c"))
	turn("c", provider.StatusCompleted, "r", start("g"))
	turn("g", provider.StatusRunning, "c")
	for _, id := range []string{"r", "c", "g"} {
		if ttl := mr.TTL(p.Keyspace().Instance(id)); ttl != 0 {
			t.Fatalf("%s has a TTL (%v) while its grandchild runs", id, ttl)
		}
	}
	if _, err := p.DeleteInstancesAtomic(ctx, []string{"g"}, true); err != nil {
		t.Fatal(err)
	}
	if ttl := mr.TTL(p.Keyspace().Instance("r")); ttl <= 0 {
		t.Fatalf("root TTL after its last running descendant was deleted: %v, want the retention", ttl)
	}
}

// TestRetentionReapsLargeTreePromptly (DESIGN.md S7, S4): a finished tree of 2,000 children (500 on
// miniredis, whose Lua is much slower; still five reaping batches) is gone within seconds of its
// retention expiring, with one fetcher long-polling as a dispatcher does (reaping took one batch of
// 100 per 30 s idle poll: a minute and more for such a tree). Not parallel: it ends by counting
// the commands of idle polls, which skip the script only within a time window.
func TestRetentionReapsLargeTreePromptly(t *testing.T) {
	// Long enough that the root's TTL is still there to read right after the last ack on a
	// loaded machine (300 ms was not: the root was gone, PTTL -2).
	const ttl = 2 * time.Second
	n := 2000
	if backend() == "miniredis" {
		n = 500
	}
	ctx := t.Context()
	p, mr := newTestProviderWith(t, redisprovider.Options{Retention: ttl})
	meta := func(status, parent string) provider.ExecutionMetadata {
		return provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}
	}
	started := func(id string) []provider.Event {
		return []provider.Event{{EventID: 1, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}}
	}
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}

	// The root completes in its first turn, starting its children; each child completes in one
	// turn (ack-and-fetch chains them). The tree settles with the last child.
	if err := p.EnqueueForOrchestrator(ctx, start("root"), 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != "root" {
		t.Fatalf("fetch root: %+v %v", it, err)
	}
	children := make([]provider.WorkItem, n)
	for i := range children {
		children[i] = start(fmt.Sprintf("child-%d", i))
	}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: started("root"), OrchestratorItems: children, Metadata: meta(provider.StatusCompleted, "")}); err != nil {
		t.Fatal(err)
	}
	it, err = p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	for done := 0; done < n; done++ {
		if err != nil || it == nil {
			t.Fatalf("child %d: fetch %+v %v", done, it, err)
		}
		it, err = p.AckOrchestrationItemAndFetch(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: started(it.Item.Instance), Metadata: meta(provider.StatusCompleted, "root")}, time.Minute, nil, provider.FetchOptions{})
	}
	if err != nil || it != nil {
		t.Fatalf("after the last child: %+v %v, want nothing left", it, err)
	}
	if ttl := p.Client().PTTL(ctx, p.Keyspace().Instance("root")).Val(); ttl <= 0 {
		t.Fatalf("the finished root has no retention TTL (%v)", ttl)
	}
	expired := time.Now().Add(ttl)
	if mr != nil { // the embedded server's keys expire and its TIME moves only when told
		mr.FastForward(2 * ttl)
		mr.SetTime(time.Now().Add(2 * ttl))
	}

	// One dispatcher-like fetcher: long polls of the runtime's default length.
	fetchCtx, stop := context.WithCancel(ctx)
	fetcherDone := make(chan struct{})
	go func() {
		defer close(fetcherDone)
		for fetchCtx.Err() == nil {
			if it, err := p.FetchOrchestrationItem(fetchCtx, 5*time.Second, 30*time.Second, nil); it != nil || (err != nil && fetchCtx.Err() == nil) {
				t.Errorf("idle fetch: %+v %v", it, err)
				return
			}
		}
	}()
	defer func() { stop(); <-fetcherDone }()

	// Only keys that exist without any instance may remain: the sequence, the fetch gate, the
	// chores time, wake lists and attempt ids (which expire on their own), and in a namespace of
	// several partitions the outboxes' sequence numbers and high-water marks; the outcome counts
	// of the last day (stats) are kept.
	left := func() []string {
		var out []string
		for _, k := range wKeys(t, p) {
			switch {
			case k == "meta", slices.Contains(dxredis.Format1Keys, k), k == "oq:gate", k == "chores", strings.HasPrefix(k, "wake:"), strings.HasPrefix(k, "att:"),
				k == "ob:seq", k == "ib:hwm", k == "stats":
			default:
				out = append(out, k)
			}
		}
		return out
	}
	deadline := expired.Add(10 * time.Second)
	for keys := left(); len(keys) > 0; keys = left() {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys of the finished tree left 10 s after its retention expired, e.g. %q", len(keys), keys[:min(len(keys), 5)])
		}
		time.Sleep(50 * time.Millisecond) // polling the condition
	}
	t.Logf("reaped %v after the retention expired", time.Since(expired).Round(time.Millisecond))
	if p.Keyspace().Partitions() > 1 {
		return // what follows reads one partition's gate and counts one partition's commands
	}
	// Done, the fetcher is idle again: no chore is due and the fetch gate names no time, so its
	// fetches wait for wake-ups (an idle fetcher costs Redis about nothing).
	prefix := p.Keyspace().Prefix(0)
	if gate := p.Client().Get(ctx, prefix+"oq:gate").Val(); gate != "99999999999999" {
		t.Errorf("fetch gate %q after the reaping, want none (99999999999999)", gate)
	}
	if n := p.Client().Exists(ctx, prefix+"chores").Val(); n != 0 {
		t.Errorf("a chore is still due after the reaping")
	}
	stop()
	<-fetcherDone
	if mr != nil { // as in TestIdleFetcherCostsOneCommandPerPoll: at most one command per idle poll
		if it, err := p.FetchOrchestrationItem(ctx, time.Second, 100*time.Millisecond, nil); it != nil || err != nil {
			t.Fatalf("first idle poll: %+v %v", it, err)
		}
		before := mr.CommandCount()
		const polls = 5
		for range polls {
			if it, err := p.FetchOrchestrationItem(ctx, time.Second, 100*time.Millisecond, nil); it != nil || err != nil {
				t.Fatalf("idle poll: %+v %v", it, err)
			}
		}
		if n := mr.CommandCount() - before; n > polls {
			t.Errorf("%d idle polls after the reaping issued %d commands, want at most one each", polls, n)
		}
	}
}

// TestRetentionSweepBeforeServerExpiry: a sweep that runs when a root's retention is due by the
// server's clock but its keys have not expired yet (the server expires a key after its last
// millisecond) looks at the root again later, instead of forgetting it and leaving its tree.
func TestRetentionSweepBeforeServerExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: mr.Addr(), Namespace: "early", Logger: quietLogger, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	turn := func(want, parent string, orch ...provider.WorkItem) {
		t.Helper()
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil || it.Item.Instance != want {
			t.Fatalf("fetch: want %q, got %+v, %v", want, it, err)
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{{EventID: 1, InstanceID: want, ExecutionID: 1, DuroxideVersion: "0.1.30",
				Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}},
			OrchestratorItems: orch,
			Metadata:          provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}}); err != nil {
			t.Fatal(err)
		}
	}
	start := func(id string) provider.WorkItem {
		return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
	}
	if err := p.EnqueueForOrchestrator(ctx, start("root"), 0); err != nil {
		t.Fatal(err)
	}
	turn("root", "", start("child"))
	turn("child", "root")
	sweep := func(at time.Time) {
		t.Helper()
		mr.SetTime(at)
		if it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil); err != nil || it != nil {
			t.Fatalf("sweeping fetch: %+v %v", it, err)
		}
	}
	// Due by the server's TIME, but the keys are still there.
	sweep(time.Now().Add(time.Hour + time.Minute))
	mr.FastForward(time.Hour + time.Minute)
	sweep(time.Now().Add(3 * time.Hour))
	if ids, err := p.ListInstances(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("instances after expiry: %v %v, want none", ids, err)
	}
	if mr.Exists(p.Keyspace().Instance("child")) {
		t.Fatal("the child of the expired root was not reaped")
	}
}
