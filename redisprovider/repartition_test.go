package redisprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
func repartWorld(t *testing.T, p *redisprovider.Provider) map[string]string {
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
	for i := range 8 {
		start("Hello", fmt.Sprint("hello-", i), fmt.Sprint("n", i))
	}
	start("Tree", "tree", 2)
	want := map[string]string{"tagged": "heavy t", "sess": "hello, s|heavy s", "parent": ""}
	for i := range 3 {
		id := fmt.Sprint("waiter-", i)
		start("Waiter", id, id)
		want[id] = id + ":go:msg"
	}
	start("Tagged", "tagged", "t")
	start("Sess", "sess", "s")
	start("Parent", "parent", 2)
	var kids []string
	for i := range 2 {
		a, x := fmt.Sprintf("parent::sub::%d", 2+2*i), fmt.Sprintf("parent-x%d", i)
		kids = append(kids, fmt.Sprintf("parent-a%d:go:msg", i), "x:go:msg")
		want[a], want[x] = "", ""
	}
	want["parent"] = strings.Join(kids, ",")
	waitFor(t, 30*time.Second, "the fixture to settle", func() bool {
		for i := range 8 {
			if st, _ := c.Status(ctx, fmt.Sprint("hello-", i)); st.State != dx.StateCompleted {
				return false
			}
		}
		if st, _ := c.Status(ctx, "tree"); st.State != dx.StateCompleted {
			return false
		}
		for id := range want {
			if strings.HasPrefix(id, "waiter-") || strings.HasPrefix(id, "parent-x") || strings.Contains(id, "::sub::") {
				if st, _ := c.Status(ctx, id); st.CustomStatus == nil {
					return false
				}
			}
		}
		d, err := p.GetQueueDepths(ctx)
		return err == nil && d.WorkerQueue == 2 // the tagged item and the session's
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
// from 1 partition to 12, 4, 12 and 1: after each move every reading through the provider API is
// the same and fsck finds nothing; a runtime started at the end completes the running instances
// with the outputs they would have had.
func TestRepartition(t *testing.T) {
	t.Parallel()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
	want := repartWorld(t, p)
	before := repartReading(t, p)
	t.Log(before[strings.Index(before, "metrics"):])
	cur := p
	for _, n := range []int{12, 4, 12, 1} {
		cur = repartitionTo(t, cur, n)
		if got := repartReading(t, cur); got != before {
			t.Fatalf("after the move to %d partitions the namespace reads differently:\n%s", n, readingDiff(before, got))
		}
		checkFsck(t, cur)
		if t.Failed() {
			t.FailNow()
		}
	}
	if _, err := reopenWith(t, cur, 12); err == nil {
		t.Fatal("a provider of 12 partitions opens the namespace moved to 1")
	}
	finishWorld(t, cur, want)
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

// TestRepartitionStoppedAfterEachStep: a move stopped after any of its steps (as a crash there
// would leave it) refuses every provider, and a second run ends where an uninterrupted move does:
// from 1 partition to 3, and from 3 to 2 (partitions split and merged).
func TestRepartitionStoppedAfterEachStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 1})
	repartWorld(t, p)
	src := p
	for _, n := range []int{3, 2} {
		ref := repartitionTo(t, cloneNamespace(t, src), n) // (waits for the runtime's registrations to lapse)
		want := repartReading(t, ref)
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
			if r, err := reopenWith(t, q, 0); err == nil {
				t.Fatalf("%d -> %d, stopped after %d steps: a provider opens the namespace (%d partitions)", src.Keyspace().Partitions(), n, stop, r.Keyspace().Partitions())
			}
			if _, err := redisprovider.Migrate(ctx, q.Client(), ns, redisprovider.MigrateOptions{Partitions: n}); err != nil {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: %v", src.Keyspace().Partitions(), n, stop, err)
			}
			r, err := reopenWith(t, q, n)
			if err != nil {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: open: %v", src.Keyspace().Partitions(), n, stop, err)
			}
			if got := repartReading(t, r); got != want {
				t.Fatalf("%d -> %d, stopped after %d steps, then migrate: the namespace reads differently:\n%s", src.Keyspace().Partitions(), n, stop, readingDiff(want, got))
			}
			checkFsck(t, r)
			if t.Failed() {
				t.FailNow()
			}
		}
		t.Logf("%d -> %d partitions: %d steps, each stopped after and run again", src.Keyspace().Partitions(), n, steps)
		if steps < 10 {
			t.Fatalf("%d -> %d partitions took %d steps: want the plan, marks, copies, deletes and records", src.Keyspace().Partitions(), n, steps)
		}
		src = ref
	}
}
