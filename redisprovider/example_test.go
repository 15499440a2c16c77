package redisprovider_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/redisprovider"
)

func Example() {
	m := miniredis.NewMiniRedis() // stands in for a real server here
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()
	ctx := context.Background()

	p, err := redisprovider.New(ctx, redisprovider.Options{
		Addr:      m.Addr(), // default "127.0.0.1:6379"
		Namespace: "orders", // every key of this provider lives under this namespace
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()

	// p is a provider.Provider: hand it to a runtime and a client.
	c := dx.NewClient(p)
	id, err := c.Start(ctx, "Checkout", map[string]int{"cents": 1250}, dx.WithInstanceID("order-7"))
	if err != nil {
		panic(err)
	}
	st, err := c.Status(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Name(), id, st.State) // no runtime here, so it has not started yet
	// Output: redis order-7 NotFound
}
