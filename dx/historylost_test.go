package dx_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// A turn of an instance whose history is lost (the key gone, or cut shorter than its record
// says) is not replayed from a stump nor acked silently: the instance fails with an error that
// says its history was lost, a warning names it and dx_history_lost_total counts it; a child whose
// whole history is gone tells its waiting parent, which fails with it.
func TestHistoryLostFailsLoudly(t *testing.T) {
	p := newProvider(t)
	ctx := waitCtx(t)
	var logs logCapture
	m := &countingMetrics{}
	opts := testOptions()
	opts.Logger, opts.Metrics = logs.logger(), m
	rt := dx.NewRuntime(p, opts)
	dx.Register(rt, "Wait", func(ctx dx.Context, _ string) (string, error) {
		return dx.WaitEvent[string](ctx, "go").Await(ctx)
	})
	dx.Register(rt, "Parent", func(ctx dx.Context, _ string) (string, error) {
		return dx.CallSub[string](ctx, "Wait", "", dx.WithInstanceID("lost-kid")).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	for _, id := range []string{"lost-gone", "lost-cut"} {
		mustStart(t, c, ctx, "Wait", "", dx.WithInstanceID(id))
	}
	mustStart(t, c, ctx, "Parent", "", dx.WithInstanceID("lost-parent"))
	for _, id := range []string{"lost-gone", "lost-cut", "lost-kid"} {
		waitFor(t, id+" waiting", func() bool {
			h, _ := c.History(ctx, id, 1)
			return len(h) > 0 && h[len(h)-1].Kind.EventType() == "ExternalSubscribed"
		})
	}
	ks, cl := p.Keyspace(), p.Client()
	cl.Del(ctx, ks.History("lost-gone", 1), ks.History("lost-kid", 1))
	cut := cl.Get(ctx, ks.History("lost-cut", 1)).Val()
	cl.Set(ctx, ks.History("lost-cut", 1), cut[:strings.Index(cut, "\n")+1], 0)
	for _, id := range []string{"lost-gone", "lost-cut", "lost-kid"} {
		if err := c.RaiseEvent(ctx, id, "go", "x"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"lost-gone", "lost-cut", "lost-kid", "lost-parent"} {
		st, err := c.Wait(ctx, id)
		if err != nil || st.State != dx.StateFailed || st.Err == nil || !strings.Contains(st.Err.Error(), "history lost") {
			r := cl.HGetAll(ctx, ks.Instance(id)).Val()
			t.Fatalf("%s: %+v, %v; record %v history %q", id, st, err, r, cl.Get(ctx, ks.History(id, 1)).Val())
		}
		if id != "lost-parent" && len(logs.lines("level=WARN", "history lost", "instance="+id)) == 0 {
			t.Errorf("no warning names %s", id)
		}
	}
	if n := m.get(dx.MetricHistoryLost); n != 3 {
		t.Errorf("%s = %d, want 3", dx.MetricHistoryLost, n)
	}
}

// A namespace whose only runtime was SIGKILLed mid-flight (chains of activities, trees of
// children across partitions), then lost every worker item and the histories of two running
// chains: fsck --deep reports them, its repair re-queues every lost activity from the histories,
// and a restarted runtime brings every instance to an end: completed as the program says, or (the
// two) failed with "history lost"; afterwards the deep check is clean.
func TestSigkillLostKeysDeepRepair(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	addr, ns, p := faultBackend(t)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	ids := startChains(t, c, 30)
	var trees []string
	for i := range 4 {
		id := fmt.Sprintf("tree-%d", i)
		mustStart(t, c, ctx, "Tree", i*100, dx.WithInstanceID(id))
		trees = append(trees, id)
	}
	victim := startChild(t, addr, ns)
	waitFor(t, "some chains done", func() bool {
		done := 0
		for _, id := range ids {
			if st, _ := c.Status(ctx, id); st.Terminal() {
				done++
			}
		}
		return done >= 3
	})
	if err := victim.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.Wait()

	ks, cl := p.Keyspace(), p.Client()
	var mu sync.Mutex
	lost := map[string]bool{}
	for _, id := range ids {
		if st, _ := c.Status(ctx, id); st.State == dx.StateRunning && len(lost) < 2 {
			if cl.Del(ctx, ks.History(id, 1)).Val() == 1 {
				lost[id] = true
			}
		}
	}
	items := 0
	for part := range ks.Partitions() {
		pattern := strings.ReplaceAll(ks.Prefix(part), "{", `\{`) + "wq:m:*"
		var keys []string
		if cc, ok := cl.(*redis.ClusterClient); ok { // a partition's slot is on one primary
			_ = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
				found := n.Keys(ctx, pattern).Val()
				mu.Lock()
				keys = append(keys, found...)
				mu.Unlock()
				return nil
			})
		} else {
			keys = cl.Keys(ctx, pattern).Val()
		}
		for _, k := range keys {
			items += int(cl.Del(ctx, k).Val())
		}
	}
	t.Logf("after the kill: %d worker items and %d histories deleted", items, len(lost))
	rep, err := p.FsckDeep(ctx, redisprovider.DeepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]int{}
	for _, v := range rep.Violations {
		found[v.Code]++
	}
	if found["history_missing"] != len(lost) || items > 0 && found["activity_lost"] == 0 {
		t.Fatalf("deep fsck found %v (deleted %d items, %d histories)", found, items, len(lost))
	}
	rr, err := p.RepairDeep(ctx, redisprovider.DeepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rr.After.Violations {
		if !lost[v.Subject] {
			t.Errorf("after repair: %s %s: %s", v.Code, v.Subject, v.Detail)
		}
	}
	rt := dx.NewRuntime(p, faultOptions())
	faultProgram(rt)
	startRuntime(t, rt)
	for i, id := range ids {
		st, err := c.Wait(ctx, id)
		switch {
		case err != nil:
			t.Fatalf("%s never ended: %v", id, err)
		case lost[id]:
			if st.State != dx.StateFailed || !strings.Contains(st.Err.Error(), "history lost") {
				t.Errorf("%s (history lost): %s %v", id, st.State, st.Err)
			}
		case st.State != dx.StateCompleted || st.Output != chainOutput(i):
			t.Errorf("%s: %s %s %v, want %s", id, st.State, st.Output, st.Err, chainOutput(i))
		}
	}
	for i, id := range trees {
		want := 0
		for j := range treeWidth {
			want += i*100 + j + 1
		}
		if st, err := c.Wait(ctx, id); err != nil || st.State != dx.StateCompleted || st.Output != fmt.Sprint(want) {
			t.Errorf("%s: %+v, %v (want %d)", id, st, err, want)
		}
	}
	if rep, err := p.FsckDeep(ctx, redisprovider.DeepOptions{}); err != nil || len(rep.Violations) > 0 {
		t.Errorf("deep fsck at the end: %+v, %v", rep.Violations, err)
	}
}
