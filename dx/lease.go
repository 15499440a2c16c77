package dx

import (
	"fmt"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// lease is a lock this runtime holds (a turn's or an activity's), as its own clock sees it: valid
// until the fetch or the last renewal that took it, plus the lock timeout, less a margin for the
// call's latency (a fetch's lock starts before its reply arrives) and for clock drift. While it is
// valid, a call that needs the lock and fails with a retryable error (Redis restarting, a dropped
// connection) is retried: an acknowledgement, so that a result finished during a short outage is
// not run again; a renewal, so that a transient error does not cancel an activity that still
// holds its lock. Only a permanent error (the lock is lost) or the lease's end stops them.
type lease struct {
	timeout time.Duration
	mu      sync.Mutex
	until   time.Time
}

// newLease starts a lease for a lock of timeout taken by a call that returned at at.
func newLease(at time.Time, timeout time.Duration) *lease {
	l := &lease{timeout: timeout}
	l.renewed(at)
	return l
}

// leaseMargin is how much earlier than its timeout a lock is taken as lost: a tenth, at most 1 s.
func leaseMargin(timeout time.Duration) time.Duration { return min(timeout/10, time.Second) }

// renewed extends the lease after a renewal sent at at succeeded.
func (l *lease) renewed(at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := at.Add(l.timeout - leaseMargin(l.timeout)); u.After(l.until) {
		l.until = u
	}
}

// left is how long the lease is still valid (≤ 0 once it ended).
func (l *lease) left() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Until(l.until)
}

// retryWait is the wait before try+1 of a call that failed with a retryable error: 20 ms
// doubling, at most 500 ms.
func retryWait(try int) time.Duration {
	return min(20*time.Millisecond<<min(try-1, 5), 500*time.Millisecond)
}

// retryAfter decides about a call that failed with err at its try-th try: for a retryable error
// while the lease is valid it waits (retryWait, never past the lease's end) and reports true.
func (l *lease) retryAfter(err error, try int) bool {
	if !provider.IsRetryable(err) {
		return false
	}
	left := l.left()
	if left <= 0 {
		return false
	}
	time.Sleep(min(retryWait(try), left))
	return true
}

// renewing calls renew every interval until stop is called, extending l after each success. A
// renewal that fails with a retryable error is retried (retryWait) while l is valid; a permanent
// error, or l ending, ends the renewals and is passed to lost (which may be nil). Nothing runs until
// the first renewal is due, so a turn shorter than interval costs one timer; stop waits for a
// renewal in progress.
func renewing(l *lease, interval time.Duration, renew func() error, lost func(error)) (stop func()) {
	var mu sync.Mutex
	var running sync.WaitGroup
	stopped := false
	failures := 0
	var t *time.Timer
	mu.Lock() // the callback reads t under mu: a short interval may run it before AfterFunc returns
	defer mu.Unlock()
	t = time.AfterFunc(interval, func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		running.Add(1)
		mu.Unlock()
		defer running.Done()
		sent := time.Now()
		next := interval
		if err := renew(); err == nil {
			l.renewed(sent)
			failures = 0
		} else {
			left := l.left()
			if !provider.IsRetryable(err) || left <= 0 {
				if left <= 0 && provider.IsRetryable(err) {
					err = fmt.Errorf("the lock's lease ended while its renewals failed: %w", err)
				}
				if lost != nil {
					lost(err)
				}
				return
			}
			failures++
			next = min(retryWait(failures), left)
		}
		mu.Lock()
		if !stopped {
			t.Reset(next)
		}
		mu.Unlock()
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		running.Wait()
	}
}
