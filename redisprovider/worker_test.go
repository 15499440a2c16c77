package redisprovider_test

// Worker-side tests: the worker queue, tag routing, sessions, cancellation and long polling. They
// run on the backend newTestProvider picks (miniredis, or the server at DXREDIS_TEST_ADDR). Lock
// expiry needs real sleeps; they are kept at a few hundred milliseconds.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

const wLongLock = 30 * time.Second

func wptr[T any](v T) *T { return &v }

// wAct is an ActivityExecute of instance/execution 1; tag and session "" mean none.
func wAct(instance string, id uint64, tag, session string) provider.WorkItem {
	a := provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: id, Name: fmt.Sprintf("A%d", id), Input: "{}"}
	if tag != "" {
		a.Tag = wptr(tag)
	}
	if session != "" {
		a.SessionID = wptr(session)
	}
	return provider.WorkItem{Kind: a}
}

func wEnqueue(t *testing.T, p provider.Provider, items ...provider.WorkItem) {
	t.Helper()
	for _, it := range items {
		if err := p.EnqueueForWorker(t.Context(), it); err != nil {
			t.Fatalf("enqueue_for_worker: %v", err)
		}
	}
}

// wFetch fetches (poll 0) and fails the test on error.
func wFetch(t *testing.T, p provider.Provider, lock time.Duration, s *provider.SessionFetchConfig, f provider.TagFilter) *provider.LockedWorkItem {
	t.Helper()
	it, err := p.FetchWorkItem(t.Context(), lock, 0, s, f)
	if err != nil {
		t.Fatalf("fetch_work_item: %v", err)
	}
	return it
}

// wID returns the activity id of a fetched item (0 for nil).
func wID(t *testing.T, it *provider.LockedWorkItem) uint64 {
	t.Helper()
	if it == nil {
		return 0
	}
	a, ok := it.Item.Kind.(provider.ActivityExecute)
	if !ok {
		t.Fatalf("fetched %s, want ActivityExecute", it.Item.Variant())
	}
	return a.ID
}

// wIDs returns the activity ids of fetched items, in order.
func wIDs(t *testing.T, items []*provider.LockedWorkItem) []uint64 {
	t.Helper()
	var ids []uint64
	for _, it := range items {
		ids = append(ids, wID(t, it))
	}
	return ids
}

// wDrain fetches and acks until nothing is left and returns the activity ids in fetch order.
func wDrain(t *testing.T, p provider.Provider, s *provider.SessionFetchConfig, f provider.TagFilter) []uint64 {
	t.Helper()
	var ids []uint64
	for range 100 {
		it := wFetch(t, p, wLongLock, s, f)
		if it == nil {
			return ids
		}
		ids = append(ids, wID(t, it))
		if err := p.AckWorkItem(t.Context(), it.LockToken, nil); err != nil {
			t.Fatalf("ack_work_item: %v", err)
		}
	}
	t.Fatal("drain: queue does not empty")
	return nil
}

func wWantIDs(t *testing.T, what string, got []uint64, want ...uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %v, want %v", what, got, want)
	}
}

// wWantKind fails unless err is a permanent ProviderError of the given kind.
func wWantKind(t *testing.T, err error, kind error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got no error, want %v", what, kind)
	}
	pe, ok := provider.AsProviderError(err)
	if !ok {
		t.Fatalf("%s: got %T %v, want a *provider.ProviderError", what, err, err)
	}
	if !errors.Is(err, kind) || pe.Retryable {
		t.Fatalf("%s: got %v (kind %v, retryable %v), want permanent %v", what, err, pe.Kind, pe.Retryable, kind)
	}
}

func wFilter(t *testing.T, mk func(...string) (provider.TagFilter, error), tags ...string) provider.TagFilter {
	t.Helper()
	f, err := mk(tags...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// wKeys lists the namespace's keys (prefix stripped), sorted. On a cluster it scans every
// primary (a cluster client's SCAN reaches one node).
func wKeys(t *testing.T, p *redisprovider.Provider) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		keys []string
	)
	for part := range p.Keyspace().Partitions() {
		prefix := p.Keyspace().Prefix(part)
		match := strings.NewReplacer("{", `\{`, "}", `\}`).Replace(prefix) + "*"
		scan := func(ctx context.Context, c redis.Cmdable) error {
			iter := c.Scan(ctx, 0, match, 1000).Iterator()
			for iter.Next(ctx) {
				mu.Lock()
				keys = append(keys, strings.TrimPrefix(iter.Val(), prefix))
				mu.Unlock()
			}
			return iter.Err()
		}
		var err error
		if cc, ok := p.Client().(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(t.Context(), func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		} else {
			err = scan(t.Context(), p.Client())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	return keys
}

// wNoQueueKeys fails when any worker-queue key other than session records, their indexes and the
// (expiring) wake lists is left: after every item is acked or cancelled, the indexes must be empty (no leaks).
func wNoQueueKeys(t *testing.T, p *redisprovider.Provider) {
	t.Helper()
	for _, k := range wKeys(t, p) {
		switch {
		case k == "meta", slices.Contains(dxredis.Format1Keys, k), k == "wq:tks", strings.HasPrefix(k, "wake:"), strings.HasPrefix(k, "wq:wake:"), k == "wq:waiting", // wake keys expire
			strings.HasPrefix(k, "wq:sess:"), k == "wq:sowned", k == "wq:sidle", strings.HasPrefix(k, "wq:owner:"):
		case strings.HasPrefix(k, "wq:"):
			t.Errorf("worker-queue key %q left after the queue drained", k)
		}
	}
}

// wLib is the shared Lua library (lib.lua + lib_worker.lua), for test-only scripts that call the
// helpers directly.
func wLib(t *testing.T) string {
	t.Helper()
	lib := luascripts.LibSource()
	return lib + "\n"
}

// wEval runs lib + body with the provider's calling convention (KEYS[1] seq, ARGV[1] prefix).
func wEval(t *testing.T, p *redisprovider.Provider, body string, args ...any) any {
	t.Helper()
	ks := p.Keyspace()
	res, err := p.Client().Eval(t.Context(), wLib(t)+body, []string{ks.Meta(0)}, append([]any{ks.Prefix(0)}, args...)...).Result()
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	return res
}

func TestWorkerLuaKeysMatchGo(t *testing.T) {
	onePartitionOnly(t, "compares the keys of partition 0")
	t.Parallel()
	p := newTestProvider(t)
	ks := p.Keyspace()
	const (
		inst  = "in{st}: ü 1"
		sid   = "se:s{x}"
		tag   = "g:p u"
		owner = "own{er}:1"
	)
	got := wEval(t, p, `return {WQ.k_item(WQ.id(42)), WQ.k_item(WQ.id(1234567890123456)), WQ.k_q(WQ.tag_key('')), WQ.k_q(WQ.tag_key(ARGV[4])),
		WQ.K_SHOLD, WQ.K_TKS, WQ.k_inst(ARGV[2]), WQ.k_sess(ARGV[3]),
		WQ.k_sitems(WQ.tag_key(ARGV[4]), ARGV[3]), WQ.k_sitems(WQ.tag_key(''), ARGV[3]), WQ.k_stags(ARGV[3]), WQ.K_SCOUNT,
		WQ.k_sfree(WQ.tag_key(ARGV[4])), WQ.k_sown(WQ.tag_key(ARGV[4]), ARGV[5]), WQ.K_SOWNED, WQ.K_SIDLE,
		WQ.k_owner(ARGV[5]), WQ.k_wake('p', WQ.tag_key(ARGV[4])), WQ.k_wake('s', '*'), WQ.k_wake('o', WQ.tag_key(''), ARGV[5]), WQ.K_WAITING}`,
		inst, sid, tag, owner)
	want := []string{ks.WorkItem(0, 42), ks.WorkItem(0, 1234567890123456), ks.WorkSchedule(0, ""), ks.WorkSchedule(0, tag),
		ks.SessionsHeld(0), ks.WorkTagKeys(0), ks.WorkInstance(inst), ks.Session(0, sid),
		ks.SessionItems(0, tag, sid), ks.SessionItems(0, "", sid), ks.SessionTags(0, sid), ks.SessionCounts(0),
		ks.SessionsFree(0, tag), ks.SessionsOwnedBy(0, tag, owner), ks.SessionsOwned(0), ks.SessionsIdle(0),
		ks.OwnerSessions(0, owner), ks.WorkWake(0, dxredis.WorkWakePlain, dxredis.WorkTagKey(tag), ""),
		ks.WorkWake(0, dxredis.WorkWakeSession, dxredis.WorkTagKeyAny, ""), ks.WorkWake(0, dxredis.WorkWakeOwned, "-", owner), ks.WorkWaiting(0)}
	g, _ := got.([]any)
	if len(g) != len(want) {
		t.Fatalf("lua returned %d keys, want %d", len(g), len(want))
	}
	for i := range want {
		if g[i] != want[i] {
			t.Errorf("key %d: lua %q, go %q", i, g[i], want[i])
		}
	}
	// Tag keys are self-delimiting: no tag/session split can produce the same key.
	if ks.SessionItems(0, "a", "1:b") == ks.SessionItems(0, "a:1", "b") || ks.WorkSchedule(0, "-") == ks.WorkSchedule(0, "") {
		t.Error("tag keys collide")
	}
}

func TestWorkerFIFOAndRedeliveryOrder(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	for i := uint64(1); i <= 5; i++ {
		wEnqueue(t, p, wAct("inst-"+fmt.Sprint(i%2), i, "", ""))
	}
	anyTags := provider.TagFilterAny()
	first := wFetch(t, p, wLongLock, nil, anyTags)
	second := wFetch(t, p, wLongLock, nil, anyTags)
	wWantIDs(t, "first two", []uint64{wID(t, first), wID(t, second)}, 1, 2)
	// An abandoned item keeps its place: it comes before the items enqueued after it.
	if err := p.AbandonWorkItem(t.Context(), second.LockToken, 0, false); err != nil {
		t.Fatal(err)
	}
	if err := p.AbandonWorkItem(t.Context(), first.LockToken, 0, false); err != nil {
		t.Fatal(err)
	}
	wWantIDs(t, "after abandon", wDrain(t, p, nil, anyTags), 1, 2, 3, 4, 5)
	wNoQueueKeys(t, p)
}

// A session-less item whose lock expired is taken again in the order it became takeable: after
// an item enqueued while it was locked (visible since its enqueue), not before it by sequence
// number; its attempt counts the second delivery.
func TestWorkerReclaimedItemQueuesBehindEarlierWork(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	wEnqueue(t, p, wAct("i", 1, "", ""))
	first := wFetch(t, p, 200*time.Millisecond, nil, provider.TagFilterDefaultOnly())
	wEnqueue(t, p, wAct("i", 2, "", ""))
	until, err := p.Client().HGet(ctx, p.Keyspace().Prefix(0)+"wq:m:"+first.LockToken[37:], "u").Int64()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the lock expires", func() bool {
		now, err := p.Client().Time(ctx).Result()
		return err == nil && now.UnixMilli() > until
	})
	second := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	third := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	wWantIDs(t, "after the lock expired", []uint64{wID(t, second), wID(t, third)}, 2, 1)
	if third.AttemptCount != 2 {
		t.Fatalf("reclaimed item's attempt %d, want 2", third.AttemptCount)
	}
	wWantKind(t, p.AckWorkItem(ctx, first.LockToken, nil), provider.ErrInvalidLockToken, "ack with the expired token")
}

// TagFilter Any reads the tag keys of wq:tks: one whose items are all gone is dropped by the
// next Any fetch, but not while session items exist (a session item's tag key must stay).
func TestWorkerAnyDropsUnusedTagKeys(t *testing.T) {
	onePartitionOnly(t, "reads partition 0's tag keys")
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	tks := p.Keyspace().Prefix(0) + "wq:tks"
	wEnqueue(t, p, wAct("i", 1, "gpu", ""), wAct("i", 2, "cpu", "s1"))
	if got := p.Client().SMembers(ctx, tks).Val(); len(got) != 2 {
		t.Fatalf("wq:tks = %q, want both tag keys", got)
	}
	wWantIDs(t, "any, no session", wDrain(t, p, nil, provider.TagFilterAny()), 1)
	if got := p.Client().SMembers(ctx, tks).Val(); !slices.Contains(got, "3:cpu") {
		t.Fatalf("wq:tks = %q: the session item's tag key went", got)
	}
	wWantIDs(t, "any, session", wDrain(t, p, &provider.SessionFetchConfig{OwnerID: "w", LockTimeout: time.Minute}, provider.TagFilterAny()), 2)
	if it := wFetch(t, p, wLongLock, nil, provider.TagFilterAny()); it != nil {
		t.Fatalf("fetched %+v from an empty queue", it)
	}
	if n := p.Client().SCard(ctx, tks).Val(); n != 0 {
		t.Fatalf("wq:tks holds %d tag keys once every item is gone", n)
	}
}

func TestWorkerTagFilterModes(t *testing.T) {
	t.Parallel()
	// Items: 1 untagged, 2 gpu, 3 cpu, 4 untagged, 5 tpu, 6 gpu.
	tags := []string{"", "gpu", "cpu", "", "tpu", "gpu"}
	cases := []struct {
		name   string
		filter func(t *testing.T) provider.TagFilter
		want   []uint64
	}{
		{"DefaultOnly", func(*testing.T) provider.TagFilter { return provider.TagFilterDefaultOnly() }, []uint64{1, 4}},
		{"ZeroValueIsDefaultOnly", func(*testing.T) provider.TagFilter { return provider.TagFilter{} }, []uint64{1, 4}},
		{"Tags", func(t *testing.T) provider.TagFilter { return wFilter(t, provider.TagFilterTags, "gpu") }, []uint64{2, 6}},
		{"TagsMulti", func(t *testing.T) provider.TagFilter { return wFilter(t, provider.TagFilterTags, "tpu", "gpu") }, []uint64{2, 5, 6}},
		{"TagsUnknown", func(t *testing.T) provider.TagFilter { return wFilter(t, provider.TagFilterTags, "fpga") }, nil},
		{"DefaultAnd", func(t *testing.T) provider.TagFilter { return wFilter(t, provider.TagFilterDefaultAnd, "cpu") }, []uint64{1, 3, 4}},
		{"Any", func(*testing.T) provider.TagFilter { return provider.TagFilterAny() }, []uint64{1, 2, 3, 4, 5, 6}},
		{"None", func(*testing.T) provider.TagFilter { return provider.TagFilterNone() }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newTestProvider(t)
			for i, tag := range tags {
				wEnqueue(t, p, wAct("inst", uint64(i+1), tag, ""))
			}
			wWantIDs(t, c.name, wDrain(t, p, nil, c.filter(t)), c.want...)
			// Whatever the filter left is still there, in order, for Any; the tag survives the trip.
			rest := wFetch(t, p, wLongLock, nil, provider.TagFilterAny())
			if rest != nil {
				a := rest.Item.Kind.(provider.ActivityExecute)
				if want := tags[a.ID-1]; (want == "") != (a.Tag == nil) || (a.Tag != nil && *a.Tag != want) {
					t.Fatalf("item %d came back with tag %v, want %q", a.ID, a.Tag, want)
				}
			}
		})
	}
}

func TestWorkerTagFilterNoneDoesNotTouchRedis(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(t.Context(), redisprovider.Options{Addr: mr.Addr(), Namespace: "t", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	mr.Close() // any Redis call would now fail
	start := time.Now()
	it, err := p.FetchWorkItem(t.Context(), wLongLock, 100*time.Millisecond, nil, provider.TagFilterNone())
	if it != nil || err != nil {
		t.Fatalf("None filter: got %v, %v; want nil, nil", it, err)
	}
	if e := time.Since(start); e < 100*time.Millisecond {
		t.Fatalf("None filter returned after %v, want it to wait the poll timeout", e)
	}
}

func TestWorkerInvalidTagFilters(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	noTags, err := provider.TagFilterTags()
	if err == nil {
		t.Fatal("TagFilterTags() accepted an empty set")
	}
	tooMany, err := provider.TagFilterDefaultAnd("a", "b", "c", "d", "e", "f")
	if err == nil {
		t.Fatal("TagFilterDefaultAnd accepted 6 tags")
	}
	emptyTag, _ := provider.TagFilterTags("")
	for name, f := range map[string]provider.TagFilter{"no tags": noTags, "6 tags": tooMany, "empty tag": emptyTag} {
		_, err := p.FetchWorkItem(t.Context(), wLongLock, 0, nil, f)
		wWantKind(t, err, provider.ErrInvalidInput, name)
	}
}

func TestWorkerBadInput(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	bad := map[string]provider.WorkItem{
		"no variant":     {},
		"not activity":   {Kind: provider.ActivityCompleted{Instance: "i", ExecutionID: 1, ID: 1, Result: "x"}},
		"start":          {Kind: provider.StartOrchestration{Instance: "i", Orchestration: "O", ExecutionID: 1}},
		"empty instance": wAct("", 1, "", ""),
		"empty tag":      {Kind: provider.ActivityExecute{Instance: "i", ExecutionID: 1, ID: 1, Tag: wptr("")}},
		"empty session":  {Kind: provider.ActivityExecute{Instance: "i", ExecutionID: 1, ID: 1, SessionID: wptr("")}},
	}
	for name, it := range bad {
		wWantKind(t, p.EnqueueForWorker(ctx, it), provider.ErrInvalidInput, "enqueue "+name)
	}
	// (A namespace of several partitions has its partitions' records from the start.)
	if keys := slices.DeleteFunc(wKeys(t, p), func(k string) bool { return p.Keyspace().Partitions() > 1 && k == "meta" }); len(keys) != 0 {
		t.Fatalf("rejected enqueues wrote keys: %v", keys)
	}

	_, err := p.FetchWorkItem(ctx, wLongLock, 0, &provider.SessionFetchConfig{OwnerID: "", LockTimeout: time.Second}, provider.TagFilterDefaultOnly())
	wWantKind(t, err, provider.ErrInvalidInput, "empty owner id")
	_, err = p.FetchWorkItem(ctx, 0, 0, nil, provider.TagFilterDefaultOnly())
	wWantKind(t, err, provider.ErrInvalidInput, "zero lock timeout")

	for _, tok := range []string{"", "no-such-token"} {
		wWantKind(t, p.AckWorkItem(ctx, tok, nil), provider.ErrInvalidLockToken, "ack "+tok)
		wWantKind(t, p.RenewWorkItemLock(ctx, tok, time.Second), provider.ErrInvalidLockToken, "renew "+tok)
		wWantKind(t, p.AbandonWorkItem(ctx, tok, 0, false), provider.ErrInvalidLockToken, "abandon "+tok)
	}
	err = p.AckWorkItem(ctx, "no-such-token", nil)
	if !strings.Contains(err.Error(), "Invalid lock token") {
		t.Fatalf("ack error %q does not say Invalid lock token", err)
	}

	// A completion of the wrong variant is refused and the item stays locked, then acks fine.
	wEnqueue(t, p, wAct("i", 1, "", ""))
	it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	for _, c := range []provider.WorkItem{
		{Kind: provider.TimerFired{Instance: "i", ExecutionID: 1, ID: 1}},
		wAct("i", 1, "", ""),
		{},
		{Kind: provider.ActivityCompleted{Instance: "", ExecutionID: 1, ID: 1}},
	} {
		wWantKind(t, p.AckWorkItem(ctx, it.LockToken, &c), provider.ErrInvalidInput, "ack with "+c.Variant())
	}
	if w := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()); w != nil {
		t.Fatal("item became visible after a refused ack")
	}
	if err := p.AckWorkItem(ctx, it.LockToken, nil); err != nil {
		t.Fatalf("ack after refused acks: %v", err)
	}
}

func TestWorkerAckCompletionLandsInOrchestratorQueue(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	const inst = "orch-1"
	wEnqueue(t, p, wAct(inst, 1, "", ""), wAct(inst, 2, "", ""))
	completions := []provider.WorkItem{
		{Kind: provider.ActivityCompleted{Instance: inst, ExecutionID: 1, ID: 1, Result: `{"ok":true}`}},
		{Kind: provider.ActivityFailed{Instance: inst, ExecutionID: 1, ID: 2, Details: provider.ErrorDetails{
			Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppActivityFailed}, Message: "boom"}}}},
	}
	for _, c := range completions {
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		if err := p.AckWorkItem(ctx, it.LockToken, &c); err != nil {
			t.Fatalf("ack with %s: %v", c.Variant(), err)
		}
		// The entry is gone: the same token fails permanently.
		err := p.AckWorkItem(ctx, it.LockToken, &c)
		wWantKind(t, err, provider.ErrInvalidLockToken, "second ack")
	}
	// Both completions sit in the instance's orchestrator queue, verbatim, as 'O' messages (type
	// code O, then the ms they became visible).
	msgs, err := p.Client().HGetAll(ctx, p.Keyspace().Messages(inst)).Result()
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for k, v := range msgs {
		if strings.HasPrefix(k, "m") {
			stored = append(stored, v)
			if code := msgs["t"+k[1:]]; !strings.HasPrefix(code, "O") {
				t.Errorf("message %s has type code %q, want O<ms>", k, code)
			}
		}
	}
	for _, c := range completions {
		b, _ := provider.Marshal(c)
		if !slices.Contains(stored, string(b)) {
			t.Errorf("completion %s not in the orchestrator queue (have %v)", b, stored)
		}
	}
	// Through the orchestration side: once the instance starts, its batch holds the completions in order.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: inst, Orchestration: "O", Input: "{}", Version: wptr("1.0.0"), ExecutionID: 1}}, 0); err != nil {
		t.Fatal(err)
	}
	oi, err := p.FetchOrchestrationItem(ctx, wLongLock, 0, nil)
	if err != nil || oi == nil {
		t.Fatalf("fetch_orchestration_item: %v, %v", oi, err)
	}
	var variants []string
	for _, m := range oi.Item.Messages {
		variants = append(variants, m.Variant())
	}
	if !slices.Equal(variants, []string{"ActivityCompleted", "ActivityFailed", "StartOrchestration"}) {
		t.Fatalf("orchestration batch = %v", variants)
	}
	wNoQueueKeys(t, p)
}

func TestWorkerLockExpiryAndRenew(t *testing.T) { // not parallel: it acts within a lock's few hundred ms
	p := newTestProvider(t)
	ctx := t.Context()
	const lock = 250 * time.Millisecond
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""))
	a := wFetch(t, p, lock, nil, provider.TagFilterDefaultOnly())
	b := wFetch(t, p, lock, nil, provider.TagFilterDefaultOnly())
	if a.AttemptCount != 1 || b.AttemptCount != 1 {
		t.Fatalf("attempts %d, %d; want 1, 1", a.AttemptCount, b.AttemptCount)
	}
	time.Sleep(150 * time.Millisecond) // lets time pass, less than the lock: b is renewed while valid
	if err := p.RenewWorkItemLock(ctx, b.LockToken, time.Second); err != nil {
		t.Fatalf("renew: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // a expired, b renewed
	wWantKind(t, p.AckWorkItem(ctx, a.LockToken, nil), provider.ErrInvalidLockToken, "ack of an expired lock")
	wWantKind(t, p.RenewWorkItemLock(ctx, a.LockToken, time.Second), provider.ErrInvalidLockToken, "renew of an expired lock")
	again := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	if wID(t, again) != 1 || again.AttemptCount != 2 || again.LockToken == a.LockToken {
		t.Fatalf("redelivery: id %d attempt %d; want item 1, attempt 2, new token", wID(t, again), again.AttemptCount)
	}
	// The reclaimed token is void, even for abandon.
	wWantKind(t, p.AbandonWorkItem(ctx, a.LockToken, 0, false), provider.ErrInvalidLockToken, "abandon of a reclaimed lock")
	if w := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()); w != nil {
		t.Fatalf("got item %d; the renewed item must still be locked", wID(t, w))
	}
	for _, tok := range []string{again.LockToken, b.LockToken} {
		if err := p.AckWorkItem(ctx, tok, nil); err != nil {
			t.Fatal(err)
		}
	}
	wWantKind(t, p.RenewWorkItemLock(ctx, b.LockToken, time.Second), provider.ErrInvalidLockToken, "renew after ack")
	wNoQueueKeys(t, p)
}

func TestWorkerAbandonDelayAndAttempts(t *testing.T) { // not parallel: it acts within a lock's few hundred ms
	onePartitionOnly(t, "sets an item's attempts by its key")
	p := newTestProvider(t)
	ctx := t.Context()
	wEnqueue(t, p, wAct("i", 1, "gpu", ""), wAct("i", 2, "gpu", ""))
	gpu := wFilter(t, provider.TagFilterTags, "gpu")
	it := wFetch(t, p, wLongLock, nil, gpu)
	if err := p.AbandonWorkItem(ctx, it.LockToken, 300*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	wWantKind(t, p.AbandonWorkItem(ctx, it.LockToken, 0, false), provider.ErrInvalidLockToken, "second abandon")
	// The delayed item is skipped; the next one is served; then nothing until the delay passes.
	next := wFetch(t, p, wLongLock, nil, gpu)
	if wID(t, next) != 2 {
		t.Fatalf("got item %d, want 2 while item 1 is delayed", wID(t, next))
	}
	if w := wFetch(t, p, wLongLock, nil, gpu); w != nil {
		t.Fatalf("got item %d before the delay passed", wID(t, w))
	}
	time.Sleep(350 * time.Millisecond) // lets time pass: the abandon delay runs out
	it = wFetch(t, p, wLongLock, nil, gpu)
	if wID(t, it) != 1 || it.AttemptCount != 2 || it.Item.Kind.(provider.ActivityExecute).Tag == nil {
		t.Fatalf("after delay: item %d attempt %d", wID(t, it), it.AttemptCount)
	}
	// ignore_attempt undoes the fetch's increment and never goes below 0.
	for _, want := range []uint32{2, 2} {
		if err := p.AbandonWorkItem(ctx, it.LockToken, 0, true); err != nil {
			t.Fatal(err)
		}
		it = wFetch(t, p, wLongLock, nil, gpu)
		if it.AttemptCount != want {
			t.Fatalf("after ignore_attempt: attempt %d, want %d", it.AttemptCount, want)
		}
	}
	// Floor at 0: force the stored count to 0 while the item is locked, then ignore the attempt.
	if err := p.Client().HSet(ctx, p.Keyspace().WorkItem(0, 1), "n", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.AbandonWorkItem(ctx, it.LockToken, 0, true); err != nil {
		t.Fatal(err)
	}
	if it = wFetch(t, p, wLongLock, nil, gpu); it.AttemptCount != 1 {
		t.Fatalf("attempt from 0 after ignore_attempt: %d, want 1 (floor 0)", it.AttemptCount)
	}
}

// wSess is a session config.
func wSess(owner string, lock time.Duration) *provider.SessionFetchConfig {
	return &provider.SessionFetchConfig{OwnerID: owner, LockTimeout: lock}
}

func wSessionRecord(t *testing.T, p *redisprovider.Provider, sid string) (owner string, until, last int64) {
	t.Helper()
	m, err := p.Client().HGetAll(t.Context(), p.Keyspace().Session(p.Keyspace().SessionPartition(sid), sid)).Result()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Sscan(m["u"], &until)
	fmt.Sscan(m["l"], &last)
	return m["o"], until, last
}

func TestWorkerSessionRouting(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	def := provider.TagFilterDefaultOnly()
	// 1 s1, 2 plain, 3 s2, 4 s1, 5 s1 tagged gpu, 6 plain.
	wEnqueue(t, p, wAct("i", 1, "", "s1"), wAct("i", 2, "", ""), wAct("i", 3, "", "s2"),
		wAct("i", 4, "", "s1"), wAct("i", 5, "gpu", "s1"), wAct("i", 6, "", ""))

	// Without a session config, session items are invisible.
	plain := wFetch(t, p, wLongLock, nil, def)
	if wID(t, plain) != 2 {
		t.Fatalf("no session config: got %d, want 2", wID(t, plain))
	}
	// A claims s1 (FIFO head), B then cannot see s1 but gets s2 and plain items.
	before := time.Now().UnixMilli()
	a1 := wFetch(t, p, wLongLock, wSess("A", 10*time.Second), def)
	if wID(t, a1) != 1 {
		t.Fatalf("A: got %d, want 1", wID(t, a1))
	}
	owner, until, last := wSessionRecord(t, p, "s1")
	if owner != "A" || until < before+9000 || until > time.Now().UnixMilli()+11000 || last < before-1000 {
		t.Fatalf("session record: owner %q until %d last %d (now %d)", owner, until, last, before)
	}
	b := wFetch(t, p, wLongLock, wSess("B", 10*time.Second), def)
	if wID(t, b) != 3 {
		t.Fatalf("B: got %d, want 3 (s1 belongs to A)", wID(t, b))
	}
	if b2 := wFetch(t, p, wLongLock, wSess("B", 10*time.Second), def); wID(t, b2) != 6 {
		t.Fatalf("B: got %d, want 6", wID(t, b2))
	}
	if b3 := wFetch(t, p, wLongLock, wSess("B", 10*time.Second), provider.TagFilterAny()); b3 != nil {
		t.Fatalf("B: got %d, want nothing (everything left is A's)", wID(t, b3))
	}
	// A (any slot using owner id A) gets its next s1 item; the gpu one only with a gpu filter.
	if a2 := wFetch(t, p, wLongLock, wSess("A", time.Second), def); wID(t, a2) != 4 {
		t.Fatalf("A: got %d, want 4", wID(t, a2))
	}
	// A short session lock in a later fetch never shortens the lock A holds.
	if _, u, _ := wSessionRecord(t, p, "s1"); u < until {
		t.Fatalf("session lock shortened from %d to %d", until, u)
	}
	if a3 := wFetch(t, p, wLongLock, wSess("A", time.Second), def); a3 != nil {
		t.Fatalf("A DefaultOnly: got %d, want nothing", wID(t, a3))
	}
	a4 := wFetch(t, p, wLongLock, wSess("A", time.Second), wFilter(t, provider.TagFilterTags, "gpu"))
	if wID(t, a4) != 5 || *a4.Item.Kind.(provider.ActivityExecute).SessionID != "s1" {
		t.Fatalf("A gpu: got %d, want 5 of s1", wID(t, a4))
	}
	if n, err := p.RenewSessionLock(ctx, []string{"A", "B", "A", "C"}, time.Minute, time.Minute); err != nil || n != 2 {
		t.Fatalf("renew_session_lock = %d, %v; want 2 (s1 of A, s2 of B)", n, err)
	}
	if n, err := p.RenewSessionLock(ctx, nil, time.Minute, time.Minute); err != nil || n != 0 {
		t.Fatalf("renew_session_lock(no owners) = %d, %v", n, err)
	}
	_, err := p.RenewSessionLock(ctx, []string{"A", ""}, time.Minute, time.Minute)
	wWantKind(t, err, provider.ErrInvalidInput, "renew_session_lock with an empty owner id")
}

func TestWorkerSessionExpiryTakeoverAndCleanup(t *testing.T) { // not parallel: it acts within a lock's few hundred ms
	p := newTestProvider(t)
	ctx := t.Context()
	def := provider.TagFilterDefaultOnly()
	const slock = 250 * time.Millisecond
	wEnqueue(t, p, wAct("i", 1, "", "s"))
	a := wFetch(t, p, wLongLock, wSess("A", slock), def)
	wEnqueue(t, p, wAct("i", 2, "", "s"))
	if w := wFetch(t, p, wLongLock, wSess("B", time.Minute), def); w != nil {
		t.Fatalf("B got %d while A holds the session", wID(t, w))
	}
	time.Sleep(slock + 100*time.Millisecond) // lets time pass: A's session lock expires
	if n, _ := p.RenewSessionLock(ctx, []string{"A"}, time.Minute, time.Minute); n != 0 {
		t.Fatalf("renew of an expired session = %d, want 0", n)
	}
	// B takes the expired session over; A's item lock is still valid and A can still ack it.
	const block = 400 * time.Millisecond
	b := wFetch(t, p, wLongLock, wSess("B", block), def)
	if wID(t, b) != 2 {
		t.Fatalf("B: got %d, want 2 after A's session expired", wID(t, b))
	}
	if o, _, _ := wSessionRecord(t, p, "s"); o != "B" {
		t.Fatalf("session owner %q, want B", o)
	}
	if err := p.AckWorkItem(ctx, a.LockToken, nil); err != nil {
		t.Fatalf("A's ack after losing the session: %v", err)
	}
	if n, _ := p.CleanupOrphanedSessions(ctx, time.Minute); n != 0 {
		t.Fatalf("cleanup = %d, want 0 (session held by B and has an item)", n)
	}
	if err := p.AckWorkItem(ctx, b.LockToken, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.CleanupOrphanedSessions(ctx, time.Minute); n != 0 {
		t.Fatalf("cleanup = %d, want 0 (B's session lock is valid)", n)
	}
	// Once B's session lock expires, the item-less session is removed and anyone can claim it again.
	time.Sleep(block + 100*time.Millisecond) // lets time pass: B's session lock expires
	if n, _ := p.CleanupOrphanedSessions(ctx, time.Minute); n != 1 {
		t.Fatalf("cleanup = %d, want 1", n)
	}
	if keys := wKeys(t, p); slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "wq:s") || strings.HasPrefix(k, "wq:owner:") }) {
		t.Fatalf("session keys left after cleanup: %v", keys)
	}
	wEnqueue(t, p, wAct("i", 3, "", "s"))
	if c := wFetch(t, p, wLongLock, wSess("C", time.Minute), def); wID(t, c) != 3 {
		t.Fatalf("C: got %d, want 3", wID(t, c))
	}
}

func TestWorkerSessionLockValidItemLockExpired(t *testing.T) { // not parallel: it acts within a lock's few hundred ms
	p := newTestProvider(t)
	def := provider.TagFilterDefaultOnly()
	wEnqueue(t, p, wAct("i", 1, "", "s"))
	wFetch(t, p, 200*time.Millisecond, wSess("A", time.Minute), def)
	time.Sleep(300 * time.Millisecond) // lets time pass: the item lock (200 ms) expires
	if w := wFetch(t, p, wLongLock, wSess("B", time.Minute), def); w != nil {
		t.Fatalf("B got %d; the session still belongs to A", wID(t, w))
	}
	if w := wFetch(t, p, wLongLock, nil, def); w != nil {
		t.Fatalf("a session-less fetch got %d", wID(t, w))
	}
	w := wFetch(t, p, wLongLock, wSess("A", time.Minute), def)
	if wID(t, w) != 1 || w.AttemptCount != 2 {
		t.Fatalf("A redelivery: id %d attempt %d", wID(t, w), w.AttemptCount)
	}
}

func TestWorkerSessionLastActivity(t *testing.T) { // not parallel: it acts within a lock's few hundred ms
	p := newTestProvider(t)
	ctx := t.Context()
	def := provider.TagFilterDefaultOnly()
	const idle = 200 * time.Millisecond
	wEnqueue(t, p, wAct("i", 1, "", "s"), wAct("i", 2, "", "t"))
	a := wFetch(t, p, wLongLock, wSess("A", time.Minute), def)
	b := wFetch(t, p, wLongLock, wSess("A", time.Minute), def)
	time.Sleep(idle + 50*time.Millisecond) // lets time pass: the sessions go idle
	if n, _ := p.RenewSessionLock(ctx, []string{"A"}, time.Minute, idle); n != 0 {
		t.Fatalf("renew of idle sessions = %d, want 0", n)
	}
	if err := p.RenewWorkItemLock(ctx, a.LockToken, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.RenewSessionLock(ctx, []string{"A"}, time.Minute, idle); n != 1 {
		t.Fatalf("renew after an item renew = %d, want 1", n)
	}
	c := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "i", ExecutionID: 1, ID: 2, Result: "r"}}
	if err := p.AckWorkItem(ctx, b.LockToken, &c); err != nil {
		t.Fatal(err)
	}
	if n, _ := p.RenewSessionLock(ctx, []string{"A"}, time.Minute, idle); n != 2 {
		t.Fatalf("renew after an ack = %d, want 2", n)
	}
	if n, _ := p.RenewSessionLock(ctx, []string{"A"}, time.Minute, 0); n != 0 {
		t.Fatalf("renew with idle timeout 0 = %d, want 0 (strict)", n)
	}
}

func TestWorkerCancellation(t *testing.T) {
	onePartitionOnly(t, "runs wq_cancel in partition 0")
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	cancel := func(inst string, exec, act uint64) int64 {
		return wEval(t, p, `return wq_cancel(ARGV[2], ARGV[3], ARGV[4])`, inst, exec, act).(int64)
	}
	// 1 locked, 2 ready, 3 delayed, 4 ready in a session, 5 survives; 2 is queued twice.
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""), wAct("i", 2, "", ""), wAct("i", 3, "gpu", ""),
		wAct("i", 4, "", "s"), wAct("i", 5, "", ""))
	locked := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	gpu := wFetch(t, p, wLongLock, nil, wFilter(t, provider.TagFilterTags, "gpu"))
	if err := p.AbandonWorkItem(ctx, gpu.LockToken, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		act  uint64
		want int64
	}{{1, 1}, {2, 2}, {3, 1}, {4, 1}, {4, 0}, {99, 0}} {
		if n := cancel("i", 1, c.act); n != c.want {
			t.Fatalf("wq_cancel(i, 1, %d) = %d, want %d", c.act, n, c.want)
		}
	}
	if n := cancel("i", 2, 5); n != 0 {
		t.Fatalf("wq_cancel of another execution = %d, want 0", n)
	}
	// The cancelled item's token fails permanently (not retryable).
	err := p.AckWorkItem(ctx, locked.LockToken, &provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "i", ExecutionID: 1, ID: 1}})
	wWantKind(t, err, provider.ErrInvalidLockToken, "ack of a cancelled item")
	wWantKind(t, p.RenewWorkItemLock(ctx, locked.LockToken, time.Second), provider.ErrInvalidLockToken, "renew of a cancelled item")
	if msgs, _ := p.Client().HLen(ctx, p.Keyspace().Messages("i")).Result(); msgs != 0 {
		t.Fatal("a refused ack enqueued its completion")
	}
	wWantIDs(t, "left after cancellation", wDrain(t, p, wSess("A", time.Minute), provider.TagFilterAny()), 5)
	wNoQueueKeys(t, p)

	// wq_delete_instance removes every item of one instance, whatever its state.
	wEnqueue(t, p, wAct("x", 1, "", ""), wAct("x", 2, "gpu", "s"), wAct("y", 1, "", ""))
	wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
	if n := wEval(t, p, `return wq_delete_instance(ARGV[2])`, "x").(int64); n != 2 {
		t.Fatalf("wq_delete_instance = %d, want 2", n)
	}
	if n := wEval(t, p, `return wq_delete_instance(ARGV[2])`, "x").(int64); n != 0 {
		t.Fatalf("second wq_delete_instance = %d, want 0", n)
	}
	time.Sleep(10 * time.Millisecond) // lets the server clock move on (ms scores)
	wWantIDs(t, "other instance", wDrain(t, p, wSess("A", time.Minute), provider.TagFilterAny()), 1)
	wNoQueueKeys(t, p)

	// wq_enqueue (as orch_ack calls it) indexes like EnqueueForWorker.
	js, _ := provider.Marshal(wAct("z", 7, "gpu", "s9"))
	wEval(t, p, `wq_enqueue(now_ms(), ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]) return 1`, string(js), "z", 1, 7, "s9", "gpu")
	it := wFetch(t, p, wLongLock, wSess("A", time.Minute), wFilter(t, provider.TagFilterTags, "gpu"))
	if wID(t, it) != 7 {
		t.Fatalf("item from wq_enqueue: got %d", wID(t, it))
	}
}

func TestWorkerLongPoll(t *testing.T) { // not parallel: it checks that an immediate fetch returns at once
	p := newTestProvider(t)
	ctx := t.Context()
	def := provider.TagFilterDefaultOnly()

	t.Run("returns at once with poll 0", func(t *testing.T) {
		start := time.Now()
		if it, err := p.FetchWorkItem(ctx, wLongLock, 0, nil, def); it != nil || err != nil {
			t.Fatalf("got %v, %v", it, err)
		}
		if e := time.Since(start); e > 100*time.Millisecond {
			t.Fatalf("poll 0 took %v", e)
		}
	})
	t.Run("times out", func(t *testing.T) {
		start := time.Now()
		if it, err := p.FetchWorkItem(ctx, wLongLock, 300*time.Millisecond, nil, def); it != nil || err != nil {
			t.Fatalf("got %v, %v", it, err)
		}
		if e := time.Since(start); e < 300*time.Millisecond || e > 800*time.Millisecond {
			t.Fatalf("poll 300ms took %v", e)
		}
	})
	t.Run("wakes on enqueue", func(t *testing.T) {
		type res struct {
			it  *provider.LockedWorkItem
			err error
			at  time.Duration
		}
		done := make(chan res, 1)
		start := time.Now()
		go func() {
			it, err := p.FetchWorkItem(ctx, wLongLock, 5*time.Second, nil, def)
			done <- res{it, err, time.Since(start)}
		}()
		time.Sleep(150 * time.Millisecond) // lets the fetch block: one that has not blocked yet finds the item at once (the test then proves less, never fails wrongly)
		wEnqueue(t, p, wAct("lp", 1, "", ""))
		r := <-done
		if r.err != nil || wID(t, r.it) != 1 || r.at > 2*time.Second {
			t.Fatalf("long poll: item %d err %v after %v", wID(t, r.it), r.err, r.at)
		}
		_ = p.AckWorkItem(ctx, r.it.LockToken, nil)
	})
	t.Run("wakes when a delayed item comes due", func(t *testing.T) {
		wEnqueue(t, p, wAct("lp", 2, "", ""))
		it := wFetch(t, p, wLongLock, nil, def)
		if err := p.AbandonWorkItem(ctx, it.LockToken, 300*time.Millisecond, false); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got, err := p.FetchWorkItem(ctx, wLongLock, 5*time.Second, nil, def)
		if err != nil || wID(t, got) != 2 || time.Since(start) > 2*time.Second {
			t.Fatalf("got %d, %v after %v", wID(t, got), err, time.Since(start))
		}
		_ = p.AckWorkItem(ctx, got.LockToken, nil)
	})
	t.Run("wakes when a lock expires", func(t *testing.T) {
		wEnqueue(t, p, wAct("lp", 3, "", ""))
		wFetch(t, p, 300*time.Millisecond, nil, def)
		start := time.Now()
		got, err := p.FetchWorkItem(ctx, wLongLock, 5*time.Second, nil, def)
		if err != nil || wID(t, got) != 3 || got.AttemptCount != 2 || time.Since(start) > 2*time.Second {
			t.Fatalf("got %d, %v after %v", wID(t, got), err, time.Since(start))
		}
	})
	// The wake-up reaches a fetcher that can take the item, even when others wait too: a gpu item
	// wakes the gpu fetcher, not a DefaultOnly one; an item of a held session wakes its owner. The
	// others wait out their (short) poll timeout each round, so that no abandoned BLPOP holds a
	// connection into the next round (with a shared cluster client that could starve the pool).
	const othersPoll = 300 * time.Millisecond
	targeted := func(t *testing.T, item func(i uint64) provider.WorkItem, want func(context.Context) (*provider.LockedWorkItem, error),
		others ...func(context.Context) (*provider.LockedWorkItem, error)) {
		for i := uint64(1); i <= 3; i++ {
			var wg sync.WaitGroup
			for _, o := range others {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if it, _ := o(ctx); it != nil {
						t.Errorf("a fetcher that cannot take the item got %d", wID(t, it))
					}
				}()
			}
			got := make(chan *provider.LockedWorkItem, 1)
			go func() {
				it, err := want(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- it
			}()
			time.Sleep(100 * time.Millisecond) // everyone is blocked
			start := time.Now()
			wEnqueue(t, p, item(i))
			select {
			case it := <-got:
				if it == nil {
					t.Fatalf("round %d: the right fetcher timed out", i)
				}
				if e := time.Since(start); e > 400*time.Millisecond {
					t.Fatalf("round %d: the right fetcher woke after %v", i, e)
				}
				_ = p.AckWorkItem(ctx, it.LockToken, nil)
			case <-time.After(3 * time.Second):
				t.Fatalf("round %d: the right fetcher was not woken", i)
			}
			wg.Wait()
		}
	}
	poll := func(s *provider.SessionFetchConfig, f provider.TagFilter) func(context.Context) (*provider.LockedWorkItem, error) {
		return func(c context.Context) (*provider.LockedWorkItem, error) {
			return p.FetchWorkItem(c, wLongLock, othersPoll, s, f)
		}
	}
	wantPoll := func(s *provider.SessionFetchConfig, f provider.TagFilter) func(context.Context) (*provider.LockedWorkItem, error) {
		return func(c context.Context) (*provider.LockedWorkItem, error) {
			return p.FetchWorkItem(c, wLongLock, 2*time.Second, s, f)
		}
	}
	t.Run("wakes the fetcher of the item's tag", func(t *testing.T) {
		gpu := wFilter(t, provider.TagFilterTags, "gpu")
		targeted(t, func(i uint64) provider.WorkItem { return wAct("tg", i, "gpu", "") }, wantPoll(nil, gpu),
			poll(nil, def), poll(nil, def), poll(wSess("X", time.Minute), wFilter(t, provider.TagFilterTags, "cpu")))
	})
	t.Run("wakes the owner of the item's session", func(t *testing.T) {
		// A holds session s (claimed with a first item it then acks).
		wEnqueue(t, p, wAct("ts", 100, "", "s"))
		if err := p.AckWorkItem(ctx, wFetch(t, p, wLongLock, wSess("A", time.Minute), def).LockToken, nil); err != nil {
			t.Fatal(err)
		}
		targeted(t, func(i uint64) provider.WorkItem { return wAct("ts", i, "", "s") }, wantPoll(wSess("A", time.Minute), def),
			poll(wSess("B", time.Minute), def), poll(wSess("C", time.Minute), def), poll(nil, def))
	})
	t.Run("wakes a TagFilter Any fetcher", func(t *testing.T) {
		targeted(t, func(i uint64) provider.WorkItem { return wAct("ta", i, "rare", "") }, wantPoll(nil, provider.TagFilterAny()),
			poll(nil, def))
	})
	t.Run("ends with the context", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		if it, _ := p.FetchWorkItem(cctx, wLongLock, 10*time.Second, nil, def); it != nil {
			t.Fatal("got an item")
		}
		if e := time.Since(start); e > 2*time.Second {
			t.Fatalf("fetch outlived its context: %v", e)
		}
	})
}

func TestWorkerConcurrentFetchNoDuplicates(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	const items, workers = 60, 8
	for i := uint64(1); i <= items; i++ {
		sess := ""
		if i%3 == 0 {
			sess = fmt.Sprint("s", i%4)
		}
		wEnqueue(t, p, wAct("c", i, "", sess))
	}
	var (
		mu   sync.Mutex
		seen = map[uint64]int{}
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := wSess(fmt.Sprint("owner-", w%3), time.Minute)
			for {
				it, err := p.FetchWorkItem(ctx, wLongLock, 200*time.Millisecond, cfg, provider.TagFilterDefaultOnly())
				if err != nil {
					t.Error(err)
					return
				}
				if it == nil {
					return
				}
				mu.Lock()
				seen[it.Item.Kind.(provider.ActivityExecute).ID]++
				mu.Unlock()
				if err := p.AckWorkItem(ctx, it.LockToken, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != items {
		t.Fatalf("fetched %d distinct items, want %d", len(seen), items)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("item %d fetched %d times", id, n)
		}
	}
	wNoQueueKeys(t, p)
}

// TestWorkerScriptsParse loads every script (the provider does it in New) and checks the worker
// scripts' headers.
func TestWorkerScriptsParse(t *testing.T) {
	t.Parallel()
	newTestProvider(t)
	for _, name := range luascripts.ScriptNames() {
		if !strings.HasPrefix(name, "work_") {
			continue
		}
		src := luascripts.ScriptSource(name)
		for _, h := range []string{"KEYS[1]", "ARGV[1]", "Reply:", "Errors:", "Cost:"} {
			if !strings.Contains(src, h) {
				t.Errorf("%s.lua header lacks %q", name, h)
			}
		}
	}
}

// A worker wake-up goes only to lists a fetcher may be blocked on: an enqueue nobody waits for
// pushes no token, and a fetcher blocked in a long poll (plain, tagged, Any, with a session
// config) is woken at once by the item it may take.
func TestWorkerWakeOnlyWhereFetchersWait(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := newTestProvider(t)
	ks := p.Keyspace()
	wEnqueue(t, p, wAct("nobody", 1, "", ""))
	if n := p.Client().Exists(ctx, ks.WorkWake(0, dxredis.WorkWakePlain, "-", ""), ks.WorkWake(0, dxredis.WorkWakePlain, "*", "")).Val(); n != 0 {
		t.Fatalf("an enqueue with no fetcher waiting pushed %d wake lists", n)
	}
	if it := wFetch(t, p, wLongLock, nil, provider.TagFilterAny()); it == nil {
		t.Fatal("queued item not fetched")
	}
	session := &provider.SessionFetchConfig{OwnerID: "w1", LockTimeout: time.Minute}
	gpu, err := provider.TagFilterTags("gpu")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		filter  provider.TagFilter
		session *provider.SessionFetchConfig
		item    provider.WorkItem
	}{
		{provider.TagFilterDefaultOnly(), nil, wAct("plain", 2, "", "")},
		{gpu, nil, wAct("tagged", 3, "gpu", "")},
		{provider.TagFilterAny(), nil, wAct("any", 4, "gpu", "")},
		{provider.TagFilterDefaultOnly(), session, wAct("session", 5, "", "s1")},
	} {
		got := make(chan *provider.LockedWorkItem, 1)
		go func() {
			it, err := p.FetchWorkItem(ctx, wLongLock, 10*time.Second, c.session, c.filter)
			if err != nil {
				t.Error(err)
			}
			got <- it
		}()
		time.Sleep(300 * time.Millisecond) // the fetch found nothing and blocks
		start := time.Now()
		wEnqueue(t, p, c.item)
		select {
		case it := <-got:
			if it == nil {
				t.Fatalf("case %d: the blocked fetch returned nothing", i)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("case %d: woken after %v", i, d)
			}
		case <-time.After(8 * time.Second):
			t.Fatalf("case %d: the blocked fetch was not woken", i)
		}
	}
}

// GetQueueStats breaks the worker queue down by tag: ready, session, delayed and locked items.
func TestWorkerQueueStatsPerTag(t *testing.T) {
	p := newTestProvider(t)
	ctx := t.Context()
	wEnqueue(t, p, wAct("qs", 1, "", ""), wAct("qs", 2, "gpu", ""), wAct("qs", 3, "gpu", ""), wAct("qs", 4, "gpu", ""),
		wAct("qs", 5, "gpu", "s1"), wAct("qs", 6, "", ""))
	if id := wID(t, wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())); id != 1 {
		t.Fatalf("fetched %d, want 1", id)
	}
	gpu := wFilter(t, provider.TagFilterTags, "gpu")
	if id := wID(t, wFetch(t, p, wLongLock, nil, gpu)); id != 2 {
		t.Fatalf("fetched %d, want 2", id)
	}
	it := wFetch(t, p, wLongLock, nil, gpu)
	if wID(t, it) != 3 {
		t.Fatalf("fetched %d, want 3", wID(t, it))
	}
	if err := p.AbandonWorkItem(ctx, it.LockToken, time.Hour, false); err != nil {
		t.Fatal(err)
	}
	qs, err := p.GetQueueStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []redisprovider.WorkerTagStats{
		{Tag: "", Queued: 2, Ready: 1, Locked: 1},
		{Tag: "gpu", Queued: 4, Ready: 1, Session: 1, Delayed: 1, Locked: 1},
	}
	if !slices.Equal(qs.Worker.Tags, want) || qs.Worker.Unlocked != 4 || qs.Worker.Locked != 2 {
		t.Fatalf("worker stats = %+v, want tags %+v", qs.Worker, want)
	}
}
