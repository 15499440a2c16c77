package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// Factory creates providers for the suite. Every CreateProvider call must return a fresh, empty,
// isolated store (a new namespace for Redis): tests run in parallel and some use store-wide filters.
type Factory interface {
	// CreateProvider returns a new isolated provider; the suite closes nothing, use t.Cleanup.
	CreateProvider(t *testing.T) provider.Provider
	// LockTimeout is the lock duration the tests pass to fetches and base their sleeps on (1 s for Redis).
	LockTimeout() time.Duration
	// ShortPollThreshold is the most an immediate (poll timeout 0) empty fetch may take.
	ShortPollThreshold() time.Duration
	// CorruptInstanceHistory overwrites the stored history of instance's executions in p so that it
	// no longer decodes as Events.
	CorruptInstanceHistory(t *testing.T, p provider.Provider, instance string)
	// MaxAttemptCount returns the highest attempt count among instance's queued orchestrator messages in p.
	MaxAttemptCount(t *testing.T, p provider.Provider, instance string) uint32
}

// test is one conformance test: a name as in duroxide's suite and its body.
type test struct {
	name string
	fn   func(t *testing.T, f Factory)
}

// category is a group of tests, named after duroxide's provider_validation module.
type category struct {
	name  string
	tests []test
}

// categories lists every category in the order duroxide's catalog gives them. Each category file
// appends itself in an init function.
var categories []category

func register(name string, tests ...test) {
	categories = append(categories, category{name: name, tests: tests})
}

// Run runs every category as a subtest, every test in parallel on its own provider: first
// long_polling, whose tests check latencies (an immediate fetch returns within
// ShortPollThreshold), with no other category beside it; then all the others in parallel.
func Run(t *testing.T, f Factory) {
	for _, c := range categories {
		t.Run(c.name, func(t *testing.T) {
			if c.name != timedCategory {
				t.Parallel() // starts once the loop is done, after timedCategory
			}
			runCategory(t, f, c)
		})
	}
}

// timedCategory is the category that checks latencies.
const timedCategory = "long_polling"

// RunCategory runs the named category only (e.g. "atomicity", "sessions").
func RunCategory(t *testing.T, f Factory, name string) {
	for _, c := range categories {
		if c.name == name {
			runCategory(t, f, c)
			return
		}
	}
	t.Fatalf("unknown conformance category %q", name)
}

func runCategory(t *testing.T, f Factory, c category) {
	for _, tc := range c.tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, f)
		})
	}
}

// ctx returns a context that ends with the test.
func ctx(t *testing.T) context.Context { return t.Context() }
