// Command hello runs the smallest orchestration: one activity call.
//
//	go run ./examples/hello
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Greet is an activity: it may do I/O, read clocks, fail and be retried.
func Greet(ctx context.Context, name string) (string, error) {
	return "Hello, " + name + "!", nil
}

// Hello is an orchestration: deterministic code whose steps are recorded and replayed.
func Hello(ctx dx.Context, name string) (string, error) {
	return dx.Call[string](ctx, "Greet", name).Await(ctx)
}

func register(rt *dx.Runtime) error {
	return errors.Join(
		dx.RegisterActivity(rt, "Greet", Greet),
		dx.Register(rt, "Hello", Hello),
	)
}

func main() {
	exenv.Main("hello", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		id, err := c.Start(ctx, "Hello", "world")
		if err != nil {
			return err
		}
		out, err := dx.Result[string](ctx, c, id)
		if err != nil {
			return err
		}
		fmt.Println(out)
		return nil
	})
}
