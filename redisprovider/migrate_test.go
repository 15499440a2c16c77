package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// Migrate on a hand-made format-1 namespace (the keys format 2 changes; format1_test.go runs the
// format-1 code itself): refused while a lock or a waiting fetcher is live; then the sequence,
// the gates and the orphan index move, the format record is written and the namespace opens;
// a migration stopped after its first step is finished by the next run; a format-2 or empty
// namespace is left alone.
func TestMigrateFormat1Keys(t *testing.T) {
	onePartitionOnly(t, "format-1 data has one partition")
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	c, ns, prefix := p.Client(), p.Keyspace().Namespace(), p.Keyspace().Prefix(0)

	rep, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || rep.From != 0 || len(rep.Steps) != 0 || len(namespaceKeys(t, p)) != 0 {
		t.Fatalf("empty namespace: %+v %v, keys %q: want nothing done", rep, err, namespaceKeys(t, p))
	}
	now := time.Now().UnixMilli()
	c.Set(ctx, prefix+"seq", "41", 0)
	c.Set(ctx, prefix+"oq:next", "99999999999999", 0)
	c.Set(ctx, prefix+"wq:next", strconv.FormatInt(now, 10), 0)
	c.ZAdd(ctx, prefix+"oq:orphans", redis.Z{Score: float64(now + 3600_000), Member: "orphan"})
	c.Set(ctx, prefix+"chores", strconv.FormatInt(now+3600_000, 10), 0) // as format 1 parks it (fsck: chores_late)
	c.ZAdd(ctx, prefix+"oq:locked", redis.Z{Score: float64(now + 60_000), Member: "busy"})
	// Format 1's messages: bodies and type codes (none for 'O') in q:<id>, visible times in qz:<id>.
	c.HSet(ctx, prefix+"q:msgs", "m5", `{"x":1}`, "t5", "S", "m6", `{"x":2}`, "a6", "1")
	c.ZAdd(ctx, prefix+"qz:msgs", redis.Z{Score: float64(now), Member: "5"}, redis.Z{Score: float64(now + 5000), Member: "6"})
	before := namespaceKeys(t, p)
	_, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if !errors.Is(err, redisprovider.ErrNamespaceBusy) {
		t.Fatalf("migrate with a live lock: %v, want ErrNamespaceBusy", err)
	}
	if after := namespaceKeys(t, p); len(after) != len(before) || c.Type(ctx, prefix+"seq").Val() != "string" {
		t.Fatalf("refused migrate changed keys: %q -> %q", before, after)
	}
	c.ZAdd(ctx, prefix+"oq:locked", redis.Z{Score: float64(now - 1), Member: "busy"}) // the lock expired: format 2 reclaims it
	c.ZAdd(ctx, prefix+"wake:filters", redis.Z{Score: float64(now + 60_000), Member: "*"})
	if _, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{}); !errors.Is(err, redisprovider.ErrNamespaceBusy) {
		t.Fatalf("migrate with a waiting fetcher: %v, want ErrNamespaceBusy", err)
	}
	c.Del(ctx, prefix+"wake:filters")

	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{Partitions: 1})
	if err != nil || rep.From != 1 || rep.To != dxredis.Format || len(rep.Steps) != 3 {
		t.Fatalf("migrate: %+v %v", rep, err)
	}
	meta := c.HGetAll(ctx, p.Keyspace().Meta(0)).Val()
	if meta["format"] != "2" || meta["seq"] != "41" || meta["migrating"] != "" {
		t.Fatalf("format record after migrate: %v", meta)
	}
	msgs := c.HGetAll(ctx, prefix+"q:msgs").Val()
	if msgs["t5"] != "S"+strconv.FormatInt(now, 10) || msgs["t6"] != "O"+strconv.FormatInt(now+5000, 10) ||
		msgs["m6"] != `{"x":2}` || msgs["a6"] != "1" || c.Exists(ctx, prefix+"qz:msgs").Val() != 0 {
		t.Fatalf("messages after migrate: %v (qz: %d)", msgs, c.Exists(ctx, prefix+"qz:msgs").Val())
	}
	c.Del(ctx, prefix+"q:msgs") // hand-made: no instance or index holds them
	if c.ZScore(ctx, prefix+"oq:parked", "orphan").Val() != float64(now+3600_000) {
		t.Fatalf("the orphan index did not move to oq:parked")
	}
	for _, k := range dxredis.Format1Keys {
		if typ := c.Type(ctx, prefix+k).Val(); typ != "hash" {
			t.Fatalf("%s is a %s after migrate, want the format-2 hash", k, typ)
		}
	}
	q, err := reopen(p)
	if err != nil {
		t.Fatalf("open after migrate: %v", err)
	}
	_ = q.Close()
	c.ZRem(ctx, prefix+"oq:locked", "busy") // the hand-made lock has no lock hash: not fsck-clean

	// Stopped after its first step: the next run finishes it.
	c.HSet(ctx, p.Keyspace().Meta(0), "migrating", "2")
	c.HDel(ctx, p.Keyspace().Meta(0), "format")
	if _, err := reopen(p); err == nil {
		t.Fatal("a namespace being migrated opened")
	}
	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || len(rep.Steps) != 1 || rep.Steps[0] != "finish" || c.HGet(ctx, p.Keyspace().Meta(0), "format").Val() != "2" {
		t.Fatalf("migrate after a stop: %+v %v", rep, err)
	}
	rep, err = redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{})
	if err != nil || len(rep.Steps) != 0 || rep.From != 2 {
		t.Fatalf("migrate of a format-2 namespace: %+v %v, want nothing done", rep, err)
	}
	if _, err := redisprovider.Migrate(ctx, c, ns, redisprovider.MigrateOptions{Partitions: 257}); !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("migrate to 257 partitions: %v, want invalid input", err)
	}
}

// valueSnapshot reads every key of p's namespace by value (hashes as maps, sorted sets with scores),
// without the format record's tags (they name the namespace).
func valueSnapshot(t *testing.T, p *redisprovider.Provider) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, prefix := p.Client(), p.Keyspace().Prefix(0)
	out := map[string]string{}
	for _, k := range namespaceKeys(t, p) {
		key := prefix + k
		switch typ := c.Type(ctx, key).Val(); typ {
		case "hash":
			m := c.HGetAll(ctx, key).Val()
			if k == "meta" {
				delete(m, "tags")
			}
			out[k] = fmt.Sprint(m)
		case "zset":
			out[k] = fmt.Sprint(c.ZRangeWithScores(ctx, key, 0, -1).Val())
		case "string":
			out[k] = c.Get(ctx, key).Val()
		default:
			out[k] = typ
		}
	}
	return out
}

// A migration stopped after any of its steps (a kill: each step is atomic) and run again ends
// exactly where an uninterrupted one does.
func TestMigrateResumesAfterAStop(t *testing.T) {
	onePartitionOnly(t, "format-1 data has one partition")
	t.Parallel()
	ctx := context.Background()
	now := time.Now().UnixMilli()
	format1 := func(p *redisprovider.Provider) map[string]string {
		c, prefix := p.Client(), p.Keyspace().Prefix(0)
		c.Set(ctx, prefix+"seq", "900", 0)
		c.Set(ctx, prefix+"oq:next", "99999999999999", 0)
		c.ZAdd(ctx, prefix+"oq:orphans", redis.Z{Score: float64(now + 3600_000), Member: "i-0"})
		for i := range 450 { // three batches of the messages step
			id := fmt.Sprintf("i-%d", i)
			c.HSet(ctx, prefix+"q:"+id, "m1", `{"x":1}`, "t1", "Q", "m2", `{"x":2}`)
			c.ZAdd(ctx, prefix+"qz:"+id, redis.Z{Score: float64(now), Member: "1"}, redis.Z{Score: float64(now + int64(i)), Member: "2"})
		}
		return writeOldLayouts(t, p, false) // one batch of the records step
	}
	ref := newTestProvider(t)
	skipFsck(t) // hand-made messages without instances or indexes
	reads := format1(ref)
	if _, err := redisprovider.Migrate(ctx, ref.Client(), ref.Keyspace().Namespace(), redisprovider.MigrateOptions{}); err != nil {
		t.Fatal(err)
	}
	for id, w := range reads { // the records in older layouts read as before
		if got := layoutReads(t, ref, id); got != w {
			t.Errorf("%s after migrate:\n got %s\nwant %s", id, got, w)
		}
	}
	want := valueSnapshot(t, ref)
	for n := 1; n <= 5; n++ { // begin, three batches of messages, one of records, finish: 6 steps
		p := newTestProvider(t)
		format1(p)
		_, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateStoppingAfter(n))
		if !errors.Is(err, redisprovider.ErrMigrateStopped) {
			t.Fatalf("stop after %d steps: %v", n, err)
		}
		if _, err := reopen(p); err == nil {
			t.Fatalf("stopped after %d steps: the namespace opens", n)
		}
		if _, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{}); err != nil {
			t.Fatalf("migrate after a stop after %d steps: %v", n, err)
		}
		got := valueSnapshot(t, p)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			for k, v := range want {
				if got[k] != v {
					t.Fatalf("stop after %d steps, then migrate: %s is %.200q, want %.200q", n, k, got[k], v)
				}
			}
			t.Fatalf("stop after %d steps, then migrate: %d keys, want %d", n, len(got), len(want))
		}
	}
}

// migrateWhenIdle runs Migrate (with opts) until it is no longer refused as busy: a format-1
// runtime that stopped cleanly leaves its fetchers' wait registrations until they lapse (a few
// seconds), and migrate refuses while any is live.
func migrateWhenIdle(t *testing.T, client redis.UniversalClient, ns string, opts redisprovider.MigrateOptions) (*redisprovider.MigrateReport, error) {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		rep, err := redisprovider.Migrate(context.Background(), client, ns, opts)
		if !errors.Is(err, redisprovider.ErrNamespaceBusy) || time.Now().After(deadline) {
			return rep, err
		}
		time.Sleep(100 * time.Millisecond) // polling the condition: the registrations lapse by themselves
	}
}

// A namespace written by the format-1 code (commit 563f790: running, waiting on timers, events
// and children, queued and delayed messages, finished with and without retention, continued as
// new, sessions, KV, custom status, parked orphans), migrated with a stop after every step, then
// run to the end by this release: every instance ends with the results and histories the
// format-1 code gives them (format1gen's reference), and fsck finds nothing.
func TestMigrateFormat1Namespace(t *testing.T) {
	onePartitionOnly(t, "format-1 data has one partition")
	t.Parallel()
	old := format1Gen(t)
	cur := currentGen(t)
	addr, ns, client := genNamespace(t)
	m := genPopulate(t, old, addr, ns, 0)
	// The format-1 worker queue holds an item in each state the conversion handles.
	ctx, pre := context.Background(), "{"+ns+":0}:"
	for _, c := range []struct{ what, key string }{
		{"waiting", "wq:ready:5:later"}, {"delayed", "wq:due"}, {"locked, expired", "wq:locked"},
		{"session-bound, waiting", "wq:sitems:5:later:s2"}, {"sessions", "wq:scount"},
	} {
		if n, err := client.Exists(ctx, pre+c.key).Result(); err != nil || n != 1 {
			t.Fatalf("format-1 fixture: no %s worker item (%s): %d %v", c.what, c.key, n, err)
		}
	}
	if n := client.ZCount(ctx, pre+"wq:locked", "-inf", "+inf").Val(); n < 2 {
		t.Fatalf("format-1 fixture: %d locked worker items, want a session-less and a session one", n)
	}
	stops := 0
	for {
		rep, err := migrateWhenIdle(t, client, ns, redisprovider.MigrateStoppingAfter(1))
		if err == nil {
			if rep.From != 1 || rep.To != dxredis.Format {
				t.Fatalf("migrate: %+v", rep)
			}
			break
		}
		if !errors.Is(err, redisprovider.ErrMigrateStopped) {
			t.Fatalf("migrate (after %d stops): %v", stops, err)
		}
		stops++
	}
	if stops < 2 {
		t.Fatalf("the migration took %d steps, want begin, messages and finish at least", stops+1)
	}
	p, err := redisprovider.NewFromClient(context.Background(), client, redisprovider.Options{Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	checkFsck(t, p) // the converted worker items are where format 2 keeps them
	for _, k := range namespaceKeys(t, p) {
		if n, ok := strings.CutPrefix(k, "wq:m:"); ok && strings.Trim(n, "0123456789") == "" ||
			strings.HasPrefix(k, "wq:ready:") || slices.Contains([]string{"wq:due", "wq:locked", "wq:tags"}, k) {
			t.Errorf("format-1 worker key %s left after migrate", k)
		}
	}
	if d := diffResults(format1Reference(t), genFinish(t, cur, addr, ns, m)); d != "" {
		t.Errorf("after migrate, this release's results differ from the format-1 code's:\n%s", d)
	}
}

// Migrate is an administrative run, like dxctl's: it works on a server whose maxmemory-policy
// evicts, which a runtime's New refuses.
func TestMigrateOnAnEvictingServer(t *testing.T) {
	onePartitionOnly(t, "format-1 data has one partition")
	t.Parallel()
	ctx := context.Background()
	mr := withPolicy(t, "allkeys-lru")
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	c.Set(ctx, "{evict:0}:seq", "3", 0) // a format-1 namespace
	rep, err := redisprovider.Migrate(ctx, c, "evict", redisprovider.MigrateOptions{})
	if err != nil || rep.To != dxredis.Format {
		t.Fatalf("migrate on an allkeys-lru server: %+v %v", rep, err)
	}
}
