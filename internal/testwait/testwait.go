// Package testwait is the tests' one way to wait for a condition: poll it on a ticker until it
// holds, failing the test once the time is up (after one last look).
package testwait

import (
	"testing"
	"time"
)

// For polls cond every 5 ms until it holds; after within it fails t with fail's message.
func For(t testing.TB, within time.Duration, cond func() bool, fail func() string) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatal(fail())
		}
	}
}

// Until is For with the message "timed out waiting for <what>".
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	For(t, within, cond, func() string { return "timed out waiting for " + what })
}
