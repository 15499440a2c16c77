package redisprovider_test

import (
	"testing"

	"github.com/duroxide-go/dxredis/conformance"
)

// TestConformance runs the whole provider validation suite on the test backend (miniredis by
// default; see backend()).
func TestConformance(t *testing.T) {
	conformance.Run(t, redisFactory{})
}
