package dx_test

// Audit: sub-orchestration / detached-start edge cases against duroxide 0.1.30 (derived from
// alpinevm/duroxide @ 23063eb): lib.rs build_child_instance_id (explicit ids used verbatim, auto ids
// "<parent>::sub::N"); runtime/execution.rs (StartSubOrchestration / StartOrchestrationDetached work
// items; Completed/Failed do NOT cancel outstanding children, only the Cancelled arm does; dropped
// select losers -> CancelInstance "parent dropped sub-orchestration future");
// runtime/dispatchers/orchestration.rs:593 (a batch for a Completed/Failed instance is acked and
// dropped); runtime/state_helpers.rs:404 (a second Start in one batch is ignored, the first wins);
// a Start for a running instance only replays it (history non-empty: no new OrchestrationStarted).
// The parent's completion is then never delivered, so every parent races the child with a timer.

import (
	"errors"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

const droppedSub = "parent dropped sub-orchestration future"

func registerQuick(g *goldenEnv) {
	dx.Register(g.rt, "Quick", func(ctx dx.Context, in dx.Raw) (dx.Raw, error) { return in, nil })
}

// raceParent: CallSub(child, input, id) against a 150 ms timer; the timer must win.
func registerRaceExisting(g *goldenEnv, name, child, id string) {
	dx.Register(g.rt, name, func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
		sub := dx.CallSub[dx.Raw](ctx, child, "new", dx.WithInstanceID(id))
		tm := ctx.Timer(150 * time.Millisecond)
		if dx.Select(ctx, sub, tm) != dx.Awaitable(tm) {
			return "", errors.New("the child answered")
		}
		return `"timeout"`, nil
	})
}

func raceExistingEvents(p, child, id string) []string {
	return []string{
		aStarted(p, p, "null", "", 0),
		aev(p, 2, 0, "SubOrchestrationScheduled", `"name":`+jstr(child)+`,"instance":`+jstr(id)+`,"input":"\"new\""`),
		aev(p, 3, 0, "TimerCreated", `"fire_at_ms":150`),
		aev(p, 4, 3, "TimerFired", `"fire_at_ms":150`),
		aev(p, 5, 2, "SubOrchestrationCancelRequested", `"reason":"dropped_future"`),
		aev(p, 6, 0, "OrchestrationCompleted", `"output":"\"timeout\""`),
	}
}

func TestAuditChild(t *testing.T) {
	t.Parallel()
	var cases []auditCase

	// 1. explicit child id of an instance that already Completed: the Start is dropped, the child
	// is untouched (no parent link), the parent never hears back; the dropped-future CancelInstance
	// reaching the finished instance is dropped too.
	{
		p, c := "ExistDoneParent", "exist-done"
		cases = append(cases, auditCase{"c1-existing-completed", goldenProgram{
			register: func(g *goldenEnv) { registerQuick(g); registerRaceExisting(g, p, "Quick", c) },
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Quick", c, "orig")
				g.wait(c)
				g.start(p, p, nil)
				g.wait(p)
				g.settle() // late messages land
			},
		}, []auditInst{
			{id: p, name: p, status: "Completed", text: `"timeout"`, events: raceExistingEvents(p, "Quick", c)},
			{id: c, name: "Quick", status: "Completed", text: `"orig"`, events: []string{
				aStarted(c, "Quick", `"orig"`, "", 0),
				aev(c, 2, 0, "OrchestrationCompleted", `"output":"\"orig\""`),
			}},
		}})
	}

	// 2. explicit child id of a running instance (no parent): the Start only replays it; the
	// dropped-future CancelInstance then cancels that unrelated instance.
	{
		p, c := "ExistRunParent", "exist-run"
		cases = append(cases, auditCase{"c2-existing-running", goldenProgram{
			register: func(g *goldenEnv) { registerChildWaits(g); registerRaceExisting(g, p, "ChildWaits", c) },
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ChildWaits", c, nil)
				g.waitHistory(c, "ExternalSubscribed", 1)
				g.start(p, p, nil)
				g.wait(p, c)
			},
		}, []auditInst{
			{id: p, name: p, status: "Completed", text: `"timeout"`, events: raceExistingEvents(p, "ChildWaits", c)},
			{id: c, name: "ChildWaits", status: "Failed", text: "canceled: " + droppedSub, events: []string{
				aStarted(c, "ChildWaits", "null", "", 0),
				aev(c, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c, 3, 0, "OrchestrationCancelRequested", `"reason":`+jstr(droppedSub)),
				aev(c, 4, 2, "ExternalSubscribedCancelled", `"reason":"orchestration_terminal"`),
				aev(c, 5, 0, "OrchestrationFailed", `"details":`+aCancelled(droppedSub)),
			}},
		}})
	}

	// 3. explicit child id = the parent's own id: the Start reaches the running parent and only
	// replays it; the CancelInstance to itself rides in the completing ack and is dropped.
	{
		p := "SelfChild"
		cases = append(cases, auditCase{"c3-self-id", goldenProgram{
			register: func(g *goldenEnv) { registerRaceExisting(g, p, p, p) },
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start(p, p, nil)
				g.wait(p)
				g.settle() // late messages land
			},
		}, []auditInst{
			{id: p, name: p, status: "Completed", text: `"timeout"`, events: raceExistingEvents(p, p, p)},
		}})
	}

	// 4. two children with the same explicit id in one turn: one child (first Start of the batch
	// wins, parent_id 2); the second future never completes.
	{
		p, c := "dup-parent", "dup-child"
		cases = append(cases, auditCase{"c4-duplicate-id", goldenProgram{
			register: func(g *goldenEnv) {
				registerQuick(g)
				dx.Register(g.rt, "DupParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					a := dx.CallSub[dx.Raw](ctx, "Quick", "one", dx.WithInstanceID(c))
					b := dx.CallSub[dx.Raw](ctx, "Quick", "two", dx.WithInstanceID(c))
					ra, err := a.Await(ctx)
					if err != nil {
						return "", err
					}
					tm := ctx.Timer(150 * time.Millisecond)
					if dx.Select(ctx, b, tm) != dx.Awaitable(tm) {
						return "", errors.New("the second child answered")
					}
					return ra, nil
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("DupParent", p, nil)
				g.wait(p, c)
				g.settle() // late messages land
			},
		}, []auditInst{
			{id: p, name: "DupParent", status: "Completed", text: `"one"`, events: []string{
				aStarted(p, "DupParent", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"Quick","instance":"dup-child","input":"\"one\""`),
				aev(p, 3, 0, "SubOrchestrationScheduled", `"name":"Quick","instance":"dup-child","input":"\"two\""`),
				aev(p, 4, 2, "SubOrchestrationCompleted", `"result":"\"one\""`),
				aev(p, 5, 0, "TimerCreated", `"fire_at_ms":150`),
				aev(p, 6, 5, "TimerFired", `"fire_at_ms":150`),
				aev(p, 7, 3, "SubOrchestrationCancelRequested", `"reason":"dropped_future"`),
				aev(p, 8, 0, "OrchestrationCompleted", `"output":"\"one\""`),
			}},
			{id: c, name: "Quick", parent: p, status: "Completed", text: `"one"`, events: []string{
				aStarted(c, "Quick", `"one"`, p, 2),
				aev(c, 2, 0, "OrchestrationCompleted", `"output":"\"one\""`),
			}},
		}})
	}

	// 5. detached starts: one (from a child) of a new id, one (from the root) of an id that already
	// Completed: recorded as OrchestrationChained; the second Start is dropped.
	{
		p, ch, fc, ex := "launch-p", "launch-p::sub::2", "from-child", "exist-d"
		cases = append(cases, auditCase{"c5-detached", goldenProgram{
			register: func(g *goldenEnv) {
				registerQuick(g)
				dx.Register(g.rt, "ChildLauncher", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					if err := ctx.StartOrchestration("Quick", fc, "c"); err != nil {
						return "", err
					}
					return `"ok"`, nil
				})
				dx.Register(g.rt, "Launcher", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					r, err := dx.CallSub[dx.Raw](ctx, "ChildLauncher", nil).Await(ctx)
					if err != nil {
						return "", err
					}
					return r, ctx.StartOrchestration("Quick", ex, "new")
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Quick", ex, "orig")
				g.wait(ex)
				g.start("Launcher", p, nil)
				g.wait(p, ch)
				g.settle() // late messages land
				g.wait(fc)
			},
		}, []auditInst{
			{id: p, name: "Launcher", status: "Completed", text: `"ok"`, events: []string{
				aStarted(p, "Launcher", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildLauncher","instance":"sub::2","input":"null"`),
				aev(p, 3, 2, "SubOrchestrationCompleted", `"result":"\"ok\""`),
				aev(p, 4, 0, "OrchestrationChained", `"name":"Quick","instance":"exist-d","input":"\"new\""`),
				aev(p, 5, 0, "OrchestrationCompleted", `"output":"\"ok\""`),
			}},
			{id: ch, name: "ChildLauncher", parent: p, status: "Completed", text: `"ok"`, events: []string{
				aStarted(ch, "ChildLauncher", "null", p, 2),
				aev(ch, 2, 0, "OrchestrationChained", `"name":"Quick","instance":"from-child","input":"\"c\""`),
				aev(ch, 3, 0, "OrchestrationCompleted", `"output":"\"ok\""`),
			}},
			{id: fc, name: "Quick", status: "Completed", text: `"c"`, events: []string{
				aStarted(fc, "Quick", `"c"`, "", 0),
				aev(fc, 2, 0, "OrchestrationCompleted", `"output":"\"c\""`),
			}},
			{id: ex, name: "Quick", status: "Completed", text: `"orig"`, events: []string{
				aStarted(ex, "Quick", `"orig"`, "", 0),
				aev(ex, 2, 0, "OrchestrationCompleted", `"output":"\"orig\""`),
			}},
		}})
	}

	// 6. the parent completes while a child it never awaited still runs. duroxide (lib.rs:682
	// DurableFuture::drop at the orchestration's return -> replay_engine.rs finalize_turn
	// collect_cancelled_from_context on the Completed path) records SubOrchestrationCancelRequested
	// "dropped_future" before OrchestrationCompleted and sends CancelInstance; the Completed arm itself
	// (execution.rs) cancels nothing. dx models the Go future as dropped at return the same way.
	{
		p, c := "bg-parent", "bg-parent::sub::2"
		cases = append(cases, auditCase{"c6-parent-done-child-runs", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildWaits(g)
				dx.Register(g.rt, "BgParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					_ = dx.CallSub[dx.Raw](ctx, "ChildWaits", nil)
					if _, err := ctx.Timer(50 * time.Millisecond).Await(ctx); err != nil {
						return "", err
					}
					return `"done"`, nil
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("BgParent", p, nil)
				g.wait(p, c)
			},
		}, []auditInst{
			{id: p, name: "BgParent", status: "Completed", text: `"done"`, events: []string{
				aStarted(p, "BgParent", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::2","input":"null"`),
				aev(p, 3, 0, "TimerCreated", `"fire_at_ms":50`),
				aev(p, 4, 3, "TimerFired", `"fire_at_ms":50`),
				aev(p, 5, 2, "SubOrchestrationCancelRequested", `"reason":"dropped_future"`),
				aev(p, 6, 0, "OrchestrationCompleted", `"output":"\"done\""`),
			}},
			{id: c, name: "ChildWaits", parent: p, status: "Failed", text: "canceled: " + droppedSub, events: []string{
				aStarted(c, "ChildWaits", "null", p, 2),
				aev(c, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c, 3, 0, "OrchestrationCancelRequested", `"reason":`+jstr(droppedSub)),
				aev(c, 4, 2, "ExternalSubscribedCancelled", `"reason":"orchestration_terminal"`),
				aev(c, 5, 0, "OrchestrationFailed", `"details":`+aCancelled(droppedSub)),
			}},
		}})
	}

	// 8. an event raised to a child by its auto id "<parent>::sub::2" reaches it; the parent gets
	// the child's output.
	{
		p, c := "ev-parent", "ev-parent::sub::2"
		cases = append(cases, auditCase{"c8-raise-to-auto-child", goldenProgram{
			register: func(g *goldenEnv) {
				registerChildWaits(g)
				dx.Register(g.rt, "EvParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "ChildWaits", nil).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("EvParent", p, nil)
				g.waitHistory(c, "ExternalSubscribed", 1)
				g.raise(c, "go", `"went"`)
				g.wait(c, p)
			},
		}, []auditInst{
			{id: p, name: "EvParent", status: "Completed", text: `"went"`, events: []string{
				aStarted(p, "EvParent", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::2","input":"null"`),
				aev(p, 3, 2, "SubOrchestrationCompleted", `"result":"\"went\""`),
				aev(p, 4, 0, "OrchestrationCompleted", `"output":"\"went\""`),
			}},
			{id: c, name: "ChildWaits", parent: p, status: "Completed", text: `"went"`, events: []string{
				aStarted(c, "ChildWaits", "null", p, 2),
				aev(c, 2, 0, "ExternalSubscribed", `"name":"go"`),
				aev(c, 3, 0, "ExternalEvent", `"name":"go","data":"\"went\""`),
				aev(c, 4, 0, "OrchestrationCompleted", `"output":"\"went\""`),
			}},
		}})
	}

	for _, c := range cases {
		t.Run(c.folder, func(t *testing.T) { t.Parallel(); runAuditCase(t, c) })
	}
}

// TestAuditChildCANStatus: an instance whose execution 1 ContinuedAsNew and whose execution 2 runs
// is Running to the client (client/mod.rs get_orchestration_status: no terminal event in the
// latest execution, a Started one => Running).
func TestAuditChildCANStatus(t *testing.T) {
	t.Parallel()
	i := "can-status"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			dx.Register(g.rt, "CanStatus", func(ctx dx.Context, in canIn) (dx.Raw, error) {
				if in.N == 0 {
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				return dx.WaitEvent[dx.Raw](ctx, "fin").Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("CanStatus", i, canIn{0})
			g.waitExec(i, 2, "ExternalSubscribed", 1)
			st, err := g.c.Status(g.ctx, i)
			if err != nil || st.State != dx.StateRunning || st.ExecutionID != 2 || st.Output != "" || st.Err != nil {
				g.t.Errorf("status of a continued-then-running instance: %+v %v; want Running, execution 2", st, err)
			}
			g.raise(i, "fin", `"f"`)
			g.wait(i)
		},
	}
	runCanCase(t, "c7-can-status", prog, []canInst{
		{id: i, name: "CanStatus", status: "Completed", text: `"f"`, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, []string{
				cStarted(i, 1, "CanStatus", "1.0.0", `{"n":0}`, "", 0, ""),
				cev(i, 1, 2, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
			}},
			{"Completed", `"f"`, []string{
				cStarted(i, 2, "CanStatus", "1.0.0", `{"n":1}`, "", 0, ""),
				cev(i, 2, 2, 0, "ExternalSubscribed", `"name":"fin"`),
				cev(i, 2, 3, 0, "ExternalEvent", `"name":"fin","data":"\"f\""`),
				cev(i, 2, 4, 0, "OrchestrationCompleted", `"output":"\"f\""`),
			}},
		}},
	})
}
