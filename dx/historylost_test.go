package dx_test

import (
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
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
		for {
			h, _ := c.History(ctx, id, 1)
			if len(h) > 0 && h[len(h)-1].Kind.EventType() == "ExternalSubscribed" {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s never waited", id)
			}
			time.Sleep(10 * time.Millisecond) // polling the condition
		}
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
