package dx_test

// The Go ports of the reference programs in testdata/golden, one per folder (see each folder's
// program.md). Payload types mirror program.md's JSON: field order and json tags give the same key
// order, so inputs and outputs are byte-identical to what the recording stored.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

var goldenPrograms = map[string]goldenProgram{
	"01-hello":                goldenHello,
	"02-sequence":             goldenSequence,
	"03-fan-out-fan-in":       goldenFanOut,
	"04-timer-then-activity":  goldenTimer,
	"07-sub-orchestration":    goldenSubOrchestration,
	"08-continue-as-new":      goldenContinueAsNew,
	"09-activity-failure":     goldenActivityFailure,
	"10-retry":                goldenRetry,
	"11-custom-status-and-kv": goldenStatusAndKV,
	"12-dequeue-event":        goldenDequeue,
	"14-guid-and-now":         goldenBuiltins,
	"15-detached-start":       goldenDetached,
	"17-versions":             goldenVersions,
	"18-session-and-tag":      goldenSessionAndTag,
	"19-nondeterminism":       goldenNondeterminism,
}

// ---- the README's activities ----

type pair struct {
	A int `json:"a"`
	B int `json:"b"`
}

func registerEcho(g *goldenEnv) {
	dx.RegisterActivity(g.rt, "Echo", func(_ context.Context, in dx.Raw) (dx.Raw, error) { return in, nil })
}

func registerGreet(g *goldenEnv) {
	dx.RegisterActivity(g.rt, "Greet", func(_ context.Context, s string) (string, error) { return "Hello, " + s + "!", nil })
}

func registerAdd(g *goldenEnv) {
	dx.RegisterActivity(g.rt, "Add", func(_ context.Context, p pair) (int, error) { return p.A + p.B, nil })
}

func registerMultiply(g *goldenEnv) {
	dx.RegisterActivity(g.rt, "Multiply", func(_ context.Context, p pair) (int, error) { return p.A * p.B, nil })
}

func registerFail(g *goldenEnv) {
	dx.RegisterActivity(g.rt, "Fail", func(_ context.Context, m string) (dx.Raw, error) { return "", errors.New(m) })
}

type flakyInput struct {
	Key       string `json:"key"`
	FailTimes int    `json:"failTimes"`
}

// registerFlaky registers Flaky with its own invocation counters (per key, from zero).
func registerFlaky(g *goldenEnv) {
	var mu sync.Mutex
	calls := map[string]int{}
	dx.RegisterActivity(g.rt, "Flaky", func(_ context.Context, in flakyInput) (string, error) {
		mu.Lock()
		calls[in.Key]++
		n := calls[in.Key]
		mu.Unlock()
		if n <= in.FailTimes {
			return "", fmt.Errorf("%s: attempt %d failed", in.Key, n)
		}
		return fmt.Sprintf("%s: succeeded on attempt %d", in.Key, n), nil
	})
}

// ---- 01 ----

var goldenHello = goldenProgram{
	register: func(g *goldenEnv) {
		registerGreet(g)
		dx.Register(g.rt, "Hello", func(ctx dx.Context, name string) (string, error) {
			return dx.Call[string](ctx, "Greet", name).Await(ctx)
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Hello", "hello", "world")
		g.wait("hello")
	},
}

// ---- 02 ----

var goldenSequence = goldenProgram{
	register: func(g *goldenEnv) {
		registerAdd(g)
		registerMultiply(g)
		type out struct {
			Steps []int `json:"steps"`
		}
		dx.Register(g.rt, "Sequence", func(ctx dx.Context, s int) (out, error) {
			x1, err := dx.Call[int](ctx, "Add", pair{s, 2}).Await(ctx)
			if err != nil {
				return out{}, err
			}
			x2, err := dx.Call[int](ctx, "Multiply", pair{x1, 5}).Await(ctx)
			if err != nil {
				return out{}, err
			}
			x3, err := dx.Call[int](ctx, "Add", pair{x2, -1}).Await(ctx)
			if err != nil {
				return out{}, err
			}
			return out{[]int{x1, x2, x3}}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Sequence", "sequence", 1)
		g.wait("sequence")
	},
}

// ---- 03 ----

type fanOutInput struct {
	N      int `json:"n"`
	FailAt int `json:"failAt,omitempty"`
}

var goldenFanOut = goldenProgram{
	register: func(g *goldenEnv) {
		registerMultiply(g)
		registerFail(g)
		type out struct {
			Squares []int `json:"squares"`
			Sum     int   `json:"sum"`
			Failed  []int `json:"failed"`
		}
		dx.Register(g.rt, "FanOut", func(ctx dx.Context, in fanOutInput) (out, error) {
			futs := make([]dx.Future[int], 0, in.N)
			for i := 1; i <= in.N; i++ {
				if i == in.FailAt {
					futs = append(futs, dx.Call[int](ctx, "Fail", fmt.Sprintf("item %d failed", i)))
				} else {
					futs = append(futs, dx.Call[int](ctx, "Multiply", pair{i, i}))
				}
			}
			as := make([]dx.Awaitable, len(futs))
			for i, f := range futs {
				as[i] = f
			}
			_ = dx.Join(ctx, as...) // a failure is a result, read below
			o := out{Squares: []int{}, Failed: []int{}}
			for i, f := range futs {
				v, err := f.Await(ctx)
				if err != nil {
					o.Failed = append(o.Failed, i+1)
					continue
				}
				o.Squares = append(o.Squares, v)
				o.Sum += v
			}
			return o, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("FanOut", "fanout", fanOutInput{N: 5})
		g.start("FanOut", "fanout-partial-failure", fanOutInput{N: 5, FailAt: 3})
		g.wait("fanout", "fanout-partial-failure")
	},
}

// ---- 04 ----

var goldenTimer = goldenProgram{
	register: func(g *goldenEnv) {
		registerEcho(g)
		type in struct {
			DelayMs int `json:"delayMs"`
		}
		dx.Register(g.rt, "TimerThenActivity", func(ctx dx.Context, i in) (dx.Raw, error) {
			if err := ctx.Sleep(time.Duration(i.DelayMs) * time.Millisecond); err != nil {
				return "", err
			}
			return dx.Call[dx.Raw](ctx, "Echo", "after timer").Await(ctx)
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("TimerThenActivity", "timer", dx.Raw(`{"delayMs":250}`))
		g.wait("timer")
	},
}

// ---- 07 ----

type childAdderInput struct {
	Value int  `json:"value"`
	Fail  bool `json:"fail,omitempty"`
}

type parentOfChildInput struct {
	Value     int    `json:"value"`
	ChildID   string `json:"childId,omitempty"`
	FailChild bool   `json:"failChild,omitempty"`
}

// registerChildAdder registers Add and program 07's child: it doubles its value with Add and fails
// when asked to.
func registerChildAdder(g *goldenEnv) {
	registerAdd(g)
	type doubled struct {
		Doubled int `json:"doubled"`
	}
	dx.Register(g.rt, "ChildAdder", func(ctx dx.Context, in childAdderInput) (doubled, error) {
		d, err := dx.Call[int](ctx, "Add", pair{in.Value, in.Value}).Await(ctx)
		if err != nil {
			return doubled{}, err
		}
		if in.Fail {
			return doubled{}, fmt.Errorf("child refused %d", d)
		}
		return doubled{d}, nil
	})
}

var goldenSubOrchestration = goldenProgram{
	register: func(g *goldenEnv) {
		registerChildAdder(g)
		type childResult struct {
			ChildResult json.RawMessage `json:"childResult"`
		}
		type childFailed struct {
			ChildFailed bool `json:"childFailed"`
		}
		dx.Register(g.rt, "ParentOfChild", func(ctx dx.Context, in parentOfChildInput) (any, error) {
			var opts []dx.SubOption
			if in.ChildID != "" {
				opts = append(opts, dx.WithInstanceID(in.ChildID))
			}
			if in.FailChild {
				_, err := dx.CallSub[dx.Raw](ctx, "ChildAdder", childAdderInput{Value: in.Value, Fail: true}, opts...).Await(ctx)
				if err == nil {
					return nil, errors.New("the failing child completed")
				}
				return childFailed{true}, nil
			}
			r, err := dx.CallSub[dx.Raw](ctx, "ChildAdder", childAdderInput{Value: in.Value}, opts...).Await(ctx)
			if err != nil {
				return nil, err
			}
			return childResult{json.RawMessage(r)}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("ParentOfChild", "sub-auto", parentOfChildInput{Value: 21})
		g.wait("sub-auto")
		g.start("ParentOfChild", "sub-explicit", parentOfChildInput{Value: 5, ChildID: "sub-explicit-child"})
		g.wait("sub-explicit")
		g.start("ParentOfChild", "sub-failing", parentOfChildInput{Value: 4, ChildID: "sub-failing-child", FailChild: true})
		g.wait("sub-auto", "sub-auto::sub::2", "sub-explicit", "sub-explicit-child", "sub-failing", "sub-failing-child")
	},
}

// ---- 08 ----

type counterInput struct {
	Count int `json:"count"`
}

var goldenContinueAsNew = goldenProgram{
	register: func(g *goldenEnv) {
		registerAdd(g)
		type final struct {
			Final int `json:"final"`
		}
		dx.Register(g.rt, "Counter", func(ctx dx.Context, in counterInput) (*final, error) {
			ctx.SetCustomStatus(fmt.Sprintf("count=%d", in.Count))
			next, err := dx.Call[int](ctx, "Add", pair{in.Count, 1}).Await(ctx)
			if err != nil {
				return nil, err
			}
			if next < 3 {
				return nil, dx.ContinueAsNew(ctx, counterInput{next})
			}
			return &final{next}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Counter", "counter", counterInput{0})
		g.wait("counter")
	},
}

// ---- 09 ----

var goldenActivityFailure = goldenProgram{
	register: func(g *goldenEnv) {
		registerFail(g)
		registerEcho(g)
		type in struct {
			CatchIt bool `json:"catchIt"`
		}
		type out struct {
			Caught bool   `json:"caught"`
			After  string `json:"after"`
		}
		dx.Register(g.rt, "FailureHandling", func(ctx dx.Context, i in) (*out, error) {
			if !i.CatchIt {
				_, err := dx.Call[dx.Raw](ctx, "Fail", "fatal boom").Await(ctx)
				if err == nil {
					err = errors.New("Fail did not fail")
				}
				return nil, err
			}
			if _, err := dx.Call[dx.Raw](ctx, "Fail", "boom").Await(ctx); err == nil {
				return nil, errors.New("Fail did not fail")
			}
			after, err := dx.Call[string](ctx, "Echo", "recovered").Await(ctx)
			if err != nil {
				return nil, err
			}
			return &out{true, after}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("FailureHandling", "fail-caught", dx.Raw(`{"catchIt":true}`))
		g.wait("fail-caught")
		g.start("FailureHandling", "fail-uncaught", dx.Raw(`{"catchIt":false}`))
		g.wait("fail-uncaught")
	},
}

// ---- 10 ----

type retryPolicyInput struct {
	MaxAttempts int    `json:"maxAttempts"`
	TimeoutMs   int    `json:"timeoutMs,omitempty"`
	Backoff     string `json:"backoff,omitempty"`
}

type retryFlakyInput struct {
	Key       string           `json:"key"`
	FailTimes int              `json:"failTimes"`
	Policy    retryPolicyInput `json:"policy"`
}

var goldenRetry = goldenProgram{
	register: func(g *goldenEnv) {
		registerFlaky(g)
		type out struct {
			Result string `json:"result"`
		}
		dx.Register(g.rt, "RetryFlaky", func(ctx dx.Context, in retryFlakyInput) (*out, error) {
			p := dx.RetryPolicy{MaxAttempts: in.Policy.MaxAttempts, Timeout: time.Duration(in.Policy.TimeoutMs) * time.Millisecond}
			switch in.Policy.Backoff {
			case "exponential":
				p.Backoff = dx.ExponentialBackoff(100*time.Millisecond, 2, 30*time.Second)
			case "linear":
				p.Backoff = dx.LinearBackoff(100*time.Millisecond, 30*time.Second)
			}
			r, err := dx.Call[string](ctx, "Flaky", flakyInput{in.Key, in.FailTimes}, dx.WithRetry(p)).Await(ctx)
			if err != nil {
				return nil, err
			}
			return &out{r}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("RetryFlaky", "retry-exponential", retryFlakyInput{"retry-exponential", 2, retryPolicyInput{MaxAttempts: 3, Backoff: "exponential"}})
		g.wait("retry-exponential")
		g.start("RetryFlaky", "retry-with-timeout", retryFlakyInput{"retry-with-timeout", 2, retryPolicyInput{MaxAttempts: 4, TimeoutMs: 60000, Backoff: "linear"}})
		g.wait("retry-with-timeout")
		g.start("RetryFlaky", "retry-exhausted", retryFlakyInput{"retry-exhausted", 5, retryPolicyInput{MaxAttempts: 2}})
		g.wait("retry-exhausted")
	},
}

// ---- 11 ----

var goldenStatusAndKV = goldenProgram{
	register: func(g *goldenEnv) {
		registerEcho(g)
		type out struct {
			First            string            `json:"first"`
			ColorLocal       string            `json:"colorLocal"`
			ColorViaActivity *string           `json:"colorViaActivity"`
			Missing          *string           `json:"missing"`
			KvAtEnd          map[string]string `json:"kvAtEnd"`
			StatusAtEnd      *string           `json:"statusAtEnd"`
		}
		dx.Register(g.rt, "StatusAndKv", func(ctx dx.Context, _ dx.Raw) (*out, error) {
			ctx.SetCustomStatus("step-1")
			ctx.SetKV("color", "red")
			ctx.SetKV("size", "L")
			first, err := dx.Call[string](ctx, "Echo", "checkpoint").Await(ctx)
			if err != nil {
				return nil, err
			}
			colorLocal, _ := ctx.KV("color")
			viaActivity, err := ctx.KVFromInstance("status-kv", "color").Await(ctx)
			if err != nil {
				return nil, err
			}
			missing, err := ctx.KVFromInstance("no-such-instance", "color").Await(ctx)
			if err != nil {
				return nil, err
			}
			ctx.SetCustomStatus("step-2")
			ctx.ClearKV("size")
			ctx.ResetCustomStatus()
			ctx.SetKV("temp", "1")
			ctx.ClearAllKV()
			ctx.SetKV("final", "yes")
			ctx.SetCustomStatus("done")
			o := &out{First: first, ColorLocal: colorLocal, ColorViaActivity: viaActivity, Missing: missing, KvAtEnd: ctx.KVAll()}
			if s, ok := ctx.CustomStatus(); ok {
				o.StatusAtEnd = &s
			}
			return o, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("StatusAndKv", "status-kv", nil)
		g.wait("status-kv")
	},
}

// ---- 12 ----

var goldenDequeue = goldenProgram{
	register: func(g *goldenEnv) {
		type out struct {
			First  json.RawMessage `json:"first"`
			Second json.RawMessage `json:"second"`
		}
		dx.Register(g.rt, "InboxReader", func(ctx dx.Context, _ dx.Raw) (*out, error) {
			first, err := dx.Dequeue[dx.Raw](ctx, "inbox").Await(ctx)
			if err != nil {
				return nil, err
			}
			second, err := dx.Dequeue[dx.Raw](ctx, "inbox").Await(ctx)
			if err != nil {
				return nil, err
			}
			return &out{json.RawMessage(first), json.RawMessage(second)}, nil
		})
	},
	drive: func(g *goldenEnv) {
		// Before the runtime starts: the start and both messages reach the first turn together.
		g.start("InboxReader", "inbox-prestart", nil)
		g.enqueue("inbox-prestart", "inbox", dx.Raw(`{"msg":1}`))
		g.enqueue("inbox-prestart", "inbox", dx.Raw(`{"msg":2}`))
		g.startRuntime()
		g.wait("inbox-prestart")

		g.start("InboxReader", "inbox-stepwise", nil)
		g.waitHistory("inbox-stepwise", "ExternalSubscribedPersistent", 1)
		g.enqueue("inbox-stepwise", "inbox", dx.Raw(`{"msg":"a"}`))
		g.waitHistory("inbox-stepwise", "ExternalSubscribedPersistent", 2)
		g.enqueue("inbox-stepwise", "inbox", dx.Raw(`{"msg":"b"}`))
		g.wait("inbox-stepwise")
	},
}

// ---- 14 ----

var lowerUUIDv4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

var goldenBuiltins = goldenProgram{
	register: func(g *goldenEnv) {
		type out struct {
			GUIDLength  int  `json:"guidLength"`
			GUIDsDiffer bool `json:"guidsDiffer"`
			GUIDIsV4    bool `json:"guidIsV4"`
			NowIsNumber bool `json:"nowIsNumber"`
		}
		dx.Register(g.rt, "Builtins", func(ctx dx.Context, _ dx.Raw) (*out, error) {
			g1, err := ctx.NewGUID().Await(ctx)
			if err != nil {
				return nil, err
			}
			g2, err := ctx.NewGUID().Await(ctx)
			if err != nil {
				return nil, err
			}
			now, err := ctx.UtcNow().Await(ctx)
			if err != nil {
				return nil, err
			}
			return &out{len(g1), g1 != g2, lowerUUIDv4.MatchString(g1), float64(now.UnixMilli()) > 1.7e12}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Builtins", "builtins", nil)
		g.wait("builtins")
	},
}

// ---- 15 ----

type jobInput struct {
	Job string `json:"job"`
}

var goldenDetached = goldenProgram{
	register: func(g *goldenEnv) {
		registerEcho(g)
		registerGreet(g)
		dx.Register(g.rt, "DetachedJob", func(ctx dx.Context, in jobInput) (string, error) {
			return dx.Call[string](ctx, "Greet", "job "+in.Job).Await(ctx)
		})
		type out struct {
			Mid      string   `json:"mid"`
			Launched []string `json:"launched"`
		}
		dx.Register(g.rt, "Launcher", func(ctx dx.Context, _ dx.Raw) (*out, error) {
			if err := ctx.StartOrchestration("DetachedJob", "detached-a", jobInput{"a"}); err != nil {
				return nil, err
			}
			mid, err := dx.Call[string](ctx, "Echo", "launched a").Await(ctx)
			if err != nil {
				return nil, err
			}
			if err := ctx.StartOrchestration("DetachedJob", "detached-b", jobInput{"b"}); err != nil {
				return nil, err
			}
			return &out{mid, []string{"detached-a", "detached-b"}}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Launcher", "launcher", nil)
		g.wait("launcher")
		g.wait("detached-a", "detached-b")
	},
}

// ---- 17 ----

type versionedInput struct {
	Step    int    `json:"step"`
	Upgrade string `json:"upgrade,omitempty"`
}

type versionedOutput struct {
	RanVersion string `json:"ranVersion"`
	R          string `json:"r"`
}

var goldenVersions = goldenProgram{
	register: func(g *goldenEnv) {
		registerEcho(g)
		dx.RegisterVersion(g.rt, "Versioned", "1.0.0", func(ctx dx.Context, in versionedInput) (*versionedOutput, error) {
			r, err := dx.Call[string](ctx, "Echo", fmt.Sprintf("v1 step %d", in.Step)).Await(ctx)
			if err != nil {
				return nil, err
			}
			switch in.Upgrade {
			case "versioned":
				return nil, dx.ContinueAsNew(ctx, versionedInput{Step: in.Step + 1}, dx.WithVersion("2.0.0"))
			case "plain":
				return nil, dx.ContinueAsNew(ctx, versionedInput{Step: in.Step + 1})
			}
			return &versionedOutput{ctx.Version(), r}, nil
		})
		dx.RegisterVersion(g.rt, "Versioned", "2.0.0", func(ctx dx.Context, in versionedInput) (*versionedOutput, error) {
			r, err := dx.Call[string](ctx, "Echo", fmt.Sprintf("v2 step %d", in.Step)).Await(ctx)
			if err != nil {
				return nil, err
			}
			return &versionedOutput{ctx.Version(), r}, nil
		})
		type parentInput struct {
			ChildID string `json:"childId"`
		}
		type parentOutput struct {
			Child json.RawMessage `json:"child"`
		}
		dx.Register(g.rt, "VersionedParent", func(ctx dx.Context, in parentInput) (*parentOutput, error) {
			r, err := dx.CallSub[dx.Raw](ctx, "Versioned", versionedInput{Step: 7},
				dx.WithInstanceID(in.ChildID), dx.WithVersion("1.0.0")).Await(ctx)
			if err != nil {
				return nil, err
			}
			return &parentOutput{json.RawMessage(r)}, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Versioned", "versioned-latest", versionedInput{Step: 1})
		g.wait("versioned-latest")
		g.start("Versioned", "versioned-upgrade", versionedInput{Step: 1, Upgrade: "versioned"}, dx.WithVersion("1.0.0"))
		g.wait("versioned-upgrade")
		g.start("Versioned", "versioned-plain-can", versionedInput{Step: 1, Upgrade: "plain"}, dx.WithVersion("1.0.0"))
		g.wait("versioned-plain-can")
		g.start("VersionedParent", "versioned-parent", dx.Raw(`{"childId":"versioned-child"}`))
		g.wait("versioned-parent", "versioned-child")
	},
}

// ---- 18 ----

var goldenSessionAndTag = goldenProgram{
	workerTags: []string{"gpu"},
	register: func(g *goldenEnv) {
		registerEcho(g)
		dx.Register(g.rt, "Routed", func(ctx dx.Context, _ dx.Raw) ([]string, error) {
			calls := []struct {
				input string
				opts  []dx.CallOption
			}{
				{"on session", []dx.CallOption{dx.OnSession("session-1")}},
				{"tagged", []dx.CallOption{dx.WithTag("gpu")}},
				{"session and tag", []dx.CallOption{dx.OnSession("session-1"), dx.WithTag("gpu")}},
				{"retry on session", []dx.CallOption{dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2}), dx.OnSession("session-2")}},
			}
			var out []string
			for _, c := range calls {
				r, err := dx.Call[string](ctx, "Echo", c.input, c.opts...).Await(ctx)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Routed", "routed", nil)
		g.wait("routed")
	},
}

// ---- 19 ----

var goldenNondeterminism = goldenProgram{
	register: func(g *goldenEnv) {
		registerEcho(g)
		runs := 0 // this case's own count of the times the code ran
		dx.Register(g.rt, "Drifting", func(ctx dx.Context, _ dx.Raw) (string, error) {
			runs++
			input := "v2"
			if runs == 1 {
				input = "v1"
			}
			if _, err := dx.Call[string](ctx, "Echo", input).Await(ctx); err != nil {
				return "", err
			}
			return "unreachable", nil
		})
	},
	drive: func(g *goldenEnv) {
		g.startRuntime()
		g.start("Drifting", "drifting", nil)
		g.wait("drifting")
	},
}
