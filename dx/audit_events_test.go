package dx_test

// Audit of external events (WaitEvent / RaiseEvent) and select/race against what duroxide 0.1.30
// stores. Each case's expected history was derived by hand from duroxide's source
// (src/runtime/replay_engine.rs: prep_completions, the replay loop's "poll before the next event",
// ExternalEvent delivery only to a pending subscription slot, collect_cancelled_from_context's
// dropped_future breadcrumbs after the turn's new events; src/lib.rs: DurableFuture::drop,
// get_external_event's compressed indices; src/combinators.rs: Select2 picks the first ready in
// argument order; the Node binding's race = ctx.select2 of two lazily scheduled futures).
// Every case runs like the golden programs: replay-only, with the executor cache, and through the
// extension provider.
//
// With the cache on, four of these cases (raised-before-start, race-two-waits-one-name-then-wait,
// race-event-timeout-then-wait-again, timeout-and-event-same-batch-then-wait) once hung or picked
// another winner: a kept engine did not mark the ExternalSubscribedCancelled breadcrumbs it had
// recorded itself (engine.commit does now). TestWaitAgainAfterLostRace is the unit test of it.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

type eaEnv struct {
	*goldenEnv
	mu          sync.Mutex
	gates       map[string]chan struct{}
	blocked     chan struct{}
	slowRan     atomic.Int32 // runs of Slow that returned
	slowStarted atomic.Int32 // runs of Slow that began
}

func (a *eaEnv) gate(key string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch, ok := a.gates[key]
	if !ok {
		ch = make(chan struct{})
		a.gates[key] = ch
	}
	return ch
}

func (a *eaEnv) release(key string) { close(a.gate(key)) }

func (a *eaEnv) raise(instance, name string, data string) {
	a.t.Helper()
	if err := a.c.RaiseEvent(a.ctx, instance, name, dx.Raw(data)); err != nil {
		a.t.Fatalf("raise %s on %s: %v", name, instance, err)
	}
}

// block starts an instance of Blocker, whose first run holds the only orchestration slot for d, and
// returns once it runs: messages sent meanwhile reach their instance's next turn in one batch.
func (a *eaEnv) block(instance string, d time.Duration) {
	a.t.Helper()
	a.start("Blocker", instance, d.Milliseconds())
	select {
	case <-a.blocked:
	case <-a.ctx.Done():
		a.t.Fatal("blocker never ran")
	}
}

// waitTimerDue waits until the instance's first timer is due: the clock has passed its fire_at_ms.
func (a *eaEnv) waitTimerDue(instance string) {
	a.t.Helper()
	h, err := a.p.Read(a.ctx, instance)
	if err != nil {
		a.t.Fatal(err)
	}
	for _, ev := range h {
		if tc, ok := ev.Kind.(provider.TimerCreatedEvent); ok {
			waitFor(a.t, "the timer to be due", func() bool { return time.Now().UnixMilli() > int64(tc.FireAtMs) })
			return
		}
	}
	a.t.Fatalf("%s has no timer", instance)
}

func eaRegisterCommon(a *eaEnv) {
	registerEcho(a.goldenEnv)
	dx.RegisterActivity(a.rt, "Slow", func(ctx context.Context, ms int) (string, error) {
		a.slowStarted.Add(1)
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
		}
		a.slowRan.Add(1)
		return "slow done", nil
	})
	dx.RegisterActivity(a.rt, "Gate", func(ctx context.Context, key string) (string, error) {
		select {
		case <-a.gate(key):
		case <-ctx.Done():
		}
		return key, nil
	})
	dx.Register(a.rt, "Blocker", func(ctx dx.Context, ms int) (string, error) {
		if !ctx.IsReplaying() {
			select {
			case a.blocked <- struct{}{}:
			default:
			}
			time.Sleep(time.Duration(ms) * time.Millisecond) // holds the orchestration slot on purpose
		}
		return "done", nil
	})
}

// ev is an expected event: id, source (0: null), type, then the type's fields as JSON text.
func eaEv(id, src int, typ, fields string) string {
	s := "null"
	if src != 0 {
		s = strconv.Itoa(src)
	}
	if fields != "" {
		fields = "," + fields
	}
	return fmt.Sprintf(`{"event_id":%d,"source_event_id":%s,"type":%q%s}`, id, s, typ, fields)
}

func eaStarted(name, input string) string {
	return eaEv(1, 0, "OrchestrationStarted", fmt.Sprintf(`"name":%q,"version":"1.0.0","input":%q,"parent_instance":null,"parent_id":null`, name, input))
}

func eaCompleted(id int, output string) string {
	return eaEv(id, 0, "OrchestrationCompleted", fmt.Sprintf(`"output":%q`, output))
}

type eaCase struct {
	name     string
	instance string
	register func(a *eaEnv)
	drive    func(a *eaEnv)
	want     []string
	output   string // the instance's final output (Completed)
	after    func(a *eaEnv)
}

func eaCanonical(t *testing.T, raw []byte, drop bool) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if drop {
		for _, k := range []string{"timestamp_ms", "fire_at_ms", "instance_id", "execution_id", "duroxide_version"} {
			delete(m, k)
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func eaRun(t *testing.T, c eaCase) {
	for _, mode := range []struct {
		name  string
		cache int
		ext   bool
	}{{"replay", -1, false}, {"cached", 0, false}, {"extensions", 0, true}} {
		t.Run(mode.name, func(t *testing.T) {
			p := newProvider(t)
			opts := dx.Options{OrchestrationConcurrency: 1, WorkerConcurrency: 1, MinPollInterval: 20 * time.Millisecond,
				PollTimeout: 200 * time.Millisecond, Logger: testLogger(), ExecutorCacheSize: mode.cache}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t.Cleanup(cancel)
			var rp provider.Provider = p
			if mode.ext {
				rp = newExtProvider(p)
			}
			g := &goldenEnv{t: t, ctx: ctx, p: p, rt: dx.NewRuntime(rp, opts), c: dx.NewClient(rp)}
			a := &eaEnv{goldenEnv: g, gates: map[string]chan struct{}{}, blocked: make(chan struct{}, 1)}
			eaRegisterCommon(a)
			c.register(a)
			c.drive(a)
			if t.Failed() {
				return
			}
			check := func(when string) {
				hist, err := p.Read(ctx, c.instance)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range hist {
					b, err := json.Marshal(e)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, eaCanonical(t, b, true))
				}
				var want []string
				for _, w := range c.want {
					want = append(want, eaCanonical(t, []byte(w), false))
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: history of %s differs\nwant:\n  %s\ngot:\n  %s", when, c.instance,
						strings.Join(want, "\n  "), strings.Join(got, "\n  "))
				}
			}
			check("at the end")
			st, err := g.c.Status(ctx, c.instance)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != dx.StateCompleted || st.Output != c.output {
				t.Errorf("status: want Completed %s, got %s %s (err %v)", c.output, st.State, st.Output, st.Err)
			}
			if c.after != nil {
				c.after(a)
				check("after the late messages")
			}
		})
	}
}

type eaRaceOut struct {
	Winner int             `json:"winner"`
	Value  json.RawMessage `json:"value"`
}

// eaWinnerOf returns the index of Select's winner among futs.
func eaWinnerOf(sel dx.Awaitable, futs ...dx.Awaitable) int {
	for i, f := range futs {
		if f == sel {
			return i
		}
	}
	return -1
}

func TestAuditEvents(t *testing.T) {
	t.Parallel()
	// Orchestrations shared by several cases.
	raceEvTimer := func(a *eaEnv) {
		// RaceEv {"ms":N}: race(waitForEvent("approve"), timer N ms).
		type in struct {
			Ms int `json:"ms"`
		}
		dx.Register(a.rt, "RaceEv", func(ctx dx.Context, i in) (eaRaceOut, error) {
			w := dx.WaitEvent[dx.Raw](ctx, "approve")
			tm := ctx.Timer(time.Duration(i.Ms) * time.Millisecond)
			if eaWinnerOf(dx.Select(ctx, w, tm), w, tm) == 0 {
				v, err := w.Await(ctx)
				return eaRaceOut{0, json.RawMessage(v)}, err
			}
			return eaRaceOut{1, json.RawMessage(`null`)}, nil
		})
	}
	midRun := func(a *eaEnv) {
		// EvMid: timer 1 s, then race(wait "x", timer 200 ms). The first timer leaves a test's
		// raise (or blocker) that much time to land before it fires; 300 ms was too little on a
		// loaded machine (the raise then came after TimerFired: another history).
		dx.Register(a.rt, "EvMid", func(ctx dx.Context, _ dx.Raw) (string, error) {
			if err := ctx.Sleep(time.Second); err != nil {
				return "", err
			}
			w := dx.WaitEvent[string](ctx, "x")
			tm := ctx.Timer(200 * time.Millisecond)
			if dx.Select(ctx, w, tm) == dx.Awaitable(w) {
				return w.Await(ctx)
			}
			return "timeout", nil
		})
	}

	cases := []eaCase{
		{
			name: "wait-then-raise", instance: "ev-basic",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "EvBasic", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.WaitEvent[dx.Raw](ctx, "approve").Await(ctx)
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvBasic", "ev-basic", nil)
				a.waitHistory("ev-basic", "ExternalSubscribed", 1)
				a.raise("ev-basic", "approve", `{"by":"alice"}`)
				a.wait("ev-basic")
			},
			want: []string{
				eaStarted("EvBasic", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"approve"`),
				eaEv(3, 0, "ExternalEvent", `"name":"approve","data":"{\"by\":\"alice\"}"`),
				eaCompleted(4, `{"by":"alice"}`),
			},
			output: `{"by":"alice"}`,
		},
		{
			// Raised before the runtime starts: recorded with the start, never delivered (no
			// subscription at that point of the history); the race times out; a raise after
			// the second subscription is delivered to it.
			name: "raised-before-start", instance: "ev-prestart",
			register: func(a *eaEnv) {
				type out struct {
					First  string          `json:"first"`
					Second json.RawMessage `json:"second"`
				}
				dx.Register(a.rt, "EvEarly", func(ctx dx.Context, _ dx.Raw) (out, error) {
					w := dx.WaitEvent[dx.Raw](ctx, "early")
					tm := ctx.Timer(200 * time.Millisecond)
					first := "timeout"
					if dx.Select(ctx, w, tm) == dx.Awaitable(w) {
						v, _ := w.Await(ctx)
						first = string(v)
					}
					v, err := dx.WaitEvent[dx.Raw](ctx, "early").Await(ctx)
					return out{first, json.RawMessage(v)}, err
				})
			},
			drive: func(a *eaEnv) {
				a.start("EvEarly", "ev-prestart", nil)
				a.raise("ev-prestart", "early", `1`)
				a.startRuntime()
				a.waitHistory("ev-prestart", "ExternalSubscribed", 2)
				a.raise("ev-prestart", "early", `2`)
				a.wait("ev-prestart")
			},
			want: []string{
				eaStarted("EvEarly", "null"),
				eaEv(2, 0, "ExternalEvent", `"name":"early","data":"1"`),
				eaEv(3, 0, "ExternalSubscribed", `"name":"early"`),
				eaEv(4, 0, "TimerCreated", ``),
				eaEv(5, 4, "TimerFired", ``),
				eaEv(6, 0, "ExternalSubscribed", `"name":"early"`),
				eaEv(7, 3, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaEv(8, 0, "ExternalEvent", `"name":"early","data":"2"`),
				eaCompleted(9, `{"first":"timeout","second":2}`),
			},
			output: `{"first":"timeout","second":2}`,
		},
		{
			// Raised while the code waits on a timer (own turn): recorded, not delivered.
			name: "raised-mid-run-own-turn", instance: "ev-mid",
			register: midRun,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvMid", "ev-mid", nil)
				a.waitHistory("ev-mid", "TimerCreated", 1)
				a.raise("ev-mid", "x", `"early"`)
				a.waitHistory("ev-mid", "ExternalEvent", 1)
				a.wait("ev-mid")
			},
			want: []string{
				eaStarted("EvMid", "null"),
				eaEv(2, 0, "TimerCreated", ``),
				eaEv(3, 0, "ExternalEvent", `"name":"x","data":"\"early\""`),
				eaEv(4, 2, "TimerFired", ``),
				eaEv(5, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(6, 0, "TimerCreated", ``),
				eaEv(7, 6, "TimerFired", ``),
				eaEv(8, 5, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaCompleted(9, `"timeout"`),
			},
			output: `"timeout"`,
		},
		{
			// Same, but the raise and the timer reach one batch [TimerFired, ExternalRaised]:
			// the code subscribes in the poll before the event is applied, yet the event is not
			// delivered (the new subscription is bound only when converted).
			name: "raised-same-batch-as-wakeup", instance: "ev-batch",
			register: midRun,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvMid", "ev-batch", nil)
				a.waitHistory("ev-batch", "TimerCreated", 1)
				a.block("blocker", 1600*time.Millisecond)
				a.raise("ev-batch", "x", `"early"`)
				a.wait("ev-batch")
			},
			want: []string{
				eaStarted("EvMid", "null"),
				eaEv(2, 0, "TimerCreated", ``),
				eaEv(3, 2, "TimerFired", ``),
				eaEv(4, 0, "ExternalEvent", `"name":"x","data":"\"early\""`),
				eaEv(5, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(6, 0, "TimerCreated", ``),
				eaEv(7, 6, "TimerFired", ``),
				eaEv(8, 5, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaCompleted(9, `"timeout"`),
			},
			output: `"timeout"`,
		},
		{
			name: "two-events-stepwise", instance: "ev-two",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "EvTwo", func(ctx dx.Context, _ dx.Raw) ([]string, error) {
					x, err := dx.WaitEvent[string](ctx, "x").Await(ctx)
					if err != nil {
						return nil, err
					}
					y, err := dx.WaitEvent[string](ctx, "x").Await(ctx)
					return []string{x, y}, err
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvTwo", "ev-two", nil)
				a.waitHistory("ev-two", "ExternalSubscribed", 1)
				a.raise("ev-two", "x", `"a"`)
				a.waitHistory("ev-two", "ExternalSubscribed", 2)
				a.raise("ev-two", "x", `"b"`)
				a.wait("ev-two")
			},
			want: []string{
				eaStarted("EvTwo", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "ExternalEvent", `"name":"x","data":"\"a\""`),
				eaEv(4, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(5, 0, "ExternalEvent", `"name":"x","data":"\"b\""`),
				eaCompleted(6, `["a","b"]`),
			},
			output: `["a","b"]`,
		},
		{
			// Two events of one name in one batch with one subscription: the second has no slot
			// and is never delivered, even to the subscription made right after.
			name: "two-events-one-batch-one-subscription", instance: "ev-two-batch",
			register: func(a *eaEnv) {
				type out struct {
					A string `json:"a"`
					B string `json:"b"`
				}
				dx.Register(a.rt, "EvTwoRace", func(ctx dx.Context, _ dx.Raw) (out, error) {
					x, err := dx.WaitEvent[string](ctx, "x").Await(ctx)
					if err != nil {
						return out{}, err
					}
					w := dx.WaitEvent[string](ctx, "x")
					tm := ctx.Timer(300 * time.Millisecond)
					if dx.Select(ctx, w, tm) == dx.Awaitable(w) {
						y, _ := w.Await(ctx)
						return out{x, y}, nil
					}
					return out{x, "timeout"}, nil
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvTwoRace", "ev-two-batch", nil)
				a.waitHistory("ev-two-batch", "ExternalSubscribed", 1)
				a.block("blocker", 600*time.Millisecond)
				a.raise("ev-two-batch", "x", `"a"`)
				a.raise("ev-two-batch", "x", `"b"`)
				a.wait("ev-two-batch")
			},
			want: []string{
				eaStarted("EvTwoRace", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "ExternalEvent", `"name":"x","data":"\"a\""`),
				eaEv(4, 0, "ExternalEvent", `"name":"x","data":"\"b\""`),
				eaEv(5, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(6, 0, "TimerCreated", ``),
				eaEv(7, 6, "TimerFired", ``),
				eaEv(8, 5, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaCompleted(9, `{"a":"a","b":"timeout"}`),
			},
			output: `{"a":"a","b":"timeout"}`,
		},
		{
			name: "join-two-waits-one-name", instance: "ev-join",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "EvJoin", func(ctx dx.Context, _ dx.Raw) ([]string, error) {
					return dx.All(ctx, dx.WaitEvent[string](ctx, "x"), dx.WaitEvent[string](ctx, "x"))
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvJoin", "ev-join", nil)
				a.waitHistory("ev-join", "ExternalSubscribed", 2)
				a.raise("ev-join", "x", `"a"`)
				a.waitHistory("ev-join", "ExternalEvent", 1)
				a.raise("ev-join", "x", `"b"`)
				a.wait("ev-join")
			},
			want: []string{
				eaStarted("EvJoin", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(4, 0, "ExternalEvent", `"name":"x","data":"\"a\""`),
				eaEv(5, 0, "ExternalEvent", `"name":"x","data":"\"b\""`),
				eaCompleted(6, `["a","b"]`),
			},
			output: `["a","b"]`,
		},
		{
			// race(wait x, wait x): the first wins, the second is dropped; a later wait of x gets
			// the next event (compressed index: the cancelled subscription gives up its slot).
			name: "race-two-waits-one-name-then-wait", instance: "ev-race2",
			register: func(a *eaEnv) {
				type out struct {
					Winner int    `json:"winner"`
					First  string `json:"first"`
					Second string `json:"second"`
				}
				dx.Register(a.rt, "EvRaceTwo", func(ctx dx.Context, _ dx.Raw) (out, error) {
					w1, w2 := dx.WaitEvent[string](ctx, "x"), dx.WaitEvent[string](ctx, "x")
					sel := dx.Select(ctx, w1, w2)
					o := out{Winner: eaWinnerOf(sel, w1, w2)}
					if o.Winner == 0 {
						o.First, _ = w1.Await(ctx)
					} else {
						o.First, _ = w2.Await(ctx)
					}
					var err error
					o.Second, err = dx.WaitEvent[string](ctx, "x").Await(ctx)
					return o, err
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvRaceTwo", "ev-race2", nil)
				a.waitHistory("ev-race2", "ExternalSubscribed", 2)
				a.raise("ev-race2", "x", `"a"`)
				a.waitHistory("ev-race2", "ExternalSubscribed", 3)
				a.raise("ev-race2", "x", `"b"`)
				a.wait("ev-race2")
			},
			want: []string{
				eaStarted("EvRaceTwo", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(4, 0, "ExternalEvent", `"name":"x","data":"\"a\""`),
				eaEv(5, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(6, 3, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaEv(7, 0, "ExternalEvent", `"name":"x","data":"\"b\""`),
				eaCompleted(8, `{"winner":0,"first":"a","second":"b"}`),
			},
			output: `{"winner":0,"first":"a","second":"b"}`,
		},
		{
			// Timeout race whose timer and event reach one batch [TimerFired, ExternalRaised]:
			// the dropped wait is not yet marked cancelled in that turn, so the event fills its
			// slot; on the next turn's replay the breadcrumb compresses the indices and the second
			// wait resolves with that event (duroxide's replay from scratch).
			name: "timeout-and-event-same-batch-then-wait", instance: "ev-quirk",
			register: func(a *eaEnv) {
				type out struct {
					First  string `json:"first"`
					Second string `json:"second"`
				}
				dx.Register(a.rt, "EvQuirk", func(ctx dx.Context, _ dx.Raw) (out, error) {
					race := func(ms int) string {
						w := dx.WaitEvent[string](ctx, "x")
						tm := ctx.Timer(time.Duration(ms) * time.Millisecond)
						if dx.Select(ctx, w, tm) == dx.Awaitable(w) {
							v, _ := w.Await(ctx)
							return v
						}
						return "timeout"
					}
					first := race(300)
					return out{first, race(700)}, nil
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvQuirk", "ev-quirk", nil)
				a.waitHistory("ev-quirk", "TimerCreated", 1)
				a.block("blocker", 900*time.Millisecond)
				a.waitTimerDue("ev-quirk") // the first timer is due (its TimerFired waits behind the blocker)
				a.raise("ev-quirk", "x", `"v"`)
				a.wait("ev-quirk")
			},
			want: []string{
				eaStarted("EvQuirk", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 3, "TimerFired", ``),
				eaEv(5, 0, "ExternalEvent", `"name":"x","data":"\"v\""`),
				eaEv(6, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(7, 0, "TimerCreated", ``),
				eaEv(8, 2, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaEv(9, 7, "TimerFired", ``),
				// The resolved wait 6 is still "outstanding" by the history-only terminal
				// computation (execution.rs get_outstanding_schedule_ids: the event at 5 paired
				// with subscription 2), so it gets an orchestration_terminal breadcrumb.
				eaEv(10, 6, "ExternalSubscribedCancelled", `"reason":"orchestration_terminal"`),
				eaCompleted(11, `{"first":"timeout","second":"v"}`),
			},
			output: `{"first":"timeout","second":"v"}`,
		},
		{
			// race(wait x, timer) times out, then the code waits for x again and x is raised:
			// the dropped subscription gives up its slot (compressed index), so the new wait
			// gets the event.
			name: "race-event-timeout-then-wait-again", instance: "ev-retry",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "EvRetry", func(ctx dx.Context, _ dx.Raw) (string, error) {
					w := dx.WaitEvent[string](ctx, "x")
					tm := ctx.Timer(100 * time.Millisecond)
					if dx.Select(ctx, w, tm) == dx.Awaitable(w) {
						return w.Await(ctx)
					}
					return dx.WaitEvent[string](ctx, "x").Await(ctx)
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("EvRetry", "ev-retry", nil)
				a.waitHistory("ev-retry", "ExternalSubscribed", 2)
				a.raise("ev-retry", "x", `"v"`)
				a.wait("ev-retry")
			},
			want: []string{
				eaStarted("EvRetry", "null"),
				eaEv(2, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 3, "TimerFired", ``),
				eaEv(5, 0, "ExternalSubscribed", `"name":"x"`),
				eaEv(6, 2, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaEv(7, 0, "ExternalEvent", `"name":"x","data":"\"v\""`),
				eaCompleted(8, `"v"`),
			},
			output: `"v"`,
		},
		{
			name: "race-event-wins", instance: "race-ev-win",
			register: raceEvTimer,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceEv", "race-ev-win", dx.Raw(`{"ms":30000}`))
				a.waitHistory("race-ev-win", "ExternalSubscribed", 1)
				a.raise("race-ev-win", "approve", `"ok"`)
				a.wait("race-ev-win")
			},
			want: []string{
				eaStarted("RaceEv", `{"ms":30000}`),
				eaEv(2, 0, "ExternalSubscribed", `"name":"approve"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 0, "ExternalEvent", `"name":"approve","data":"\"ok\""`),
				eaCompleted(5, `{"winner":0,"value":"ok"}`),
			},
			output: `{"winner":0,"value":"ok"}`,
		},
		{
			name: "race-event-times-out", instance: "race-ev-timeout",
			register: raceEvTimer,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceEv", "race-ev-timeout", dx.Raw(`{"ms":150}`))
				a.wait("race-ev-timeout")
			},
			want: []string{
				eaStarted("RaceEv", `{"ms":150}`),
				eaEv(2, 0, "ExternalSubscribed", `"name":"approve"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 3, "TimerFired", ``),
				eaEv(5, 2, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
				eaCompleted(6, `{"winner":1,"value":null}`),
			},
			output: `{"winner":1,"value":null}`,
			after: func(a *eaEnv) { // an event for a finished instance is dropped
				a.raise("race-ev-timeout", "approve", `"late"`)
				a.settle() // the late event was taken and dropped
			},
		},
	}

	// Races with activities.
	type actIn struct {
		SlowMs  int `json:"slowMs,omitempty"`
		TimerMs int `json:"timerMs"`
		AfterMs int `json:"afterMs"`
	}
	raceAct := func(a *eaEnv) {
		// RaceAct: race(Echo "fast" or Slow slowMs, timer timerMs); then a timer of afterMs if > 0.
		dx.Register(a.rt, "RaceAct", func(ctx dx.Context, i actIn) (eaRaceOut, error) {
			var act dx.Future[dx.Raw]
			if i.SlowMs > 0 {
				act = dx.Call[dx.Raw](ctx, "Slow", i.SlowMs)
			} else {
				act = dx.Call[dx.Raw](ctx, "Echo", "fast")
			}
			tm := ctx.Timer(time.Duration(i.TimerMs) * time.Millisecond)
			o := eaRaceOut{1, json.RawMessage(`null`)}
			if eaWinnerOf(dx.Select(ctx, act, tm), act, tm) == 0 {
				v, err := act.Await(ctx)
				if err != nil {
					return o, err
				}
				o = eaRaceOut{0, json.RawMessage(v)}
			}
			if i.AfterMs > 0 {
				if err := ctx.Sleep(time.Duration(i.AfterMs) * time.Millisecond); err != nil {
					return o, err
				}
			}
			return o, nil
		})
	}
	cases = append(cases,
		eaCase{
			name: "race-activity-wins", instance: "race-act-win", register: raceAct,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceAct", "race-act-win", actIn{TimerMs: 60000})
				a.wait("race-act-win")
			},
			want: []string{
				eaStarted("RaceAct", `{"timerMs":60000,"afterMs":0}`),
				eaEv(2, 0, "ActivityScheduled", `"name":"Echo","input":"\"fast\""`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 2, "ActivityCompleted", `"result":"\"fast\""`),
				eaCompleted(5, `{"winner":0,"value":"fast"}`),
			},
			output: `{"winner":0,"value":"fast"}`,
		},
		eaCase{
			// The losing timer still fires while the orchestration runs: its TimerFired is recorded.
			name: "race-activity-wins-loser-timer-fires-later", instance: "race-act-late-timer", register: raceAct,
			drive: func(a *eaEnv) {
				a.startRuntime()
				// The activity must win a race against the timer, on a loaded CI machine too:
				// 1.5 s, not the 300 ms that lost under load.
				a.start("RaceAct", "race-act-late-timer", actIn{TimerMs: 1500, AfterMs: 2500})
				a.wait("race-act-late-timer")
			},
			want: []string{
				eaStarted("RaceAct", `{"timerMs":1500,"afterMs":2500}`),
				eaEv(2, 0, "ActivityScheduled", `"name":"Echo","input":"\"fast\""`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 2, "ActivityCompleted", `"result":"\"fast\""`),
				eaEv(5, 0, "TimerCreated", ``),
				eaEv(6, 3, "TimerFired", ``),
				eaEv(7, 5, "TimerFired", ``),
				eaCompleted(8, `{"winner":0,"value":"fast"}`),
			},
			output: `{"winner":0,"value":"fast"}`,
		},
		eaCase{
			// Timer wins: ActivityCancelRequested(dropped_future) after the turn's new events; the
			// stolen activity's completion never reaches the history.
			name: "race-activity-times-out-then-runs-on", instance: "race-act-timeout", register: raceAct,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceAct", "race-act-timeout", actIn{SlowMs: 600, TimerMs: 50, AfterMs: 1500})
				a.wait("race-act-timeout")
			},
			want: []string{
				eaStarted("RaceAct", `{"slowMs":600,"timerMs":50,"afterMs":1500}`),
				eaEv(2, 0, "ActivityScheduled", `"name":"Slow","input":"600"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 3, "TimerFired", ``),
				eaEv(5, 0, "TimerCreated", ``),
				eaEv(6, 2, "ActivityCancelRequested", `"reason":"dropped_future"`),
				eaEv(7, 5, "TimerFired", ``),
				eaCompleted(8, `{"winner":1,"value":null}`),
			},
			output: `{"winner":1,"value":null}`,
		},
		eaCase{
			name: "race-activity-times-out-and-ends", instance: "race-act-timeout-end", register: raceAct,
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceAct", "race-act-timeout-end", actIn{SlowMs: 600, TimerMs: 50})
				a.wait("race-act-timeout-end")
			},
			want: []string{
				eaStarted("RaceAct", `{"slowMs":600,"timerMs":50,"afterMs":0}`),
				eaEv(2, 0, "ActivityScheduled", `"name":"Slow","input":"600"`),
				eaEv(3, 0, "TimerCreated", ``),
				eaEv(4, 3, "TimerFired", ``),
				eaEv(5, 2, "ActivityCancelRequested", `"reason":"dropped_future"`),
				eaCompleted(6, `{"winner":1,"value":null}`),
			},
			output: `{"winner":1,"value":null}`,
			after: func(a *eaEnv) { // the cancelled Slow returns (or, on a slow machine, was dropped unfetched); its result is not recorded
				waitFor(a.t, "the cancelled activity to end", func() bool {
					if a.slowRan.Load() != a.slowStarted.Load() {
						return false
					}
					st, err := a.p.GetQueueStats(a.ctx)
					return err == nil && st.Worker.Unlocked+st.Worker.Locked == 0
				})
				a.settle()
			},
		},
		eaCase{
			// Select of two activities (one worker slot, oldest first): Echo wins, Slow is cancelled.
			name: "race-two-activities", instance: "race-acts",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "RaceActs", func(ctx dx.Context, _ dx.Raw) (eaRaceOut, error) {
					x, y := dx.Call[dx.Raw](ctx, "Echo", "a"), dx.Call[dx.Raw](ctx, "Slow", 500)
					sel := dx.Select(ctx, x, y)
					o := eaRaceOut{Winner: eaWinnerOf(sel, x, y)}
					var v dx.Raw
					if o.Winner == 0 {
						v, _ = x.Await(ctx)
					} else {
						v, _ = y.Await(ctx)
					}
					o.Value = json.RawMessage(v)
					return o, ctx.Sleep(900 * time.Millisecond)
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceActs", "race-acts", nil)
				a.wait("race-acts")
			},
			want: []string{
				eaStarted("RaceActs", "null"),
				eaEv(2, 0, "ActivityScheduled", `"name":"Echo","input":"\"a\""`),
				eaEv(3, 0, "ActivityScheduled", `"name":"Slow","input":"500"`),
				eaEv(4, 2, "ActivityCompleted", `"result":"\"a\""`),
				eaEv(5, 0, "TimerCreated", ``),
				eaEv(6, 3, "ActivityCancelRequested", `"reason":"dropped_future"`),
				eaEv(7, 5, "TimerFired", ``),
				eaCompleted(8, `{"winner":0,"value":"a"}`),
			},
			output: `{"winner":0,"value":"a"}`,
		},
		eaCase{
			// Both completions in one batch: the loser's completion is recorded and it still gets
			// a dropped_future cancellation (it was never polled to Ready).
			name: "race-two-activities-same-batch", instance: "race-acts-batch",
			register: func(a *eaEnv) {
				dx.Register(a.rt, "RaceGates", func(ctx dx.Context, _ dx.Raw) (eaRaceOut, error) {
					x, y := dx.Call[dx.Raw](ctx, "Gate", "A"), dx.Call[dx.Raw](ctx, "Gate", "B")
					sel := dx.Select(ctx, x, y)
					o := eaRaceOut{Winner: eaWinnerOf(sel, x, y)}
					var v dx.Raw
					if o.Winner == 0 {
						v, _ = x.Await(ctx)
					} else {
						v, _ = y.Await(ctx)
					}
					o.Value = json.RawMessage(v)
					return o, nil
				})
			},
			drive: func(a *eaEnv) {
				a.startRuntime()
				a.start("RaceGates", "race-acts-batch", nil)
				a.waitHistory("race-acts-batch", "ActivityScheduled", 2)
				a.block("blocker", 800*time.Millisecond)
				a.release("A")
				a.release("B")
				a.wait("race-acts-batch")
			},
			want: []string{
				eaStarted("RaceGates", "null"),
				eaEv(2, 0, "ActivityScheduled", `"name":"Gate","input":"\"A\""`),
				eaEv(3, 0, "ActivityScheduled", `"name":"Gate","input":"\"B\""`),
				eaEv(4, 2, "ActivityCompleted", `"result":"\"A\""`),
				eaEv(5, 3, "ActivityCompleted", `"result":"\"B\""`),
				eaEv(6, 3, "ActivityCancelRequested", `"reason":"dropped_future"`),
				eaCompleted(7, `{"winner":0,"value":"A"}`),
			},
			output: `{"winner":0,"value":"A"}`,
		},
	)

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eaRun(t, c)
		})
	}
}
