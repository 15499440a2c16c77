package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary serve as the demo's worker processes (the demo re-runs its own
// executable with -worker).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-worker" {
		if err := runWorker(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestDemoEveryInstanceOnceAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if err := runDemo(150); err != nil {
		t.Fatal(err)
	}
}
