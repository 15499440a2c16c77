package dx_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// readsOnly hands CheckReplay a provider that allows only the reads it documents, counting
// them. Every other call panics: the embedded interfaces are nil.
type readsOnly struct {
	provider.Provider
	t     *testing.T
	p     *redisprovider.Provider
	mu    sync.Mutex
	calls map[string]int
	at    []time.Time
}

func (r *readsOnly) count(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[name]++
	r.at = append(r.at, time.Now())
}

// roAdmin is readsOnly's Admin: the same rules.
type roAdmin struct {
	provider.Admin
	*readsOnly
}

func (r *readsOnly) Admin() (provider.Admin, bool) { return roAdmin{readsOnly: r}, true }
func (r roAdmin) ListInstancesByStatus(ctx context.Context, status string) ([]string, error) {
	r.count("ListInstancesByStatus")
	return r.p.ListInstancesByStatus(ctx, status)
}
func (r *readsOnly) ListInstancesPage(ctx context.Context, cursor string, limit int, status string) ([]string, string, error) {
	r.count("ListInstancesPage")
	return r.p.ListInstancesPage(ctx, cursor, limit, status)
}
func (r roAdmin) GetInstanceInfo(ctx context.Context, id string) (provider.InstanceInfo, error) {
	r.count("GetInstanceInfo")
	return r.p.GetInstanceInfo(ctx, id)
}
func (r roAdmin) ReadHistory(ctx context.Context, id string) ([]provider.Event, error) {
	r.count("ReadHistory")
	return r.p.ReadHistory(ctx, id)
}
func (r roAdmin) ListExecutions(ctx context.Context, id string) ([]uint64, error) {
	r.count("ListExecutions")
	return r.p.ListExecutions(ctx, id)
}
func (r roAdmin) ReadHistoryWithExecutionID(ctx context.Context, id string, e uint64) ([]provider.Event, error) {
	r.count("ReadHistoryWithExecutionID")
	return r.p.ReadHistoryWithExecutionID(ctx, id, e)
}
func (r *readsOnly) ReadForReplay(ctx context.Context, id string, e uint64) ([]provider.Event, map[string]provider.KVEntry, string, error) {
	r.count("ReadForReplay")
	return r.p.ReadForReplay(ctx, id, e)
}
func (r *readsOnly) FetchOrchestrationItemLite(context.Context, time.Duration, time.Duration, *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	r.t.Error("CheckReplay fetched (locked) an instance")
	return nil, fmt.Errorf("not allowed")
}

// digest renders every key of the given instances (type, value, TTL), sorted.
func digest(t *testing.T, p *redisprovider.Provider, ids []string) string {
	t.Helper()
	ctx := context.Background()
	c := p.Client()
	var keys []string
	for part := range p.Keyspace().Partitions() {
		iter := c.Scan(ctx, 0, strings.NewReplacer("{", `\{`, "}", `\}`).Replace(p.Keyspace().Prefix(part))+"*", 1000).Iterator()
		for iter.Next(ctx) {
			for _, id := range ids {
				if strings.HasSuffix(iter.Val(), ":"+id) {
					keys = append(keys, iter.Val())
				}
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		typ := c.Type(ctx, k).Val()
		var v any
		switch typ {
		case "string":
			v = c.Get(ctx, k).Val()
		case "hash":
			m := c.HGetAll(ctx, k).Val()
			var f []string
			for fk, fv := range m {
				f = append(f, fk+"="+fv)
			}
			slices.Sort(f)
			v = f
		case "set":
			m := c.SMembers(ctx, k).Val()
			slices.Sort(m)
			v = m
		case "zset":
			v = c.ZRangeWithScores(ctx, k, 0, -1).Val()
		case "list":
			v = c.LRange(ctx, k, 0, -1).Val()
		}
		fmt.Fprintf(&b, "%s %s %v ttl=%v\n", k, typ, v, c.PTTL(ctx, k).Val() > 0)
	}
	return b.String()
}

// workload keeps a runtime busy on p until the test ends: Tick instances start and complete
// without pause, next to Parked instances that wait for an event nobody raises.
func workload(t *testing.T, p *redisprovider.Provider, parked int) []string {
	t.Helper()
	ctx := waitCtx(t)
	rt := dx.NewRuntime(p, testOptions())
	registerWorkload(rt)
	startRuntime(t, rt)
	c := dx.NewClient(p)
	var ids []string
	for i := range parked {
		id := fmt.Sprintf("parked-%02d", i)
		ids = append(ids, id)
		mustStart(t, c, ctx, "Parked", "p", dx.WithInstanceID(id))
	}
	for _, id := range ids {
		waitFor(t, id+" to wait", func() bool {
			return historyHas(t, p, id, func(ev provider.Event) bool { _, ok := ev.Kind.(provider.ExternalSubscribedEvent); return ok })
		})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Start(context.Background(), "Tick", i); err != nil {
				t.Errorf("start Tick: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond) // a steady trickle, not a flood
		}
	}()
	t.Cleanup(func() { close(stop); <-done }) // before the runtime's shutdown
	waitFor(t, "Ticks to complete", func() bool {
		ids, err := p.ListInstancesByStatus(ctx, provider.StatusCompleted)
		return err == nil && len(ids) >= 10
	})
	return ids
}

func registerWorkload(rt *dx.Runtime) {
	dx.RegisterActivity(rt, "Step", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	dx.Register(rt, "Tick", func(ctx dx.Context, n int) (int, error) { return dx.Call[int](ctx, "Step", n).Await(ctx) })
	dx.Register(rt, "Parked", func(ctx dx.Context, s string) (string, error) {
		if _, err := dx.Call[int](ctx, "Step", 1).Await(ctx); err != nil {
			return "", err
		}
		return dx.WaitEvent[string](ctx, "never").Await(ctx)
	})
}

// CheckReplay under a live workload: it makes only the reads it documents (any other call
// panics), never fetches, changes no key of the instances the workload leaves alone although
// it reads them all, and keeps to its read budget.
func TestCheckReplayOnlyReadsWithinBudget(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	parked := workload(t, p, 20)
	before := digest(t, p, parked)
	ro := &readsOnly{t: t, p: p, calls: map[string]int{}}
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	registerWorkload(rt)
	const budget = 200
	began := time.Now()
	rep, err := dx.CheckReplay(waitCtx(t), ro, rt, dx.CheckReplayOptions{ReadsPerSecond: budget, FinishedScan: 20})
	elapsed := time.Since(began)
	if err != nil || !rep.OK() {
		t.Fatalf("err %v, report:\n%v", err, rep)
	}
	if after := digest(t, p, parked); after != before || !strings.Contains(before, "parked-19") {
		t.Fatalf("the parked instances' keys changed:\nbefore\n%s\nafter\n%s", before, after)
	}
	total := 0
	for _, n := range ro.calls {
		total += n
	}
	if total != rep.Reads || ro.calls["ReadHistory"] < 20 {
		t.Fatalf("calls %v (%d), report says %d reads", ro.calls, total, rep.Reads)
	}
	// Within any stretch of time d, at most 1 + d*budget calls (a slow machine only spreads them).
	for i := range ro.at {
		for j := i + 1; j < len(ro.at); j++ {
			if d := ro.at[j].Sub(ro.at[i]); float64(j-i) > 1+d.Seconds()*budget {
				t.Fatalf("calls %d..%d came within %v: over %d reads per second", i, j, d, budget)
			}
		}
	}
	if float64(total) > 1+elapsed.Seconds()*budget {
		t.Fatalf("%d reads in %v", total, elapsed)
	}
}

// Logged in as a Redis user that may only read (FCALL_RO and read commands: any write, in a
// script or not, is refused with NOPERM), CheckReplay checks a namespace a runtime is busy on.
func TestCheckReplayRunsAsAReadOnlyRedisUser(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := waitCtx(t)
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Namespace: "orders", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	workload(t, p, 5)
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	rule := "on >s3cret resetkeys ~{orders:* resetchannels -@all +@read +fcall_ro +evalsha_ro +function|list +ping +hello +auth +config|get +time"
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "checker"}, toAny(strings.Fields(rule))...)...).Err(); err != nil {
		t.Fatal(err)
	}
	ro, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Username: "checker", Password: "s3cret",
		Namespace: "orders", Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	// The user really cannot write.
	if err := ro.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "parked-00", Name: "never", Data: `"x"`}}, 0); err == nil ||
		!strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("a write as the read-only user: %v, want NOPERM", err)
	}
	rt := dx.NewRuntime(nil, dx.Options{Logger: quietLogger})
	registerWorkload(rt)
	rep, err := dx.CheckReplay(ctx, ro, rt, dx.CheckReplayOptions{ReadsPerSecond: -1, FinishedScan: 20})
	if err != nil || !rep.OK() || rep.Groups[0].Running < 5 {
		t.Fatalf("err %v, report:\n%v", err, rep)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
