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

// Handles: each names an activity or an orchestration (the name is what histories record, so
// renaming Go code never breaks running instances) and fixes its input and output types, which
// the compiler then checks at every registration and call.
var (
	Greet = dx.NewActivity[string, string]("Greet")
	Hello = dx.NewOrchestration[string, string]("Hello")
)

// greet is an activity: it may do I/O, read clocks, fail and be retried.
func greet(ctx context.Context, name string) (string, error) {
	return "Hello, " + name + "!", nil
}

// hello is an orchestration: deterministic code whose steps are recorded and replayed.
func hello(ctx dx.Context, name string) (string, error) {
	return Greet.Call(ctx, name).Await(ctx)
}

func register(rt *dx.Runtime) error {
	return errors.Join(
		Greet.Register(rt, greet),
		Hello.Register(rt, hello),
	)
}

func main() {
	exenv.Main("hello", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		id, err := Hello.Start(ctx, c, "world")
		if err != nil {
			return err
		}
		out, err := Hello.Result(ctx, c, id)
		if err != nil {
			return err
		}
		fmt.Println(out)
		return nil
	})
}
