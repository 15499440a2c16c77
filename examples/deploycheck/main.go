// Command deploycheck shows the check before a deploy (dx.CheckReplay): replay what is live now
// against the build about to ship and see which instances it would break, before it ships. A
// change that swaps two activity calls breaks the orders in flight: the report names them, with
// the event where the new code diverges. The same change as a new version, next to the old one,
// breaks nothing. An orchestration that never ends (it continues as new) cannot drain: its old
// code, kept, continues as new onto the new version, and the versions in flight show the old one
// drain; then a build without the old versions passes the check.
//
//	go run ./examples/deploycheck
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
	"github.com/duroxide-go/dxredis/redisprovider"
)

var (
	Reserve = dx.NewActivity[string, string]("Reserve")
	Charge  = dx.NewActivity[string, string]("Charge")
	Record  = dx.NewActivity[int, int]("Record")
	// Order reserves, charges, then waits for the shipment (a queue message).
	Order = dx.NewOrchestration[string, string]("Order")
	// Meter counts ticks for ever: three per execution, then it continues as new.
	Meter = dx.NewOrchestration[int, int]("Meter")
)

// orderV1 is the code the running orders were started with.
func orderV1(ctx dx.Context, id string) (string, error) {
	if _, err := Reserve.Call(ctx, id).Await(ctx); err != nil {
		return "", err
	}
	if _, err := Charge.Call(ctx, id).Await(ctx); err != nil {
		return "", err
	}
	return shipped(ctx)
}

// orderChargeFirst charges before reserving: a different order of durable steps.
func orderChargeFirst(ctx dx.Context, id string) (string, error) {
	if _, err := Charge.Call(ctx, id).Await(ctx); err != nil {
		return "", err
	}
	if _, err := Reserve.Call(ctx, id).Await(ctx); err != nil {
		return "", err
	}
	return shipped(ctx)
}

func shipped(ctx dx.Context) (string, error) {
	ctx.SetCustomStatus("awaiting shipment")
	return dx.Dequeue[string](ctx, "shipped").Await(ctx)
}

// meterV1 adds each tick to the count. ContinueAsNew without a version moves to the latest
// version the runtime registers: the way an orchestration that never ends gets onto new code.
func meterV1(ctx dx.Context, n int) (int, error) {
	for range 3 {
		ctx.SetCustomStatus(fmt.Sprintf("count %d", n))
		tick, err := dx.Dequeue[int](ctx, "ticks").Await(ctx)
		if err != nil {
			return 0, err
		}
		n += tick
	}
	return 0, Meter.ContinueAsNew(ctx, n)
}

// meterV2 also records each count with an activity: a new durable step, so a new version.
func meterV2(ctx dx.Context, n int) (int, error) {
	for range 3 {
		ctx.SetCustomStatus(fmt.Sprintf("count %d (2.0.0)", n))
		tick, err := dx.Dequeue[int](ctx, "ticks").Await(ctx)
		if err != nil {
			return 0, err
		}
		n += tick
		if _, err := Record.Call(ctx, n).Await(ctx); err != nil {
			return 0, err
		}
	}
	return 0, Meter.ContinueAsNew(ctx, n)
}

func activities(rt *dx.Runtime) error {
	return errors.Join(
		Reserve.Register(rt, func(_ context.Context, id string) (string, error) { return "reserved " + id, nil }),
		Charge.Register(rt, func(_ context.Context, id string) (string, error) { return "charged " + id, nil }),
		Record.Register(rt, func(_ context.Context, n int) (int, error) { return n, nil }))
}

// The builds, each a register function as a program's main would have.

// deployed is the build in production.
func deployed(rt *dx.Runtime) error {
	return errors.Join(activities(rt), Order.Register(rt, orderV1), Meter.Register(rt, meterV1))
}

// reordered changes Order in place: it would break the orders in flight.
func reordered(rt *dx.Runtime) error {
	return errors.Join(activities(rt), Order.Register(rt, orderChargeFirst), Meter.Register(rt, meterV1))
}

// versioned adds the changes as new versions and keeps the old ones for the instances in flight.
func versioned(rt *dx.Runtime) error {
	return errors.Join(activities(rt),
		Order.Register(rt, orderV1), Order.RegisterVersion(rt, "2.0.0", orderChargeFirst),
		Meter.Register(rt, meterV1), Meter.RegisterVersion(rt, "2.0.0", meterV2))
}

// drained drops the old versions: safe once nothing runs them.
func drained(rt *dx.Runtime) error {
	return errors.Join(activities(rt), Order.RegisterVersion(rt, "2.0.0", orderChargeFirst), Meter.RegisterVersion(rt, "2.0.0", meterV2))
}

// check replays the namespace against a build, as a check-deploy command of the program would.
func check(ctx context.Context, p *redisprovider.Provider, build func(*dx.Runtime) error) (*dx.CheckReplayReport, error) {
	rt := dx.NewRuntime(nil, dx.Options{}) // registrations only: nothing runs
	if err := build(rt); err != nil {
		return nil, err
	}
	return dx.CheckReplay(ctx, p, rt, dx.CheckReplayOptions{})
}

// running runs a build on p until stop is called (a deployment of it).
func running(ctx context.Context, p *redisprovider.Provider, build func(*dx.Runtime) error) (stop func() error, err error) {
	rt := dx.NewRuntime(p, dx.Options{Logger: exenv.Logger(), PollTimeout: 100 * time.Millisecond})
	if err := build(rt); err != nil {
		return nil, err
	}
	if err := rt.Start(ctx); err != nil {
		return nil, err
	}
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return rt.Shutdown(sctx)
	}, nil
}

// waitCustom waits until the instance's custom status is want (the status and its version are
// read together, so no change is missed).
func waitCustom(ctx context.Context, c *dx.Client, id, want string) error {
	for {
		st, err := c.Status(ctx, id)
		if err != nil || st.CustomStatus != nil && *st.CustomStatus == want {
			return err
		}
		if st.Terminal() {
			return fmt.Errorf("%s ended: %s", id, st.State)
		}
		if _, err := c.WaitForStatusChange(ctx, id, st.CustomStatusVersion); err != nil {
			return err
		}
	}
}

// Outcome is what the demonstration found, for its test.
type Outcome struct {
	Reordered, Versioned, TooEarly, Drained *dx.CheckReplayReport
	// MeterBefore and MeterAfter are the versions in flight before and after the meter's
	// continue-as-new onto 2.0.0, Final once every order shipped.
	MeterBefore, MeterAfter, Final []redisprovider.VersionInFlight
}

// demo runs the whole story on p, printing it to out.
func demo(ctx context.Context, p *redisprovider.Provider, out io.Writer) (o Outcome, err error) {
	c := dx.NewClient(p)
	stop, err := running(ctx, p, deployed)
	if err != nil {
		return o, err
	}
	defer func() {
		if stop != nil {
			err = errors.Join(err, stop())
		}
	}()
	orders := []string{"order-1", "order-2", "order-3"}
	for _, id := range orders {
		if _, err := Order.Start(ctx, c, id, dx.WithInstanceID(id)); err != nil {
			return o, err
		}
	}
	if _, err := Meter.Start(ctx, c, 0, dx.WithInstanceID("meter")); err != nil {
		return o, err
	}
	for _, id := range orders {
		if err := waitCustom(ctx, c, id, "awaiting shipment"); err != nil {
			return o, err
		}
	}
	if err := waitCustom(ctx, c, "meter", "count 0"); err != nil {
		return o, err
	}

	fmt.Fprintln(out, "== Order changed in place (Charge before Reserve): the check before the deploy")
	if o.Reordered, err = check(ctx, p, reordered); err != nil {
		return o, err
	}
	fmt.Fprint(out, o.Reordered)

	fmt.Fprintln(out, "\n== The same change as Order 2.0.0, next to 1.0.0 (and Meter 2.0.0 next to 1.0.0)")
	if o.Versioned, err = check(ctx, p, versioned); err != nil {
		return o, err
	}
	fmt.Fprint(out, o.Versioned)

	fmt.Fprintln(out, "\n== Deployed. Versions in flight:")
	if err := stop(); err != nil {
		return o, err
	}
	if stop, err = running(ctx, p, versioned); err != nil {
		return o, err
	}
	if o.MeterBefore, err = p.VersionsInFlight(ctx); err != nil {
		return o, err
	}
	printVersions(out, o.MeterBefore)

	fmt.Fprintln(out, "\n== Dropping 1.0.0 now would break them:")
	if o.TooEarly, err = check(ctx, p, drained); err != nil {
		return o, err
	}
	fmt.Fprint(out, o.TooEarly)

	fmt.Fprintln(out, "\n== Three ticks: the meter's 1.0.0 code continues as new, onto the latest version, 2.0.0")
	for range 3 {
		if err := c.EnqueueEvent(ctx, "meter", "ticks", 1); err != nil {
			return o, err
		}
	}
	if err := waitCustom(ctx, c, "meter", "count 3 (2.0.0)"); err != nil {
		return o, err
	}
	if o.MeterAfter, err = p.VersionsInFlight(ctx); err != nil {
		return o, err
	}
	printVersions(out, o.MeterAfter)

	fmt.Fprintln(out, "\n== The orders ship and finish: 1.0.0 has drained")
	for _, id := range orders {
		if err := c.EnqueueEvent(ctx, id, "shipped", "parcel "+id); err != nil {
			return o, err
		}
		if _, err := c.Wait(ctx, id); err != nil {
			return o, err
		}
	}
	if o.Final, err = p.VersionsInFlight(ctx); err != nil {
		return o, err
	}
	printVersions(out, o.Final)

	fmt.Fprintln(out, "\n== Now a build without the 1.0.0 versions:")
	if o.Drained, err = check(ctx, p, drained); err != nil {
		return o, err
	}
	fmt.Fprint(out, o.Drained)
	return o, nil
}

func printVersions(out io.Writer, vs []redisprovider.VersionInFlight) {
	for _, v := range vs {
		fmt.Fprintf(out, "  %s %s: %d running, %d held\n", v.Orchestration, v.Version, v.Running, v.Held)
	}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, closeAll, err := exenv.Connect(ctx, "deploycheck")
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(1)
	}
	var b strings.Builder
	_, err = demo(ctx, p, &b)
	closeAll()
	fmt.Print(b.String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploycheck:", err)
		os.Exit(1)
	}
}
