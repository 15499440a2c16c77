package dx_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// runExample registers with register, starts the runtime, runs fn and shuts the runtime down.
func runExample(register func(rt *dx.Runtime) error, fn func(ctx context.Context, c *dx.Client)) {
	p, done := exampleProvider()
	defer done()
	ctx := context.Background()
	rt := dx.NewRuntime(p, dx.Options{Logger: quietLogger})
	if err := register(rt); err != nil {
		panic(err)
	}
	if err := rt.Start(ctx); err != nil {
		panic(err)
	}
	defer func() {
		if err := rt.Shutdown(ctx); err != nil {
			panic(err)
		}
	}()
	fn(ctx, dx.NewClient(p))
}

type Pair struct{ A, B int }

func ExampleActivity() {
	add := dx.NewActivity[Pair, int]("Add")
	sum := dx.NewOrchestration[[]int, int]("Sum")
	runExample(func(rt *dx.Runtime) error {
		if err := add.Register(rt, func(ctx context.Context, p Pair) (int, error) { return p.A + p.B, nil }); err != nil {
			return err
		}
		return sum.Register(rt, func(ctx dx.Context, xs []int) (int, error) {
			total := 0
			for _, x := range xs {
				var err error
				// add.Call takes a Pair and its future gives an int: the compiler checks both.
				if total, err = add.Call(ctx, Pair{total, x}, dx.WithRetry(dx.RetryPolicy{MaxAttempts: 3})).Await(ctx); err != nil {
					return 0, err
				}
			}
			return total, nil
		})
	}, func(ctx context.Context, c *dx.Client) {
		id, err := sum.Start(ctx, c, []int{1, 2, 3})
		if err != nil {
			panic(err)
		}
		fmt.Println(sum.Result(ctx, c, id))
	})
	// Output: 6 <nil>
}

func ExampleOrchestration() {
	hello := dx.NewOrchestration[string, string]("Hello")
	runExample(func(rt *dx.Runtime) error {
		if err := hello.Register(rt, func(ctx dx.Context, name string) (string, error) {
			return "Hello, " + name + "!", nil
		}); err != nil {
			return err
		}
		// A second version with the same types; new instances start on the latest.
		return hello.RegisterVersion(rt, "2.0.0", func(ctx dx.Context, name string) (string, error) {
			return "Hi, " + name + " (v" + ctx.Version() + ")", nil
		})
	}, func(ctx context.Context, c *dx.Client) {
		latest, err := hello.Start(ctx, c, "world", dx.WithInstanceID("hello-latest"))
		if err != nil {
			panic(err)
		}
		first, err := hello.Start(ctx, c, "world", dx.WithInstanceID("hello-v1"), dx.WithVersion("1.0.0"))
		if err != nil {
			panic(err)
		}
		fmt.Println(hello.Result(ctx, c, latest))
		fmt.Println(hello.Result(ctx, c, first))
	})
	// Output:
	// Hi, world (v2.0.0) <nil>
	// Hello, world! <nil>
}

func ExampleOrchestration_CallSub() {
	square := dx.NewOrchestration[int, int]("Square")
	squares := dx.NewOrchestration[int, []int]("Squares")
	runExample(func(rt *dx.Runtime) error {
		if err := square.Register(rt, func(ctx dx.Context, n int) (int, error) { return n * n, nil }); err != nil {
			return err
		}
		return squares.Register(rt, func(ctx dx.Context, n int) ([]int, error) {
			var fs []dx.Future[int]
			for i := 1; i <= n; i++ {
				fs = append(fs, square.CallSub(ctx, i, dx.WithInstanceID(fmt.Sprintf("%s-square-%d", ctx.InstanceID(), i))))
			}
			return dx.All(ctx, fs...)
		})
	}, func(ctx context.Context, c *dx.Client) {
		id, err := squares.Start(ctx, c, 4)
		if err != nil {
			panic(err)
		}
		fmt.Println(squares.Result(ctx, c, id))
	})
	// Output: [1 4 9 16] <nil>
}

func ExampleOrchestration_ContinueAsNew() {
	type count struct{ N, Limit int }
	counter := dx.NewOrchestration[count, int]("Counter")
	runExample(func(rt *dx.Runtime) error {
		return counter.Register(rt, func(ctx dx.Context, in count) (int, error) {
			if in.N < in.Limit { // each step in a new execution: the history stays short
				return 0, counter.ContinueAsNew(ctx, count{in.N + 1, in.Limit})
			}
			return int(ctx.ExecutionID()), nil
		})
	}, func(ctx context.Context, c *dx.Client) {
		id, err := counter.Start(ctx, c, count{0, 3})
		if err != nil {
			panic(err)
		}
		fmt.Println(counter.Result(ctx, c, id))
	})
	// Output: 4 <nil>
}

func ExampleOrchestration_StartDetached() {
	audit := dx.NewOrchestration[string, string]("Audit")
	order := dx.NewOrchestration[string, string]("Order")
	runExample(func(rt *dx.Runtime) error {
		if err := audit.Register(rt, func(ctx dx.Context, what string) (string, error) { return "audited " + what, nil }); err != nil {
			return err
		}
		return order.Register(rt, func(ctx dx.Context, id string) (string, error) {
			// Fire and forget: the audit instance runs on its own; the order does not wait for it.
			if err := audit.StartDetached(ctx, "audit-"+id, "order "+id); err != nil {
				return "", err
			}
			return "placed " + id, nil
		})
	}, func(ctx context.Context, c *dx.Client) {
		id, err := order.Start(ctx, c, "o-1", dx.WithInstanceID("o-1"))
		if err != nil {
			panic(err)
		}
		fmt.Println(order.Result(ctx, c, id))
		fmt.Println(audit.Result(ctx, c, "audit-o-1"))
	})
	// Output:
	// placed o-1 <nil>
	// audited order o-1 <nil>
}

// program is one orchestration program written twice, with handles and with string names: both
// must record the same histories.
type program struct {
	register func(rt *dx.Runtime) error
	start    func(ctx context.Context, c *dx.Client) (string, error)
}

type step struct {
	N     int    `json:"n"`
	Label string `json:"label"`
}

var (
	hGreet  = dx.NewActivity[string, string]("Greet")
	hAdd    = dx.NewActivity[step, int]("Add")
	hChild  = dx.NewOrchestration[step, int]("Child")
	hAudit  = dx.NewOrchestration[string, string]("Audit")
	hParent = dx.NewOrchestration[step, string]("Parent")
)

func greetFn(_ context.Context, s string) (string, error) { return "Hello, " + s + "!", nil }
func addFn(_ context.Context, s step) (int, error)        { return s.N + len(s.Label), nil }
func auditFn(_ dx.Context, s string) (string, error)      { return "audited " + s, nil }

var byHandle = program{
	register: func(rt *dx.Runtime) error {
		return errors.Join(
			hGreet.Register(rt, greetFn),
			hAdd.Register(rt, addFn),
			hAudit.Register(rt, auditFn),
			hChild.Register(rt, func(ctx dx.Context, s step) (int, error) {
				return hAdd.Call(ctx, s, dx.OnSession("s-1")).Await(ctx)
			}),
			hParent.Register(rt, func(ctx dx.Context, s step) (string, error) {
				g, err := hGreet.Call(ctx, s.Label, dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2}), dx.WithTag("t")).Await(ctx)
				if err != nil {
					return "", err
				}
				n, err := hChild.CallSub(ctx, s, dx.WithInstanceID(fmt.Sprintf("child-%s-%d", ctx.InstanceID(), ctx.ExecutionID())), dx.WithVersion("1.0.0")).Await(ctx)
				if err != nil {
					return "", err
				}
				if s.N == 0 {
					return "", hParent.ContinueAsNew(ctx, step{N: n, Label: s.Label}, dx.WithVersion("1.0.0"))
				}
				// Detached starts in the last execution: a turn that continues as new does not
				// dispatch them (dx/turn.go, turnContinuedAsNew).
				if err := hAudit.StartDetached(ctx, "audit-"+ctx.InstanceID(), g, dx.WithVersion("1.0.0")); err != nil {
					return "", err
				}
				return fmt.Sprintf("%s %d", g, n), nil
			}),
		)
	},
	start: func(ctx context.Context, c *dx.Client) (string, error) {
		return hParent.Start(ctx, c, step{Label: "world"}, dx.WithInstanceID("p"), dx.WithVersion("1.0.0"))
	},
}

var byName = program{
	register: func(rt *dx.Runtime) error {
		return errors.Join(
			dx.RegisterActivity(rt, "Greet", greetFn),
			dx.RegisterActivity(rt, "Add", addFn),
			dx.Register(rt, "Audit", auditFn),
			dx.Register(rt, "Child", func(ctx dx.Context, s step) (int, error) {
				return dx.Call[int](ctx, "Add", s, dx.OnSession("s-1")).Await(ctx)
			}),
			dx.Register(rt, "Parent", func(ctx dx.Context, s step) (string, error) {
				g, err := dx.Call[string](ctx, "Greet", s.Label, dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2}), dx.WithTag("t")).Await(ctx)
				if err != nil {
					return "", err
				}
				n, err := dx.CallSub[int](ctx, "Child", s, dx.WithInstanceID(fmt.Sprintf("child-%s-%d", ctx.InstanceID(), ctx.ExecutionID())), dx.WithVersion("1.0.0")).Await(ctx)
				if err != nil {
					return "", err
				}
				if s.N == 0 {
					return "", dx.ContinueAsNew(ctx, step{N: n, Label: s.Label}, dx.WithVersion("1.0.0"))
				}
				if err := ctx.StartOrchestration("Audit", "audit-"+ctx.InstanceID(), g, dx.WithVersion("1.0.0")); err != nil {
					return "", err
				}
				return fmt.Sprintf("%s %d", g, n), nil
			}),
		)
	},
	start: func(ctx context.Context, c *dx.Client) (string, error) {
		return c.Start(ctx, "Parent", step{Label: "world"}, dx.WithInstanceID("p"), dx.WithVersion("1.0.0"))
	},
}

// histories runs prog on a fresh namespace and returns the normalised histories of every
// execution of the instances it makes, by "instance#execution".
func histories(t *testing.T, prog program) (string, map[string][]jsonObject) {
	t.Helper()
	p := newProvider(t)
	opts := testOptions()
	f, err := provider.TagFilterDefaultAnd("t")
	if err != nil {
		t.Fatal(err)
	}
	opts.WorkerTagFilter = f
	rt := dx.NewRuntime(p, opts)
	if err := prog.register(rt); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := prog.start(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := dx.Result[string](ctx, c, id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]jsonObject{}
	for _, inst := range []string{"p", "child-p-1", "child-p-2", "audit-p"} {
		if _, err := dx.Result[dx.Raw](ctx, c, inst); err != nil {
			for _, i := range []string{"p", "child-p-1", "child-p-2", "audit-p"} {
				st, _ := c.Status(context.Background(), i)
				evs, _ := c.History(context.Background(), i, 1)
				t.Logf("%s %+v %+v", i, st, evs)
			}
			t.Fatalf("%s: %v", inst, err)
		}
		execs, err := c.Executions(ctx, inst)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range execs {
			evs, err := c.History(ctx, inst, ex.ExecutionID)
			if err != nil {
				t.Fatal(err)
			}
			var objs []jsonObject
			for _, ev := range evs {
				b, err := json.Marshal(ev)
				if err != nil {
					t.Fatal(err)
				}
				o, err := decodeObject(b)
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, o)
			}
			got[fmt.Sprintf("%s#%d", inst, ex.ExecutionID)] = normalise(objs, false)
		}
	}
	return out, got
}

func TestHandlesRecordWhatNamesRecord(t *testing.T) {
	outH, h := histories(t, byHandle)
	outN, n := histories(t, byName)
	if outH != "Hello, world! 10" || outH != outN {
		t.Fatalf("outputs: by handle %q, by name %q", outH, outN)
	}
	if len(h) != 5 { // p#1, p#2, a child for each, the audit
		t.Fatalf("executions by handle: %d", len(h))
	}
	for k, want := range n {
		if got := h[k]; !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nby handle %s\nby name   %s", k, show(got), show(want))
		}
	}
	if len(h) != len(n) {
		t.Errorf("executions: by handle %d, by name %d", len(h), len(n))
	}
}

func TestHandleRegistrationRefusals(t *testing.T) {
	orch := func(ctx dx.Context, s string) (string, error) { return s, nil }
	act := func(ctx context.Context, s string) (string, error) { return s, nil }
	cases := map[string]func(rt *dx.Runtime) error{
		"activity without a name":          func(rt *dx.Runtime) error { return dx.Activity[string, string]{}.Register(rt, act) },
		"activity with an empty name":      func(rt *dx.Runtime) error { return dx.NewActivity[string, string]("").Register(rt, act) },
		"activity with a non-UTF-8 name":   func(rt *dx.Runtime) error { return dx.NewActivity[string, string]("bad\xff").Register(rt, act) },
		"orchestration without a name":     func(rt *dx.Runtime) error { return dx.Orchestration[string, string]{}.Register(rt, orch) },
		"orchestration with an empty name": func(rt *dx.Runtime) error { return dx.NewOrchestration[string, string]("").Register(rt, orch) },
		"orchestration with a non-UTF-8 name": func(rt *dx.Runtime) error {
			return dx.NewOrchestration[string, string]("\xc3\x28").RegisterVersion(rt, "2.0.0", orch)
		},
		"activity name taken by a handle of other types": func(rt *dx.Runtime) error {
			if err := dx.NewActivity[string, string]("A").Register(rt, act); err != nil {
				return fmt.Errorf("first registration: %v", err)
			}
			return dx.NewActivity[int, int]("A").Register(rt, func(ctx context.Context, n int) (int, error) { return n, nil })
		},
		"orchestration version through a handle of other types": func(rt *dx.Runtime) error {
			if err := dx.NewOrchestration[string, string]("O").Register(rt, orch); err != nil {
				return fmt.Errorf("first registration: %v", err)
			}
			return dx.NewOrchestration[int, string]("O").RegisterVersion(rt, "2.0.0", func(ctx dx.Context, n int) (string, error) { return "", nil })
		},
		"orchestration version through a handle of another output type": func(rt *dx.Runtime) error {
			if err := dx.NewOrchestration[string, string]("O").RegisterVersion(rt, "2.0.0", orch); err != nil {
				return fmt.Errorf("first registration: %v", err)
			}
			return dx.NewOrchestration[string, dx.Raw]("O").Register(rt, func(ctx dx.Context, s string) (dx.Raw, error) { return "", nil })
		},
	}
	for name, register := range cases {
		t.Run(name, func(t *testing.T) {
			rt := dx.NewRuntime(newProvider(t), testOptions())
			err := register(rt)
			if !errors.Is(err, dx.ErrInvalidInput) {
				t.Fatalf("registration: %v, want ErrInvalidInput", err)
			}
			if err := rt.Start(context.Background()); !errors.Is(err, dx.ErrInvalidInput) {
				t.Fatalf("Start after a refused registration: %v, want ErrInvalidInput", err)
			}
		})
	}

	t.Run("versions through handles of the same types", func(t *testing.T) {
		rt := dx.NewRuntime(newProvider(t), testOptions())
		o := dx.NewOrchestration[string, string]("O")
		if err := errors.Join(o.Register(rt, orch), dx.NewOrchestration[string, string]("O").RegisterVersion(rt, "2.0.0", orch),
			dx.RegisterVersion(rt, "O", "3.0.0", func(ctx dx.Context, n int) (int, error) { return n, nil })); err != nil {
			t.Fatal(err)
		}
	})
}

// A handle's ContinueAsNew continues the orchestration that runs: called from another
// orchestration's code it fails that orchestration, naming both, and schedules nothing.
func TestHandleContinueAsNewFromAnotherOrchestration(t *testing.T) {
	p := newProvider(t)
	rt := dx.NewRuntime(p, testOptions())
	hello := dx.NewOrchestration[string, string]("Hello")
	other := dx.NewOrchestration[string, string]("Other")
	if err := errors.Join(
		hello.Register(rt, func(ctx dx.Context, s string) (string, error) { return s, nil }),
		other.Register(rt, func(ctx dx.Context, s string) (string, error) {
			err := hello.ContinueAsNew(ctx, s)
			if !errors.Is(err, dx.ErrInvalidInput) {
				return "", fmt.Errorf("want ErrInvalidInput, got %v", err)
			}
			return "", err
		}),
	); err != nil {
		t.Fatal(err)
	}
	startRuntime(t, rt)
	c := dx.NewClient(p)
	ctx := waitCtx(t)
	id, err := other.Start(ctx, c, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Result(ctx, c, id); err == nil || !strings.Contains(err.Error(), `Hello.ContinueAsNew called from orchestration "Other"`) {
		t.Fatalf("result: %v", err)
	}
	execs, err := c.Executions(ctx, id)
	if err != nil || len(execs) != 1 {
		t.Fatalf("executions: %+v %v", execs, err)
	}
	evs, err := c.History(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if _, ok := ev.Kind.(provider.OrchestrationContinuedAsNewEvent); ok {
			t.Fatalf("continued as new: %+v", evs)
		}
	}
}

// A handle used outside orchestration code fails like the string-named call: an error, no panic.
func TestHandlesOutsideAnOrchestration(t *testing.T) {
	var ctx dx.Context
	if _, err := hGreet.Call(ctx, "x").Await(ctx); err == nil {
		t.Fatal("Call on a nil context")
	}
	if err := hAudit.StartDetached(ctx, "i", "x"); err == nil {
		t.Fatal("StartDetached on a nil context")
	}
	if err := hAudit.ContinueAsNew(ctx, "x"); err == nil {
		t.Fatal("ContinueAsNew on a nil context")
	}
	if _, err := hAudit.Start(context.Background(), nil, "x"); !errors.Is(err, dx.ErrInvalidInput) {
		t.Fatalf("Start on a nil client: %v", err)
	}
	if _, err := hAudit.Result(context.Background(), nil, "x"); !errors.Is(err, dx.ErrInvalidInput) {
		t.Fatalf("Result on a nil client: %v", err)
	}
}
