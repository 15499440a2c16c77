package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dxredis "github.com/duroxide-go/dxredis"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// deepProgram registers the deep check's programs: each leaves something in flight that its
// history determines (an activity tagged "w", which only a runtime with workers for that tag runs;
// one on a session; a timer; a child, auto-named and named).
func deepProgram(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Echo", func(_ context.Context, s string) (string, error) { return "e:" + s, nil })
	dx.Register(rt, "Act", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Echo", s, dx.WithTag("w")).Await(ctx)
	})
	dx.Register(rt, "Sess", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Echo", s, dx.OnSession("s-"+s), dx.WithTag("w")).Await(ctx)
	})
	dx.Register(rt, "Tim", func(ctx dx.Context, s string) (string, error) {
		if _, err := ctx.Timer(3 * time.Second).Await(ctx); err != nil {
			return "", err
		}
		return "t:" + s, nil
	})
	dx.Register(rt, "Par", func(ctx dx.Context, s string) (string, error) {
		return dx.CallSub[string](ctx, "Act", s).Await(ctx)
	})
	dx.Register(rt, "ParNamed", func(ctx dx.Context, s string) (string, error) {
		return dx.CallSub[string](ctx, "Act", s, dx.WithInstanceID("kid-"+s)).Await(ctx)
	})
}

// deepWorld is a namespace whose runtime stopped mid-flight: instances of every program of
// deepProgram, each waiting on what it started.
type deepWorld struct {
	p    *redisprovider.Provider
	c    *dx.Client
	ids  []string          // every started instance, children included
	want map[string]string // instance -> its output when it completes
}

func newDeepWorld(t *testing.T) *deepWorld {
	t.Helper()
	skipFsck(t) // damaged on purpose; the test checks the end itself
	p, _ := newTestProviderWith(t, redisprovider.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := dx.NewRuntime(p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger})
	deepProgram(rt)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	w := &deepWorld{p: p, c: dx.NewClient(p), want: map[string]string{}}
	// what each instance's history shows once it waits
	waits := map[string]string{}
	for i := range 3 {
		s := fmt.Sprint(i)
		for _, name := range []string{"Act", "Sess", "Tim", "Par", "ParNamed"} {
			id := name + "-" + s
			if _, err := w.c.Start(ctx, name, s, dx.WithInstanceID(id)); err != nil {
				t.Fatal(err)
			}
			w.ids = append(w.ids, id)
			switch name {
			case "Tim":
				w.want[id], waits[id] = `"t:`+s+`"`, "TimerCreated"
			case "Par", "ParNamed":
				kid := id + "::sub::2"
				if name == "ParNamed" {
					kid = "kid-" + s
				}
				w.ids = append(w.ids, kid)
				w.want[id], waits[id] = `"e:`+s+`"`, "SubOrchestrationScheduled"
				w.want[kid], waits[kid] = `"e:`+s+`"`, "ActivityScheduled"
			default:
				w.want[id], waits[id] = `"e:`+s+`"`, "ActivityScheduled"
			}
		}
	}
	end, _ := ctx.Deadline()
	for _, id := range w.ids {
		waitFor(t, time.Until(end), id+" reaching "+waits[id], func() bool {
			return slices.ContainsFunc(w.history(t, id), func(e provider.Event) bool { return e.Kind.EventType() == waits[id] })
		})
	}
	// Stopped without finishing anything: its turns are done, its timers and activities wait.
	sctx, scancel := context.WithCancel(ctx)
	scancel()
	_ = rt.Shutdown(sctx)
	return w
}

func (w *deepWorld) history(t *testing.T, id string) []provider.Event {
	h, err := w.p.ReadWithExecution(context.Background(), id, 1)
	if err != nil {
		return nil
	}
	return h
}

// finish runs a runtime with workers for every tag until every instance ends, and checks each
// ended as its program says or failed naming the loss (lost: the instances allowed to).
func (w *deepWorld) finish(t *testing.T, lost map[string]bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rt := dx.NewRuntime(w.p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger,
		WorkerTagFilter: provider.TagFilterAny()})
	deepProgram(rt)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	end, _ := ctx.Deadline()
	for _, id := range w.ids {
		var st dx.Status
		waitFor(t, time.Until(end), id+" ending", func() bool {
			var err error
			st, err = w.c.Status(ctx, id)
			return err == nil && (st.Terminal() || st.State == dx.StateNotFound && lost[id])
		})
		switch {
		case st.State == dx.StateCompleted && st.Output == w.want[id]:
		case st.State == dx.StateFailed && lost[id] && strings.Contains(st.Err.Error(), "history"):
		case st.State == dx.StateFailed && lost[id] && strings.Contains(st.Err.Error(), "lost"):
		case st.State == dx.StateNotFound:
		default:
			t.Errorf("%s ended %s: output %s, err %v", id, st.State, st.Output, st.Err)
		}
	}
}

func codes(vs []redisprovider.FsckViolation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Code+" "+v.Subject)
	}
	slices.Sort(out)
	return out
}

func deepFsck(t *testing.T, p *redisprovider.Provider) redisprovider.FsckReport {
	t.Helper()
	rep, err := p.FsckDeep(context.Background(), redisprovider.DeepOptions{HistoriesPerSecond: -1})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// Each kind of loss on a namespace whose runtime stopped mid-flight: the deep check reports it,
// the deep repair leaves a clean deep check (but for instances whose history is lost, which a
// runtime ends), and a runtime brings every instance to an end: completed as its program says,
// or failed naming the loss.
func TestDeepFsckLosses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type loss struct {
		name string
		do   func(t *testing.T, w *deepWorld) (want []string, lost map[string]bool)
	}
	del := func(t *testing.T, w *deepWorld, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if n, err := w.p.Client().Del(ctx, k).Result(); err != nil || n != 1 {
				t.Fatalf("del %s: %d, %v", k, n, err)
			}
		}
	}
	losses := []loss{
		{"history", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			del(t, w, w.p.Keyspace().History("Act-0", 1), w.p.Keyspace().History("Tim-1", 1))
			return []string{"history_missing Act-0", "history_missing Tim-1"}, map[string]bool{"Act-0": true, "Tim-1": true}
		}},
		{"history_cut", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			k := w.p.Keyspace().History("Sess-1", 1)
			h := w.p.Client().Get(ctx, k).Val()
			w.p.Client().Set(ctx, k, h[:strings.Index(h, "\n")+1], 0)
			return []string{"history_short Sess-1"}, map[string]bool{"Sess-1": true}
		}},
		{"worker_item", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			var want []string
			for _, id := range []string{"Act-0", "Sess-2", "Par-1::sub::2"} {
				want = append(want, "activity_lost "+id)
				w.dropItems(t, id)
			}
			return want, nil
		}},
		{"timer_message", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			del(t, w, w.p.Keyspace().Messages("Tim-0"), w.p.Keyspace().Messages("Tim-2"))
			return []string{"timer_lost Tim-0", "timer_lost Tim-2"}, nil
		}},
		{"child_start", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			w.dropInstance(t, "Par-0::sub::2")
			w.dropInstance(t, "kid-1")
			return []string{"child_lost Par-0", "child_lost ParNamed-1"}, nil
		}},
		{"children_index", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			del(t, w, w.p.Keyspace().Children("Par-2"))
			return []string{"child_unlisted Par-2::sub::2"}, nil
		}},
		{"record", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			ks := w.p.Keyspace()
			del(t, w, ks.Instance("Act-1"), ks.Instance("Par-0"), ks.Instance("Par-1::sub::2"), ks.Instance("kid-2"))
			return []string{"record_missing Act-1", "record_missing Par-0", "record_missing Par-1::sub::2", "record_missing kid-2"}, nil
		}},
		{"format_record", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			del(t, w, w.p.Keyspace().Meta(0))
			return []string{"format_record "}, nil
		}},
		{"root_record", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			ks := w.p.Keyspace()
			if ks.Partitions() == 1 {
				t.Skip("a namespace of one partition has no root record")
			}
			del(t, w, ks.RootMeta(), ks.Meta(ks.Partitions()-1))
			return []string{"format_record "}, nil
		}},
		{"session_index", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			ks := w.p.Keyspace()
			var want []string
			for _, i := range []int{0, 1, 2} {
				sp := ks.SessionPartition(fmt.Sprintf("s-%d", i))
				w.p.Client().Del(ctx, ks.SessionsFree(sp, "w"))
				for _, item := range w.p.Client().ZRange(ctx, ks.Prefix(sp)+"wq:sitems:"+dxredis.WorkTagKey("w")+fmt.Sprintf(":s-%d", i), 0, -1).Val() {
					want = append(want, "item_session_unindexed "+item)
				}
			}
			return want, nil
		}},
		{"session_count", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			// wq:scount lost: a fetch looks for session items only while it exists.
			ks := w.p.Keyspace()
			var want []string
			for _, i := range []int{0, 1, 2} {
				sp := ks.SessionPartition(fmt.Sprintf("s-%d", i))
				w.p.Client().Del(ctx, ks.SessionCounts(sp))
				for _, item := range w.p.Client().ZRange(ctx, ks.Prefix(sp)+"wq:sitems:"+dxredis.WorkTagKey("w")+fmt.Sprintf(":s-%d", i), 0, -1).Val() {
					want = append(want, "session_uncounted "+item)
				}
			}
			return want, nil
		}},
		{"outbox_sequence", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			ks := w.p.Keyspace()
			if ks.Partitions() == 1 {
				t.Skip("outboxes are between partitions")
			}
			var want []string
			for part := range ks.Partitions() {
				for d := range w.p.Client().HGetAll(ctx, ks.Prefix(part)+"ob:seq").Val() {
					want = append(want, "outbox_seq_behind "+d)
				}
				w.p.Client().Del(ctx, ks.Prefix(part)+"ob:seq")
			}
			return want, nil
		}},
		{"inbox_mark", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			// ib:hwm lost: the sources' next entries would follow a gap and never be applied.
			ks := w.p.Keyspace()
			if ks.Partitions() == 1 {
				t.Skip("inboxes are between partitions")
			}
			var want []string
			for part := range ks.Partitions() {
				for src, m := range w.p.Client().HGetAll(ctx, ks.Prefix(part)+"ib:hwm").Val() {
					if m != "0" {
						want = append(want, "inbox_mark_behind "+src)
					}
				}
				w.p.Client().Del(ctx, ks.Prefix(part)+"ib:hwm")
			}
			return want, nil
		}},
		{"index", func(t *testing.T, w *deepWorld) ([]string, map[string]bool) {
			del(t, w, w.p.Keyspace().Prefix(0)+"idx:instances")
			return nil, nil // the shallow check's record_unlisted
		}},
	}
	for _, l := range losses {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel() // each loss on a namespace and runtime of its own
			w := newDeepWorld(t)
			if rep := deepFsck(t, w.p); len(rep.Violations) != 0 {
				t.Fatalf("before the loss: %q", codes(rep.Violations))
			}
			want, lost := l.do(t, w)
			rep := deepFsck(t, w.p)
			got := codes(rep.Violations)
			for _, c := range want {
				if !slices.Contains(got, c) {
					t.Errorf("deep fsck: want %s, got %q", c, got)
				}
			}
			if len(got) == 0 {
				t.Fatal("deep fsck found nothing")
			}
			rr := w.repair(t)
			for _, v := range rr.After.Violations {
				if !lost[v.Subject] || (v.Code != "history_missing" && v.Code != "history_short") {
					t.Errorf("after repair: %s %s: %s", v.Code, v.Subject, v.Detail)
				}
			}
			w.finish(t, lost)
			if rep := deepFsck(t, w.p); len(rep.Violations) != 0 {
				t.Errorf("after the runtime: %q", codes(rep.Violations))
			}
		})
	}
}

// repair runs the deep repair as the runbook does (docs/operations.md): when the format record
// is lost (no script runs: repair says to migrate) or a format-1 guard key is (repair leaves
// format_record), dxctl migrate writes it again, then repair runs again.
func (w *deepWorld) repair(t *testing.T) redisprovider.RepairReport {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		rr, err := w.p.RepairDeep(ctx, redisprovider.DeepOptions{HistoriesPerSecond: -1})
		if err != nil && !strings.Contains(err.Error(), "migrate") && !strings.Contains(err.Error(), "no record for a partition") {
			t.Fatal(err)
		}
		if err == nil && !slices.ContainsFunc(rr.After.Violations, func(v redisprovider.FsckViolation) bool { return v.Code == "format_record" }) {
			return rr
		}
		// The partition count, as the runbook says: a lost root record no longer holds it. Migrate
		// refuses (busy) until the stopped runtime's fetcher entry lapses (seconds).
		waitFor(t, 30*time.Second, "migrate to take the namespace", func() bool {
			_, err := redisprovider.Migrate(ctx, w.p.Client(), w.p.Keyspace().Namespace(), redisprovider.MigrateOptions{Partitions: w.p.Keyspace().Partitions()})
			if err != nil && !errors.Is(err, redisprovider.ErrNamespaceBusy) {
				t.Fatal(err)
			}
			return err == nil
		})
	}
	t.Fatal("repair and migrate did not restore the format record")
	return redisprovider.RepairReport{}
}

// dropItems deletes the worker items of an instance (its index entries stay: the shallow check's
// item_index_without_item).
func (w *deepWorld) dropItems(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	cl, ks := w.p.Client(), w.p.Keyspace()
	ip := ks.Prefix(ks.PartitionOf(id))
	for _, v := range cl.HGetAll(ctx, ip+"wq:inst:"+id).Val() {
		part := ks.PartitionOf(id)
		if strings.HasPrefix(v, "@") {
			fmt.Sscan(v[1:], &part)
			v = cl.HGet(ctx, ks.Prefix(part)+"wq:inst:"+id, "1:2").Val()
		}
		for _, item := range strings.Fields(v) {
			if n := cl.Del(ctx, ks.Prefix(part)+"wq:m:"+item).Val(); n != 1 {
				t.Fatalf("item %s of %s not found", item, id)
			}
		}
	}
}

// dropInstance deletes every key of an instance and its worker items.
func (w *deepWorld) dropInstance(t *testing.T, id string) {
	t.Helper()
	w.dropItems(t, id)
	ctx := context.Background()
	cl, ks := w.p.Client(), w.p.Keyspace()
	pre := ks.Prefix(ks.PartitionOf(id))
	var keys []string
	for _, k := range keysMatching(t, w.p, globEscape(pre)+"*") {
		if strings.HasSuffix(k, ":"+id) && !strings.HasSuffix(k, "::"+id) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		t.Fatalf("no keys of %s", id)
	}
	cl.Del(ctx, keys...)
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// A random few percent of all keys lost: whatever the deep repair cannot rebuild it names, and a
// runtime brings every instance to an end (completed, failed naming the loss, or gone with its
// record: not found); none stays Running.
func TestDeepFsckRandomLoss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			w := newDeepWorld(t)
			rng := rand.New(rand.NewPCG(seed, 35))
			cl, ks := w.p.Client(), w.p.Keyspace()
			var all []string
			for part := range ks.Partitions() {
				all = append(all, keysMatching(t, w.p, globEscape(ks.Prefix(part))+"*")...)
			}
			if ks.Partitions() > 1 {
				all = append(all, ks.RootMeta())
			}
			slices.Sort(all)
			var gone []string
			for _, k := range all {
				if rng.IntN(100) < 3 {
					gone = append(gone, k)
				}
			}
			if len(gone) == 0 {
				gone = append(gone, all[rng.IntN(len(all))])
			}
			cl.Del(ctx, gone...)
			t.Logf("deleted %d of %d keys: %q", len(gone), len(all), gone)
			rep := deepFsck(t, w.p)
			t.Logf("deep fsck: %q", codes(rep.Violations))
			rr := w.repair(t)
			t.Logf("after repair: %q", codes(rr.After.Violations))
			lost := map[string]bool{}
			for _, id := range w.ids {
				lost[id] = true
			}
			w.finish(t, lost)
			after := deepFsck(t, w.p)
			for _, v := range after.Violations {
				t.Errorf("after the runtime: %s %s: %s", v.Code, v.Subject, v.Detail)
			}
		})
	}
}

// The deep check under a live workload (activities on sessions and tags, timers, children in
// other partitions) reports nothing, reads no faster than its budget, and changes nothing: on
// the stopped namespace afterwards, every key's value is what it was before another deep check.
func TestDeepFsckLive(t *testing.T) {
	p := newTestProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rt := dx.NewRuntime(p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond, Logger: quietLogger,
		WorkerTagFilter: provider.TagFilterAny()})
	deepProgram(rt)
	dx.Register(rt, "Mix", func(ctx dx.Context, s string) (string, error) {
		a, err := dx.CallSub[string](ctx, "Sess", s, dx.WithInstanceID("mix-kid-"+s)).Await(ctx)
		if err != nil {
			return "", err
		}
		if _, err := ctx.Timer(30 * time.Millisecond).Await(ctx); err != nil {
			return "", err
		}
		return dx.Call[string](ctx, "Echo", a, dx.WithTag("w")).Await(ctx)
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rt.Shutdown(context.Background()) }()
	c := dx.NewClient(p)
	const n = 40
	var ids []string
	done := make(chan struct{})
	checked := make(chan struct{}, 1) // a check ended
	go func() {
		defer close(done)
		for i := range n {
			id, err := c.Start(ctx, "Mix", fmt.Sprint(i), dx.WithInstanceID(fmt.Sprintf("mix-%d", i)))
			if err != nil {
				t.Error(err)
				return
			}
			ids = append(ids, id)
			if i%4 == 3 { // four starts per check: the starts spread over the checks
				select {
				case <-checked:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	const rate = 400
	checks := 0
	for running := true; running; checks++ {
		select {
		case <-done:
			running = false
		default:
		}
		began := time.Now()
		rep, err := p.FsckDeep(ctx, redisprovider.DeepOptions{HistoriesPerSecond: rate, Batch: 10})
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(began)
		for _, v := range rep.Violations {
			t.Errorf("check %d under load: %s %s: %s", checks, v.Code, v.Subject, v.Detail)
		}
		select {
		case checked <- struct{}{}:
		default:
		}
		// The limiter lets a batch go at once, then spaces the reads at the rate.
		if max := float64(rate)*took.Seconds() + 10 + 1; float64(rep.Histories) > max {
			t.Errorf("check %d read %d histories in %v: over its budget of %d/s", checks, rep.Histories, took, rate)
		}
	}
	for i, id := range ids {
		st, err := c.Wait(ctx, id)
		if want := fmt.Sprintf(`"e:e:%d"`, i); err != nil || st.State != dx.StateCompleted || st.Output != want {
			t.Fatalf("%s: %+v, %v (want %s)", id, st, err, want)
		}
	}
	_ = rt.Shutdown(ctx)
	before := namespaceDigest(t, p)
	if rep := deepFsck(t, p); len(rep.Violations) != 0 || rep.Histories < 2*n {
		t.Fatalf("after the load: %d histories, %q", rep.Histories, codes(rep.Violations))
	}
	if after := namespaceDigest(t, p); before != after {
		t.Fatal("the deep check changed the namespace")
	}
	t.Logf("%d deep checks under load", checks)
}

// keysMatching lists the keys that match pattern, on every primary of a cluster.
func keysMatching(t *testing.T, p *redisprovider.Provider, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var keys []string
	list := func(ctx context.Context, c redis.Cmdable) error {
		found, err := c.Keys(ctx, pattern).Result()
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, found...)
		return err
	}
	var err error
	if cc, ok := p.Client().(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return list(ctx, c) })
	} else {
		err = list(ctx, p.Client())
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
