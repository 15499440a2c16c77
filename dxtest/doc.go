// Package dxtest tests orchestrations: an in-process runtime on an embedded miniredis with a
// virtual clock and activity mocks, and a replayer that checks recorded histories against the
// current code.
//
//	func TestCheckout(t *testing.T) {
//		env := dxtest.New(t)
//		if err := Checkout.Register(env.Runtime, checkout); err != nil { // Checkout: a dx.Orchestration
//			t.Fatal(err)
//		}
//		dxtest.OnActivity(env, Charge).Return(Receipt{ID: "r-1"}) // Charge: a dx.Activity; typed answers
//
//		id := env.Start(Checkout.Name(), Order{ID: "o-7"})
//		got := dxtest.Result[Receipt](env, id) // a 24 h timer in Checkout takes milliseconds
//		if got.ID != "r-1" { ... }
//	}
//
// Time stands still until a wait (Wait, Result, Err, WaitForEventWait, WaitForCustomStatus) finds
// nothing left to do but wait for a timer or a retry's backoff; then the clock jumps to it. Events
// the code waits for are raised from the test once the code waits (WaitForEventWait,
// WaitForCustomStatus), or at a virtual time with After. An event raised while nothing waits for
// it is dropped by the runtime, and fails the test at its end (AllowDroppedEvents allows it).
//
// A mock (OnActivity) overrides the activity registered under its name, so a test registers the
// real activities as the program does and mocks the ones it controls.
//
// Every turn is compared with fresh replays of the stored history (dx.Options.ReplayCheckRate), so
// orchestration code that reads time.Now, ranges over a map or draws random numbers fails its test
// every time with a nondeterminism error, where the runtime's executor cache would let it pass
// until a restart. WithoutReplayCheck turns this off.
//
// Replay, ReplayFile and ReplayInstance replay recorded histories against the code registered on a
// runtime, so that a change that would break running instances fails CI with the event where the
// code diverges; RequireReplayable does it for every live instance of a store (dx.CheckReplay).
package dxtest
