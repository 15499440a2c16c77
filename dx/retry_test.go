package dx

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// Retry policies: what stops them (Permanent errors, timeouts) and what they refuse. The sims
// replay the stored history after every turn, so each decision is also checked on replay.

func TestPermanentErrorWraps(t *testing.T) {
	base := errors.New("card declined")
	err := fmt.Errorf("charge: %w", Permanent(base))
	if !errors.Is(err, ErrPermanent) || !errors.Is(err, base) || err.Error() != "charge: card declined" {
		t.Fatalf("errors.Is(ErrPermanent) %v, errors.Is(base) %v, text %q", errors.Is(err, ErrPermanent), errors.Is(err, base), err)
	}
	var pe *provider.ProviderError
	if !errors.As(Permanent(provider.NewPermanentError("op", "m")), &pe) {
		t.Fatal("errors.As does not see through Permanent")
	}
	if Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	// Recorded: the mark in front of the message; an ordinary failure is recorded as before.
	if d := activityErrorDetails(err, 2); d != appError(provider.AppActivityFailed, "dx.Permanent: charge: card declined") {
		t.Fatalf("permanent failure recorded as %+v", d)
	}
	if d := activityErrorDetails(base, 2); d != appError(provider.AppActivityFailed, "card declined") {
		t.Fatalf("ordinary failure recorded as %+v", d)
	}
	if !errors.Is(&Error{Details: activityErrorDetails(err, 2)}, ErrPermanent) || errors.Is(&Error{Details: activityErrorDetails(base, 2)}, ErrPermanent) {
		t.Fatal("the awaited *Error does not tell a permanent failure from an ordinary one")
	}
}

func TestRetryStopsAtPermanentFailure(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Retry", func(ctx Context, _ Raw) (string, error) {
		_, err := Call[string](ctx, "Charge", 1, WithRetry(RetryPolicy{MaxAttempts: 3, Backoff: FixedBackoff(time.Second)})).Await(ctx)
		if errors.Is(err, ErrPermanent) {
			return "", fmt.Errorf("permanent: %w", err)
		}
		return "", err
	})
	s.start("Retry", "null")
	s.turn(s.failedActivity(2, "flaky")) // ordinary: retried after the backoff
	s.turn(s.fired(4))
	s.want(t, "OrchestrationStarted ActivityScheduled ActivityFailed(2) TimerCreated TimerFired(4) ActivityScheduled")
	s.turn(s.failedActivity(6, "dx.Permanent: declined")) // permanent: no third attempt
	s.want(t, "OrchestrationStarted ActivityScheduled ActivityFailed(2) TimerCreated TimerFired(4) ActivityScheduled "+
		"ActivityFailed(6) OrchestrationFailed")
	if got := s.output(); got != "failed: permanent: dx.Permanent: declined" {
		t.Fatalf("output %s", got)
	}
}

func TestRetryTimeoutsOption(t *testing.T) {
	s := newSim(t)
	Register(s.rt, "Retry", func(ctx Context, _ Raw) (string, error) {
		return Call[string](ctx, "Slow", 1, WithRetry(RetryPolicy{MaxAttempts: 2, Timeout: time.Minute,
			Backoff: FixedBackoff(time.Second), RetryTimeouts: true})).Await(ctx)
	})
	s.start("Retry", "null")
	s.turn(s.fired(3)) // attempt 1 times out: cancelled, then retried after the backoff
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated TimerFired(3) TimerCreated ActivityCancelRequested(2)")
	s.turn(s.fired(5))
	s.turn(s.fired(9)) // attempt 2 (the last) times out: the call fails
	s.want(t, "OrchestrationStarted ActivityScheduled TimerCreated TimerFired(3) TimerCreated ActivityCancelRequested(2) "+
		"TimerFired(5) ActivityScheduled TimerCreated TimerFired(9) ActivityCancelRequested(8) OrchestrationFailed")
	if got := s.output(); got != "failed: timeout: activity timed out" {
		t.Fatalf("output %s", got)
	}
}

func TestRetryPolicyNeedsAnAttempt(t *testing.T) {
	for _, n := range []int{0, -1} {
		s := newSim(t)
		Register(s.rt, "Retry", func(ctx Context, _ Raw) (string, error) {
			_, err := Call[string](ctx, "A", 1, WithRetry(RetryPolicy{MaxAttempts: n})).Await(ctx)
			if errors.Is(err, ErrInvalidInput) {
				return "refused", nil
			}
			return "", err
		})
		s.start("Retry", "null")
		s.want(t, "OrchestrationStarted OrchestrationCompleted") // nothing scheduled
		if got := s.output(); got != `"refused"` {
			t.Fatalf("MaxAttempts %d: output %s", n, got)
		}
	}
}
