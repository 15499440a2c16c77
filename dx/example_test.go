package dx_test

import (
	"context"
	"errors"
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

// The activities and orchestrations of a program, declared once: a name and the types it takes
// and returns.
var (
	Greet = dx.NewActivity[string, string]("Greet")
	Hello = dx.NewOrchestration[string, string]("Hello")
)

func ExampleRuntime() {
	p, done := exampleProvider()
	defer done()
	ctx := context.Background()

	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	if err := Greet.Register(rt, func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	}); err != nil {
		panic(err)
	}
	if err := Hello.Register(rt, func(ctx dx.Context, name string) (string, error) {
		return Greet.Call(ctx, name).Await(ctx)
	}); err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer func() {
		if err := rt.Shutdown(ctx); err != nil {
			panic(err)
		}
	}()

	c := dx.NewClient(p)
	id, err := Hello.Start(ctx, c, "world")
	if err != nil {
		panic(err)
	}
	out, err := Hello.Result(ctx, c, id)
	fmt.Println(out, err)
	// Output: Hello, world! <nil>
}

func ExampleClient_Start() {
	p, done := exampleProvider()
	defer done()
	ctx := context.Background()
	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	approval := dx.NewOrchestration[int, string]("Approval")
	if err := approval.Register(rt, func(ctx dx.Context, amount int) (string, error) {
		ok := dx.WaitEvent[bool](ctx, "Approved")
		ctx.SetCustomStatus("waiting")
		if dx.Select(ctx, ok, ctx.Timer(time.Hour)) != ok {
			return "timed out", nil
		}
		yes, err := ok.Await(ctx)
		if err != nil {
			return "", err
		}
		if yes {
			return fmt.Sprintf("%d approved", amount), nil
		}
		return "rejected", nil
	}); err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer func() {
		if err := rt.Shutdown(ctx); err != nil {
			panic(err)
		}
	}()

	c := dx.NewClient(p)
	id, err := approval.Start(ctx, c, 120, dx.WithInstanceID("expense-7"))
	if err != nil {
		panic(err)
	}
	// An event is delivered only to a wait that exists (one raised earlier is dropped): wait for
	// the custom status first, or use EnqueueEvent and Dequeue for messages that may come early.
	if _, err := c.WaitForStatusChange(ctx, id, 0); err != nil {
		panic(err)
	}
	if err := c.RaiseEvent(ctx, id, "Approved", true); err != nil {
		panic(err)
	}
	out, err := approval.Result(ctx, c, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(id, out)
	// Output: expense-7 120 approved
}

// A nil provider, also a typed nil left by an ignored constructor error, is refused at the call
// with ErrInvalidInput instead of crashing a background goroutine.
func ExampleNewRuntime_nilProvider() {
	var p *redisprovider.Provider // as left by p, _ := redisprovider.New(...) with Redis down
	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	err := rt.Start(context.Background())
	fmt.Println(errors.Is(err, dx.ErrInvalidInput))
	// Output: true
}
