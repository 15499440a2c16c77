package redisprovider_test

import (
	"testing"

	"github.com/duroxide-go/dxredis/conformance"
)

// TestConformance runs the whole provider validation suite on the test backend (miniredis by
// default; see backend()).
// Not parallel: its long_polling category checks latencies, and runs with nothing beside it (its
// other categories run in parallel).
func TestConformance(t *testing.T) {
	conformance.Run(t, redisFactory{})
}
