package dx

import (
	"context"
	"fmt"
	"reflect"
)

// Activity is a typed handle of the activity registered under an explicit name: declare it once,
// register its function with Register and call it from orchestration code with Call. The compiler
// checks the function's and the call's input and output types against the handle's.
//
//	var Greet = dx.NewActivity[string, string]("Greet")
//
//	err := Greet.Register(rt, func(ctx context.Context, name string) (string, error) {
//		return "Hello, " + name + "!", nil
//	})
//	greeting, err := Greet.Call(ctx, "world").Await(ctx) // in orchestration code
//
// The name is the activity's identity in histories and on the wire, never derived from a Go
// function name, so renaming Go code does not break running instances. A handle records exactly
// what the string-named calls record: Greet.Call(ctx, in) and Call[string](ctx, "Greet", in) write
// the same history. The zero Activity has an empty name: Register refuses it.
type Activity[In, Out any] struct{ name string }

// NewActivity returns the handle of the activity name with input In and output Out. The name is
// checked when the handle is registered (non-empty, valid UTF-8).
func NewActivity[In, Out any](name string) Activity[In, Out] { return Activity[In, Out]{name} }

// Name is the activity's registered name.
func (a Activity[In, Out]) Name() string { return a.name }

// Register registers fn as the activity. It fails like RegisterActivity, and with ErrInvalidInput
// when the name is already registered (also through another handle).
func (a Activity[In, Out]) Register(rt *Runtime, fn func(ctx context.Context, input In) (Out, error)) error {
	return RegisterActivity(rt, a.name, fn)
}

// Call schedules the activity with input and returns a future of its result: Call[Out](ctx,
// a.Name(), input, opts...). Options: OnSession, WithTag, WithRetry.
func (a Activity[In, Out]) Call(ctx Context, input In, opts ...CallOption) Future[Out] {
	return Call[Out](ctx, a.name, input, opts...)
}

// Orchestration is a typed handle of the orchestration registered under an explicit name: declare
// it once, register its function (and versions), and use it from orchestration code (CallSub,
// StartDetached, ContinueAsNew) and from a client (Start, Result). The compiler checks the input
// and output types against the handle's.
//
//	var Hello = dx.NewOrchestration[string, string]("Hello")
//
//	err := Hello.Register(rt, func(ctx dx.Context, name string) (string, error) {
//		return Greet.Call(ctx, name).Await(ctx)
//	})
//	id, err := Hello.Start(ctx, client, "world", dx.WithInstanceID("hello-1"))
//	out, err := Hello.Result(ctx, client, id) // "Hello, world!"
//
// Every version of one name has the handle's types: registering a version through a handle whose
// types differ from another handle's registered under that name fails with ErrInvalidInput. A
// version that changes the input or output type gets a new name (or is registered and called by
// name: RegisterVersion, CallSub). Each method records exactly what the string-named call it names
// records. The zero Orchestration has an empty name: Register refuses it.
type Orchestration[In, Out any] struct{ name string }

// NewOrchestration returns the handle of the orchestration name with input In and output Out. The
// name is checked when the handle is registered (non-empty, valid UTF-8).
func NewOrchestration[In, Out any](name string) Orchestration[In, Out] {
	return Orchestration[In, Out]{name}
}

// Name is the orchestration's registered name.
func (o Orchestration[In, Out]) Name() string { return o.name }

// Register registers fn as the orchestration, version DefaultVersion (1.0.0). It fails like
// Register (the package function) and on a handle whose types differ from those of another handle
// registered under the same name.
func (o Orchestration[In, Out]) Register(rt *Runtime, fn func(ctx Context, input In) (Out, error)) error {
	return o.RegisterVersion(rt, DefaultVersion, fn)
}

// RegisterVersion registers fn as version (a semantic version such as "2.0.0") of the
// orchestration. It fails like RegisterVersion (the package function) and like Register.
func (o Orchestration[In, Out]) RegisterVersion(rt *Runtime, version string, fn func(ctx Context, input In) (Out, error)) error {
	sig := signature{reflect.TypeFor[In](), reflect.TypeFor[Out]()}
	return registerVersion(rt, o.name, version, fn, &sig)
}

// CallSub starts the orchestration as a sub-orchestration of this one and returns a future of its
// output: CallSub[Out](ctx, o.Name(), input, opts...). Options: WithInstanceID, WithVersion.
func (o Orchestration[In, Out]) CallSub(ctx Context, input In, opts ...SubOption) Future[Out] {
	return CallSub[Out](ctx, o.name, input, opts...)
}

// StartDetached starts an independent instance of the orchestration from orchestration code (fire
// and forget): ctx.StartOrchestration(o.Name(), instance, input, opts...). Options: WithVersion.
// As in duroxide, a start made in the turn that continues as new is recorded but never started
// (see Context.StartOrchestration).
func (o Orchestration[In, Out]) StartDetached(ctx Context, instance string, input In, opts ...DetachedOption) error {
	if ctx == nil {
		return errNotInOrchestration
	}
	return ctx.StartOrchestration(o.name, instance, input, opts...)
}

// ContinueAsNew ends this execution and starts a new one of the same instance with input, as
// ContinueAsNew (the package function) does; the orchestration returns the error it gives back:
//
//	return "", Eternal.ContinueAsNew(ctx, next)
//
// An execution continues as the orchestration it runs: called from another orchestration's code,
// it fails with ErrInvalidInput and schedules nothing. Options: WithVersion.
func (o Orchestration[In, Out]) ContinueAsNew(ctx Context, input In, opts ...ContinueOption) error {
	if _, err := engineFor(ctx); err != nil {
		return err
	}
	if name := ctx.Name(); name != o.name {
		return fmt.Errorf("dx: %s.ContinueAsNew called from orchestration %q: an execution continues as the orchestration it runs (%w)", o.name, name, ErrInvalidInput)
	}
	return ContinueAsNew(ctx, input, opts...)
}

// Start starts an instance of the orchestration with input and returns its id: c.Start(ctx,
// o.Name(), input, opts...). Options: WithInstanceID, WithVersion.
func (o Orchestration[In, Out]) Start(ctx context.Context, c *Client, input In, opts ...StartOption) (string, error) {
	return c.Start(ctx, o.name, input, opts...)
}

// Result waits until the instance completes and returns its output (or its failure, an *Error):
// Result[Out](ctx, c, instance).
func (o Orchestration[In, Out]) Result(ctx context.Context, c *Client, instance string) (Out, error) {
	return Result[Out](ctx, c, instance)
}

// signature is a handle's input and output types, kept by the registry per orchestration name.
type signature struct{ in, out reflect.Type }

func (s signature) String() string { return fmt.Sprintf("[%v, %v]", s.in, s.out) }
