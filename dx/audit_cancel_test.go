package dx_test

// Audit: cancellation and sub-orchestration failure, compared with what duroxide 0.1.30 would store
// (derived from duroxide's source: runtime/execution.rs, runtime/replay_engine.rs,
// runtime/dispatchers/orchestration.rs, and the golden rows in shared/golden/duroxide-0.1.30).
// Each case is written out as a golden folder (history.jsonl + result.json) in a temp dir and run
// through runGolden, so the comparison is exactly the one TestGolden makes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

// ---- expected-event builders ----

func aev(inst string, id int, src int, typ, fields string) string {
	s := "null"
	if src > 0 {
		s = fmt.Sprint(src)
	}
	line := fmt.Sprintf(`{"event_id":%d,"source_event_id":%s,"instance_id":%q,"execution_id":1,"timestamp_ms":0,"duroxide_version":"0.1.30","type":%q`, id, s, inst, typ)
	if fields != "" {
		line += "," + fields
	}
	return line + "}"
}

func jstr(s string) string { b, _ := json.Marshal(s); return string(b) }

func aStarted(inst string, name, input string, parent string, parentID int) string {
	f := `"name":` + jstr(name) + `,"version":"1.0.0","input":` + jstr(input)
	if parent == "" {
		f += `,"parent_instance":null,"parent_id":null`
	} else {
		f += fmt.Sprintf(`,"parent_instance":%s,"parent_id":%d,"parent_execution_id":1`, jstr(parent), parentID)
	}
	return aev(inst, 1, 0, "OrchestrationStarted", f)
}

func aCancelled(reason string) string {
	return `{"Application":{"kind":{"Cancelled":{"reason":` + jstr(reason) + `}},"message":"","retryable":false}}`
}

func aAppFailed(msg string) string {
	return `{"Application":{"kind":"OrchestrationFailed","message":` + jstr(msg) + `,"retryable":false}}`
}

type auditInst struct {
	id, name, parent string
	status           string // Completed / Failed
	text             string // output (Completed) or error (Failed)
	events           []string
}

// ---- shared pieces ----

// blocker is an activity "Block" that runs until released (or its context ends).
type blocker struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
	calls   atomic.Int32
}

func registerBlock(g *goldenEnv) *blocker {
	b := &blocker{started: make(chan struct{}), release: make(chan struct{})}
	dx.RegisterActivity(g.rt, "Block", func(ctx context.Context, in dx.Raw) (dx.Raw, error) {
		b.calls.Add(1)
		b.once.Do(func() { close(b.started) })
		select {
		case <-b.release:
			return in, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	g.t.Cleanup(b.free)
	return b
}

func (b *blocker) free() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

func (b *blocker) waitStarted(g *goldenEnv) {
	g.t.Helper()
	select {
	case <-b.started:
	case <-g.ctx.Done():
		g.t.Fatal("Block never started")
	}
}

func (g *goldenEnv) cancel(instance, reason string) {
	g.t.Helper()
	if err := g.c.Cancel(g.ctx, instance, reason); err != nil {
		g.t.Fatalf("cancel %s: %v", instance, err)
	}
}

func registerChildWaits(g *goldenEnv) {
	dx.Register(g.rt, "ChildWaits", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
		return dx.WaitEvent[dx.Raw](ctx, "go").Await(ctx)
	})
}

// settle waits until late messages (a cancelled child's SubOrchFailed, a released activity) have
// landed: the namespace is idle.
func (g *goldenEnv) settle() { g.t.Helper(); waitIdle(g.ctx, g.t, g.p) }

// waitOrchQueueEmpty waits until the orchestrator queue holds nothing: no message visible, delayed
// (a timer not yet fired) or locked.
func (g *goldenEnv) waitOrchQueueEmpty() {
	g.t.Helper()
	waitFor(g.t, "an empty orchestrator queue", func() bool {
		st, err := g.p.GetQueueStats(g.ctx)
		if err != nil {
			g.t.Fatalf("queue stats: %v", err)
		}
		o := st.Orchestrator
		return o.Visible == 0 && o.Delayed == 0 && o.Locked == 0 && o.LockedInstances == 0
	})
}

type auditCase struct {
	folder string
	prog   goldenProgram
	insts  []auditInst
}

// runAuditCase runs a case of one-execution instances through audit_can_test.go's runCanCase.
func runAuditCase(t *testing.T, c auditCase) {
	insts := make([]canInst, len(c.insts))
	for i, in := range c.insts {
		insts[i] = canInst{id: in.id, name: in.name, parent: in.parent, status: in.status, text: in.text,
			execs: []canExec{{status: in.status, output: in.text, events: in.events}}}
	}
	runCanCase(t, c.folder, c.prog, insts)
}

// ---- cases ----

func TestAuditCancel(t *testing.T) {
	t.Parallel()
	const term = `"reason":"orchestration_terminal"`
	const termFailed = `"reason":"orchestration_terminal_failed"`
	cases := []auditCase{}

	// 1. cancel while an activity is in flight.
	{
		var b *blocker
		i := "cancel-activity"
		cases = append(cases, auditCase{"c01-cancel-activity", goldenProgram{
			register: func(g *goldenEnv) {
				b = registerBlock(g)
				dx.Register(g.rt, "WaitOnActivity", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Block", "x").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("WaitOnActivity", i, nil)
				b.waitStarted(g)
				g.cancel(i, "stop please")
				g.wait(i)
				b.free()
				g.settle()
			},
		}, []auditInst{{id: i, name: "WaitOnActivity", status: "Failed", text: "canceled: stop please", events: []string{
			aStarted(i, "WaitOnActivity", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Block","input":"\"x\""`),
			aev(i, 3, 0, "OrchestrationCancelRequested", `"reason":"stop please"`),
			aev(i, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("stop please")),
			aev(i, 5, 2, "ActivityCancelRequested", termFailed),
		}}}})
	}

	// 2. cancel while a timer is pending.
	{
		i := "cancel-timer"
		cases = append(cases, auditCase{"c02-cancel-timer", goldenProgram{
			register: func(g *goldenEnv) {
				dx.Register(g.rt, "WaitOnTimer", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					_, err := ctx.Timer(60 * time.Second).Await(ctx)
					return "null", err
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("WaitOnTimer", i, nil)
				g.waitHistory(i, "TimerCreated", 1)
				g.cancel(i, "stop timer")
				g.wait(i)
				g.settle()
			},
		}, []auditInst{{id: i, name: "WaitOnTimer", status: "Failed", text: "canceled: stop timer", events: []string{
			aStarted(i, "WaitOnTimer", "null", "", 0),
			aev(i, 2, 0, "TimerCreated", `"fire_at_ms":60000`),
			aev(i, 3, 0, "OrchestrationCancelRequested", `"reason":"stop timer"`),
			aev(i, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("stop timer")),
		}}}})
	}

	// 3. cancel while waiting for an external event.
	{
		i := "cancel-event"
		cases = append(cases, auditCase{"c03-cancel-event", goldenProgram{
			register: func(g *goldenEnv) {
				dx.Register(g.rt, "WaitOnEvent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.WaitEvent[dx.Raw](ctx, "approval").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("WaitOnEvent", i, nil)
				g.waitHistory(i, "ExternalSubscribed", 1)
				g.cancel(i, "stop wait")
				g.wait(i)
				g.settle()
			},
		}, []auditInst{{id: i, name: "WaitOnEvent", status: "Failed", text: "canceled: stop wait", events: []string{
			aStarted(i, "WaitOnEvent", "null", "", 0),
			aev(i, 2, 0, "ExternalSubscribed", `"name":"approval"`),
			aev(i, 3, 0, "OrchestrationCancelRequested", `"reason":"stop wait"`),
			aev(i, 4, 2, "ExternalSubscribedCancelled", term),
			aev(i, 5, 0, "OrchestrationFailed", `"details":`+aCancelled("stop wait")),
		}}}})
	}

	// 4. cancel a parent waiting on a running child (automatic id).
	{
		p, c := "cancel-parent", "cancel-parent::sub::2"
		cases = append(cases, auditCase{"c04-cancel-parent-child", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildWaits(g)
				dx.Register(g.rt, "ParentWaits", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChildWaits", nil).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ParentWaits", p, nil)
				g.waitHistory(c, "ExternalSubscribed", 1)
				g.cancel(p, "stop tree")
				g.wait(p, c)
				g.settle()
			},
		}, []auditInst{
			{id: p, name: "ParentWaits", status: "Failed", text: "canceled: stop tree", events: []string{
				aStarted(p, "ParentWaits", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::2","input":"null"`),
				aev(p, 3, 0, "OrchestrationCancelRequested", `"reason":"stop tree"`),
				aev(p, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("stop tree")),
			}},
			{id: c, name: "ChildWaits", parent: p, status: "Failed", text: "canceled: parent canceled", events: []string{
				aStarted(c, "ChildWaits", "null", p, 2),
				aev(c, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c, 3, 0, "OrchestrationCancelRequested", `"reason":"parent canceled"`),
				aev(c, 4, 2, "ExternalSubscribedCancelled", term),
				aev(c, 5, 0, "OrchestrationFailed", `"details":`+aCancelled("parent canceled")),
			}},
		}})
	}

	// 5. cancel a three-level tree (explicit id, then automatic id) whose leaf runs an activity.
	{
		var b *blocker
		r, m, l := "tree-root", "tree-mid", "tree-mid::sub::2"
		cases = append(cases, auditCase{"c05-cancel-tree", goldenProgram{
			register: func(g *goldenEnv) {
				b = registerBlock(g)
				dx.Register(g.rt, "TreeRoot", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "TreeMid", nil, dx.WithInstanceID(m)).Await(ctx)
				})
				dx.Register(g.rt, "TreeMid", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "TreeLeaf", nil).Await(ctx)
				})
				dx.Register(g.rt, "TreeLeaf", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Block", "leaf").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("TreeRoot", r, nil)
				b.waitStarted(g)
				g.cancel(r, "stop all")
				g.wait(r, m, l)
				b.free()
				g.settle()
			},
		}, []auditInst{
			{id: r, name: "TreeRoot", status: "Failed", text: "canceled: stop all", events: []string{
				aStarted(r, "TreeRoot", "null", "", 0),
				aev(r, 2, 0, "SubOrchestrationScheduled", `"name":"TreeMid","instance":"tree-mid","input":"null"`),
				aev(r, 3, 0, "OrchestrationCancelRequested", `"reason":"stop all"`),
				aev(r, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("stop all")),
			}},
			{id: m, name: "TreeMid", parent: r, status: "Failed", text: "canceled: parent canceled", events: []string{
				aStarted(m, "TreeMid", "null", r, 2),
				aev(m, 2, 0, "SubOrchestrationScheduled", `"name":"TreeLeaf","instance":"sub::2","input":"null"`),
				aev(m, 3, 0, "OrchestrationCancelRequested", `"reason":"parent canceled"`),
				aev(m, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("parent canceled")),
			}},
			{id: l, name: "TreeLeaf", parent: m, status: "Failed", text: "canceled: parent canceled", events: []string{
				aStarted(l, "TreeLeaf", "null", m, 2),
				aev(l, 2, 0, "ActivityScheduled", `"name":"Block","input":"\"leaf\""`),
				aev(l, 3, 0, "OrchestrationCancelRequested", `"reason":"parent canceled"`),
				aev(l, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("parent canceled")),
				aev(l, 5, 2, "ActivityCancelRequested", termFailed),
			}},
		}})
	}

	// 6. cancel before the first turn (start + cancel while no runtime runs): the code still runs
	// its first turn after OrchestrationCancelRequested; nothing it scheduled is dispatched.
	{
		var b *blocker
		e, a, s, d := "early-event", "early-activity", "early-sub", "early-detach"
		cases = append(cases, auditCase{"c06-cancel-before-start", goldenProgram{
			register: func(g *goldenEnv) {
				b = registerBlock(g)
				registerChildWaits(g)
				dx.Register(g.rt, "EarlyEvent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.WaitEvent[dx.Raw](ctx, "approval").Await(ctx)
				})
				dx.Register(g.rt, "EarlyActivity", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Block", "early").Await(ctx)
				})
				dx.Register(g.rt, "EarlyDetach", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					if err := ctx.StartOrchestration("ChildWaits", "detached-never", nil); err != nil {
						return "", err
					}
					return dx.WaitEvent[dx.Raw](ctx, "approval").Await(ctx)
				})
				dx.Register(g.rt, "EarlySub", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChildWaits", nil).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.start("EarlyEvent", e, nil)
				g.start("EarlyActivity", a, nil)
				g.start("EarlySub", s, nil)
				g.start("EarlyDetach", d, nil)
				g.cancel(d, "no detach")
				g.cancel(e, "first")
				g.cancel(e, "second")
				g.cancel(a, "early stop")
				g.cancel(s, "early sub stop")
				g.startRuntime()
				g.wait(e, a, s, d)
				g.settle()
				if n := b.calls.Load(); n != 0 {
					g.t.Errorf("Block ran %d times; duroxide dispatches nothing a cancelled turn scheduled", n)
				}
			},
		}, []auditInst{
			{id: e, name: "EarlyEvent", status: "Failed", text: "canceled: first", events: []string{
				aStarted(e, "EarlyEvent", "null", "", 0),
				aev(e, 2, 0, "OrchestrationCancelRequested", `"reason":"first"`),
				aev(e, 3, 0, "ExternalSubscribed", `"name":"approval"`),
				aev(e, 4, 3, "ExternalSubscribedCancelled", term),
				aev(e, 5, 0, "OrchestrationFailed", `"details":`+aCancelled("first")),
			}},
			{id: a, name: "EarlyActivity", status: "Failed", text: "canceled: early stop", events: []string{
				aStarted(a, "EarlyActivity", "null", "", 0),
				aev(a, 2, 0, "OrchestrationCancelRequested", `"reason":"early stop"`),
				aev(a, 3, 0, "ActivityScheduled", `"name":"Block","input":"\"early\""`),
				aev(a, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("early stop")),
				aev(a, 5, 3, "ActivityCancelRequested", termFailed),
			}},
			{id: s, name: "EarlySub", status: "Failed", text: "canceled: early sub stop", events: []string{
				aStarted(s, "EarlySub", "null", "", 0),
				aev(s, 2, 0, "OrchestrationCancelRequested", `"reason":"early sub stop"`),
				aev(s, 3, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::3","input":"null"`),
				aev(s, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("early sub stop")),
			}},
			// A detached start emitted in a cancelled turn is recorded but not carried out
			// (execution.rs's Cancelled branch has no enqueue_detached_from_pending).
			{id: d, name: "EarlyDetach", status: "Failed", text: "canceled: no detach", events: []string{
				aStarted(d, "EarlyDetach", "null", "", 0),
				aev(d, 2, 0, "OrchestrationCancelRequested", `"reason":"no detach"`),
				aev(d, 3, 0, "OrchestrationChained", `"name":"ChildWaits","instance":"detached-never","input":"null"`),
				aev(d, 4, 0, "ExternalSubscribed", `"name":"approval"`),
				aev(d, 5, 4, "ExternalSubscribedCancelled", `"reason":"orchestration_terminal"`),
				aev(d, 6, 0, "OrchestrationFailed", `"details":`+aCancelled("no detach")),
			}},
		}})
	}

	// 7. cancel an instance that already completed, and one that never existed: nothing changes.
	{
		i := "finished"
		cases = append(cases, auditCase{"c07-cancel-finished", goldenProgram{
			register: func(g *goldenEnv) {
				registerEcho(g)
				dx.Register(g.rt, "EchoOnce", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Echo", "done").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("EchoOnce", i, nil)
				g.wait(i)
				g.cancel(i, "too late")
				g.cancel("never-started", "ghost")
				g.settle()
			},
		}, []auditInst{{id: i, name: "EchoOnce", status: "Completed", text: `"done"`, events: []string{
			aStarted(i, "EchoOnce", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Echo","input":"\"done\""`),
			aev(i, 3, 2, "ActivityCompleted", `"result":"\"done\""`),
			aev(i, 4, 0, "OrchestrationCompleted", `"output":"\"done\""`),
		}}}})
	}

	for _, c := range cases {
		t.Run(c.folder, func(t *testing.T) { t.Parallel(); runAuditCase(t, c) })
	}
}

func TestAuditSubOrchFailure(t *testing.T) {
	t.Parallel()
	const term = `"reason":"orchestration_terminal"`
	cases := []auditCase{}

	// 8. a failing child (automatic id) whose failure the parent does not catch.
	{
		p, c := "prop-parent", "prop-parent::sub::2"
		cases = append(cases, auditCase{"s08-child-fail-propagates", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildAdder(g)
				dx.Register(g.rt, "ParentPropagates", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChildAdder", childAdderInput{Value: 4, Fail: true}).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ParentPropagates", p, nil)
				g.wait(p, c)
			},
		}, []auditInst{
			{id: p, name: "ParentPropagates", status: "Failed", text: "child refused 8", events: []string{
				aStarted(p, "ParentPropagates", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildAdder","instance":"sub::2","input":"{\"value\":4,\"fail\":true}"`),
				aev(p, 3, 2, "SubOrchestrationFailed", `"details":`+aAppFailed("child refused 8")),
				aev(p, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed("child refused 8")),
			}},
			{id: c, name: "ChildAdder", parent: p, status: "Failed", text: "child refused 8", events: []string{
				aStarted(c, "ChildAdder", `{"value":4,"fail":true}`, p, 2),
				aev(c, 2, 0, "ActivityScheduled", `"name":"Add","input":"{\"a\":4,\"b\":4}"`),
				aev(c, 3, 2, "ActivityCompleted", `"result":"8"`),
				aev(c, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed("child refused 8")),
			}},
		}})
	}

	// 9. a grandchild's failure propagated by its parent (explicit id) and caught by the root.
	{
		r, m, l := "chain-root", "chain-mid", "chain-mid::sub::2"
		cases = append(cases, auditCase{"s09-grandchild-fail", goldenProgram{
			register: func(g *goldenEnv) {
				type caught struct {
					Caught string `json:"caught"`
				}
				dx.Register(g.rt, "ChainRoot", func(ctx dx.Context, _ dx.Raw) (caught, error) {
					_, err := dx.CallSub[dx.Raw](ctx, "ChainMid", nil, dx.WithInstanceID(m)).Await(ctx)
					if err == nil {
						return caught{}, errors.New("mid completed")
					}
					return caught{err.Error()}, nil
				})
				dx.Register(g.rt, "ChainMid", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChainLeaf", nil).Await(ctx)
				})
				dx.Register(g.rt, "ChainLeaf", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return "", errors.New("leaf broke")
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ChainRoot", r, nil)
				g.wait(r, m, l)
			},
		}, []auditInst{
			{id: r, name: "ChainRoot", status: "Completed", text: `{"caught":"leaf broke"}`, events: []string{
				aStarted(r, "ChainRoot", "null", "", 0),
				aev(r, 2, 0, "SubOrchestrationScheduled", `"name":"ChainMid","instance":"chain-mid","input":"null"`),
				aev(r, 3, 2, "SubOrchestrationFailed", `"details":`+aAppFailed("leaf broke")),
				aev(r, 4, 0, "OrchestrationCompleted", `"output":"{\"caught\":\"leaf broke\"}"`),
			}},
			{id: m, name: "ChainMid", parent: r, status: "Failed", text: "leaf broke", events: []string{
				aStarted(m, "ChainMid", "null", r, 2),
				aev(m, 2, 0, "SubOrchestrationScheduled", `"name":"ChainLeaf","instance":"sub::2","input":"null"`),
				aev(m, 3, 2, "SubOrchestrationFailed", `"details":`+aAppFailed("leaf broke")),
				aev(m, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed("leaf broke")),
			}},
			{id: l, name: "ChainLeaf", parent: m, status: "Failed", text: "leaf broke", events: []string{
				aStarted(l, "ChainLeaf", "null", m, 2),
				aev(l, 2, 0, "OrchestrationFailed", `"details":`+aAppFailed("leaf broke")),
			}},
		}})
	}

	// 10. the client cancels a child directly: one parent catches the failure, one propagates it.
	{
		p1, c1, p2, c2 := "victim-parent", "victim-child", "victim-parent2", "victim-child2"
		cases = append(cases, auditCase{"s10-child-cancelled-by-client", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildWaits(g)
				type childError struct {
					ChildError string `json:"childError"`
				}
				dx.Register(g.rt, "ParentCatches", func(ctx dx.Context, _ dx.Raw) (childError, error) {
					_, err := dx.CallSub[dx.Raw](ctx, "ChildWaits", nil, dx.WithInstanceID(c1)).Await(ctx)
					if err == nil {
						return childError{}, errors.New("child completed")
					}
					return childError{err.Error()}, nil
				})
				dx.Register(g.rt, "ParentPropagatesCancel", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChildWaits", nil, dx.WithInstanceID(c2)).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ParentCatches", p1, nil)
				g.waitHistory(c1, "ExternalSubscribed", 1)
				g.cancel(c1, "killed by client")
				g.wait(p1, c1)
				g.start("ParentPropagatesCancel", p2, nil)
				g.waitHistory(c2, "ExternalSubscribed", 1)
				g.cancel(c2, "killed again")
				g.wait(p2, c2)
			},
		}, []auditInst{
			{id: p1, name: "ParentCatches", status: "Completed", text: `{"childError":"canceled: killed by client"}`, events: []string{
				aStarted(p1, "ParentCatches", "null", "", 0),
				aev(p1, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"victim-child","input":"null"`),
				aev(p1, 3, 2, "SubOrchestrationFailed", `"details":`+aCancelled("killed by client")),
				aev(p1, 4, 0, "OrchestrationCompleted", `"output":"{\"childError\":\"canceled: killed by client\"}"`),
			}},
			{id: c1, name: "ChildWaits", parent: p1, status: "Failed", text: "canceled: killed by client", events: []string{
				aStarted(c1, "ChildWaits", "null", p1, 2),
				aev(c1, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c1, 3, 0, "OrchestrationCancelRequested", `"reason":"killed by client"`),
				aev(c1, 4, 2, "ExternalSubscribedCancelled", term),
				aev(c1, 5, 0, "OrchestrationFailed", `"details":`+aCancelled("killed by client")),
			}},
			{id: p2, name: "ParentPropagatesCancel", status: "Failed", text: "canceled: killed again", events: []string{
				aStarted(p2, "ParentPropagatesCancel", "null", "", 0),
				aev(p2, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"victim-child2","input":"null"`),
				aev(p2, 3, 2, "SubOrchestrationFailed", `"details":`+aCancelled("killed again")),
				aev(p2, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed("canceled: killed again")),
			}},
			{id: c2, name: "ChildWaits", parent: p2, status: "Failed", text: "canceled: killed again", events: []string{
				aStarted(c2, "ChildWaits", "null", p2, 2),
				aev(c2, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c2, 3, 0, "OrchestrationCancelRequested", `"reason":"killed again"`),
				aev(c2, 4, 2, "ExternalSubscribedCancelled", term),
				aev(c2, 5, 0, "OrchestrationFailed", `"details":`+aCancelled("killed again")),
			}},
		}})
	}

	// 11. a child that loses a select to a timer: dropped-future cancel, and the child's cancelled
	// failure reaching the still-running parent.
	{
		p, c := "race", "race::sub::2"
		const dropped = "parent dropped sub-orchestration future"
		cases = append(cases, auditCase{"s11-race-child-dropped", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildWaits(g)
				dx.Register(g.rt, "RaceParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					sub := dx.CallSub[dx.Raw](ctx, "ChildWaits", nil)
					tm := ctx.Timer(300 * time.Millisecond)
					if w := dx.Select(ctx, sub, tm); w != dx.Awaitable(tm) {
						return "", errors.New("the child won")
					}
					return dx.WaitEvent[dx.Raw](ctx, "after").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("RaceParent", p, nil)
				g.waitHistory(p, "SubOrchestrationFailed", 1)
				if err := g.c.RaiseEvent(g.ctx, p, "after", "x"); err != nil {
					g.t.Fatal(err)
				}
				g.wait(p, c)
			},
		}, []auditInst{
			{id: p, name: "RaceParent", status: "Completed", text: `"x"`, events: []string{
				aStarted(p, "RaceParent", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::2","input":"null"`),
				aev(p, 3, 0, "TimerCreated", `"fire_at_ms":300`),
				aev(p, 4, 3, "TimerFired", `"fire_at_ms":300`),
				aev(p, 5, 0, "ExternalSubscribed", `"name":"after"`),
				aev(p, 6, 2, "SubOrchestrationCancelRequested", `"reason":"dropped_future"`),
				aev(p, 7, 2, "SubOrchestrationFailed", `"details":`+aCancelled(dropped)),
				aev(p, 8, 0, "ExternalEvent", `"name":"after","data":"\"x\""`),
				aev(p, 9, 0, "OrchestrationCompleted", `"output":"\"x\""`),
			}},
			{id: c, name: "ChildWaits", parent: p, status: "Failed", text: "canceled: " + dropped, events: []string{
				aStarted(c, "ChildWaits", "null", p, 2),
				aev(c, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c, 3, 0, "OrchestrationCancelRequested", `"reason":`+jstr(dropped)),
				aev(c, 4, 2, "ExternalSubscribedCancelled", term),
				aev(c, 5, 0, "OrchestrationFailed", `"details":`+aCancelled(dropped)),
			}},
		}})
	}

	for _, c := range cases {
		t.Run(c.folder, func(t *testing.T) { t.Parallel(); runAuditCase(t, c) })
	}
}
