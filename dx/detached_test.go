package dx_test

import (
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

// A detached start made in a turn that continues as new, or that the instance's cancellation ends,
// is recorded (OrchestrationChained) but never started: duroxide starts detached orchestrations
// only when their turn goes on, completes or fails (execution.rs), and dx reproduces that. The
// drop is logged at warning level, naming the instance and the detached instance, once the turn
// is stored.
func TestDetachedStartDroppedWarns(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	var logs logCapture
	o := testOptions()
	o.Logger = logs.logger()
	rt := dx.NewRuntime(p, o)
	for _, err := range []error{
		dx.Register(rt, "Job", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) { return `"ok"`, nil }),
		dx.Register(rt, "Rotate", func(ctx dx.Context, n int) (int, error) {
			if n == 0 {
				if err := ctx.StartOrchestration("Job", "job-can", nil); err != nil {
					return 0, err
				}
				return 0, dx.ContinueAsNew(ctx, 1)
			}
			return n, nil
		}),
		dx.Register(rt, "Stopped", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
			if err := ctx.StartOrchestration("Job", "job-stopped", nil); err != nil {
				return "", err
			}
			return dx.WaitEvent[dx.Raw](ctx, "never").Await(ctx)
		}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	if _, err := c.Start(ctx, "Rotate", 0, dx.WithInstanceID("rotate")); err != nil {
		t.Fatal(err)
	}
	// Cancelled before its first turn: that turn runs the code (which starts the job) and ends it.
	if _, err := c.Start(ctx, "Stopped", nil, dx.WithInstanceID("stopped")); err != nil {
		t.Fatal(err)
	}
	if err := c.Cancel(ctx, "stopped", "stop"); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	for _, id := range []string{"rotate", "stopped"} {
		if _, err := c.Wait(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []struct{ instance, detached string }{{"rotate", "job-can"}, {"stopped", "job-stopped"}} {
		waitFor(t, "the warning for "+w.detached, func() bool {
			return len(logs.lines("level=WARN", "detached start dropped", "instance="+w.instance, "detached="+w.detached)) > 0
		})
		if got := logs.lines("detached=" + w.detached); len(got) != 1 {
			t.Errorf("%d records name %s, want 1:\n%s", len(got), w.detached, strings.Join(got, "\n"))
		}
	}
}
