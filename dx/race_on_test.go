//go:build race

package dx_test

// raceSlowdown stretches the tests' waits under the race detector (make test-race), which runs
// the code several times slower.
const raceSlowdown = 4
