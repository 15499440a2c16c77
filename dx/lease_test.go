package dx

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/internal/testwait"
	"github.com/duroxide-go/dxredis/provider"
)

func TestLeaseRetryAfter(t *testing.T) {
	l := newLease(time.Now(), time.Minute)
	if !l.retryAfter(provider.NewRetryableError("op", "LOADING"), 1) {
		t.Fatal("a retryable error while the lease is valid is not retried")
	}
	if l.retryAfter(provider.NewPermanentError("op", "lost").WithKind(provider.ErrInvalidLockToken), 1) {
		t.Fatal("a permanent error is retried")
	}
	if newLease(time.Now().Add(-time.Minute), time.Second).retryAfter(provider.NewRetryableError("op", "LOADING"), 1) {
		t.Fatal("a retryable error is retried after the lease ended")
	}
}

// A renewal failing with retryable errors is retried while the lease is valid; once one
// succeeds, the lease is extended and nothing is lost.
func TestRenewingRetriesTransientErrors(t *testing.T) {
	l := newLease(time.Now(), time.Minute)
	var calls atomic.Int32
	var lost atomic.Value
	stop := renewing(l, time.Millisecond, func() error {
		if calls.Add(1) <= 4 {
			return provider.NewRetryableError("renew", "connection refused")
		}
		return nil
	}, func(err error) { lost.Store(err) })
	testwait.Until(t, 5*time.Second, "a renewal succeeds after 4 transient failures", func() bool { return calls.Load() >= 6 })
	stop()
	if err := lost.Load(); err != nil {
		t.Fatalf("lost called: %v", err)
	}
}

// A permanent error (the lock is lost) ends the renewals at once.
func TestRenewingStopsOnPermanentError(t *testing.T) {
	l := newLease(time.Now(), time.Minute)
	var calls atomic.Int32
	lostErr := make(chan error, 2)
	stop := renewing(l, time.Millisecond, func() error {
		calls.Add(1)
		return provider.NewPermanentError("renew", "lost").WithKind(provider.ErrInvalidLockToken)
	}, func(err error) { lostErr <- err })
	defer stop()
	if err := <-lostErr; !errors.Is(err, provider.ErrInvalidLockToken) {
		t.Fatalf("lost got %v", err)
	}
	stop()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d renewals after a permanent error, want 1", n)
	}
}

// Renewals failing with retryable errors until the lease ends: lost is called then, not before.
func TestRenewingGivesUpWhenLeaseEnds(t *testing.T) {
	l := newLease(time.Now(), 300*time.Millisecond)
	var mu sync.Mutex
	var lostErr error
	var leftAtLost time.Duration
	stop := renewing(l, time.Millisecond, func() error { return provider.NewRetryableError("renew", "LOADING") },
		func(err error) { mu.Lock(); lostErr, leftAtLost = err, l.left(); mu.Unlock() })
	defer stop()
	testwait.Until(t, 5*time.Second, "lost is called", func() bool { mu.Lock(); defer mu.Unlock(); return lostErr != nil })
	mu.Lock()
	defer mu.Unlock()
	if leftAtLost > 0 || !provider.IsRetryable(lostErr) {
		t.Fatalf("lost called with %v while the lease had %s left", lostErr, leftAtLost)
	}
}
