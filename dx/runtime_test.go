package dx_test

import (
	"context"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

func TestHelloEndToEnd(t *testing.T) {
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	dx.RegisterActivity(rt, "Greet", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		return dx.Call[string](ctx, "Greet", name).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := c.Start(ctx, "Hello", "world", dx.WithInstanceID("hello"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := dx.Result[string](ctx, c, id)
	if err != nil || out != "Hello, world!" {
		t.Fatalf("got %q, %v", out, err)
	}
}
