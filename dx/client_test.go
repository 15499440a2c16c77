package dx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

func TestClientEventsStatusKVAndManagement(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	type approval struct {
		By string `json:"by"`
	}
	dx.Register(rt, "Approve", func(ctx dx.Context, n int) (string, error) {
		ctx.SetCustomStatus("waiting")
		ctx.SetKV("stage", "waiting")
		a, err := dx.WaitEvent[approval](ctx, "approval").Await(ctx)
		if err != nil {
			return "", err
		}
		ctx.SetCustomStatus("approved by " + a.By)
		msg, err := dx.Dequeue[string](ctx, "notes").Await(ctx)
		if err != nil {
			return "", err
		}
		if n > 0 {
			return "", dx.ContinueAsNew(ctx, n-1)
		}
		return a.By + ": " + msg, nil
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := c.Start(ctx, "Approve", 1, dx.WithInstanceID("approve-1"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.WaitForKV(ctx, id, "stage"); err != nil || v != "waiting" {
		t.Fatalf("kv %q %v", v, err)
	}
	st, err := c.WaitForStatusChange(ctx, id, 0)
	if err != nil || st.CustomStatus == nil || *st.CustomStatus != "waiting" || st.State != dx.StateRunning {
		t.Fatalf("status %+v %v", st, err)
	}
	// Enqueued messages wait; raised events need a pending wait, which exists now.
	for exec := uint64(1); exec <= 2; exec++ {
		if err := c.EnqueueEvent(ctx, id, "notes", "note"); err != nil {
			t.Fatal(err)
		}
		if err := c.RaiseEvent(ctx, id, "approval", approval{By: "ann"}); err != nil {
			t.Fatal(err)
		}
		if exec == 1 {
			// the second execution subscribes again: wait for its subscription before raising
			waitFor(t, "the second execution's subscription", func() bool {
				h, _ := c.History(ctx, id, 2)
				return len(h) > 0 && h[len(h)-1].EventType() == "ExternalSubscribed"
			})
		}
	}
	out, err := dx.Result[string](ctx, c, id)
	if err != nil || out != "ann: note" {
		t.Fatalf("result %q %v", out, err)
	}
	execs, err := c.Executions(ctx, id)
	if err != nil || len(execs) != 2 || execs[0].Status != provider.StatusContinuedAsNew || execs[1].Status != provider.StatusCompleted {
		t.Fatalf("executions %+v %v", execs, err)
	}
	ids, err := c.ListInstances(ctx, dx.StateCompleted)
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("list %v %v", ids, err)
	}
	if info, err := c.Info(ctx, id); err != nil || info.CurrentExecutionID != 2 {
		t.Fatalf("info %+v %v", info, err)
	}
	if tree, err := c.Tree(ctx, id); err != nil || len(tree.AllIDs) != 1 {
		t.Fatalf("tree %+v %v", tree, err)
	}
	if r, err := c.Prune(ctx, id, provider.PruneOptions{KeepLast: 1}); err != nil || r.ExecutionsDeleted != 1 {
		t.Fatalf("prune %+v %v", r, err)
	}
	if r, err := c.Delete(ctx, id, false); err != nil || r.InstancesDeleted != 1 {
		t.Fatalf("delete %+v %v", r, err)
	}
	if st, err := c.Status(ctx, id); err != nil || st.State != dx.StateNotFound {
		t.Fatalf("after delete %+v %v", st, err)
	}
}

func TestClientRefusesBadInput(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	c := dx.NewClient(p)
	ctx := context.Background()
	if _, err := c.Start(ctx, "", nil); err == nil {
		t.Fatal("start without a name")
	}
	if _, err := c.Start(ctx, "O", func() {}); err == nil {
		t.Fatal("start with an input that is not JSON")
	}
	if _, err := c.Start(ctx, "O", nil, dx.WithVersion("one")); err == nil {
		t.Fatal("start with a version that is not semver")
	}
	if st, err := c.Status(ctx, "nope"); err != nil || st.State != dx.StateNotFound {
		t.Fatalf("status of a missing instance: %+v %v", st, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(wctx, "nope"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a missing instance: %v", err)
	}
}

func TestFailedOrchestrationResult(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.RegisterActivity(rt, "Fail", func(ctx context.Context, m string) (string, error) { return "", errors.New(m) })
	dx.Register(rt, "O", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.Call[string](ctx, "Fail", "broken").Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id := mustStart(t, c, ctx, "O", nil)
	_, err := dx.Result[string](ctx, c, id)
	var de *dx.Error
	if !errors.As(err, &de) || err.Error() != "broken" {
		t.Fatalf("result error %v", err)
	}
	if a, ok := de.Details.Kind.(provider.ApplicationError); !ok || a.Kind.Name != provider.AppOrchestrationFailed {
		t.Fatalf("details %+v", de.Details)
	}
}
