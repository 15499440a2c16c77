// Command eternal runs an orchestration that never grows: it counts in steps, keeps its count in
// the KV store, and continues as new (a fresh, empty history) every few steps until a limit.
//
//	go run ./examples/eternal
package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Plan says how far to count and how many steps one execution takes.
type Plan struct {
	Limit   int           `json:"limit"`
	PerExec int           `json:"per_exec"`
	Every   time.Duration `json:"every"`
}

// Counter is the orchestration's handle: its name and its input and output types.
var Counter = dx.NewOrchestration[Plan, int]("Counter")

// counter adds one per step (after a durable timer), records the count in the KV store (kept
// across continue-as-new, readable by clients) and continues as new every PerExec steps.
func counter(ctx dx.Context, p Plan) (int, error) {
	count := 0
	if v, ok := ctx.KV("count"); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, fmt.Errorf("KV count %q: %w", v, err)
		}
		count = n
	}
	for range p.PerExec {
		if count >= p.Limit {
			return count, nil
		}
		if err := ctx.Sleep(p.Every); err != nil {
			return 0, err
		}
		count++
		ctx.SetKV("count", strconv.Itoa(count))
		ctx.SetCustomStatus(fmt.Sprintf("count %d, execution %d", count, ctx.ExecutionID()))
	}
	return 0, Counter.ContinueAsNew(ctx, p)
}

func register(rt *dx.Runtime) error { return Counter.Register(rt, counter) }

func main() {
	exenv.Main("eternal", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		id, err := Counter.Start(ctx, c, Plan{Limit: 10, PerExec: 3, Every: 10 * time.Millisecond})
		if err != nil {
			return err
		}
		n, err := Counter.Result(ctx, c, id)
		if err != nil {
			return err
		}
		st, err := c.Status(ctx, id)
		if err != nil {
			return err
		}
		fmt.Printf("counted to %d in %d executions\n", n, st.ExecutionID)
		return nil
	})
}
