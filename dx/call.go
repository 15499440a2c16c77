package dx

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Call schedules the activity registered as name with input (encoded as JSON) and returns a future
// of its result, decoded into Out: the string-named form of Activity.Call, for names known only at
// run time. Options: OnSession, WithTag, WithRetry.
//
//	total, err := dx.Call[int](ctx, "Add", Pair{A: 1, B: 2}).Await(ctx)
func Call[Out any](ctx Context, name string, input any, opts ...CallOption) Future[Out] {
	e, err := engineFor(ctx)
	if err != nil {
		return failed[Out](e, err)
	}
	o, err := collect(opts, CallOption.applyCall)
	if err != nil {
		return failed[Out](e, err)
	}
	if name == "" {
		return failed[Out](e, fmt.Errorf("dx: Call needs an activity name (%w)", ErrInvalidInput))
	}
	in, err := encode(input)
	if err != nil {
		return failed[Out](e, err)
	}
	if o.retry != nil {
		return retry[Out](ctx, name, in, o)
	}
	return Future[Out]{e.schedule(&activity{name: name, input: in, sessionID: o.session, tag: o.tag})}
}

// CallSub starts the orchestration registered as name as a sub-orchestration and returns a future of
// its output, decoded into Out. Its instance id is "<this instance>::sub::<event id>" unless
// WithInstanceID gives one; WithVersion picks a version (default: the latest registered). It is the
// string-named form of Orchestration.CallSub.
func CallSub[Out any](ctx Context, name string, input any, opts ...SubOption) Future[Out] {
	e, err := engineFor(ctx)
	if err != nil {
		return failed[Out](e, err)
	}
	o, err := collect(opts, SubOption.applySub)
	if err != nil {
		return failed[Out](e, err)
	}
	if name == "" {
		return failed[Out](e, fmt.Errorf("dx: CallSub needs an orchestration name (%w)", ErrInvalidInput))
	}
	in, err := encode(input)
	if err != nil {
		return failed[Out](e, err)
	}
	return Future[Out]{e.schedule(&subOrch{name: name, input: in, instance: deref(o.instance), version: o.version})}
}

// WaitEvent waits for the next external event called name raised on this instance (Client.RaiseEvent)
// and decodes its data into T. The Nth wait for a name receives the Nth event of that name that
// arrives while a wait is pending.
//
// Events vs queue messages: an event is a signal to a wait that exists now. One raised before the
// orchestration waits for that name (or after its wait ended) is recorded in the history but never
// delivered, as in duroxide; the runtime logs a warning naming the instance and the event and
// counts MetricDroppedEvents, and dxctl raise warns when no wait is pending. A queue message
// (Client.EnqueueEvent, read with Dequeue) is kept until the orchestration reads it, in order: use
// Dequeue for anything that may arrive before the orchestration is ready for it.
func WaitEvent[T any](ctx Context, name string) Future[T] {
	e, err := engineFor(ctx)
	if err != nil {
		return failed[T](e, err)
	}
	return Future[T]{e.schedule(&eventWait{name: name})}
}

// Dequeue takes the next message of the instance's persistent FIFO queue called name
// (Client.EnqueueEvent) and decodes it into T. Messages that arrive before anyone dequeues are kept,
// in order, and carried across continue-as-new (unlike WaitEvent's events, which are dropped when
// no wait is pending). A turn takes messages already there one dequeue
// after another; as in duroxide, code that dequeues 99 or more of them in one turn without waiting
// on anything else fails the orchestration (Infrastructure error "quiescence_loop"): drain a
// backlog in rounds (a timer between them, or continue-as-new).
func Dequeue[T any](ctx Context, name string) Future[T] {
	e, err := engineFor(ctx)
	if err != nil {
		return failed[T](e, err)
	}
	return Future[T]{e.schedule(&dequeue{name: name})}
}

// ContinueAsNew ends this execution and starts a new one of the same instance with input; the
// orchestration must return the error it gives back:
//
//	return Out{}, dx.ContinueAsNew(ctx, next)
//
// The new execution runs WithVersion's version, else the latest registered version. Queue messages
// not yet dequeued and the custom status are carried over; so is the KV store.
func ContinueAsNew(ctx Context, input any, opts ...ContinueOption) error {
	e, err := engineFor(ctx)
	if err != nil {
		return err
	}
	o, err := collect(opts, ContinueOption.applyContinue)
	if err != nil {
		return err
	}
	in, err := encode(input)
	if err != nil {
		return err
	}
	e.emit(&continueAsNew{input: in, version: o.version})
	return &continueAsNewError{}
}

// continueAsNewError is what ContinueAsNew returns for the orchestration to return.
type continueAsNewError struct{}

func (*continueAsNewError) Error() string { return "dx: continue as new" }

func engineFor(ctx Context) (*engine, error) {
	oc, ok := ctx.(*octx)
	if !ok || oc == nil || oc.eng == nil {
		return nil, errNotInOrchestration
	}
	if !oc.live() {
		return oc.eng, errStaleContext
	}
	return oc.eng, nil
}

func failed[T any](e *engine, err error) Future[T] {
	return Future[T]{&future{eng: e, preErr: err}}
}

// RetryPolicy retries a failed activity, as duroxide's RetryPolicy does: attempts 1..MaxAttempts, a
// durable timer of Backoff(n) after failed attempt n, and, with Timeout, each attempt raced against a
// timer. Retries are ordinary activities and timers in the history.
//
// What ends the retries early:
//   - an error made with Permanent: the call fails with it at once (the mark lives in the recorded
//     failure's message, so a replay decides the same way);
//   - a timed-out attempt (duroxide's rule): the attempt is cancelled and the call fails at once
//     with ErrActivityTimeout, without further attempts, unless RetryTimeouts is set.
//
// WithRetry refuses (ErrInvalidInput) a policy with MaxAttempts below 1, as duroxide asserts.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts, at least 1.
	MaxAttempts int
	// Backoff is the wait after each failed attempt; nil means exponential: 100 ms doubling, at
	// most 30 s.
	Backoff Backoff
	// Timeout, when positive, limits each attempt; 0 means none, and a negative one fails the call
	// with ErrInvalidInput.
	Timeout time.Duration
	// RetryTimeouts counts a timed-out attempt as a failed one: it is cancelled and, while
	// attempts are left, retried after its backoff (the call then fails with ErrActivityTimeout
	// when the last attempt times out). Off by default: duroxide ends the call at the first timeout.
	RetryTimeouts bool
}

// Backoff returns the wait after failed attempt n (1-based).
type Backoff func(attempt int) time.Duration

// ExponentialBackoff waits base × multiplier^(n−1), at most max.
func ExponentialBackoff(base time.Duration, multiplier float64, max time.Duration) Backoff {
	return func(n int) time.Duration {
		d := float64(base) * math.Pow(multiplier, float64(n-1))
		if d >= float64(max) || math.IsInf(d, 0) || math.IsNaN(d) {
			return max
		}
		return time.Duration(d)
	}
}

// LinearBackoff waits base × n, at most max.
func LinearBackoff(base, max time.Duration) Backoff {
	return func(n int) time.Duration { return min(base*time.Duration(n), max) }
}

// FixedBackoff always waits d.
func FixedBackoff(d time.Duration) Backoff { return func(int) time.Duration { return d } }

// ErrActivityTimeout is the error of a retried activity whose attempt exceeded RetryPolicy.Timeout.
var ErrActivityTimeout = errors.New("timeout: activity timed out")

// ErrPermanent matches (errors.Is) an error made with Permanent: in the activity that returns it
// and, once that activity failed, in the orchestration that awaits it.
var ErrPermanent = errors.New("dx: permanent activity failure (not retried)")

// permanentMark begins the recorded failure message of an activity that returned a Permanent
// error. The mark lives there because duroxide's ActivityFailed has no field for it (it writes
// "retryable":false on every failure): a RetryPolicy, live or replaying, reads it from the history.
// Ordinary failures are recorded exactly as before (an ordinary error whose text happens to begin
// with the mark is taken as permanent too).
const permanentMark = "dx.Permanent: "

// Permanent marks an activity's error as one that retrying cannot fix (a declined card, bad
// input): a RetryPolicy makes no further attempt, and the awaiting orchestration gets the failure
// at once. The failure is recorded with the message "dx.Permanent: " + err.Error(), and
// errors.Is(·, ErrPermanent) holds on the orchestration's side. Permanent(nil) is nil; errors.Is and
// errors.As see err through it.
//
//	if declined { return Receipt{}, dx.Permanent(fmt.Errorf("card declined: %s", code)) }
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string        { return p.err.Error() }
func (p *permanentError) Unwrap() error        { return p.err }
func (p *permanentError) Is(target error) bool { return target == ErrPermanent }

func retry[Out any](ctx Context, name, input string, o options) Future[Out] {
	p := *o.retry
	if p.Backoff == nil {
		p.Backoff = ExponentialBackoff(100*time.Millisecond, 2, 30*time.Second)
	}
	return Go(ctx, func(ctx Context) (Out, error) {
		var zero Out
		e := ctx.(*octx).eng
		var last error
		for attempt := 1; attempt <= p.MaxAttempts; attempt++ {
			act := Future[Out]{e.schedule(&activity{name: name, input: input, sessionID: o.session, tag: o.tag})}
			var v Out
			var err error
			timedOut := false
			if p.Timeout > 0 {
				deadline := ctx.Timer(p.Timeout)
				if Select(ctx, act, deadline) == deadline {
					if !p.RetryTimeouts {
						return zero, ErrActivityTimeout
					}
					timedOut, err = true, ErrActivityTimeout
				}
			}
			if !timedOut {
				v, err = act.Await(ctx)
				if err == nil {
					return v, nil
				}
			}
			last = err
			if errors.Is(err, ErrPermanent) {
				return zero, err
			}
			if attempt < p.MaxAttempts {
				// "retry_attempt" counts this policy's attempts; "delivery" (the worker's logs)
				// counts how often the provider handed one work item out.
				ctx.Logger().Warn("activity attempt failed, retrying", "activity", name,
					"retry_attempt", attempt, "retry_max_attempts", p.MaxAttempts, "error", err)
				if d := p.Backoff(attempt); d > 0 {
					if err := ctx.Sleep(d); err != nil {
						return zero, err
					}
				}
			}
		}
		return zero, last
	})
}
