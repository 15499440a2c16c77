// Package dx runs durable orchestrations written as plain Go functions, on any provider.Provider
// (such as redisprovider's), replayed exactly as duroxide 0.1.30 replays them.
//
// An orchestration is a function of a Context and a typed input; an activity is a function of a
// context.Context and a typed input. Inputs and results cross the wire as JSON. Each is declared
// once as a handle, an Activity or an Orchestration: its name (its identity in histories, never
// derived from a Go function's name, so renaming code does not break running instances) and its
// input and output types, which the compiler checks at every registration and call.
//
//	var (
//		Greet = dx.NewActivity[string, string]("Greet")
//		Hello = dx.NewOrchestration[string, string]("Hello")
//	)
//
//	func greet(ctx context.Context, name string) (string, error) {
//		return "Hello, " + name + "!", nil // activities do the real work: I/O, clocks, randomness
//	}
//
//	func hello(ctx dx.Context, name string) (string, error) {
//		greeting, err := Greet.Call(ctx, name).Await(ctx)
//		if err != nil {
//			return "", err // a failed activity: *dx.Error
//		}
//		if err := ctx.Sleep(time.Hour); err != nil { // a durable timer
//			return "", err
//		}
//		return greeting, nil
//	}
//
//	rt := dx.NewRuntime(p, dx.Options{}) // p: from redisprovider.New, its error checked
//	if err := errors.Join(Greet.Register(rt, greet), Hello.Register(rt, hello)); err != nil {
//		return err
//	}
//	if err := rt.Start(ctx); err != nil { // dispatchers in the background; rt.Shutdown(ctx) drains
//		return err
//	}
//
//	c := dx.NewClient(p)
//	id, err := Hello.Start(ctx, c, "world", dx.WithInstanceID("hello-1"))
//	if err != nil {
//		return err
//	}
//	out, err := Hello.Result(ctx, c, id) // waits: "Hello, world!"
//
// In orchestration code an Orchestration handle also starts a sub-orchestration (CallSub), an
// independent instance (StartDetached) and the next execution of the running one (ContinueAsNew).
//
// # Names known at run time
//
// Every handle method stands for a call by name that records the same history: Call, CallSub,
// Context.StartOrchestration, ContinueAsNew, Client.Start, Result, RegisterActivity, Register and
// RegisterVersion. Use these for names known only at run time and for orchestrations and
// activities of other languages.
//
// # Options
//
// Each call takes its own option type (CallOption, SubOption, StartOption, ContinueOption,
// DetachedOption), so an option that does not apply to a call does not compile: OnSession, WithTag
// and WithRetry configure activity calls; WithInstanceID sub-orchestrations and client starts;
// WithVersion every kind of orchestration start.
//
// Misuse is refused at the call with an error matching ErrInvalidInput: a nil provider (also a
// typed nil left by an ignored constructor error), a nil Runtime or Client, an empty, non-UTF-8 or
// duplicate name, two handles of one orchestration name with different types, a registration after
// Start (a registration refused before Start also fails Start), an invalid option value or retry
// policy.
//
// # Events and queue messages
//
// Client.RaiseEvent sends an event to a wait that exists now (WaitEvent); an event raised before
// the orchestration waits for that name is recorded but dropped, as in duroxide (the runtime logs
// a warning and counts MetricDroppedEvents). Client.EnqueueEvent appends to a queue that Dequeue
// reads in order and that keeps what arrives early: use it for anything that may come first.
//
// # How it runs
//
// Every durable operation (Call, CallSub, Timer, WaitEvent, Dequeue, ...) is recorded in the
// instance's history. Each time something happens (an activity finishes, a timer fires, an event
// arrives) the runtime runs the function again from the start: operations already in the history
// return their recorded results at once, and the function goes on until it waits for something
// new. So orchestration code must be deterministic: with the same history it must make the same
// calls in the same order. Do not read the clock (use Context.UtcNow, Timer), start goroutines (use
// Go), use channels, select, mutexes or time.Sleep (use Select, Join, Sleep), range over maps to
// decide what to schedule, or do I/O (put it in an activity). Code that changes what it schedules
// fails the instance with a nondeterminism error naming the event and both sides (or holds it:
// Options.OnNondeterminism); the executor cache hides code that changes what it schedules from
// one run to the next until a restart, which Options.ReplayCheckRate (and dxtest, by default)
// catches by comparing turns with fresh replays; code that blocks
// outside dx fails it after Options.BlockingGuard; a panic fails it with the panic value.
//
// # Futures
//
// Operations return a Future at once; the operation is scheduled when it is created. Await one,
// Select the first of several (the others are cancelled), Join or All them, or run a multi-step
// branch with Go and treat it like any future. Cancel a future explicitly with Cancel. When the
// orchestration returns, futures it never consumed are cancelled, as duroxide drops them (see
// Future). Only one piece of orchestration code runs at a time, in a fixed order, so branches need no
// locks.
//
// # Versions
//
// Register an orchestration with RegisterVersion (Orchestration.RegisterVersion) to run several
// versions side by side: new instances
// start on the latest (or the one Client.Start names with WithVersion), running executions keep
// theirs, and ContinueAsNew moves to the latest (or WithVersion's). Before a deploy, CheckReplay
// replays the live instances of a store against the new build's registrations and reports each
// one it would break (docs/changing-orchestrations.md). Every event is stamped with
// duroxide_version DuroxideVersion: the duroxide semantics this engine reproduces, not your code's
// version. Serve one namespace with runtimes of one language: a Rust duroxide runtime cannot replay
// Go code.
package dx
