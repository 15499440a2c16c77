package dx

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// ErrCanceled is what Await returns for a future that was cancelled: a Select loser, a future whose
// Cancel was called, or a future started by a branch that was cancelled.
var ErrCanceled = errors.New("dx: future canceled")

// Awaitable is any dx future; Select and Join take Awaitables so that futures of different result
// types can be combined.
type Awaitable interface {
	base() *future
}

// Future is the result of a durable operation that may not have finished yet. Create futures with
// Call, CallSub, WaitEvent, Dequeue, Go and the Context's Timer, NewGUID, UtcNow; wait for them with
// Await, Select or Join. Futures are values: copies refer to the same operation, and == tells
// whether two futures are the same operation (so a Select's winner can be switched on).
//
// A future is scheduled when it is created, whether or not it is ever awaited. In a turn that does
// not end the orchestration, a future nobody waits for stays pending. When the orchestration function
// returns, every future it started and never consumed (awaited, won a Select, or joined) is cancelled,
// exactly as duroxide drops them: activities and sub-orchestrations get a dropped_future cancellation
// request (the activity's lock is stolen, the child is cancelled), event waits and dequeues are
// unsubscribed; timers simply never fire.
type Future[T any] struct {
	f *future
}

func (fu Future[T]) base() *future { return fu.f }

// future is the untyped state behind Future[T].
type future struct {
	eng    *engine
	act    action     // the durable operation; nil for a branch
	owner  *coroutine // the coroutine that created the future
	branch *coroutine // for Go: the branch's coroutine

	done      bool
	result    string // wire result: JSON text (bare text for the builtins)
	value     any    // a branch's result
	err       error
	preErr    error // failed before anything was scheduled (bad input, bad options)
	consumed  bool
	cancelled bool
	decode    func(string) (any, error) // custom decoding of the wire result (builtins)
}

// ready reports whether waiting on the future can end. Event waits and dequeues look up their
// arrival when asked, in the order the code asks, as duroxide's futures do when polled.
func (f *future) ready() bool {
	if f.done || f.cancelled || f.preErr != nil {
		return true
	}
	if f.act != nil {
		if v, ok := f.act.arrival(f.eng); ok {
			f.done, f.result = true, v
		}
	}
	return f.done
}

// Await blocks the calling orchestration code until the future is done and returns its result. The
// error is an *Error for a failed activity or sub-orchestration, ErrCanceled for a cancelled future,
// or a decoding error when the result does not decode into T.
//
// Await inside a branch (Go) that has been cancelled does not return: the branch's goroutine ends
// there, its deferred calls run, and durable operations they attempt are ignored.
func (fu Future[T]) Await(ctx Context) (T, error) {
	var zero T
	f := fu.f
	if f == nil {
		return zero, errors.New("dx: Await on a zero Future (create futures with dx.Call, dx.WaitEvent, ...)")
	}
	if f.preErr != nil {
		f.consumed = true
		return zero, f.preErr
	}
	co, err := current(ctx, f.eng)
	if err != nil {
		return zero, err
	}
	co.park(f.ready)
	f.consumed = true
	return result[T](f)
}

// Ready reports, without waiting, whether the future is done.
func (fu Future[T]) Ready() bool { return fu.f != nil && fu.f.ready() }

// Cancel cancels a pending future: Await then returns ErrCanceled. A cancelled activity or
// sub-orchestration gets a cancellation request (the activity's lock is stolen, the child
// orchestration is cancelled), an event wait or dequeue is unsubscribed; a cancelled branch (Go)
// cancels everything it started and stops at its next wait. Cancelling a future that is already
// consumed does nothing.
func (fu Future[T]) Cancel() {
	if f := fu.f; f != nil && f.eng != nil && !f.eng.teardown {
		f.eng.cancel(f)
	}
}

func result[T any](f *future) (T, error) {
	var zero T
	switch {
	case f.cancelled:
		return zero, ErrCanceled
	case f.err != nil:
		return zero, f.err
	case f.branch != nil:
		if f.value == nil {
			return zero, nil
		}
		v, ok := f.value.(T)
		if !ok {
			return zero, fmt.Errorf("dx: branch result is %T, not %T", f.value, zero)
		}
		return v, nil
	case f.decode != nil:
		v, err := f.decode(f.result)
		if err != nil {
			return zero, err
		}
		return v.(T), nil
	}
	return decode[T](f.result)
}

// current returns the coroutine running now, checking that ctx belongs to the same orchestration.
func current(ctx Context, e *engine) (*coroutine, error) {
	oc, ok := ctx.(*octx)
	if !ok || oc == nil || oc.eng != e || e.running == nil || e.teardown && !e.running.killed {
		return nil, errNotInOrchestration
	}
	return e.running, nil
}

// Select waits until at least one of the futures is done and returns the first done one in argument
// order (so a Select over the same history always picks the same future). Every other future passed
// is cancelled, as a loser of duroxide's select is dropped. Switch on the result:
//
//	switch dx.Select(ctx, approval, timeout) {
//	case approval:
//		...
//	case timeout:
//		...
//	}
//
// Select returns nil when called with no futures or outside the orchestration.
func Select(ctx Context, futs ...Awaitable) Awaitable {
	if len(futs) == 0 {
		return nil
	}
	e := engineOf(futs)
	co, err := current(ctx, e)
	if err != nil {
		return nil
	}
	var winner Awaitable
	co.park(func() bool {
		for _, a := range futs {
			if f := a.base(); f == nil || f.ready() {
				winner = a
				return true
			}
		}
		return false
	})
	if f := winner.base(); f != nil {
		f.consumed = true
	}
	for _, a := range futs {
		if f := a.base(); f != nil && a != winner && f != winner.base() {
			e.cancel(f)
		}
	}
	return winner
}

// Join waits until every future is done. It returns the first error among them in argument order
// (nil when all succeeded); read each result with Await, which no longer waits.
func Join(ctx Context, futs ...Awaitable) error {
	if len(futs) == 0 {
		return nil
	}
	e := engineOf(futs)
	co, err := current(ctx, e)
	if err != nil {
		return err
	}
	co.park(func() bool {
		for _, a := range futs {
			if f := a.base(); f != nil && !f.ready() {
				return false
			}
		}
		return true
	})
	var first error
	for _, a := range futs {
		f := a.base()
		if f == nil {
			continue
		}
		f.consumed = true
		if first == nil {
			switch {
			case f.preErr != nil:
				first = f.preErr
			case f.cancelled:
				first = ErrCanceled
			case f.err != nil:
				first = f.err
			}
		}
	}
	return first
}

// All waits for every future and returns their results in order, or the first error in argument
// order.
func All[T any](ctx Context, futs ...Future[T]) ([]T, error) {
	as := make([]Awaitable, len(futs))
	for i, f := range futs {
		as[i] = f
	}
	if err := Join(ctx, as...); err != nil {
		return nil, err
	}
	out := make([]T, len(futs))
	for i, f := range futs {
		v, err := f.Await(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// engineOf returns the engine of the futures, nil when they belong to different orchestrations (a
// future kept from another instance: current then refuses the call).
func engineOf(futs []Awaitable) *engine {
	var e *engine
	for _, a := range futs {
		if f := a.base(); f != nil && f.eng != nil {
			if e != nil && f.eng != e {
				return nil
			}
			e = f.eng
		}
	}
	return e
}

// Go starts fn as a branch of the orchestration: orchestration code that runs alongside the code that
// started it, one goroutine at a time, and can wait on its own futures. Its future completes with fn's
// result, and can be awaited, selected or joined like any other (a branch that loses a Select is
// cancelled with everything it started). fn must use the Context it is given, not the caller's.
//
// The branch starts when the code that called Go next waits, so durable operations are recorded in
// the same order on every replay.
func Go[T any](ctx Context, fn func(ctx Context) (T, error)) Future[T] {
	oc, ok := ctx.(*octx)
	if !ok || oc == nil {
		return Future[T]{&future{preErr: errNotInOrchestration}}
	}
	e := oc.eng
	if e.teardown {
		return Future[T]{&future{eng: e, cancelled: true}}
	}
	if !oc.live() {
		return failed[T](e, errStaleContext)
	}
	co := e.newCoroutine(e.running)
	f := &future{eng: e, owner: e.running, branch: co}
	co.fut = f
	bctx := &octx{eng: e, co: co}
	co.start(func(co *coroutine) {
		v, err := fn(bctx)
		co.branchValue, co.err = v, err
	})
	return Future[T]{f}
}

// decode decodes a wire payload into T. Raw receives the text as it is.
func decode[T any](s string) (T, error) {
	var v T
	if r, ok := any(&v).(*Raw); ok {
		*r = Raw(s)
		return v, nil
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return v, fmt.Errorf("dx: result %s does not decode into %v: %w", clip(s), reflect.TypeFor[T](), err)
	}
	return v, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q...", s[:120])
	}
	return fmt.Sprintf("%q", s)
}
