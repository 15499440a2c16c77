package dxtest

import (
	"testing"

	"github.com/duroxide-go/dxredis/dx"
)

// A start that no fetcher has taken yet is work: the clock must not jump past it (it did when the
// idle check read only the pinned ready sets, and an After callback then ran before the first turn).
func TestStartNotYetFetchedIsNotIdle(t *testing.T) {
	for _, opts := range [][]dx.StartOption{nil, {dx.WithVersion("1.2.0")}} {
		env := New(t)
		dx.Register(env.Runtime, "Noop", func(dx.Context, string) (string, error) { return "", nil })
		// The client, not env.Start: the runtime stays stopped, so the start stays queued.
		if _, err := env.Client.Start(env.ctx, "Noop", "x", opts...); err != nil {
			t.Fatal(err)
		}
		idle, _, err := env.idle()
		if err != nil {
			t.Fatal(err)
		}
		if idle {
			t.Fatalf("a queued start (options %v) reads as idle", opts)
		}
	}
}
