// Package conformance is duroxide's provider validation suite in Go: any implementation of
// provider.Provider can prove the contract with
//
//	func TestConformance(t *testing.T) { conformance.Run(t, myFactory{}) }
//
// Run runs duroxide 0.1.29's 221 tests (under their duroxide names, grouped by duroxide's
// categories), duroxide 0.1.31's provider-level additions, and tests a Redis store needs that
// duroxide lacks (category "redis_extras"). Every test runs in parallel on its own provider from
// the Factory. RunCategory runs one category; each test is also an exported function.
//
// Deviations from duroxide, each written on its test: a capability filter with several ranges
// matches a version in any range; the short-poll tests ask for an immediate answer with a poll
// timeout of 0.
package conformance
