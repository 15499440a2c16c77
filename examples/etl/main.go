// Command etl runs a small pipeline: extract on any worker, transform on one worker per batch (a
// session, so the batch's files stay on one machine), load on workers tagged "warehouse".
//
//	go run ./examples/etl
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
	"github.com/duroxide-go/dxredis/provider"
)

// Batch names the rows to process.
type Batch struct {
	ID   string   `json:"id"`
	Rows []string `json:"rows"`
}

// The activities and the orchestration, by name and types.
var (
	Extract   = dx.NewActivity[Batch, []string]("Extract")
	Transform = dx.NewActivity[string, string]("Transform")
	Load      = dx.NewActivity[[]string, int]("Load")
	Pipeline  = dx.NewOrchestration[Batch, int]("Pipeline")
)

// pipeline extracts, transforms each row on the batch's session, and loads the result on a
// warehouse worker.
func pipeline(ctx dx.Context, b Batch) (int, error) {
	rows, err := Extract.Call(ctx, b).Await(ctx)
	if err != nil {
		return 0, err
	}
	var out []string
	for _, r := range rows {
		t, err := Transform.Call(ctx, r, dx.OnSession(b.ID)).Await(ctx)
		if err != nil {
			return 0, err
		}
		out = append(out, t)
	}
	return Load.Call(ctx, out, dx.WithTag("warehouse")).Await(ctx)
}

func register(rt *dx.Runtime) error {
	return errors.Join(
		Extract.Register(rt, func(_ context.Context, b Batch) ([]string, error) { return b.Rows, nil }),
		Transform.Register(rt, func(_ context.Context, row string) (string, error) {
			return strings.ToUpper(strings.TrimSpace(row)), nil
		}),
		Load.Register(rt, func(_ context.Context, rows []string) (int, error) {
			fmt.Println("loading", rows)
			return len(rows), nil
		}),
		Pipeline.Register(rt, pipeline),
	)
}

// options make this runtime a warehouse worker too: it takes untagged activities and "warehouse".
func options() dx.Options {
	f, err := provider.TagFilterDefaultAnd("warehouse")
	if err != nil {
		panic(err)
	}
	return dx.Options{WorkerTagFilter: f}
}

func main() {
	exenv.Main("etl", options(), register, func(ctx context.Context, c *dx.Client) error {
		id, err := Pipeline.Start(ctx, c, Batch{ID: "batch-1", Rows: []string{" alpha", "beta ", "gamma"}})
		if err != nil {
			return err
		}
		n, err := Pipeline.Result(ctx, c, id)
		if err != nil {
			return err
		}
		fmt.Println("loaded", n, "rows")
		return nil
	})
}
