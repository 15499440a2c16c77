package dx_test

// Audit: continue-as-new and timer edge cases, compared with what duroxide 0.1.30 would store.
// Expected histories derived by hand from duroxide's source (alpinevm/duroxide @ 23063eb, 0.1.29+,
// plus 0.1.30's parent_execution_id routing):
//   - runtime/execution.rs (TurnResult::ContinueAsNew arm): unmatched queue messages are collected
//     first, then ExternalSubscribedCancelled / QueueSubscriptionCancelled "orchestration_terminal"
//     breadcrumbs (positional waits first, then queue waits, each in schedule order), then
//     OrchestrationContinuedAsNew; no work items for the turn's pending actions, no detached starts,
//     no CancelInstance for outstanding children; carry_forward_events + initial_custom_status.
//   - runtime/dispatchers/orchestration.rs: in-flight activities get ActivityCancelRequested
//     "orchestration_terminal_continued_as_new" AFTER the terminal event.
//   - runtime/replay_engine.rs finalize_turn: a continue-as-new returns before
//     collect_cancelled_from_context, so futures dropped in that turn leave no dropped_future
//     breadcrumb; is_completion_for_current_execution drops the old execution's late completions;
//     ExternalRaised / QueueMessage have no execution id and go to whichever execution the batch runs.
//   - runtime/state_helpers.rs WorkItemReader: carried messages are delivered before the batch's.
//   - lib.rs schedule_timer: fire_at_ms = now + delay, timers leave no cancellation breadcrumb;
//     providers/sqlite.rs: a batch holds the instance's visible messages in enqueue order.
// Each case is a golden folder written to a temp dir and run through runGolden in three modes.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

// ---- expected-history builders (multi-execution) ----

func cev(inst string, exec, id, src int, typ, fields string) string {
	return strings.Replace(aev(inst, id, src, typ, fields), `"execution_id":1,`, fmt.Sprintf(`"execution_id":%d,`, exec), 1)
}

// cStarted: extra is appended verbatim (parent_execution_id, carry_forward_events, initial_custom_status).
func cStarted(inst string, exec int, name, version, input, parent string, parentID int, extra string) string {
	f := `"name":` + jstr(name) + `,"version":` + jstr(version) + `,"input":` + jstr(input)
	if parent == "" {
		f += `,"parent_instance":null,"parent_id":null`
	} else {
		f += fmt.Sprintf(`,"parent_instance":%s,"parent_id":%d,"parent_execution_id":1`, jstr(parent), parentID)
	}
	return cev(inst, exec, 1, 0, "OrchestrationStarted", f+extra)
}

type canExec struct {
	status, output string // ContinuedAsNew (output = next input) / Completed / Failed
	events         []string
}

type canInst struct {
	id, name, version, parent string
	status, text              string // instance status and output/error
	customStatus              *string
	csVersion                 uint64
	kv                        map[string]string
	execs                     []canExec
}

func writeCanFolder(t *testing.T, folder string, insts []canInst) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), folder)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var lines []string
	res := goldenResult{Program: folder}
	for _, in := range insts {
		v := in.version
		if v == "" {
			v = "1.0.0"
		}
		gi := goldenInstance{InstanceID: in.id, Name: in.name, Version: v, CurrentExecution: uint64(len(in.execs)),
			Status: in.status, CustomStatus: in.customStatus, CustomStatusVersion: in.csVersion, KV: in.kv}
		if in.parent != "" {
			gi.Parent = ptr(in.parent)
		}
		text := in.text
		if in.status == "Completed" {
			gi.Output = &text
		} else {
			gi.Error = &text
		}
		for i, ex := range in.execs {
			lines = append(lines, ex.events...)
			out := ex.output
			gi.Executions = append(gi.Executions, goldenExecution{ExecutionID: uint64(i + 1), Status: ex.status, Output: &out, EventCount: uint64(len(ex.events))})
		}
		res.Instances = append(res.Instances, gi)
		res.All = append(res.All, in.id)
	}
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(filepath.Join(dir, "result.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runCanCase(t *testing.T, folder string, prog goldenProgram, insts []canInst) {
	dir := writeCanFolder(t, folder, insts)
	t.Run("replay", func(t *testing.T) { runGolden(t, dir, prog, -1, false) })
	t.Run("cached", func(t *testing.T) { runGolden(t, dir, prog, 0, false) })
	t.Run("extensions", func(t *testing.T) { runGolden(t, dir, prog, 0, true) })
}

func (g *goldenEnv) raise(instance, name, data string) {
	g.t.Helper()
	if err := g.c.RaiseEvent(g.ctx, instance, name, dx.Raw(data)); err != nil {
		g.t.Fatalf("raise %s on %s: %v", name, instance, err)
	}
}

func newEA(g *goldenEnv) *eaEnv {
	a := &eaEnv{goldenEnv: g, gates: map[string]chan struct{}{}, blocked: make(chan struct{}, 1)}
	eaRegisterCommon(a) // Echo, Slow, Gate, Blocker
	g.t.Cleanup(func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for _, ch := range a.gates {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})
	return a
}

type canIn struct {
	N int `json:"n"`
}

const (
	canTerm    = `"reason":"orchestration_terminal"`
	canTermCAN = `"reason":"orchestration_terminal_continued_as_new"`
)

// ---- continue-as-new ----

func TestAuditCANOutstanding(t *testing.T) {
	t.Parallel()
	// Continue-as-new in a later turn while an activity, a timer (that fires during the next
	// execution), a dequeue, an event wait and a sub-orchestration of the old execution are all
	// still outstanding; their late completions reach the new execution and are dropped.
	i, child := "can-out", "can-out::sub::6"
	var a *eaEnv
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			a = newEA(g)
			registerChildWaits(g)
			dx.Register(g.rt, "CanOutstanding", func(ctx dx.Context, in canIn) (dx.Raw, error) {
				if in.N == 0 {
					_ = dx.Call[dx.Raw](ctx, "Gate", "can-out")
					_ = ctx.Timer(200 * time.Millisecond)
					_ = dx.Dequeue[dx.Raw](ctx, "never-q")
					_ = dx.WaitEvent[dx.Raw](ctx, "never")
					_ = dx.CallSub[dx.Raw](ctx, "ChildWaits", nil)
					if _, err := ctx.Timer(50 * time.Millisecond).Await(ctx); err != nil {
						return "", err
					}
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				return dx.WaitEvent[dx.Raw](ctx, "finish").Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("CanOutstanding", i, canIn{0})
			g.waitExec(i, 2, "ExternalSubscribed", 1)
			g.waitHistory(child, "ExternalSubscribed", 1)
			g.waitOrchQueueEmpty()                            // the old execution's 200 ms timer fired and was taken
			g.raise(child, "go", `"went"`)                    // the child completes: SubOrchCompleted for execution 1
			g.waitHistory(child, "OrchestrationCompleted", 1) // (Client.Wait may take its 3 s fallback here)
			a.release("can-out")                              // the old execution's activity finishes (if its lock was not stolen)
			g.settle()
			g.raise(i, "finish", `"fin"`)
			g.waitExec(i, 2, "OrchestrationCompleted", 1)
		},
	}
	runCanCase(t, "can01-outstanding", prog, []canInst{
		{id: i, name: "CanOutstanding", status: "Completed", text: `"fin"`, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, []string{
				cStarted(i, 1, "CanOutstanding", "1.0.0", `{"n":0}`, "", 0, ""),
				cev(i, 1, 2, 0, "ActivityScheduled", `"name":"Gate","input":"\"can-out\""`),
				cev(i, 1, 3, 0, "TimerCreated", `"fire_at_ms":200`),
				cev(i, 1, 4, 0, "ExternalSubscribedPersistent", `"name":"never-q"`),
				cev(i, 1, 5, 0, "ExternalSubscribed", `"name":"never"`),
				cev(i, 1, 6, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::6","input":"null"`),
				cev(i, 1, 7, 0, "TimerCreated", `"fire_at_ms":50`),
				cev(i, 1, 8, 7, "TimerFired", `"fire_at_ms":50`),
				cev(i, 1, 9, 5, "ExternalSubscribedCancelled", canTerm),
				cev(i, 1, 10, 4, "ExternalSubscribedPersistentCancelled", canTerm),
				cev(i, 1, 11, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
				cev(i, 1, 12, 2, "ActivityCancelRequested", canTermCAN),
			}},
			{"Completed", `"fin"`, []string{
				cStarted(i, 2, "CanOutstanding", "1.0.0", `{"n":1}`, "", 0, ""),
				cev(i, 2, 2, 0, "ExternalSubscribed", `"name":"finish"`),
				cev(i, 2, 3, 0, "ExternalEvent", `"name":"finish","data":"\"fin\""`),
				cev(i, 2, 4, 0, "OrchestrationCompleted", `"output":"\"fin\""`),
			}},
		}},
		{id: child, name: "ChildWaits", parent: i, status: "Completed", text: `"went"`, execs: []canExec{
			{"Completed", `"went"`, []string{
				cStarted(child, 1, "ChildWaits", "1.0.0", "null", i, 6, ""),
				cev(child, 1, 2, 0, "ExternalSubscribed", `"name":"go"`),
				cev(child, 1, 3, 0, "ExternalEvent", `"name":"go","data":"\"went\""`),
				cev(child, 1, 4, 0, "OrchestrationCompleted", `"output":"\"went\""`),
			}},
		}},
	})
}

func TestAuditCANSameTurn(t *testing.T) {
	t.Parallel()
	// Continue-as-new in the turn that schedules an activity, a timer, a wait, a sub-orchestration
	// and a detached start: all recorded, none carried out (no work items, no child, no detached
	// instance); the wait gets its terminal breadcrumb, the activity its cancel request after.
	i := "can-same"
	var runs atomic.Int32
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerChildWaits(g)
			dx.RegisterActivity(g.rt, "CountRun", func(_ context.Context, in dx.Raw) (dx.Raw, error) {
				runs.Add(1)
				return in, nil
			})
			dx.Register(g.rt, "CanSameTurn", func(ctx dx.Context, in canIn) (dx.Raw, error) {
				if in.N == 0 {
					_ = dx.Call[dx.Raw](ctx, "CountRun", "never-run")
					_ = ctx.Timer(100 * time.Millisecond)
					_ = dx.WaitEvent[dx.Raw](ctx, "x")
					_ = dx.CallSub[dx.Raw](ctx, "ChildWaits", nil)
					if err := ctx.StartOrchestration("ChildWaits", "can-detached", nil); err != nil {
						return "", err
					}
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				return `"done2"`, nil
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("CanSameTurn", i, canIn{0})
			g.wait(i)
			g.settle()
			if n := runs.Load(); n != 0 {
				g.t.Errorf("CountRun ran %d times; duroxide dispatches nothing a continue-as-new turn scheduled", n)
			}
		},
	}
	runCanCase(t, "can02-same-turn", prog, []canInst{
		{id: i, name: "CanSameTurn", status: "Completed", text: `"done2"`, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, []string{
				cStarted(i, 1, "CanSameTurn", "1.0.0", `{"n":0}`, "", 0, ""),
				cev(i, 1, 2, 0, "ActivityScheduled", `"name":"CountRun","input":"\"never-run\""`),
				cev(i, 1, 3, 0, "TimerCreated", `"fire_at_ms":100`),
				cev(i, 1, 4, 0, "ExternalSubscribed", `"name":"x"`),
				cev(i, 1, 5, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"sub::5","input":"null"`),
				cev(i, 1, 6, 0, "OrchestrationChained", `"name":"ChildWaits","instance":"can-detached","input":"null"`),
				cev(i, 1, 7, 4, "ExternalSubscribedCancelled", canTerm),
				cev(i, 1, 8, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
				cev(i, 1, 9, 2, "ActivityCancelRequested", canTermCAN),
			}},
			{"Completed", `"done2"`, []string{
				cStarted(i, 2, "CanSameTurn", "1.0.0", `{"n":1}`, "", 0, ""),
				cev(i, 2, 2, 0, "OrchestrationCompleted", `"output":"\"done2\""`),
			}},
		}},
	})
}

func TestAuditCANAfterRace(t *testing.T) {
	t.Parallel()
	// A select won by a timer, then continue-as-new in the same turn: the losers get no
	// dropped_future breadcrumbs (finalize_turn returns ContinueAsNew before
	// collect_cancelled_from_context): the wait gets "orchestration_terminal", the activity
	// "orchestration_terminal_continued_as_new", and the child is NOT cancelled (it runs on; its
	// completion, routed to execution 1, is dropped by execution 2).
	i, child := "can-race", "can-race-child"
	var a *eaEnv
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			a = newEA(g)
			registerChildWaits(g)
			dx.Register(g.rt, "CanAfterRace", func(ctx dx.Context, in canIn) (dx.Raw, error) {
				if in.N == 0 {
					act := dx.Call[dx.Raw](ctx, "Gate", "can-race")
					w := dx.WaitEvent[dx.Raw](ctx, "x")
					s := dx.CallSub[dx.Raw](ctx, "ChildWaits", nil, dx.WithInstanceID(child))
					tm := ctx.Timer(100 * time.Millisecond)
					if dx.Select(ctx, act, w, s, tm) != dx.Awaitable(tm) {
						return "", fmt.Errorf("the timer should win")
					}
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				return dx.WaitEvent[dx.Raw](ctx, "finish").Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("CanAfterRace", i, canIn{0})
			g.waitExec(i, 2, "ExternalSubscribed", 1)
			g.waitHistory(child, "ExternalSubscribed", 1)
			g.raise(child, "go", `"went"`)
			g.waitHistory(child, "OrchestrationCompleted", 1) // (Client.Wait may take its 3 s fallback here)
			a.release("can-race")
			g.settle()
			g.raise(i, "finish", `"fin"`)
			g.waitExec(i, 2, "OrchestrationCompleted", 1)
		},
	}
	runCanCase(t, "can03-after-race", prog, []canInst{
		{id: i, name: "CanAfterRace", status: "Completed", text: `"fin"`, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, []string{
				cStarted(i, 1, "CanAfterRace", "1.0.0", `{"n":0}`, "", 0, ""),
				cev(i, 1, 2, 0, "ActivityScheduled", `"name":"Gate","input":"\"can-race\""`),
				cev(i, 1, 3, 0, "ExternalSubscribed", `"name":"x"`),
				cev(i, 1, 4, 0, "SubOrchestrationScheduled", `"name":"ChildWaits","instance":"can-race-child","input":"null"`),
				cev(i, 1, 5, 0, "TimerCreated", `"fire_at_ms":100`),
				cev(i, 1, 6, 5, "TimerFired", `"fire_at_ms":100`),
				cev(i, 1, 7, 3, "ExternalSubscribedCancelled", canTerm),
				cev(i, 1, 8, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
				cev(i, 1, 9, 2, "ActivityCancelRequested", canTermCAN),
			}},
			{"Completed", `"fin"`, []string{
				cStarted(i, 2, "CanAfterRace", "1.0.0", `{"n":1}`, "", 0, ""),
				cev(i, 2, 2, 0, "ExternalSubscribed", `"name":"finish"`),
				cev(i, 2, 3, 0, "ExternalEvent", `"name":"finish","data":"\"fin\""`),
				cev(i, 2, 4, 0, "OrchestrationCompleted", `"output":"\"fin\""`),
			}},
		}},
		{id: child, name: "ChildWaits", parent: i, status: "Completed", text: `"went"`, execs: []canExec{
			{"Completed", `"went"`, []string{
				cStarted(child, 1, "ChildWaits", "1.0.0", "null", i, 4, ""),
				cev(child, 1, 2, 0, "ExternalSubscribed", `"name":"go"`),
				cev(child, 1, 3, 0, "ExternalEvent", `"name":"go","data":"\"went\""`),
				cev(child, 1, 4, 0, "OrchestrationCompleted", `"output":"\"went\""`),
			}},
		}},
	})
}

func TestAuditCANMessages(t *testing.T) {
	t.Parallel()
	// Messages around a continue-as-new: two queue messages and an event reach execution 1's only
	// turn (one message dequeued, one carried, the event lost); a queue message and an event sent
	// while the ContinueAsNew item waits reach execution 2 after the carried one (the event, before
	// any subscription, is recorded but never delivered). Custom status and KV carry over.
	i, blk := "can-msgs", "can-msgs-blocker"
	var a *eaEnv
	type out struct {
		Status string          `json:"status"`
		K1     string          `json:"k1"`
		M1     json.RawMessage `json:"m1"`
		M2     json.RawMessage `json:"m2"`
		Ev     string          `json:"ev"`
	}
	prog := goldenProgram{
		racy: "the event e2 must arrive within the 200 ms timer",
		register: func(g *goldenEnv) {
			a = newEA(g)
			dx.Register(g.rt, "CanMsgs", func(ctx dx.Context, in canIn) (*out, error) {
				if in.N == 0 {
					ctx.SetCustomStatus("gen-1")
					ctx.SetKV("k1", "v1")
					if _, err := dx.Dequeue[dx.Raw](ctx, "inbox").Await(ctx); err != nil {
						return nil, err
					}
					return nil, dx.ContinueAsNew(ctx, canIn{1})
				}
				o := &out{Ev: "timeout"}
				o.Status, _ = ctx.CustomStatus()
				o.K1, _ = ctx.KV("k1")
				m1, err := dx.Dequeue[dx.Raw](ctx, "inbox").Await(ctx)
				if err != nil {
					return nil, err
				}
				m2, err := dx.Dequeue[dx.Raw](ctx, "inbox").Await(ctx)
				if err != nil {
					return nil, err
				}
				o.M1, o.M2 = json.RawMessage(m1), json.RawMessage(m2)
				w := dx.WaitEvent[dx.Raw](ctx, "ev")
				if dx.Select(ctx, w, ctx.Timer(200*time.Millisecond)) == dx.Awaitable(w) {
					v, _ := w.Await(ctx)
					o.Ev = string(v)
				}
				ctx.SetCustomStatus("gen-2")
				ctx.SetKV("k2", "v2")
				return o, nil
			})
		},
		drive: func(g *goldenEnv) {
			g.start("CanMsgs", i, canIn{0})
			g.enqueue(i, "inbox", dx.Raw(`{"m":1}`))
			g.enqueue(i, "inbox", dx.Raw(`{"m":"1b"}`))
			g.raise(i, "ev", `"e1"`)
			g.start("Blocker", blk, 400)
			g.startRuntime()
			select { // execution 1 has run and continued as new; the blocker holds the only slot
			case <-a.blocked:
			case <-g.ctx.Done():
				g.t.Fatal("blocker never ran")
			}
			g.enqueue(i, "inbox", dx.Raw(`{"m":2}`))
			g.raise(i, "ev", `"e2"`)
			g.wait(i, blk)
		},
	}
	const output = `{"status":"gen-1","k1":"v1","m1":{"m":"1b"},"m2":{"m":2},"ev":"timeout"}`
	runCanCase(t, "can04-messages", prog, []canInst{
		{id: i, name: "CanMsgs", status: "Completed", text: output, customStatus: ptr("gen-2"), csVersion: 2,
			kv: map[string]string{"k1": "v1", "k2": "v2"}, execs: []canExec{
				{"ContinuedAsNew", `{"n":1}`, []string{
					cStarted(i, 1, "CanMsgs", "1.0.0", `{"n":0}`, "", 0, ""),
					cev(i, 1, 2, 0, "ExternalEventPersistent", `"name":"inbox","data":"{\"m\":1}"`),
					cev(i, 1, 3, 0, "ExternalEventPersistent", `"name":"inbox","data":"{\"m\":\"1b\"}"`),
					cev(i, 1, 4, 0, "ExternalEvent", `"name":"ev","data":"\"e1\""`),
					cev(i, 1, 5, 0, "CustomStatusUpdated", `"status":"gen-1"`),
					cev(i, 1, 6, 0, "KeyValueSet", `"key":"k1","value":"v1","last_updated_at_ms":0`),
					cev(i, 1, 7, 0, "ExternalSubscribedPersistent", `"name":"inbox"`),
					cev(i, 1, 8, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
				}},
				{"Completed", output, []string{
					cStarted(i, 2, "CanMsgs", "1.0.0", `{"n":1}`, "", 0,
						`,"carry_forward_events":[["inbox","{\"m\":\"1b\"}"]],"initial_custom_status":"gen-1"`),
					cev(i, 2, 2, 0, "ExternalEventPersistent", `"name":"inbox","data":"{\"m\":\"1b\"}"`),
					cev(i, 2, 3, 0, "ExternalEventPersistent", `"name":"inbox","data":"{\"m\":2}"`),
					cev(i, 2, 4, 0, "ExternalEvent", `"name":"ev","data":"\"e2\""`),
					cev(i, 2, 5, 0, "ExternalSubscribedPersistent", `"name":"inbox"`),
					cev(i, 2, 6, 0, "ExternalSubscribedPersistent", `"name":"inbox"`),
					cev(i, 2, 7, 0, "ExternalSubscribed", `"name":"ev"`),
					cev(i, 2, 8, 0, "TimerCreated", `"fire_at_ms":200`),
					cev(i, 2, 9, 8, "TimerFired", `"fire_at_ms":200`),
					cev(i, 2, 10, 0, "CustomStatusUpdated", `"status":"gen-2"`),
					cev(i, 2, 11, 0, "KeyValueSet", `"key":"k2","value":"v2","last_updated_at_ms":0`),
					cev(i, 2, 12, 7, "ExternalSubscribedCancelled", `"reason":"dropped_future"`),
					cev(i, 2, 13, 0, "OrchestrationCompleted", `"output":`+jstr(output)),
				}},
			}},
		{id: blk, name: "Blocker", status: "Completed", text: `"done"`, execs: []canExec{
			{"Completed", `"done"`, []string{
				cStarted(blk, 1, "Blocker", "1.0.0", "400", "", 0, ""),
				cev(blk, 1, 2, 0, "OrchestrationCompleted", `"output":"\"done\""`),
			}},
		}},
	})
}

func TestAuditCANChainVersions(t *testing.T) {
	t.Parallel()
	// Several continue-as-new in a row, each in the execution's first turn, across versions
	// (latest 2.0.0 → explicit 1.0.0 → plain, i.e. latest 2.0.0 → explicit 2.0.0), with the custom
	// status set, carried untouched, reset (no initial_custom_status afterwards).
	i := "can-chain"
	type hop struct {
		Hop  int    `json:"hop"`
		Seen string `json:"seen,omitempty"`
	}
	type final struct {
		Hop     int     `json:"hop"`
		Status  *string `json:"status"`
		Version string  `json:"version"`
		Exec    uint64  `json:"exec"`
	}
	body := func(ctx dx.Context, in hop) (*final, error) {
		switch in.Hop {
		case 1:
			ctx.SetCustomStatus("a")
			return nil, dx.ContinueAsNew(ctx, hop{Hop: 2}, dx.WithVersion("1.0.0"))
		case 2:
			s, _ := ctx.CustomStatus()
			return nil, dx.ContinueAsNew(ctx, hop{Hop: 3, Seen: s})
		case 3:
			ctx.ResetCustomStatus()
			return nil, dx.ContinueAsNew(ctx, hop{Hop: 4}, dx.WithVersion("2.0.0"))
		}
		f := &final{Hop: in.Hop, Version: ctx.Version(), Exec: ctx.ExecutionID()}
		if s, ok := ctx.CustomStatus(); ok {
			f.Status = &s
		}
		return f, nil
	}
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			dx.RegisterVersion(g.rt, "Hopper", "1.0.0", body)
			dx.RegisterVersion(g.rt, "Hopper", "2.0.0", body)
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("Hopper", i, hop{Hop: 1})
			g.wait(i)
		},
	}
	const output = `{"hop":4,"status":null,"version":"2.0.0","exec":4}`
	runCanCase(t, "can05-chain-versions", prog, []canInst{
		{id: i, name: "Hopper", version: "2.0.0", status: "Completed", text: output, csVersion: 2, execs: []canExec{
			{"ContinuedAsNew", `{"hop":2}`, []string{
				cStarted(i, 1, "Hopper", "2.0.0", `{"hop":1}`, "", 0, ""),
				cev(i, 1, 2, 0, "CustomStatusUpdated", `"status":"a"`),
				cev(i, 1, 3, 0, "OrchestrationContinuedAsNew", `"input":"{\"hop\":2}"`),
			}},
			{"ContinuedAsNew", `{"hop":3,"seen":"a"}`, []string{
				cStarted(i, 2, "Hopper", "1.0.0", `{"hop":2}`, "", 0, `,"initial_custom_status":"a"`),
				cev(i, 2, 2, 0, "OrchestrationContinuedAsNew", `"input":"{\"hop\":3,\"seen\":\"a\"}"`),
			}},
			{"ContinuedAsNew", `{"hop":4}`, []string{
				cStarted(i, 3, "Hopper", "2.0.0", `{"hop":3,"seen":"a"}`, "", 0, `,"initial_custom_status":"a"`),
				cev(i, 3, 2, 0, "CustomStatusUpdated", `"status":null`),
				cev(i, 3, 3, 0, "OrchestrationContinuedAsNew", `"input":"{\"hop\":4}"`),
			}},
			{"Completed", output, []string{
				cStarted(i, 4, "Hopper", "2.0.0", `{"hop":4}`, "", 0, ""),
				cev(i, 4, 2, 0, "OrchestrationCompleted", `"output":`+jstr(output)),
			}},
		}},
	})
}

func TestAuditCANChild(t *testing.T) {
	t.Parallel()
	// A sub-orchestration continues as new: the next execution keeps the parent link
	// (parent_instance, parent_id, parent_execution_id), as in shared/golden/duroxide-0.1.30.
	p, c := "can-parent", "can-child"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			type childOut struct {
				ChildExecution uint64 `json:"childExecution"`
				Input          canIn  `json:"input"`
			}
			dx.Register(g.rt, "CanChild", func(ctx dx.Context, in canIn) (*childOut, error) {
				if in.N == 0 {
					return nil, dx.ContinueAsNew(ctx, canIn{1})
				}
				return &childOut{ctx.ExecutionID(), in}, nil
			})
			dx.Register(g.rt, "CanParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				return dx.CallSub[dx.Raw](ctx, "CanChild", canIn{0}, dx.WithInstanceID(c)).Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("CanParent", p, nil)
			g.wait(p, c)
		},
	}
	const out = `{"childExecution":2,"input":{"n":1}}`
	runCanCase(t, "can06-child", prog, []canInst{
		{id: p, name: "CanParent", status: "Completed", text: out, execs: []canExec{{"Completed", out, []string{
			cStarted(p, 1, "CanParent", "1.0.0", "null", "", 0, ""),
			cev(p, 1, 2, 0, "SubOrchestrationScheduled", `"name":"CanChild","instance":"can-child","input":"{\"n\":0}"`),
			cev(p, 1, 3, 2, "SubOrchestrationCompleted", `"result":`+jstr(out)),
			cev(p, 1, 4, 0, "OrchestrationCompleted", `"output":`+jstr(out)),
		}}}},
		{id: c, name: "CanChild", parent: p, status: "Completed", text: out, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, []string{
				cStarted(c, 1, "CanChild", "1.0.0", `{"n":0}`, p, 2, ""),
				cev(c, 1, 2, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
			}},
			{"Completed", out, []string{
				cStarted(c, 2, "CanChild", "1.0.0", `{"n":1}`, p, 2, ""),
				cev(c, 2, 2, 0, "OrchestrationCompleted", `"output":`+jstr(out)),
			}},
		}},
	})
}

// ---- timers ----

func TestAuditCANTimerZeroNegative(t *testing.T) { // not parallel: it compares two clock readings of one turn
	// Zero and negative delays: a timer at "now" (duroxide's Duration is unsigned; the Node binding
	// saturates a negative delay to 0), fired in its own later turn like any timer.
	i := "timer-zero"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "ZeroTimers", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				if err := ctx.Sleep(0); err != nil {
					return "", err
				}
				if err := ctx.Sleep(-5 * time.Second); err != nil {
					return "", err
				}
				return dx.Call[dx.Raw](ctx, "Echo", "after").Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("ZeroTimers", i, nil)
			g.wait(i)
			hist, err := g.p.Read(g.ctx, i)
			if err != nil {
				g.t.Fatal(err)
			}
			for _, ev := range hist {
				b, _ := json.Marshal(ev)
				var m struct {
					Type   string `json:"type"`
					Ts     int64  `json:"timestamp_ms"`
					FireAt int64  `json:"fire_at_ms"`
				}
				_ = json.Unmarshal(b, &m)
				// Two readings of the clock in one turn: a loaded machine puts milliseconds
				// between them (6 ms seen), far from the -5 s a negative delay would give.
				if m.Type == "TimerCreated" && (m.FireAt < m.Ts-250 || m.FireAt > m.Ts+250) {
					g.t.Errorf("TimerCreated %d: fire_at_ms %d, timestamp_ms %d: want fire_at_ms = now", ev.EventID, m.FireAt, m.Ts)
				}
			}
		},
	}
	runCanCase(t, "t01-zero-negative", prog, []canInst{
		{id: i, name: "ZeroTimers", status: "Completed", text: `"after"`, execs: []canExec{{"Completed", `"after"`, []string{
			cStarted(i, 1, "ZeroTimers", "1.0.0", "null", "", 0, ""),
			cev(i, 1, 2, 0, "TimerCreated", `"fire_at_ms":0`),
			cev(i, 1, 3, 2, "TimerFired", `"fire_at_ms":0`),
			cev(i, 1, 4, 0, "TimerCreated", `"fire_at_ms":0`),
			cev(i, 1, 5, 4, "TimerFired", `"fire_at_ms":0`),
			cev(i, 1, 6, 0, "ActivityScheduled", `"name":"Echo","input":"\"after\""`),
			cev(i, 1, 7, 6, "ActivityCompleted", `"result":"\"after\""`),
			cev(i, 1, 8, 0, "OrchestrationCompleted", `"output":"\"after\""`),
		}}}},
	})
}

func TestAuditCANTimerLoserFiresLater(t *testing.T) {
	t.Parallel()
	// A timer that lost a race leaves no breadcrumb; when it fires later, while the code waits on
	// something else, its TimerFired is recorded in its own turn (an open schedule, no
	// nondeterminism) and changes nothing else.
	i := "timer-loser"
	prog := goldenProgram{
		racy: "the activity \"fast\" must complete within the 300 ms timer",
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "TimerLoser", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				act := dx.Call[dx.Raw](ctx, "Echo", "fast")
				if dx.Select(ctx, act, ctx.Timer(300*time.Millisecond)) != dx.Awaitable(act) {
					return "", fmt.Errorf("the activity should win")
				}
				if err := ctx.Sleep(600 * time.Millisecond); err != nil {
					return "", err
				}
				return act.Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("TimerLoser", i, nil)
			g.wait(i)
		},
	}
	runCanCase(t, "t02-loser-fires-later", prog, []canInst{
		{id: i, name: "TimerLoser", status: "Completed", text: `"fast"`, execs: []canExec{{"Completed", `"fast"`, []string{
			cStarted(i, 1, "TimerLoser", "1.0.0", "null", "", 0, ""),
			cev(i, 1, 2, 0, "ActivityScheduled", `"name":"Echo","input":"\"fast\""`),
			cev(i, 1, 3, 0, "TimerCreated", `"fire_at_ms":300`),
			cev(i, 1, 4, 2, "ActivityCompleted", `"result":"\"fast\""`),
			cev(i, 1, 5, 0, "TimerCreated", `"fire_at_ms":600`),
			cev(i, 1, 6, 3, "TimerFired", `"fire_at_ms":300`),
			cev(i, 1, 7, 5, "TimerFired", `"fire_at_ms":600`),
			cev(i, 1, 8, 0, "OrchestrationCompleted", `"output":"\"fast\""`),
		}}}},
	})
}

func TestAuditCANTimersOneBatch(t *testing.T) {
	t.Parallel()
	// Three timers (300, 150, 200 ms) created in one turn all come due while the only
	// orchestration slot is held: one batch, TimerFired in enqueue (creation) order, not fire order.
	// Both instances are started before the runtime, so the blocker's turn is the next one fetched
	// after the first turn (its ack fetches it): starting the blocker once the test had seen the
	// timers lost the 150 ms race three runs in a row under the race detector on a loaded machine.
	i, blk := "timer-batch", "timer-batch-blocker"
	prog := goldenProgram{
		racy: "the blocker's turn must follow the first within 150 ms",
		register: func(g *goldenEnv) {
			newEA(g) // registers the Blocker
			dx.Register(g.rt, "TimerBatch", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				t1 := ctx.Timer(300 * time.Millisecond)
				t2 := ctx.Timer(150 * time.Millisecond)
				t3 := ctx.Timer(200 * time.Millisecond)
				if err := dx.Join(ctx, t1, t2, t3); err != nil {
					return "", err
				}
				return `"all"`, nil
			})
		},
		drive: func(g *goldenEnv) {
			g.start("TimerBatch", i, nil)
			g.start("Blocker", blk, (600 * time.Millisecond).Milliseconds())
			g.startRuntime()
			g.wait(i, blk)
		},
	}
	runCanCase(t, "t03-one-batch", prog, []canInst{
		{id: i, name: "TimerBatch", status: "Completed", text: `"all"`, execs: []canExec{{"Completed", `"all"`, []string{
			cStarted(i, 1, "TimerBatch", "1.0.0", "null", "", 0, ""),
			cev(i, 1, 2, 0, "TimerCreated", `"fire_at_ms":300`),
			cev(i, 1, 3, 0, "TimerCreated", `"fire_at_ms":150`),
			cev(i, 1, 4, 0, "TimerCreated", `"fire_at_ms":200`),
			cev(i, 1, 5, 2, "TimerFired", `"fire_at_ms":300`),
			cev(i, 1, 6, 3, "TimerFired", `"fire_at_ms":150`),
			cev(i, 1, 7, 4, "TimerFired", `"fire_at_ms":200`),
			cev(i, 1, 8, 0, "OrchestrationCompleted", `"output":"\"all\""`),
		}}}},
		{id: blk, name: "Blocker", status: "Completed", text: `"done"`, execs: []canExec{{"Completed", `"done"`, []string{
			cStarted(blk, 1, "Blocker", "1.0.0", "600", "", 0, ""),
			cev(blk, 1, 2, 0, "OrchestrationCompleted", `"output":"\"done\""`),
		}}}},
	})
}

func TestAuditCANCarryLimit(t *testing.T) {
	t.Parallel()
	// 102 queue messages, none dequeued: the continue-as-new carries the first 100 in arrival
	// order (MAX_CARRY_FORWARD_EVENTS), the rest are dropped.
	i := "can-carry"
	const total, limit = 102, 100
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			dx.Register(g.rt, "CanCarry", func(ctx dx.Context, in canIn) (dx.Raw, error) {
				if in.N == 0 {
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				return `"carried"`, nil
			})
		},
		drive: func(g *goldenEnv) {
			g.start("CanCarry", i, canIn{0})
			for k := range total {
				g.enqueue(i, "q", k)
			}
			g.startRuntime()
			g.wait(i)
		},
	}
	e1 := []string{cStarted(i, 1, "CanCarry", "1.0.0", `{"n":0}`, "", 0, "")}
	for k := range total {
		e1 = append(e1, cev(i, 1, k+2, 0, "ExternalEventPersistent", fmt.Sprintf(`"name":"q","data":"%d"`, k)))
	}
	e1 = append(e1, cev(i, 1, total+2, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`))
	var pairs []string
	for k := range limit {
		pairs = append(pairs, fmt.Sprintf(`["q","%d"]`, k))
	}
	e2 := []string{cStarted(i, 2, "CanCarry", "1.0.0", `{"n":1}`, "", 0, `,"carry_forward_events":[`+strings.Join(pairs, ",")+`]`)}
	for k := range limit {
		e2 = append(e2, cev(i, 2, k+2, 0, "ExternalEventPersistent", fmt.Sprintf(`"name":"q","data":"%d"`, k)))
	}
	e2 = append(e2, cev(i, 2, limit+2, 0, "OrchestrationCompleted", `"output":"\"carried\""`))
	runCanCase(t, "can07-carry-limit", prog, []canInst{
		{id: i, name: "CanCarry", status: "Completed", text: `"carried"`, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, e1},
			{"Completed", `"carried"`, e2},
		}},
	})
}
