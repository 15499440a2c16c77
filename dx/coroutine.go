package dx

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// A coroutine is one goroutine of orchestration code: the orchestration function itself or a branch
// started with Go. Exactly one coroutine runs at a time: the engine resumes it and waits until it
// blocks (in Await, Select or Join on a future that is not ready) or returns. The engine resumes
// coroutines in creation order, so the order of everything they do is fixed by the history alone.
type coroutine struct {
	eng    *engine
	id     int
	parent *coroutine // the coroutine that started this branch; nil for the orchestration itself

	resume  chan resumeMode // engine -> coroutine
	yield   chan struct{}   // coroutine -> engine: parked or finished
	blocked func() bool     // set while parked: reports whether the wait can end
	started bool
	done    bool // the function returned (or panicked, or unwound)
	killed  bool // set by the coroutine itself once told to exit: it unwinds at every wait

	// engine-side state, never touched by the coroutine's goroutine
	cancelled bool // a cancelled branch: resumed only to exit
	gone      bool // abandoned by the blocking guard; the engine no longer talks to it

	// result of the coroutine's function, JSON text or an error
	output      string // the orchestration function's JSON output
	branchValue any    // a branch's result
	err         error
	// panicked is set when the function panicked; err then describes the panic
	panicked bool
	stack    []byte

	fut *future // the branch's own future (nil for the orchestration function)
}

type resumeMode int

const (
	resumeRun resumeMode = iota
	resumeExit
)

// stuckGoroutines counts orchestration goroutines that blocked outside the engine (a native channel,
// time.Sleep, a mutex) past Options.BlockingGuard. Go cannot stop such a goroutine; it is left behind
// and counted here rather than pretended gone.
var stuckGoroutines atomic.Int64

// StuckGoroutines reports how many orchestration goroutines this process has abandoned because they
// blocked on something other than a dx future for longer than Options.BlockingGuard. Each one is a
// goroutine that still exists; a growing number means orchestration code waits on channels, locks or
// sleeps, which it must not do.
func StuckGoroutines() int64 { return stuckGoroutines.Load() }

// errBlocked is returned by run when the coroutine did not hand control back in time.
type errBlocked struct{ after time.Duration }

func (e errBlocked) Error() string {
	return fmt.Sprintf("orchestration code did not yield within %s: it is blocked on something outside dx "+
		"(a native channel, time.Sleep, a mutex, I/O?). Orchestration code may only wait on dx futures "+
		"(Await, Select, Join, Timer); move blocking work into an activity", e.after)
}

// start creates the goroutine lazily, on the first resume.
func (co *coroutine) start(fn func(*coroutine)) {
	co.resume = make(chan resumeMode)
	co.yield = make(chan struct{})
	go func() {
		returned := false
		defer func() {
			if r := recover(); r != nil {
				co.panicked = true
				co.err = fmt.Errorf("%v", r)
				co.stack = debug.Stack()
			} else if !returned && !co.killed {
				// runtime.Goexit in the code (t.FailNow in a helper, ...): it did not return a
				// result, so it fails like a panic rather than completing with nothing.
				co.panicked = true
				co.err = errors.New("the orchestration code called runtime.Goexit (t.Fatal or t.FailNow in a helper?) instead of returning")
				co.stack = debug.Stack()
			}
			co.done = true
			co.yield <- struct{}{}
		}()
		if <-co.resume == resumeExit {
			co.killed = true
			return
		}
		fn(co)
		returned = true
	}()
	co.started = true
}

// run hands control to the coroutine until it parks or finishes. It returns errBlocked when the
// coroutine neither parks nor finishes within the guard.
func (co *coroutine) run(mode resumeMode) error {
	e := co.eng
	prev := e.running
	e.running = co
	defer func() { e.running = prev }()
	co.blocked = nil
	co.resume <- mode
	if e.guard <= 0 {
		<-co.yield
		return nil
	}
	// Reuse one timer per engine: a turn resumes coroutines many times.
	if e.guardTimer == nil {
		e.guardTimer = time.NewTimer(e.guard)
	} else {
		e.guardTimer.Reset(e.guard)
	}
	select {
	case <-co.yield:
		e.guardTimer.Stop()
		return nil
	case <-e.guardTimer.C:
		stuckGoroutines.Add(1)
		co.gone = true
		return errBlocked{e.guard}
	}
}

// park blocks the calling coroutine until ready() reports true. It is only called from the
// coroutine's own goroutine. A killed coroutine never returns from park: it unwinds with
// runtime.Goexit, running its deferred calls (durable operations they attempt are ignored).
func (co *coroutine) park(ready func() bool) {
	for {
		if co.killed {
			runtime.Goexit()
		}
		if ready() {
			return
		}
		co.blocked = ready
		co.yield <- struct{}{}
		if <-co.resume == resumeExit {
			co.killed = true
		}
	}
}

// runnable reports whether resuming the coroutine would make progress.
func (co *coroutine) runnable() bool {
	if co.gone || co.done {
		return false
	}
	if co.cancelled {
		return co.started
	}
	if !co.started || co.blocked == nil {
		return true
	}
	return co.blocked()
}
