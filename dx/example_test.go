package dx_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// exampleProvider is a provider on an embedded miniredis; use redisprovider.New with your
// server's address instead.
func exampleProvider() (*redisprovider.Provider, func()) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		panic(err)
	}
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: m.Addr(), Namespace: "example", Logger: quietLogger})
	if err != nil {
		panic(err)
	}
	return p, func() { _ = p.Close(); m.Close() }
}

func ExampleRuntime() {
	p, done := exampleProvider()
	defer done()
	ctx := context.Background()

	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	dx.RegisterActivity(rt, "Greet", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		return dx.Call[string](ctx, "Greet", name).Await(ctx)
	})
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer rt.Shutdown(ctx)

	c := dx.NewClient(p)
	id, _ := c.Start(ctx, "Hello", "world")
	out, err := dx.Result[string](ctx, c, id)
	fmt.Println(out, err)
	// Output: Hello, world! <nil>
}

func ExampleClient_Start() {
	p, done := exampleProvider()
	defer done()
	ctx := context.Background()
	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	dx.Register(rt, "Approval", func(ctx dx.Context, amount int) (string, error) {
		ok := dx.WaitEvent[bool](ctx, "Approved")
		ctx.SetCustomStatus("waiting")
		if dx.Select(ctx, ok, ctx.Timer(time.Hour)) != ok {
			return "timed out", nil
		}
		if yes, _ := ok.Await(ctx); yes {
			return fmt.Sprintf("%d approved", amount), nil
		}
		return "rejected", nil
	})
	_ = rt.Start(ctx)
	defer rt.Shutdown(ctx)

	c := dx.NewClient(p)
	id, err := c.Start(ctx, "Approval", 120, dx.WithInstanceID("expense-7"))
	if err != nil {
		panic(err)
	}
	// An event is delivered only to a wait that exists: wait for the custom status first.
	if _, err := c.WaitForStatusChange(ctx, id, 0); err != nil {
		panic(err)
	}
	_ = c.RaiseEvent(ctx, id, "Approved", true)
	out, _ := dx.Result[string](ctx, c, id)
	fmt.Println(id, out)
	// Output: expense-7 120 approved
}
