package exenv

import (
	"context"
	"errors"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

// With no Redis at DXREDIS_ADDR, Main's plumbing falls back to miniredis and runs the example.
func TestRunFallsBackToMiniredisAndDropsTheNamespace(t *testing.T) {
	t.Setenv("DXREDIS_ADDR", "127.0.0.1:1") // nothing listens on port 1
	echo := dx.NewOrchestration[string, string]("Echo")
	err := run("test", dx.Options{}, func(rt *dx.Runtime) error {
		return echo.Register(rt, func(ctx dx.Context, s string) (string, error) { return s, nil })
	}, func(ctx context.Context, c *dx.Client) error {
		id, err := echo.Start(ctx, c, "hi")
		if err != nil {
			return err
		}
		out, err := echo.Result(ctx, c, id)
		if err == nil && out != "hi" {
			err = errors.New("wrong output " + out)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
