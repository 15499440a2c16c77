package dx_test

// Audit: key-value store and custom status, compared with what duroxide 0.1.30 would store.
// Expected histories derived by hand from duroxide's source (alpinevm/duroxide @ 23063eb, 0.1.29+)
// and checked against the recorded rows (testdata/golden/11-custom-status-and-kv,
// and duroxide 0.1.30's own golden-main recordings, kept outside this repository):
//   - lib.rs set_custom_status / reset_custom_status / set_kv_value / clear_kv_value /
//     clear_all_kv_values (3193-3330): one positional event per call, no turn boundary;
//     set_kv_value stamps kv_metadata[key] = now_ms (3239-3241), so
//     prune_kv_values_updated_before (3338-3356) also prunes keys written by this execution
//     (duroxide's own test tests/kv_store_tests.rs:2662 kv_prune_current_turn_keys_with_max_threshold).
//   - lib.rs get_kv_value_from_instance (3362) + runtime/mod.rs:46-62: builtin activity
//     __duroxide_syscall:get_kv_value, input serde_json {"instance_id","key"}, result
//     serde_json::to_string(Option<String>) ("null" when missing).
//   - providers/sqlite.rs:1314-1363: custom_status_version + 1 per ack whose delta holds a
//     CustomStatusUpdated (per turn, not per call; same value counts); kv_snapshot = kv_store
//     (prior executions only, 599/1106), kv_delta merged on a terminal ack (1435-1476).
//   - runtime/execution.rs:329 initial_custom_status = last status of the old execution.
//   - runtime/dispatchers/orchestration.rs validate_limits (37-205), called at 720 after the
//     handler's terminal event is already in the delta: custom status = last CustomStatusUpdated
//     with Some(status) (a later reset does not hide it); key count = kv_snapshot + THIS TURN's
//     delta only; on a violation fail_orchestration_for_limit (217-245) APPENDS OrchestrationFailed
//     (after an OrchestrationCompleted / OrchestrationFailed already there), and clears
//     worker_items and orchestrator_items (no SubOrchCompleted/Failed to the parent, no detached
//     start); no terminal breadcrumbs; in-flight activities then get ActivityCancelRequested (889-928).
//   - runtime/limits.rs: MAX_KV_KEYS 150, MAX_KV_VALUE_BYTES 65536, MAX_CUSTOM_STATUS_BYTES 262144.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

func kvSet(inst string, exec, id int, key, value string) string {
	return cev(inst, exec, id, 0, "KeyValueSet", `"key":`+jstr(key)+`,"value":`+jstr(value)+`,"last_updated_at_ms":0`)
}

func kvCleared(inst string, exec, id int, key string) string {
	return cev(inst, exec, id, 0, "KeyValueCleared", `"key":`+jstr(key))
}

func csUpdated(inst string, exec, id int, status *string) string {
	s := "null"
	if status != nil {
		s = jstr(*status)
	}
	return cev(inst, exec, id, 0, "CustomStatusUpdated", `"status":`+s)
}

func getKVInput(instance, key string) string {
	// serde_json::json!({...}).to_string(): keys sorted, no escaping of U+2028 / U+2029.
	return `{"instance_id":` + rawJSONString(instance) + `,"key":` + rawJSONString(key) + `}`
}

// rawJSONString encodes s as serde_json does: only '"', '\\' and control characters are escaped.
func rawJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

const (
	getKV    = "__duroxide_syscall:get_kv_value"
	farFutMs = int64(1) << 50 // a prune cutoff later than any wall clock
)

// ---- matching behaviour (regression) ----

type kvOut struct {
	CS *string           `json:"cs"`
	KV map[string]string `json:"kv"`
}

func TestAuditKVRegression(t *testing.T) {
	t.Parallel()
	// KV set / overwrite / clear (also of a missing key) / clear-all in one turn and across turns,
	// custom status set twice (same value) in one turn and again in a later turn, reset + set in
	// one turn, KV reads of another instance (key, missing key, missing instance), continue-as-new
	// carrying KV and initial_custom_status, PruneKV of a key from the previous execution, and
	// every limit at exactly its maximum.
	src, i, lim := "kv-src", "kv-a", "kv-at-limit"
	bigV := strings.Repeat("v", 64*1024)
	bigS := strings.Repeat("s", 256*1024)
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "KvSrc", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetKV("k", "v")
				return "src", nil
			})
			dx.Register(g.rt, "KvTurns", func(ctx dx.Context, in canIn) (any, error) {
				if in.N == 0 {
					ctx.SetKV("a", "1")
					ctx.SetKV("a", "2")
					ctx.SetKV("b", "x")
					ctx.SetCustomStatus("s1")
					ctx.SetCustomStatus("s1")
					if _, err := dx.Call[dx.Raw](ctx, "Echo", "t1").Await(ctx); err != nil {
						return nil, err
					}
					ctx.ClearKV("b")
					ctx.ClearKV("nope")
					ctx.SetKV("c", "3")
					ctx.ClearAllKV()
					ctx.SetKV("d", "4")
					ctx.SetCustomStatus("s1")
					var reads []*string
					for _, r := range [][2]string{{src, "k"}, {src, "zz"}, {"ghost", "k"}} {
						v, err := ctx.KVFromInstance(r[0], r[1]).Await(ctx)
						if err != nil {
							return nil, err
						}
						reads = append(reads, v)
					}
					ctx.ResetCustomStatus()
					ctx.SetCustomStatus("before-can")
					b, _ := json.Marshal(reads)
					ctx.SetKV("a", string(b))
					return nil, dx.ContinueAsNew(ctx, canIn{1})
				}
				ctx.ClearKV("d")
				n := ctx.PruneKV(time.UnixMilli(farFutMs))
				ctx.SetKV("e", strconv.Itoa(n))
				out := kvOut{KV: ctx.KVAll()}
				if s, ok := ctx.CustomStatus(); ok {
					out.CS = &s
				}
				return out, nil
			})
			dx.Register(g.rt, "KvAtLimit", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetCustomStatus(bigS)
				for k := range 149 {
					ctx.SetKV(fmt.Sprintf("k%03d", k), "v")
				}
				ctx.SetKV("big", bigV)
				return "ok", nil
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("KvSrc", src, nil)
			g.wait(src)
			g.start("KvTurns", i, canIn{0})
			g.start("KvAtLimit", lim, nil)
			g.wait(i, lim)
		},
	}
	s1, bc := "s1", "before-can"
	reads := `["v",null,null]`
	limEvents := []string{cStarted(lim, 1, "KvAtLimit", "1.0.0", "null", "", 0, ""), csUpdated(lim, 1, 2, &bigS)}
	for k := range 149 {
		limEvents = append(limEvents, kvSet(lim, 1, k+3, fmt.Sprintf("k%03d", k), "v"))
	}
	limEvents = append(limEvents, kvSet(lim, 1, 152, "big", bigV), cev(lim, 1, 153, 0, "OrchestrationCompleted", `"output":"\"ok\""`))
	runCanCase(t, "kv01-regression", prog, []canInst{
		{id: src, name: "KvSrc", status: "Completed", text: `"src"`, kv: map[string]string{"k": "v"}, execs: []canExec{{"Completed", `"src"`, []string{
			cStarted(src, 1, "KvSrc", "1.0.0", "null", "", 0, ""),
			kvSet(src, 1, 2, "k", "v"),
			cev(src, 1, 3, 0, "OrchestrationCompleted", `"output":"\"src\""`),
		}}}},
		{id: i, name: "KvTurns", status: "Completed", text: `{"cs":"before-can","kv":{"e":"1"}}`, customStatus: &bc, csVersion: 3,
			kv: map[string]string{"e": "1"}, execs: []canExec{
				{"ContinuedAsNew", `{"n":1}`, []string{
					cStarted(i, 1, "KvTurns", "1.0.0", `{"n":0}`, "", 0, ""),
					kvSet(i, 1, 2, "a", "1"),
					kvSet(i, 1, 3, "a", "2"),
					kvSet(i, 1, 4, "b", "x"),
					csUpdated(i, 1, 5, &s1),
					csUpdated(i, 1, 6, &s1),
					cev(i, 1, 7, 0, "ActivityScheduled", `"name":"Echo","input":"\"t1\""`),
					cev(i, 1, 8, 7, "ActivityCompleted", `"result":"\"t1\""`),
					kvCleared(i, 1, 9, "b"),
					kvCleared(i, 1, 10, "nope"),
					kvSet(i, 1, 11, "c", "3"),
					cev(i, 1, 12, 0, "KeyValuesCleared", ""),
					kvSet(i, 1, 13, "d", "4"),
					csUpdated(i, 1, 14, &s1),
					cev(i, 1, 15, 0, "ActivityScheduled", `"name":"`+getKV+`","input":`+jstr(getKVInput(src, "k"))),
					cev(i, 1, 16, 15, "ActivityCompleted", `"result":"\"v\""`),
					cev(i, 1, 17, 0, "ActivityScheduled", `"name":"`+getKV+`","input":`+jstr(getKVInput(src, "zz"))),
					cev(i, 1, 18, 17, "ActivityCompleted", `"result":"null"`),
					cev(i, 1, 19, 0, "ActivityScheduled", `"name":"`+getKV+`","input":`+jstr(getKVInput("ghost", "k"))),
					cev(i, 1, 20, 19, "ActivityCompleted", `"result":"null"`),
					csUpdated(i, 1, 21, nil),
					csUpdated(i, 1, 22, &bc),
					kvSet(i, 1, 23, "a", reads),
					cev(i, 1, 24, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`),
				}},
				{"Completed", `{"cs":"before-can","kv":{"e":"1"}}`, []string{
					cStarted(i, 2, "KvTurns", "1.0.0", `{"n":1}`, "", 0, `,"initial_custom_status":"before-can"`),
					kvCleared(i, 2, 2, "d"),
					kvCleared(i, 2, 3, "a"),
					kvSet(i, 2, 4, "e", "1"),
					cev(i, 2, 5, 0, "OrchestrationCompleted", `"output":`+jstr(`{"cs":"before-can","kv":{"e":"1"}}`)),
				}},
			}},
		{id: lim, name: "KvAtLimit", status: "Completed", text: `"ok"`, customStatus: &bigS, csVersion: 1,
			execs: []canExec{{"Completed", `"ok"`, limEvents}}},
	})
}

// ---- discrepancies ----

func TestAuditKVLimitViolation(t *testing.T) {
	t.Parallel()
	// validate_limits runs after the turn's terminal event is in the delta and only appends an
	// OrchestrationFailed: a completing turn stores Completed THEN Failed; a failing turn two
	// Failed events; a waiting turn gets no terminal breadcrumb. The custom-status check looks at
	// the last Some(status), so an oversized status followed by a reset still fails.
	bigV := strings.Repeat("x", 64*1024+1)
	bigS := strings.Repeat("s", 256*1024+1)
	kvMsg := "KV value for key 'big' (65537 bytes) exceeds limit (65536 bytes)"
	csMsg := "Custom status size (262145 bytes) exceeds limit (262144 bytes)"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "LimDone", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetKV("big", bigV)
				return "done", nil
			})
			dx.Register(g.rt, "LimErr", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetKV("big", bigV)
				return "", errors.New("boom")
			})
			dx.Register(g.rt, "LimWait", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				ctx.SetKV("big", bigV)
				return dx.WaitEvent[dx.Raw](ctx, "x").Await(ctx)
			})
			dx.Register(g.rt, "LimAct", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				ctx.SetKV("big", bigV)
				return dx.Call[dx.Raw](ctx, "Echo", "e").Await(ctx)
			})
			dx.Register(g.rt, "LimCsReset", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetCustomStatus(bigS)
				ctx.ResetCustomStatus()
				return "done", nil
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			for _, n := range []string{"LimDone", "LimErr", "LimWait", "LimAct", "LimCsReset"} {
				g.start(n, strings.ToLower(n), nil)
			}
			g.wait("limdone", "limerr", "limwait", "limact", "limcsreset")
			g.settle()
		},
	}
	failed := func(id, name string, mid []string, tail ...string) canInst {
		ev := append([]string{cStarted(id, 1, name, "1.0.0", "null", "", 0, "")}, mid...)
		ev = append(ev, tail...)
		return canInst{id: id, name: name, status: "Failed", text: kvMsg, execs: []canExec{{"Failed", kvMsg, ev}}}
	}
	set := func(id string) string { return kvSet(id, 1, 2, "big", bigV) }
	done := failed("limdone", "LimDone", []string{set("limdone"),
		cev("limdone", 1, 3, 0, "OrchestrationCompleted", `"output":"\"done\""`),
		cev("limdone", 1, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed(kvMsg))})
	done.kv = map[string]string{"big": bigV} // the oversized value is still materialized
	cs := canInst{id: "limcsreset", name: "LimCsReset", status: "Failed", text: csMsg, csVersion: 1, execs: []canExec{{"Failed", csMsg, []string{
		cStarted("limcsreset", 1, "LimCsReset", "1.0.0", "null", "", 0, ""),
		csUpdated("limcsreset", 1, 2, &bigS),
		csUpdated("limcsreset", 1, 3, nil),
		cev("limcsreset", 1, 4, 0, "OrchestrationCompleted", `"output":"\"done\""`),
		cev("limcsreset", 1, 5, 0, "OrchestrationFailed", `"details":`+aAppFailed(csMsg)),
	}}}}
	runCanCase(t, "kv02-limit-violation", prog, []canInst{
		done,
		failed("limerr", "LimErr", []string{set("limerr"),
			cev("limerr", 1, 3, 0, "OrchestrationFailed", `"details":`+aAppFailed("boom")),
			cev("limerr", 1, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed(kvMsg))}),
		failed("limwait", "LimWait", []string{set("limwait"),
			cev("limwait", 1, 3, 0, "ExternalSubscribed", `"name":"x"`),
			cev("limwait", 1, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed(kvMsg))}),
		failed("limact", "LimAct", []string{set("limact"),
			cev("limact", 1, 3, 0, "ActivityScheduled", `"name":"Echo","input":"\"e\""`),
			cev("limact", 1, 4, 0, "OrchestrationFailed", `"details":`+aAppFailed(kvMsg)),
			cev("limact", 1, 5, 3, "ActivityCancelRequested", `"reason":"orchestration_terminal_failed"`)}),
		cs,
	})
}

func TestAuditKVLimitDropsOrchestratorItems(t *testing.T) {
	t.Parallel()
	// A child that exceeds a limit in its completing turn: duroxide clears orchestrator_items, so
	// neither its SubOrchCompleted/Failed reaches the parent nor its detached start is made. The
	// parent keeps waiting until the driver cancels it (after the child is terminal + 400 ms).
	p, c := "kvl-parent", "kvl-child"
	bigV := strings.Repeat("x", 64*1024+1)
	kvMsg := "KV value for key 'big' (65537 bytes) exceeds limit (65536 bytes)"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			dx.Register(g.rt, "KvlParent", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				return dx.CallSub[dx.Raw](ctx, "KvlChild", nil, dx.WithInstanceID(c)).Await(ctx)
			})
			dx.Register(g.rt, "KvlChild", func(ctx dx.Context, _ dx.Raw) (string, error) {
				if err := ctx.StartOrchestration("KvlDetached", "kvl-detached", nil); err != nil {
					return "", err
				}
				ctx.SetKV("big", bigV)
				return "child-done", nil
			})
			dx.Register(g.rt, "KvlDetached", func(ctx dx.Context, _ dx.Raw) (string, error) { return "d", nil })
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("KvlParent", p, nil)
			g.wait(c)
			g.settle()
			if st, err := g.c.Status(g.ctx, p); err == nil && st.Terminal() {
				g.t.Logf("%s is already %s before the driver cancels it: the limit-failed child notified it", p, st.State)
			} else {
				g.cancel(p, "stop")
			}
			g.wait(p)
			g.settle()
		},
	}
	runCanCase(t, "kv03-limit-child", prog, []canInst{
		{id: p, name: "KvlParent", status: "Failed", text: "canceled: stop", execs: []canExec{{"Failed", "canceled: stop", []string{
			cStarted(p, 1, "KvlParent", "1.0.0", "null", "", 0, ""),
			cev(p, 1, 2, 0, "SubOrchestrationScheduled", `"name":"KvlChild","instance":"kvl-child","input":"null"`),
			cev(p, 1, 3, 0, "OrchestrationCancelRequested", `"reason":"stop"`),
			cev(p, 1, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("stop")),
		}}}},
		{id: c, name: "KvlChild", parent: p, status: "Failed", text: kvMsg, execs: []canExec{{"Failed", kvMsg, []string{
			cStarted(c, 1, "KvlChild", "1.0.0", "null", p, 2, ""),
			cev(c, 1, 2, 0, "OrchestrationChained", `"name":"KvlDetached","instance":"kvl-detached","input":"null"`),
			kvSet(c, 1, 3, "big", bigV),
			cev(c, 1, 4, 0, "OrchestrationCompleted", `"output":"\"child-done\""`),
			cev(c, 1, 5, 0, "OrchestrationFailed", `"details":`+aAppFailed(kvMsg)),
		}}}},
	})
}

func TestAuditKVKeyCount(t *testing.T) {
	t.Parallel()
	// duroxide counts keys as kv_snapshot (previous executions) + this turn's delta: 100 keys in
	// each of two turns pass (200 stored); a clear-all in an earlier turn of the execution does
	// not lower the count, so 150 carried keys + 1 new key fails after the clear-all.
	a, b := "kvc-turns", "kvc-can"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "KvcTurns", func(ctx dx.Context, _ dx.Raw) (string, error) {
				for k := range 100 {
					ctx.SetKV(fmt.Sprintf("a%03d", k), "v")
				}
				if _, err := dx.Call[dx.Raw](ctx, "Echo", "x").Await(ctx); err != nil {
					return "", err
				}
				for k := range 100 {
					ctx.SetKV(fmt.Sprintf("b%03d", k), "v")
				}
				return "done", nil
			})
			dx.Register(g.rt, "KvcCan", func(ctx dx.Context, in canIn) (string, error) {
				if in.N == 0 {
					for k := range 150 {
						ctx.SetKV(fmt.Sprintf("k%03d", k), "v")
					}
					return "", dx.ContinueAsNew(ctx, canIn{1})
				}
				ctx.ClearAllKV()
				if _, err := dx.Call[dx.Raw](ctx, "Echo", "x").Await(ctx); err != nil {
					return "", err
				}
				ctx.SetKV("one", "1")
				return "done", nil
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("KvcTurns", a, nil)
			g.start("KvcCan", b, canIn{0})
			g.wait(a, b)
		},
	}
	ea := []string{cStarted(a, 1, "KvcTurns", "1.0.0", "null", "", 0, "")}
	kvA := map[string]string{}
	for k := range 100 {
		ea = append(ea, kvSet(a, 1, k+2, fmt.Sprintf("a%03d", k), "v"))
		kvA[fmt.Sprintf("a%03d", k)] = "v"
	}
	ea = append(ea, cev(a, 1, 102, 0, "ActivityScheduled", `"name":"Echo","input":"\"x\""`), cev(a, 1, 103, 102, "ActivityCompleted", `"result":"\"x\""`))
	for k := range 100 {
		ea = append(ea, kvSet(a, 1, k+104, fmt.Sprintf("b%03d", k), "v"))
		kvA[fmt.Sprintf("b%03d", k)] = "v"
	}
	ea = append(ea, cev(a, 1, 204, 0, "OrchestrationCompleted", `"output":"\"done\""`))
	e1 := []string{cStarted(b, 1, "KvcCan", "1.0.0", `{"n":0}`, "", 0, "")}
	for k := range 150 {
		e1 = append(e1, kvSet(b, 1, k+2, fmt.Sprintf("k%03d", k), "v"))
	}
	e1 = append(e1, cev(b, 1, 152, 0, "OrchestrationContinuedAsNew", `"input":"{\"n\":1}"`))
	msg := "KV key count (151) exceeds limit (150)"
	runCanCase(t, "kv04-key-count", prog, []canInst{
		{id: a, name: "KvcTurns", status: "Completed", text: `"done"`, kv: kvA, execs: []canExec{{"Completed", `"done"`, ea}}},
		{id: b, name: "KvcCan", status: "Failed", text: msg, kv: map[string]string{"one": "1"}, execs: []canExec{
			{"ContinuedAsNew", `{"n":1}`, e1},
			{"Failed", msg, []string{
				cStarted(b, 2, "KvcCan", "1.0.0", `{"n":1}`, "", 0, ""),
				cev(b, 2, 2, 0, "KeyValuesCleared", ""),
				cev(b, 2, 3, 0, "ActivityScheduled", `"name":"Echo","input":"\"x\""`),
				cev(b, 2, 4, 3, "ActivityCompleted", `"result":"\"x\""`),
				kvSet(b, 2, 5, "one", "1"),
				cev(b, 2, 6, 0, "OrchestrationCompleted", `"output":"\"done\""`),
				cev(b, 2, 7, 0, "OrchestrationFailed", `"details":`+aAppFailed(msg)),
			}},
		}},
	})
}

func TestAuditKVPruneOwnKeys(t *testing.T) {
	t.Parallel()
	// prune_kv_values_updated_before compares kv_metadata, which set_kv_value stamps with the wall
	// clock: a cutoff after now prunes keys this execution wrote, in this turn or (re-stamped on
	// replay) an earlier one.
	i := "kv-prune"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "KvPrune", func(ctx dx.Context, _ dx.Raw) (any, error) {
				ctx.SetKV("early", "1")
				if _, err := dx.Call[dx.Raw](ctx, "Echo", "x").Await(ctx); err != nil {
					return nil, err
				}
				ctx.SetKV("now", "2")
				n := ctx.PruneKV(time.UnixMilli(farFutMs))
				return map[string]any{"removed": n, "left": ctx.KVAll()}, nil
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("KvPrune", i, nil)
			g.wait(i)
		},
	}
	// Two keys pruned in one call: duroxide clears them in HashMap order (random), so its own
	// order varies; the expectation uses dx's sorted order ("early", "now").
	out := `{"left":{},"removed":2}`
	runCanCase(t, "kv05-prune-own", prog, []canInst{
		{id: i, name: "KvPrune", status: "Completed", text: out, kv: map[string]string{}, execs: []canExec{{"Completed", out, []string{
			cStarted(i, 1, "KvPrune", "1.0.0", "null", "", 0, ""),
			kvSet(i, 1, 2, "early", "1"),
			cev(i, 1, 3, 0, "ActivityScheduled", `"name":"Echo","input":"\"x\""`),
			cev(i, 1, 4, 3, "ActivityCompleted", `"result":"\"x\""`),
			kvSet(i, 1, 5, "now", "2"),
			kvCleared(i, 1, 6, "early"),
			kvCleared(i, 1, 7, "now"),
			cev(i, 1, 8, 0, "OrchestrationCompleted", `"output":`+jstr(out)),
		}}}},
	})
}

func TestAuditKVFromInstanceLineSeparator(t *testing.T) {
	t.Parallel()
	// serde_json writes U+2028 / U+2029 raw; Go's encoding/json always escapes them (\u2028).
	// KVFromInstance's input (key) and result (value) texts are therefore not byte-identical.
	src, i := "kvu-src", "kvu"
	key, val := "k\u2028", "v\u2029"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			dx.Register(g.rt, "KvuSrc", func(ctx dx.Context, _ dx.Raw) (string, error) {
				ctx.SetKV(key, val)
				return "src", nil
			})
			dx.Register(g.rt, "Kvu", func(ctx dx.Context, _ dx.Raw) (bool, error) {
				v, err := ctx.KVFromInstance(src, key).Await(ctx)
				return v != nil && *v == val, err
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("KvuSrc", src, nil)
			g.wait(src)
			g.start("Kvu", i, nil)
			g.wait(i)
		},
	}
	res := rawJSONString(val) // serde_json::to_string(&Some(val))
	runCanCase(t, "kv06-line-separator", prog, []canInst{
		{id: src, name: "KvuSrc", status: "Completed", text: `"src"`, execs: []canExec{{"Completed", `"src"`, []string{
			cStarted(src, 1, "KvuSrc", "1.0.0", "null", "", 0, ""),
			kvSet(src, 1, 2, key, val),
			cev(src, 1, 3, 0, "OrchestrationCompleted", `"output":"\"src\""`),
		}}}},
		{id: i, name: "Kvu", status: "Completed", text: "true", execs: []canExec{{"Completed", "true", []string{
			cStarted(i, 1, "Kvu", "1.0.0", "null", "", 0, ""),
			cev(i, 1, 2, 0, "ActivityScheduled", `"name":"`+getKV+`","input":`+jstr(getKVInput(src, key))),
			cev(i, 1, 3, 2, "ActivityCompleted", `"result":`+jstr(res)),
			cev(i, 1, 4, 0, "OrchestrationCompleted", `"output":"true"`),
		}}}},
	})
}
