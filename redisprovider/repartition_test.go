package redisprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// repartRuntime registers the fixture's orchestrations and activities on a runtime over p: any
// tag (the fixture's runtime) or untagged only (its "gpu" activities then stay queued).
func repartRuntime(p *redisprovider.Provider, anyTag bool) *dx.Runtime {
	opts := dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger,
		SessionLockTimeout: time.Second, SessionLockRenewalBuffer: 300 * time.Millisecond}
	if anyTag {
		opts.WorkerTagFilter = provider.TagFilterAny()
	}
	rt := dx.NewRuntime(p, opts)
	dx.RegisterActivity(rt, "Greet", func(_ context.Context, s string) (string, error) { return "hello, " + s, nil })
	dx.RegisterActivity(rt, "Heavy", func(_ context.Context, s string) (string, error) { return "heavy " + s, nil })
	dx.Register(rt, "Hello", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Greet", s).Await(ctx)
	})
	// Waiter: custom status, KV, a delayed timer of an hour raced by an event, then a queue message.
	dx.Register(rt, "Waiter", func(ctx dx.Context, s string) (string, error) {
		ctx.SetKV("k", "v-"+s)
		ctx.SetCustomStatus("waiting " + s)
		ev := dx.WaitEvent[string](ctx, "go")
		if dx.Select(ctx, ev, ctx.Timer(time.Hour)) != ev {
			return "", errors.New("timed out")
		}
		a, _ := ev.Await(ctx)
		b, err := dx.Dequeue[string](ctx, "q").Await(ctx)
		return s + ":" + a + ":" + b, err
	})
	// Tagged: an activity only a runtime taking any tag runs.
	dx.Register(rt, "Tagged", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Heavy", s, dx.WithTag("gpu")).Await(ctx)
	})
	// Sess: a session claimed by a first activity, then a tagged one queued on it.
	dx.Register(rt, "Sess", func(ctx dx.Context, s string) (string, error) {
		a, err := dx.Call[string](ctx, "Greet", s, dx.OnSession("s-"+s)).Await(ctx)
		if err != nil {
			return "", err
		}
		b, err := dx.Call[string](ctx, "Heavy", s, dx.OnSession("s-"+s), dx.WithTag("gpu")).Await(ctx)
		return a + "|" + b, err
	})
	// Parent: auto-named children (in its partition) and explicitly named ones (elsewhere).
	dx.Register(rt, "Parent", func(ctx dx.Context, n int) (string, error) {
		var futs []dx.Future[string]
		for i := range n {
			futs = append(futs, dx.CallSub[string](ctx, "Waiter", fmt.Sprintf("%s-a%d", ctx.InstanceID(), i)))
			futs = append(futs, dx.CallSub[string](ctx, "Waiter", "x", dx.WithInstanceID(fmt.Sprintf("%s-x%d", ctx.InstanceID(), i))))
		}
		out, err := dx.All(ctx, futs...)
		return strings.Join(out, ","), err
	})
	// Again: KV, then continued as new twice (executions, the KV of earlier ones).
	dx.Register(rt, "Again", func(ctx dx.Context, n int) (int, error) {
		ctx.SetKV(fmt.Sprint("k", n), fmt.Sprint(n))
		if n < 2 {
			return 0, dx.ContinueAsNew(ctx, n+1)
		}
		return n, nil
	})
	// Tree: a finished tree of both kinds of children.
	dx.Register(rt, "Tree", func(ctx dx.Context, n int) (string, error) {
		var futs []dx.Future[string]
		for i := range n {
			futs = append(futs, dx.CallSub[string](ctx, "Hello", fmt.Sprint("auto", i)))
			futs = append(futs, dx.CallSub[string](ctx, "Hello", fmt.Sprint("named", i), dx.WithInstanceID(fmt.Sprintf("%s-n%d", ctx.InstanceID(), i))))
		}
		out, err := dx.All(ctx, futs...)
		return strings.Join(out, ","), err
	})
	return rt
}

// repartWorld fills p's namespace with the fixture (finished hellos and trees; waiters with a
// delayed timer, an event and a queue message queued; queued tagged worker items, one on a
// session; a parent waiting on its children of both kinds) and stops its runtime. It returns the
// instances a runtime completes afterwards (once "go" is raised on the waiters) with their
// outputs.
func repartWorld(t *testing.T, p *redisprovider.Provider, hellos int) map[string]string {
	t.Helper()
	ctx := context.Background()
	rt := repartRuntime(p, false)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := dx.NewClient(p)
	start := func(name, id string, in any) {
		if _, err := c.Start(ctx, name, in, dx.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range hellos {
		start("Hello", fmt.Sprint("hello-", i), fmt.Sprint("n", i))
	}
	start("Tree", "tree", 2)
	start("Again", "again", 0)
	want := map[string]string{"tagged": "heavy t", "sess": "hello, s|heavy s", "parent": ""}
	for i := range 3 {
		id := fmt.Sprint("waiter-", i)
		start("Waiter", id, id)
		want[id] = id + ":go:msg"
	}
	start("Tagged", "tagged", "t")
	start("Sess", "sess", "s")
	start("Sess", crossSession(t), "d") // deleted after the moves (TestRepartition)
	start("Parent", "parent", 2)
	var kids []string
	for i := range 2 {
		a, x := fmt.Sprintf("parent::sub::%d", 2+2*i), fmt.Sprintf("parent-x%d", i)
		kids = append(kids, fmt.Sprintf("parent-a%d:go:msg", i), "x:go:msg")
		want[a], want[x] = "", ""
	}
	want["parent"] = strings.Join(kids, ",")
	waitFor(t, 30*time.Second, "the fixture to settle", func() bool {
		for i := range hellos {
			if st, _ := c.Status(ctx, fmt.Sprint("hello-", i)); st.State != dx.StateCompleted {
				return false
			}
		}
		for _, id := range []string{"tree", "again"} {
			if st, _ := c.Status(ctx, id); st.State != dx.StateCompleted {
				return false
			}
		}
		for id := range want {
			if strings.HasPrefix(id, "waiter-") || strings.HasPrefix(id, "parent-x") || strings.Contains(id, "::sub::") {
				if st, _ := c.Status(ctx, id); st.CustomStatus == nil {
					return false
				}
			}
		}
		d, err := p.GetQueueDepths(ctx)
		return err == nil && d.WorkerQueue == 3 // the tagged item and the sessions' two
	})
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rt.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	// With no runtime: an event and a queue message wait in each waiter's messages.
	for id := range want {
		if strings.HasPrefix(id, "waiter-") {
			if err := c.RaiseEvent(ctx, id, "go", "go"); err != nil {
				t.Fatal(err)
			}
			if err := c.EnqueueEvent(ctx, id, "q", "msg"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The children's outputs are filled from the instance ids the auto-named children got.
	for id := range want {
		if strings.Contains(id, "::sub::") {
			want[id] = fmt.Sprintf("parent-a%d:go:msg", (mustAtoi(t, id[len("parent::sub::"):])-2)/2)
		} else if strings.HasPrefix(id, "parent-x") {
			want[id] = "x:go:msg"
		}
	}
	return want
}

// crossSession is the id of an instance whose session "s-d" lives in another partition than the
// instance at 12 partitions.
func crossSession(t *testing.T) string {
	t.Helper()
	tags, _ := dxredis.PartitionTags("x", 12)
	ks, _ := dxredis.NewKeyspace("x")
	ks, _ = ks.WithTags(tags)
	for i := 0; ; i++ {
		if id := fmt.Sprint("sess-del-", i); ks.PartitionOf(id) != ks.SessionPartition("s-d") {
			return id
		}
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// repartReading is everything the provider API tells of p's namespace (instances with their
// records, executions, histories, KV, custom status, parents and children; counts and queue
// depths), as text: equal readings, the same namespace to every reader.
func repartReading(t *testing.T, p *redisprovider.Provider) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	line := func(v ...any) { fmt.Fprintln(&b, v...) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ids, err := p.ListInstances(ctx)
	must(err)
	slices.Sort(ids)
	for _, id := range ids {
		info, err := p.GetInstanceInfo(ctx, id)
		must(err)
		j, _ := json.Marshal(info)
		line("instance", id, string(j))
		execs, err := p.ListExecutions(ctx, id)
		must(err)
		for _, e := range execs {
			xi, err := p.GetExecutionInfo(ctx, id, e)
			must(err)
			h, err := p.ReadHistoryWithExecutionID(ctx, id, e)
			must(err)
			j, _ := json.Marshal(xi)
			hj, _ := json.Marshal(h)
			line(" execution", e, string(j), string(hj))
		}
		kv, err := p.GetKVAllValues(ctx, id)
		must(err)
		cs, err := p.GetCustomStatus(ctx, id, 0)
		must(err)
		kids, err := p.ListChildren(ctx, id)
		must(err)
		slices.Sort(kids)
		parent, _, err := p.GetParentID(ctx, id)
		must(err)
		csj, _ := json.Marshal(cs)
		line(" kv", fmt.Sprint(kv), "status", string(csj), "parent", parent, "children", kids)
	}
	for _, st := range []string{provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed} {
		l, err := p.ListInstancesByStatus(ctx, st)
		must(err)
		slices.Sort(l)
		line("status", st, l)
	}
	m, err := p.GetSystemMetrics(ctx)
	must(err)
	d, err := p.GetQueueDepths(ctx)
	must(err)
	qs, err := p.GetQueueStats(ctx)
	must(err)
	qs.ServerTime, qs.Orchestrator.OldestVisibleAge, qs.Worker.OldestVisibleAge = time.Time{}, 0, 0
	pend, err := p.ListPendingStarts(ctx, 100)
	must(err)
	line("metrics", fmt.Sprintf("%+v", m), "depths", fmt.Sprintf("%+v", d), "queues", fmt.Sprintf("%+v", qs), "pending", len(pend))
	return b.String()
}

// reopenWith opens a new provider on p's namespace with the given partition count (0: the
// namespace's), closed when the test ends.
func reopenWith(t *testing.T, p *redisprovider.Provider, partitions int) (*redisprovider.Provider, error) {
	t.Helper()
	q, err := redisprovider.NewFromClient(context.Background(), p.Client(), redisprovider.Options{Namespace: p.Keyspace().Namespace(),
		Partitions: partitions, Logger: quietLogger})
	if err == nil {
		t.Cleanup(func() { _ = q.Close() })
	}
	return q, err
}

// repartitionTo runs Migrate to n partitions once the fixture's runtime registrations lapsed and
// returns a provider on the result.
func repartitionTo(t *testing.T, p *redisprovider.Provider, n int) *redisprovider.Provider {
	t.Helper()
	rep, err := migrateWhenIdle(t, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{Partitions: n})
	if err != nil {
		t.Fatalf("migrate to %d partitions: %v", n, err)
	}
	t.Logf("migrate to %d: %+v", n, rep)
	if rep.ToPartitions != n {
		t.Fatalf("migrate to %d partitions: %+v", n, rep)
	}
	q, err := reopenWith(t, p, 0)
	if err != nil {
		t.Fatalf("open after the move to %d partitions: %v", n, err)
	}
	if q.Keyspace().Partitions() != n {
		t.Fatalf("after the move to %d partitions the namespace has %d", n, q.Keyspace().Partitions())
	}
	return q
}

// TestRepartition moves a namespace holding finished and running instances (queued messages, a
// delayed timer, worker items, a session, KV, custom status, trees with children of both kinds)
// from 1 partition to 12, 4, 12, 1 and 12: after each move every reading through the provider API is
// the same and fsck finds nothing; a runtime started at the end completes the running instances
// with the outputs they would have had.
func TestRepartition(t *testing.T) {
	t.Parallel()
	// With retention: finished roots keep their keys for an hour, then expire with their trees.
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1, Retention: time.Hour})
	want := repartWorld(t, p, 8)
	before := repartReading(t, p)
	ttl := p.Client().PTTL(context.Background(), p.Keyspace().Instance("hello-0")).Val()
	if ttl <= 0 {
		t.Fatalf("a finished root's record has no TTL (%v) with retention", ttl)
	}
	t.Log(before[strings.Index(before, "metrics"):])
	cur := p
	for _, n := range []int{12, 4, 12, 1, 12} {
		seq := maxSeq(t, cur)
		cur = repartitionTo(t, cur, n)
		for part := range n {
			if got, _ := cur.Client().HGet(context.Background(), cur.Keyspace().Meta(part), "seq").Uint64(); got < seq {
				t.Fatalf("after the move to %d partitions, partition %d's enqueue sequence is %d, below the %d before", n, part, got, seq)
			}
		}
		if got := repartReading(t, cur); got != before {
			t.Fatalf("after the move to %d partitions the namespace reads differently:\n%s", n, readingDiff(before, got))
		}
		if got := cur.Client().PTTL(context.Background(), cur.Keyspace().Instance("hello-0")).Val(); got <= 0 || got > ttl {
			t.Fatalf("after the move to %d partitions a finished root's record expires in %v, want at most the %v it had", n, got, ttl)
		}
		checkFsck(t, cur)
		if t.Failed() {
			t.FailNow()
		}
	}
	if _, err := reopenWith(t, cur, 4); err == nil {
		t.Fatal("a provider of 4 partitions opens the namespace moved to 12")
	}
	// An instance deleted after the moves takes its session's item along (the worker index of its
	// partition notes where the item went).
	ctx := context.Background()
	if _, err := cur.DeleteInstance(ctx, crossSession(t), true); err != nil {
		t.Fatal(err)
	}
	if err := cur.ForwardAll(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := cur.GetQueueDepths(ctx); err != nil || d.WorkerQueue != 2 {
		t.Fatalf("after deleting an instance with a queued session item: %+v %v, want 2 worker items left", d, err)
	}
	finishWorld(t, cur, want)
	// Every tree settled: each parent counts no unsettled child (retention's bookkeeping, kept
	// across partitions by the pp and chx keys the move rebuilt).
	ids, err := cur.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if open := cur.Client().HGet(ctx, cur.Keyspace().Instance(id), "open").Val(); open != "" && open != "0" {
			t.Errorf("%s counts %s unsettled children after its tree finished", id, open)
		}
	}
}

// maxSeq is the greatest enqueue sequence number of p's partitions.
func maxSeq(t *testing.T, p *redisprovider.Provider) uint64 {
	t.Helper()
	var m uint64
	for part := range p.Keyspace().Partitions() {
		n, err := p.Client().HGet(context.Background(), p.Keyspace().Meta(part), "seq").Uint64()
		if err != nil {
			t.Fatal(err)
		}
		m = max(m, n)
	}
	return m
}

// finishWorld runs the fixture's instances to their end on p's namespace and checks their
// outputs.
func finishWorld(t *testing.T, p *redisprovider.Provider, want map[string]string) {
	t.Helper()
	ctx := context.Background()
	rt := repartRuntime(p, true)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(sctx)
	}()
	c := dx.NewClient(p)
	for id := range want {
		if strings.HasPrefix(id, "parent-x") || strings.Contains(id, "::sub::") {
			if err := c.RaiseEvent(ctx, id, "go", "go"); err != nil {
				t.Fatal(err)
			}
			if err := c.EnqueueEvent(ctx, id, "q", "msg"); err != nil {
				t.Fatal(err)
			}
		}
	}
	for id, out := range want {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		st, err := c.Wait(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("wait %s: %v", id, err)
		}
		var got string
		_ = json.Unmarshal([]byte(st.Output), &got)
		if st.State != dx.StateCompleted || got != out {
			t.Errorf("%s: %s %q (%v), want Completed %q", id, st.State, got, st.Err, out)
		}
	}
}

// readingDiff shows the first lines where two readings differ.
func readingDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n before %.600s\n after  %.600s", i+1, x, y)
		}
	}
	return "(same lines)"
}

// cloneNamespace copies p's namespace (every key, its value and TTL) to a new namespace of the
// same partition count, on the same server, and opens a provider on the copy (dropped when the
// test ends): a fixture made once serves many runs.
func cloneNamespace(t *testing.T, p *redisprovider.Provider) *redisprovider.Provider {
	t.Helper()
	ctx := context.Background()
	src := p.Keyspace()
	ns := "t-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	dst, err := dxredis.PartitionTags(ns, src.Partitions())
	if err != nil {
		t.Fatal(err)
	}
	tagOf := map[string]string{src.Namespace() + ":0": ns + ":0"}
	for i, tag := range src.Tags() {
		tagOf[tag] = dst[i]
	}
	braced := func(tags ...string) string { return "{" + strings.Join(tags, "} {") + "}" }
	c := p.Client()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, n redis.Cmdable) error {
		iter := n.Scan(ctx, 0, "{"+src.Namespace()+":*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		end := strings.Index(k, "}:")
		tag, ok := tagOf[k[1:end]]
		if !ok {
			continue
		}
		nk, rest := "{"+tag+"}:"+k[end+2:], k[end+2:]
		ttl := c.PTTL(ctx, k).Val()
		switch typ := c.Type(ctx, k).Val(); typ {
		case "string":
			c.Set(ctx, nk, c.Get(ctx, k).Val(), 0)
		case "hash":
			h := c.HGetAll(ctx, k).Val()
			if rest == "meta" && tag == ns+":0" {
				h["tags"] = braced(dst...) // the root record (with one partition, partition 0's)
			} else if rest == "meta" {
				h["tags"] = braced(tag)
			}
			for f, v := range h {
				c.HSet(ctx, nk, f, v)
			}
		case "set":
			for _, m := range c.SMembers(ctx, k).Val() {
				c.SAdd(ctx, nk, m)
			}
		case "zset":
			c.ZAdd(ctx, nk, c.ZRangeWithScores(ctx, k, 0, -1).Val()...)
		case "list":
			for _, m := range c.LRange(ctx, k, 0, -1).Val() {
				c.RPush(ctx, nk, m)
			}
		default:
			continue
		}
		if ttl > 0 {
			c.PExpire(ctx, nk, ttl)
		}
	}
	q, err := redisprovider.NewFromClient(ctx, c, redisprovider.Options{Namespace: ns, Logger: quietLogger})
	if err != nil {
		t.Fatalf("open the copy of %s: %v", src.Namespace(), err)
	}
	t.Cleanup(func() {
		if backend() != "miniredis" {
			_, _ = redisprovider.DropNamespace(context.Background(), c, ns)
		}
		_ = q.Close()
	})
	return q
}

// layoutOf is every key of p's namespace, its partition's tag replaced by the partition's index
// (R for the root record's), with its value (hashes and sets sorted, sorted sets with scores),
// without the format records' tags: equal layouts, one namespace stored alike.
func layoutOf(t *testing.T, p *redisprovider.Provider) string {
	t.Helper()
	ctx := context.Background()
	ks := p.Keyspace()
	name := map[string]string{"{" + ks.Namespace() + ":0}:": "R:"}
	for part := range ks.Partitions() {
		name[ks.Prefix(part)] = strconv.Itoa(part) + ":"
	}
	c := p.Client()
	var mu sync.Mutex
	var lines []string
	scan := func(ctx context.Context, n redis.Cmdable) error {
		iter := n.Scan(ctx, 0, "{"+ks.Namespace()+":*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			end := strings.Index(k, "}:") + 2
			var v string
			switch c.Type(ctx, k).Val() {
			case "string":
				v = c.Get(ctx, k).Val()
			case "hash":
				h := c.HGetAll(ctx, k).Val()
				if k[end:] == "meta" {
					delete(h, "tags")
				}
				v = fmt.Sprint(h)
			case "set":
				m := c.SMembers(ctx, k).Val()
				slices.Sort(m)
				v = fmt.Sprint(m)
			case "zset":
				v = fmt.Sprint(c.ZRangeWithScores(ctx, k, 0, -1).Val())
			case "list":
				v = fmt.Sprint(c.LRange(ctx, k, 0, -1).Val())
			}
			mu.Lock()
			lines = append(lines, name[k[:end]]+k[end:]+" = "+v)
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestRepartitionStoppedAfterEachStep: a move stopped after any of its steps (as a crash there
// would leave it) refuses every provider, and a second run ends where an uninterrupted move does
// (the same keys and values, fsck clean):
// from 1 partition to 3, and from 3 to 2 (partitions split and merged).
func TestRepartitionStoppedAfterEachStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
	repartWorld(t, p, 1)
	src := p
	for _, n := range []int{3, 2} {
		ref := repartitionTo(t, cloneNamespace(t, src), n) // (waits for the runtime's registrations to lapse)
		want := layoutOf(t, ref)
		steps := 0
		for stop := 1; ; stop++ {
			q := cloneNamespace(t, src)
			ns := q.Keyspace().Namespace()
			o := redisprovider.MigrateStoppingAfter(stop)
			o.Partitions = n
			_, err := redisprovider.Migrate(ctx, q.Client(), ns, o)
			if err == nil {
				steps = stop - 1
				break
			}
			if !errors.Is(err, redisprovider.ErrMigrateStopped) {
				t.Fatalf("%d -> %d, stop after %d steps: %v", src.Keyspace().Partitions(), n, stop, err)
			}
			for _, count := range []int{0, src.Keyspace().Partitions(), n} {
				var fe *redisprovider.FormatError
				if r, err := reopenWith(t, q, count); !errors.As(err, &fe) || !fe.Migrating {
					t.Fatalf("%d -> %d, stopped after %d steps: New with %d partitions: %v, want a FormatError (being re-partitioned)", src.Keyspace().Partitions(), n, stop, count, err)
				} else if r != nil {
					t.Fatalf("a provider opens the namespace (%d partitions)", r.Keyspace().Partitions())
				}
			}
			if _, err := redisprovider.Migrate(ctx, q.Client(), ns, redisprovider.MigrateOptions{Partitions: n}); err != nil {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: %v", src.Keyspace().Partitions(), n, stop, err)
			}
			r, err := reopenWith(t, q, n)
			if err != nil {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: open: %v", src.Keyspace().Partitions(), n, stop, err)
			}
			if got := layoutOf(t, r); got != want {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: the namespace reads differently:\n%s", src.Keyspace().Partitions(), n, stop, readingDiff(want, got))
			}
			checkFsck(t, r)
			if t.Failed() {
				t.FailNow()
			}
			if _, err := redisprovider.DropNamespace(ctx, q.Client(), ns); err != nil { // (SCANs stay short)
				t.Fatal(err)
			}
		}
		t.Logf("%d -> %d partitions: %d steps, each stopped after and run again", src.Keyspace().Partitions(), n, steps)
		if steps < 10 {
			t.Fatalf("%d -> %d partitions took %d steps: want the plan, marks, copies, deletes and records", src.Keyspace().Partitions(), n, steps)
		}
		src = ref
	}
}

// ks is a keyspace of n partitions (placement only depends on the count).
func ks(n int) dxredis.Keyspace {
	tags, _ := dxredis.PartitionTags("x", n)
	k, _ := dxredis.NewKeyspace("x")
	k, _ = k.WithTags(tags)
	return k
}

// TestRepartitionRefused: Migrate refuses to re-partition (and writes nothing) while a turn is
// locked, while an outbox holds entries it cannot forward, when two worker items of one id would
// meet in a partition, and when the namespace holds a key of no kind it knows; a bad count is
// invalid input, as is another count than the one a re-partitioning under way moves to.
func TestRepartitionRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refused := func(t *testing.T, p *redisprovider.Provider, n int, want error) {
		t.Helper()
		before := namespaceDigest(t, p)
		_, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{Partitions: n})
		if !errors.Is(err, want) {
			t.Fatalf("migrate to %d partitions: %v, want %v", n, err, want)
		}
		if after := namespaceDigest(t, p); after != before {
			t.Fatalf("a refused migrate to %d partitions wrote:\n%s", n, readingDiff(before, after))
		}
	}
	t.Run("locked", func(t *testing.T) {
		p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
		layoutEnqueue(t, p, layoutStart("a"), layoutStart("b"))
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %v %v", it, err)
		}
		refused(t, p, 12, redisprovider.ErrNamespaceBusy)
		if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("outbox", func(t *testing.T) {
		p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
		skipFsck(t) // an outbox for a partition the namespace does not have
		layoutEnqueue(t, p, layoutStart("a"))
		pre := p.Keyspace().Prefix(3)
		p.Client().RPush(ctx, pre+"ob:99", "1 o 1:a2:{}1:O1:0")
		p.Client().HSet(ctx, pre+"ob:seq", "99", "1")
		p.Client().ZAdd(ctx, pre+"ob:dirty", redis.Z{Score: 1, Member: "99"})
		refused(t, p, 4, redisprovider.ErrNamespaceBusy)
	})
	t.Run("items", func(t *testing.T) {
		p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
		skipFsck(t) // hand-made items
		layoutEnqueue(t, p, layoutStart("a"))
		// Two instances of different partitions at 12 and of one at 4, each with an item "a5".
		var a, b string
		for i := 0; b == ""; i++ {
			id := fmt.Sprint("i-", i)
			switch {
			case a == "":
				a = id
			case ks(12).PartitionOf(id) != ks(12).PartitionOf(a) && ks(4).PartitionOf(id) == ks(4).PartitionOf(a):
				b = id
			}
		}
		for _, id := range []string{a, b} {
			p.Client().HSet(ctx, p.Keyspace().Prefix(p.Keyspace().PartitionOf(id))+"wq:m:a5", "j", "{}", "i", id, "e", "1", "a", "1", "s", "", "t", "-", "n", "0", "c", "1")
		}
		refused(t, p, 4, provider.ErrInvalidInput)
	})
	t.Run("unknown key", func(t *testing.T) {
		p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
		layoutEnqueue(t, p, layoutStart("a"))
		p.Client().Set(ctx, p.Keyspace().Prefix(0)+"zz:what", "?", 0)
		refused(t, p, 3, provider.ErrInvalidInput)
		p.Client().Del(ctx, p.Keyspace().Prefix(0)+"zz:what")
	})
	t.Run("counts", func(t *testing.T) {
		p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
		layoutEnqueue(t, p, layoutStart("a"))
		for _, n := range []int{-1, 257} {
			refused(t, p, n, provider.ErrInvalidInput)
		}
		o := redisprovider.MigrateStoppingAfter(2)
		o.Partitions = 3
		if _, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), o); !errors.Is(err, redisprovider.ErrMigrateStopped) {
			t.Fatal(err)
		}
		refused(t, p, 4, provider.ErrInvalidInput) // 3 is under way
		if _, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{}); err != nil {
			t.Fatalf("migrate with no count finishes the move under way: %v", err)
		}
		if q, err := reopenWith(t, p, 0); err != nil || q.Keyspace().Partitions() != 3 {
			t.Fatalf("after the move: %v", err)
		}
	})
}

// TestRepartitionRefusesStaleProviders: a provider opened before the move (whose checks of the
// format record a Functions library may have kept) is refused by every write from the first step
// on, and after the move for its partition count.
func TestRepartitionRefusesStaleProviders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct{ from, to int }{{1, 12}, {12, 4}} {
		t.Run(fmt.Sprint(c.from, "->", c.to), func(t *testing.T) {
			p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: c.from})
			for i := range 20 { // a write in each partition: each check passed once
				layoutEnqueue(t, p, layoutStart(fmt.Sprint("a", i)))
			}
			// Stopped after the plan, the marks of every partition and one copy (writes before
			// the last mark land before anything moves).
			o := redisprovider.MigrateStoppingAfter(2 + c.from)
			o.Partitions = c.to
			if _, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), o); !errors.Is(err, redisprovider.ErrMigrateStopped) {
				t.Fatal(err)
			}
			var fe *redisprovider.FormatError
			for i := range 20 {
				err := p.EnqueueForOrchestrator(ctx, layoutStart(fmt.Sprint("b", i)), 0)
				if !errors.As(err, &fe) || !fe.Migrating || !strings.Contains(err.Error(), "re-partitioned") {
					t.Fatalf("a write during the move: %v, want a FormatError saying the namespace is being re-partitioned", err)
				}
			}
			if _, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{Partitions: c.to}); err != nil {
				t.Fatal(err)
			}
			var pe *redisprovider.PartitionError
			for i := range 20 {
				if err := p.EnqueueForOrchestrator(ctx, layoutStart(fmt.Sprint("c", i)), 0); !errors.As(err, &pe) {
					t.Fatalf("a write of %d partitions after the move to %d: %v, want a PartitionError", c.from, c.to, err)
				}
			}
		})
	}
}

// TestPartitionStats: GetPartitionStats describes every partition (tag, slot, node, instances,
// queue depths summing to the namespace's, outbox entries left unforwarded with their age, the
// node's load). Not parallel: it stops forwarding.
func TestPartitionStats(t *testing.T) {
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	redisprovider.SetForwardHooks(func(int) bool { return false }, nil)
	t.Cleanup(func() { redisprovider.SetForwardHooks(nil, nil) })
	kids := partTree(t, p, "root", 8) // children started in other partitions: outbox entries
	stats, err := p.GetPartitionStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stats) != 12 {
		t.Fatalf("%d partitions described, want 12", len(stats))
	}
	var inst, orch, outbox uint64
	nodes := map[string]int{}
	for _, s := range stats {
		nodes[s.Node]++
	}
	if backend() == "cluster" {
		primaries := 3 // scripts-dev/redis-cluster.sh's default; DXREDIS_CLUSTER_NODES changes it
		if n, err := strconv.Atoi(os.Getenv("DXREDIS_CLUSTER_NODES")); err == nil && n > 0 {
			primaries = n
		}
		if len(nodes) != primaries || nodes[stats[0].Node] != 12/primaries {
			t.Errorf("12 partitions on a %d-primary cluster served by %v, want %d on each", primaries, nodes, 12/primaries)
		}
	}
	for i, s := range stats {
		if s.NodePartitions != nodes[s.Node] || s.NodeOpsPerSec < 0 {
			t.Errorf("partition %d: node %s serves %d partitions at %d ops/s, counted %d", i, s.Node, s.NodePartitions, s.NodeOpsPerSec, nodes[s.Node])
		}
	}
	for i, s := range stats {
		if s.Partition != i || s.Tag != p.Keyspace().Tags()[i] || s.Slot != dxredis.Slot(p.Keyspace().Meta(i)) || s.Node == "" || s.NodePartitions < 1 {
			t.Errorf("partition %d: %+v", i, s)
		}
		if s.OutboxOldestAge < 0 || s.OutboxOldestAge > time.Minute || s.OutboxEntries == 0 && s.OutboxOldestAge != 0 {
			t.Errorf("partition %d: %d outbox entries of age %v", i, s.OutboxEntries, s.OutboxOldestAge)
		}
		inst, orch, outbox = inst+s.Instances, orch+s.Orchestrator, outbox+s.OutboxEntries
	}
	d, err := p.GetQueueDepths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inst != 1 || orch != d.OrchestratorQueue || outbox != uint64(outboxEntries(t, p)) || outbox == 0 {
		t.Fatalf("instances %d (want 1), orchestrator queue %d (want %d), outbox entries %d (want %d, not 0)", inst, orch, d.OrchestratorQueue, outbox, outboxEntries(t, p))
	}
	waitFor(t, 10*time.Second, "the outbox entries to age", func() bool {
		stats, err := p.GetPartitionStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stats {
			if s.OutboxEntries > 0 && s.OutboxOldestAge > 0 {
				return true
			}
		}
		return false
	})
	redisprovider.SetForwardHooks(nil, nil)
	if err := p.ForwardAll(ctx); err != nil {
		t.Fatal(err)
	}
	finishKids(t, p, "root", kids)
}
