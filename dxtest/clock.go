package dxtest

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The virtual clock. The runtime's Options.Clock and miniredis's TIME (which the provider's scripts
// read for visibility and lock expiry) show the same time, which stands still until the
// environment moves both. Wait moves it when the store shows that nothing can happen: no
// orchestration turn or activity locked (running), none ready to run, nothing delayed already due.
// It then jumps to the earliest delayed item (a timer's TimerFired, a delayed retry) or After
// callback, and wakes the orchestration fetchers so they look again at once.

// idle reports whether nothing can happen without the clock moving, and the next due time
// (zero when nothing is delayed): redisprovider's Idle, one atomic read of the queues.
func (e *Env) idle() (idle bool, next time.Time, err error) {
	st, err := e.Provider.Idle(e.ctx)
	return st.Idle, st.NextDue, err
}

// Advance moves the virtual clock forward by d at once: timers due by then fire.
func (e *Env) Advance(d time.Duration) {
	e.t.Helper()
	if d < 0 {
		e.t.Fatalf("dxtest: Advance(%v): the clock only moves forward", d)
	}
	e.setTime(e.Now().Add(d))
}

// After runs fn (on the test's goroutine, inside a wait) when the virtual clock reaches d from now,
// e.g. to raise an event two hours into an orchestration:
//
//	env.After(2*time.Hour, func() { env.RaiseEvent(id, "Approved", true) })
func (e *Env) After(d time.Duration, fn func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.callbacks = append(e.callbacks, callback{at: e.now.Add(d), fn: fn})
	slices.SortStableFunc(e.callbacks, func(a, b callback) int { return a.at.Compare(b.at) })
}

func (e *Env) setTime(t time.Time) {
	e.mu.Lock()
	if t.After(e.now) {
		e.now = t
		e.mr.SetTime(t)
	}
	e.mu.Unlock()
	// Wake the fetchers blocked on their long poll: what they wait for may be due now.
	e.Provider.Nudge()
}

// runDueCallbacks runs the After callbacks whose time has come.
func (e *Env) runDueCallbacks() bool {
	ran := false
	for {
		e.mu.Lock()
		if len(e.callbacks) == 0 || e.callbacks[0].at.After(e.now) {
			e.mu.Unlock()
			return ran
		}
		cb := e.callbacks[0]
		e.callbacks = e.callbacks[1:]
		e.mu.Unlock()
		cb.fn()
		ran = true
	}
}

// stuckAfter is how long (real time) the store must stay idle with nothing scheduled before a wait
// declares the instance stuck (another goroutine of the test may still be about to send something).
const stuckAfter = 500 * time.Millisecond

// waitFor polls done until it holds, moving the clock whenever nothing else can happen (every wait
// does), and fails the test on a misconfiguration, on an instance that can no longer move, or
// after the timeout.
func (e *Env) waitFor(what, instance string, done func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(e.timeout)
	var stuckSince time.Time
	for {
		e.runDueCallbacks()
		if done() {
			return
		}
		e.mu.Lock()
		problems := slices.Clone(e.problems)
		e.mu.Unlock()
		if len(problems) > 0 {
			e.t.Fatalf("dxtest: while waiting for %s: %s", what, strings.Join(problems, "; "))
		}
		idle, next, err := e.idle()
		if err != nil {
			e.t.Fatalf("dxtest: reading the queues: %v", err)
		}
		if idle && done() {
			return // it happened before the store went idle: no need to move the clock
		}
		e.mu.Lock()
		if len(e.callbacks) > 0 && (next.IsZero() || e.callbacks[0].at.Before(next)) {
			next = e.callbacks[0].at
		}
		e.mu.Unlock()
		switch {
		case idle && !next.IsZero():
			stuckSince = time.Time{}
			e.setTime(next)
			continue
		case idle:
			if stuckSince.IsZero() {
				stuckSince = time.Now()
			} else if time.Since(stuckSince) > stuckAfter {
				e.t.Fatalf("dxtest: while waiting for %s: nothing is running or scheduled, so it can never happen\n%s",
					what, e.describe(instance))
			}
		default:
			stuckSince = time.Time{}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("dxtest: timed out after %v waiting for %s\n%s", e.timeout, what, e.describe(instance))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// describe renders an instance's state for a failure message.
func (e *Env) describe(instance string) string {
	st, err := e.Client.Status(e.ctx, instance)
	if err != nil {
		return fmt.Sprintf("  (status unavailable: %v)", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  instance %s: %s, virtual time %s", instance, st.State, e.Now().Format(time.RFC3339))
	if st.CustomStatus != nil {
		fmt.Fprintf(&b, ", custom status %q", *st.CustomStatus)
	}
	hist, _ := e.Client.History(e.ctx, instance, 0)
	var waits []string
	for _, ev := range hist {
		if k, ok := ev.Kind.(provider.ExternalSubscribedEvent); ok && pendingWaits(hist, k.Name) > 0 && !slices.Contains(waits, k.Name) {
			waits = append(waits, k.Name)
		}
	}
	if len(waits) > 0 {
		fmt.Fprintf(&b, "\n  it waits for events %q (raise them with env.RaiseEvent, or from env.After)", waits)
	}
	from := max(0, len(hist)-8)
	fmt.Fprintf(&b, "\n  last events:")
	for _, ev := range hist[from:] {
		fmt.Fprintf(&b, "\n    %d %s", ev.EventID, ev.EventType())
	}
	return b.String()
}

// RunUntil runs the virtual clock up to t: every timer (and After callback) due by then fires, in
// order, and RunUntil returns once nothing more can happen before the clock moves past t. A
// schedule (dx.Client.CreateSchedule) never finishes, so its tests run the clock with RunUntil (or
// RunFor) and look at what it started:
//
//	env.CreateSchedule("tick", dx.Schedule{Spec: dx.ScheduleSpec{Every: time.Minute}, Action: Tick.ScheduleAction(in)})
//	env.RunFor(24 * time.Hour) // 1,440 runs, in seconds of real time
func (e *Env) RunUntil(t time.Time) {
	e.t.Helper()
	e.ensureStarted()
	deadline := time.Now().Add(e.timeout)
	for {
		e.runDueCallbacks()
		e.mu.Lock()
		problems := slices.Clone(e.problems)
		e.mu.Unlock()
		if len(problems) > 0 {
			e.t.Fatalf("dxtest: while running the clock to %s: %s", t.Format(time.RFC3339), strings.Join(problems, "; "))
		}
		idle, next, err := e.idle()
		if err != nil {
			e.t.Fatalf("dxtest: reading the queues: %v", err)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("dxtest: timed out after %v running the clock to %s (virtual time %s)", e.timeout,
				t.Format(time.RFC3339), e.Now().Format(time.RFC3339))
		}
		if !idle {
			time.Sleep(time.Millisecond)
			continue
		}
		e.mu.Lock()
		if len(e.callbacks) > 0 && (next.IsZero() || e.callbacks[0].at.Before(next)) {
			next = e.callbacks[0].at
		}
		e.mu.Unlock()
		if next.IsZero() || next.After(t) {
			if !e.Now().Before(t) {
				return
			}
			next = t
		}
		e.setTime(next)
	}
}

// RunFor runs the virtual clock for d: RunUntil(Now() + d).
func (e *Env) RunFor(d time.Duration) {
	e.t.Helper()
	e.RunUntil(e.Now().Add(d))
}

// WaitUntil waits until cond holds, moving the virtual clock like Wait when nothing else can
// happen; what names the condition in the failure message.
func (e *Env) WaitUntil(what string, cond func() bool) {
	e.t.Helper()
	e.ensureStarted()
	e.waitFor(what, "", cond)
}
