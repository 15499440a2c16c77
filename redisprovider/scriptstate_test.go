package redisprovider_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Under FUNCTION the library keeps the keys it derived from the last call's prefix: calls of two
// namespaces on one server, interleaved, must each see only their own keys.
func TestInterleavedNamespacesKeepTheirKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := newTestProvider(t), newTestProvider(t) // on Redis: one server, two namespaces
	ns := map[*redisprovider.Provider]string{a: "a", b: "b"}
	for i := 0; i < 3; i++ {
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			layoutEnqueue(t, p, layoutStart(id))
		}
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
			if err != nil || it == nil || it.Item.Instance != id {
				t.Fatalf("fetch of %s: %+v, %v", id, it, err)
			}
			if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, false); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []*redisprovider.Provider{a, b} {
			id := fmt.Sprintf("%s%d", ns[p], i)
			if err := layoutTurn(t, p, id, 1, []provider.Event{
				layoutStarted(id, 1),
			}, layoutRunning()); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []*redisprovider.Provider{a, b} {
		for other, name := range ns {
			for i := 0; i < 3; i++ {
				id := fmt.Sprintf("%s%d", name, i)
				got := p.Client().Exists(ctx, p.Keyspace().Instance(id)).Val() == 1
				if want := other == p; got != want {
					t.Errorf("namespace %s: instance %s present %v, want %v", ns[p], id, got, want)
				}
			}
		}
		if it, _ := p.FetchOrchestrationItem(ctx, time.Second, 0, nil); it != nil {
			t.Errorf("namespace %s: an item left: %+v", ns[p], it.Item)
		}
	}
}

// A worker item alone in its activity's instance-index entry drops the entry when acked, without
// reading it; an activity queued twice keeps the entry of the item not acked, so that cancelling
// the activity still finds it.
func TestWorkerActivityIndexAfterAck(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := t.Context()
	ks := p.Keyspace()
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""), wAct("i", 2, "", ""))
	for range 2 { // activity 1, then the first item of activity 2 (FIFO)
		it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly())
		if err := p.AckWorkItem(ctx, it.LockToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	fields, err := p.Client().HKeys(ctx, ks.WorkInstance("i")).Result()
	if err != nil || len(fields) != 1 || fields[0] != "1:2" {
		t.Fatalf("instance index after two acks: %v, %v; want only 1:2", fields, err)
	}
	if n := wEval(t, p, `return wq_cancel(ARGV[2], ARGV[3], ARGV[4])`, "i", 1, 2).(int64); n != 1 {
		t.Fatalf("cancel of the activity queued twice deleted %d items, want 1", n)
	}
	if it := wFetch(t, p, wLongLock, nil, provider.TagFilterDefaultOnly()); it != nil {
		t.Fatalf("an item survived its cancellation: %+v", it)
	}
	wNoQueueKeys(t, p)
}

// An append outside a turn that adds an execution under a fetch's lock makes the lock's note of
// the current execution stale: the ack must see the appended execution (here its event id 1).
func TestAppendUnderLockThenAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	const id = "appended"
	layoutEnqueue(t, p, layoutStart(id))
	it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v, %v", it, err)
	}
	started := layoutStarted(id, 1)
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{started}); err != nil {
		t.Fatal(err)
	}
	err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started},
		Metadata: layoutRunning()})
	if err == nil {
		t.Fatal("an ack repeating an event id appended under its lock was accepted")
	}
	events, err := p.ReadWithExecution(ctx, id, 1)
	if err != nil || len(events) != 1 {
		t.Fatalf("history: %d events, %v; want the appended one", len(events), err)
	}
}

// A fetch writes no attempt count (an ack deletes the messages anyway): a lock that expires
// counts its delivery when it is reclaimed, an abandon unless it ignores the attempt. A message
// that arrived during the lock was not delivered by it.
func TestOrchestrationAttemptsCountedWhenTheLockEnds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	const id = "attempts"
	layoutEnqueue(t, p, layoutStart(id))
	fetch := func(want uint32, lock time.Duration) *provider.LockedOrchestrationItem {
		t.Helper()
		var it *provider.LockedOrchestrationItem
		var err error
		deadline := time.Now().Add(10 * time.Second)
		for it == nil && err == nil && time.Now().Before(deadline) {
			if it, err = p.FetchOrchestrationItem(ctx, lock, 0, nil); it == nil && err == nil {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if err != nil || it == nil || it.AttemptCount != want {
			t.Fatalf("fetch: %+v, %v; want attempt %d", it, err, want)
		}
		return it
	}
	fetch(1, 100*time.Millisecond) // expires unacked
	fetch(2, 100*time.Millisecond) // expires too
	layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}})
	it := fetch(3, time.Minute) // the start's third delivery, the event's first
	if len(it.Item.Messages) != 2 {
		t.Fatalf("batch of %d messages, want 2", len(it.Item.Messages))
	}
	if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true); err != nil {
		t.Fatal(err)
	}
	it = fetch(3, time.Minute) // ignored: still the third
	if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, false); err != nil {
		t.Fatal(err)
	}
	fetch(4, time.Minute)
}

// A session-aware fetch takes plain items with one command while no session has items, and
// still finds session items, in FIFO order with the plain ones, once some exist.
func TestWorkerSessionAwareFetchOrder(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	owner := wSess("A", time.Minute)
	wEnqueue(t, p, wAct("i", 1, "", ""), wAct("i", 2, "", ""))
	wWantIDs(t, "no session items", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 1, 2)
	wEnqueue(t, p, wAct("i", 3, "", ""), wAct("i", 4, "", "s"), wAct("i", 5, "", ""))
	wWantIDs(t, "a session item between plain ones", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 3, 4, 5)
	wEnqueue(t, p, wAct("i", 6, "", "s"))
	wWantIDs(t, "a session-less fetcher", wDrain(t, p, nil, provider.TagFilterDefaultOnly()))
	wWantIDs(t, "the session's owner", wDrain(t, p, owner, provider.TagFilterDefaultOnly()), 6)
}

// An ack's worker items are enqueued in one batch (wq_enqueue_many): the keys it leaves must be
// exactly those of one wq_enqueue per item, in order, for every case the batch treats apart:
// activities new to the index, one already queued (its item loses its alone mark), one scheduled
// twice in the batch, tags, a session, a second instance, and a waiting fetcher to wake; and for a
// batch larger than one command's chunk of arguments.
func TestWorkerBatchEnqueueMatchesOneByOne(t *testing.T) {
	onePartitionOnly(t, "compares item keys named by sequence numbers, which are a clock with several partitions")
	t.Parallel()
	mixed := [][6]string{ // json, instance, execution, activity id, session, tag
		{`{"a":1}`, "i", "1", "1", "", ""},
		{`{"a":2}`, "i", "1", "2", "", ""},
		{`{"a":3}`, "i", "1", "3", "", ""}, // queued before the batch too
		{`{"a":2}`, "i", "1", "2", "", ""}, // twice in the batch
		{`{"a":4}`, "i", "1", "4", "", "gpu"},
		{`{"a":5}`, "i", "1", "5", "s1", ""},
		{`{"a":6}`, "i", "1", "6", "", "gpu"},
		{`{"a":1}`, "j", "2", "1", "", ""},
	}
	var large [][6]string
	for i := range 1200 { // activities 1-1100, the first 100 of them twice
		large = append(large, [6]string{fmt.Sprintf(`{"a":%d}`, i), "i", "1", fmt.Sprint(i%1100 + 1), "", ""})
	}
	for name, items := range map[string][][6]string{"mixed": mixed, "1200 items": large} {
		t.Run(name, func(t *testing.T) { batchMatchesOneByOne(t, items) })
	}
}

func batchMatchesOneByOne(t *testing.T, items [][6]string) {
	var args []any
	args = append(args, len(items))
	for _, it := range items {
		for _, v := range it {
			args = append(args, v)
		}
	}
	const prepare = `
local items = {}
for i = 0, tonumber(ARGV[2]) - 1 do
  local b = 3 + 6 * i
  items[#items + 1] = { ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5] }
end
WQ.register_waiter({ '-', '*' }, '', 60000)
wq_enqueue(1000, '{"a":0}', 'i', '1', '3', '', '')
`
	// The wake lists expire after 5 s, which a loaded machine can take to read 1200 keys: the
	// script keeps them (their expiry is wake's, not the batch's) so both runs read the same keys.
	const persistWakes = ` for _, k in ipairs(redis.call('KEYS', P .. 'wq:wake:*')) do redis.call('PERSIST', k) end return 1`
	dumps := map[string]map[string]string{}
	for name, body := range map[string]string{
		"batch":      prepare + `wq_enqueue_many(2000, ARGV, 2, #items)` + persistWakes, // a section read in place at ARGV[2]
		"one by one": prepare + `for _, w in ipairs(items) do wq_enqueue(2000, w[1], w[2], w[3], w[4], w[5], w[6]) end` + persistWakes,
	} {
		p := newTestProvider(t)
		wEval(t, p, body, args...)
		dumps[name] = wDump(t, p)
		delete(dumps[name], "meta") // names its namespace (tags)
	}
	if len(dumps["batch"]) < len(items) {
		t.Fatalf("the batch left only %d keys", len(dumps["batch"]))
	}
	for k, v := range dumps["one by one"] {
		if got, ok := dumps["batch"][k]; !ok || got != v {
			t.Errorf("%s: batch %.300q, one by one %.300q", k, got, v)
		}
	}
	for k, v := range dumps["batch"] {
		if _, ok := dumps["one by one"][k]; !ok {
			t.Errorf("%s: only in the batch: %.300q", k, v)
		}
	}
}

// wDump reads every key of the namespace (prefix stripped) as text: its type, content (hashes
// and sets sorted) and whether it expires.
func wDump(t *testing.T, p *redisprovider.Provider) map[string]string {
	t.Helper()
	ctx, c, prefix := t.Context(), p.Client(), p.Keyspace().Prefix(0)
	out := map[string]string{}
	for _, k := range wKeys(t, p) {
		key := prefix + k
		var v any
		var err error
		switch typ := c.Type(ctx, key).Val(); typ {
		case "string":
			v, err = c.Get(ctx, key).Result()
		case "hash":
			var h map[string]string
			h, err = c.HGetAll(ctx, key).Result()
			v = fmt.Sprint(h) // fmt prints maps sorted by key
		case "zset":
			v, err = c.ZRangeWithScores(ctx, key, 0, -1).Result()
		case "list":
			v, err = c.LRange(ctx, key, 0, -1).Result()
		case "set":
			var m []string
			m, err = c.SMembers(ctx, key).Result()
			slices.Sort(m)
			v = m
		default:
			t.Fatalf("%s: type %s", k, typ)
		}
		if err != nil {
			t.Fatal(err)
		}
		if k == "wq:waiting" { // scored by the time of the call
			v, err = c.ZRange(ctx, key, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
		}
		out[k] = fmt.Sprintf("%v expires=%v", v, c.PTTL(ctx, key).Val() > 0)
	}
	return out
}
