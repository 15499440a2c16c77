// Command fanout processes several files in parallel (fan-out), waits for all of them (fan-in) and
// reports the ones that failed instead of failing the whole job.
//
//	go run ./examples/fanout
package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Report is the job's result.
type Report struct {
	Lines  int               `json:"lines"`
	Failed map[string]string `json:"failed"` // file -> error
}

// The activity and the orchestration, by name and types.
var (
	CountLines = dx.NewActivity[string, int]("CountLines")
	Process    = dx.NewOrchestration[[]string, Report]("Process")
)

// countLines is the activity; it fails for files it cannot read.
func countLines(ctx context.Context, file string) (int, error) {
	if strings.HasPrefix(file, "missing") {
		return 0, fmt.Errorf("%s: no such file", file)
	}
	return len(file) * 10, nil
}

// process starts one activity per file at once, then awaits each: a failure is recorded, not fatal.
func process(ctx dx.Context, files []string) (Report, error) {
	futures := make([]dx.Future[int], len(files))
	for i, f := range files {
		futures[i] = CountLines.Call(ctx, f)
	}
	r := Report{Failed: map[string]string{}}
	for i, f := range futures {
		n, err := f.Await(ctx)
		if err != nil {
			r.Failed[files[i]] = err.Error()
			continue
		}
		r.Lines += n
	}
	return r, nil
}

func register(rt *dx.Runtime) error {
	return errors.Join(
		CountLines.Register(rt, countLines),
		Process.Register(rt, process),
	)
}

func main() {
	exenv.Main("fanout", dx.Options{WorkerConcurrency: 4}, register, func(ctx context.Context, c *dx.Client) error {
		id, err := Process.Start(ctx, c, []string{"a.csv", "bb.csv", "missing.csv", "dddd.csv"})
		if err != nil {
			return err
		}
		r, err := Process.Result(ctx, c, id)
		if err != nil {
			return err
		}
		fmt.Printf("%d lines; %d file(s) failed: %v\n", r.Lines, len(r.Failed), r.Failed)
		return nil
	})
}
