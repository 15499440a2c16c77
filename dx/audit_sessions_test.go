package dx_test

// Audit: activity sessions, activity tags and orchestration versions, compared with what duroxide
// 0.1.30 would store. Expected histories derived from duroxide's source (alpinevm/duroxide @ 23063eb,
// 0.1.29+) and the 0.1.30 rows in shared/golden/duroxide-0.1.30 and testdata/golden/17, 18:
//   - lib.rs:1126-1137 EventKind::ActivityScheduled{session_id, tag} (skip_serializing_if none: keys
//     absent, not null); replay_engine.rs:1686-1699 action_to_event copies both; 1839-1855 replay
//     matches name, input, session_id and tag.
//   - providers/sqlite.rs:1830-1870 a worker takes a session item only when the session is unowned
//     or its own; 1918-1950 the first fetch claims the session (sessions table keyed by session_id
//     alone, so a session spans executions and instances); an item whose tag the filter does not
//     accept is never fetched (it stays queued; nothing is recorded).
//   - runtime/registry.rs:96-130 Latest = BTreeMap<semver::Version>::next_back; 139-151 an explicit
//     version is an exact BTreeMap lookup (semver 1.x Version derives Eq/Ord over major, minor,
//     patch, pre AND build metadata); 330-349 register_versioned only accepts strictly later versions.
//   - runtime/dispatchers/orchestration.rs:1036-1059 explicit version → semver::Version::parse + exact
//     lookup, else policy; miss → UnregisteredOrchestration → 679-704 abandon with backoff; 549-560
//     attempt_count > max_attempts → 1209-1404 fail_orchestration_as_poison (empty history →
//     OrchestrationStarted{version: item.version} = the start item's version; non-empty history,
//     e.g. the old execution of a ContinueAsNew item → OrchestrationFailed appended to it).
//   - providers/sqlite.rs:1036-1055 item.version of a brand-new instance = the start item's version;
//     944-982 an existing instance's = its stored orchestration_version.
//   - runtime/execution.rs:184-217 sub-orchestration and detached starts carry their version in the
//     StartOrchestration work item only (SubOrchestrationScheduled / OrchestrationChained have none);
//     291-339 ContinueAsNew{version} likewise; the CAN arm enqueues no detached starts.
// Cases are golden folders in a temp dir, run through runGolden / runPoisonCase in three modes.
//
// u02, u03 and TestAuditSessVersionBuildMetadataLatest found differences, since fixed: a start for
// "1.0.0+meta" ran 1.0.0, RegisterVersion panicked on 1.0.0+build.2 after 1.0.0+build.1 (build
// metadata now counts, as in Rust's semver), and a continue-as-new onto an unregistered version
// livelocked (the poison ack wrote OrchestrationStarted id 1 into the old execution, refused as a
// duplicate, forever). Left: duroxide accepts an empty session id or tag; dx refuses them
// (hostile_test.go).

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

type sessStep struct {
	Step  int    `json:"step"`
	Child string `json:"child,omitempty"`
}

// ---- ActivityScheduled fields, sessions, an unserved tag ----

func TestAuditSessFields(t *testing.T) {
	t.Parallel()
	// One instance: a plain activity, three activities on one session scheduled in one turn, one
	// on a session with a tag; then it continues as new and uses the same session again.
	i := "sess-fields"
	unserved := "sess-unserved"
	prog := goldenProgram{
		workerTags: []string{"gpu"},
		register: func(g *goldenEnv) {
			registerEcho(g)
			dx.Register(g.rt, "SessFields", func(ctx dx.Context, in sessStep) (dx.Raw, error) {
				if in.Step == 1 {
					return dx.Call[dx.Raw](ctx, "Echo", "again", dx.OnSession("s-a")).Await(ctx)
				}
				if _, err := dx.Call[dx.Raw](ctx, "Echo", "plain").Await(ctx); err != nil {
					return "", err
				}
				a := dx.Call[dx.Raw](ctx, "Echo", "a1", dx.OnSession("s-a"))
				b := dx.Call[dx.Raw](ctx, "Echo", "a2", dx.OnSession("s-a"))
				c := dx.Call[dx.Raw](ctx, "Echo", "a3", dx.OnSession("s-a"))
				if err := dx.Join(ctx, a, b, c); err != nil {
					return "", err
				}
				if _, err := dx.Call[dx.Raw](ctx, "Echo", "tagged", dx.WithTag("gpu"), dx.OnSession("s-b")).Await(ctx); err != nil {
					return "", err
				}
				return "", dx.ContinueAsNew(ctx, sessStep{Step: 1})
			})
			dx.Register(g.rt, "SessUnserved", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
				return dx.Call[dx.Raw](ctx, "Echo", "never", dx.WithTag("cpu"), dx.OnSession("s-c")).Await(ctx)
			})
		},
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("SessFields", i, sessStep{})
			g.start("SessUnserved", unserved, nil)
			g.wait(i)
			g.waitHistory(unserved, "ActivityScheduled", 1)
			// The tagged activity no worker serves stays queued: nothing more is recorded. First
			// the store is quiet (nothing to fetch or running but that one queued item), then the check.
			waitFor(g.t, "only the unserved activity left", func() bool {
				st, err := g.p.GetQueueStats(g.ctx)
				if err != nil {
					g.t.Fatalf("queue stats: %v", err)
				}
				o, w := st.Orchestrator, st.Worker
				return o.Visible == 0 && o.Locked == 0 && o.LockedInstances == 0 && w.Locked == 0 && w.Unlocked == 1
			})
			if h, err := g.p.Read(g.ctx, unserved); err != nil || len(h) != 2 {
				g.t.Errorf("%s: want 2 events while its activity stays queued, got %d (%v)", unserved, len(h), err)
			}
			if st, err := g.c.Status(g.ctx, unserved); err != nil || st.State != dx.StateRunning {
				g.t.Errorf("%s: want Running, got %v (%v)", unserved, st.State, err)
			}
			g.cancel(unserved, "nobody serves cpu")
			g.wait(unserved)
			g.settle()
		},
	}
	sched := func(inst string, exec, id int, input, extra string) string {
		return cev(inst, exec, id, 0, "ActivityScheduled", `"name":"Echo","input":`+jstr(input)+extra)
	}
	done := func(inst string, exec, id, src int, result string) string {
		return cev(inst, exec, id, src, "ActivityCompleted", `"result":`+jstr(result))
	}
	runCanCase(t, "sess01-fields", prog, []canInst{
		{id: i, name: "SessFields", status: "Completed", text: `"again"`, execs: []canExec{
			{"ContinuedAsNew", `{"step":1}`, []string{
				cStarted(i, 1, "SessFields", "1.0.0", `{"step":0}`, "", 0, ""),
				sched(i, 1, 2, `"plain"`, ""),
				done(i, 1, 3, 2, `"plain"`),
				sched(i, 1, 4, `"a1"`, `,"session_id":"s-a"`),
				sched(i, 1, 5, `"a2"`, `,"session_id":"s-a"`),
				sched(i, 1, 6, `"a3"`, `,"session_id":"s-a"`),
				done(i, 1, 7, 4, `"a1"`),
				done(i, 1, 8, 5, `"a2"`),
				done(i, 1, 9, 6, `"a3"`),
				sched(i, 1, 10, `"tagged"`, `,"session_id":"s-b","tag":"gpu"`),
				done(i, 1, 11, 10, `"tagged"`),
				cev(i, 1, 12, 0, "OrchestrationContinuedAsNew", `"input":"{\"step\":1}"`),
			}},
			{"Completed", `"again"`, []string{
				cStarted(i, 2, "SessFields", "1.0.0", `{"step":1}`, "", 0, ""),
				sched(i, 2, 2, `"again"`, `,"session_id":"s-a"`),
				done(i, 2, 3, 2, `"again"`),
				cev(i, 2, 4, 0, "OrchestrationCompleted", `"output":"\"again\""`),
			}},
		}},
		{id: unserved, name: "SessUnserved", status: "Failed", text: "canceled: nobody serves cpu", execs: []canExec{
			{"Failed", "canceled: nobody serves cpu", []string{
				cStarted(unserved, 1, "SessUnserved", "1.0.0", "null", "", 0, ""),
				sched(unserved, 1, 2, `"never"`, `,"session_id":"s-c","tag":"cpu"`),
				cev(unserved, 1, 3, 0, "OrchestrationCancelRequested", `"reason":"nobody serves cpu"`),
				cev(unserved, 1, 4, 0, "OrchestrationFailed", `"details":`+aCancelled("nobody serves cpu")),
				cev(unserved, 1, 5, 2, "ActivityCancelRequested", `"reason":"orchestration_terminal_failed"`),
			}},
		}},
	})
}

// ---- session affinity: two workers, one store ----

func TestAuditSessAffinity(t *testing.T) {
	t.Parallel()
	// Two runtimes (distinct NodeIDs) on one store. Every activity of a session runs on the node
	// that claimed the session first, across turns, fan-outs and continue-as-new (sqlite.rs
	// 1830-1950: the sessions row is keyed by session_id and owned until its lock expires).
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	ran := map[string][]string{} // session → nodes that ran its activities
	mk := func(node string) *dx.Runtime {
		rt := dx.NewRuntime(p, dx.Options{NodeID: node, WorkerConcurrency: 2, OrchestrationConcurrency: 2,
			MinPollInterval: 5 * time.Millisecond, PollTimeout: 100 * time.Millisecond, Logger: testLogger()})
		dx.RegisterActivity(rt, "Where", func(_ context.Context, sess string) (string, error) {
			mu.Lock()
			ran[sess] = append(ran[sess], node)
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // work that takes a little while
			return node, nil
		})
		dx.Register(rt, "Affine", func(ctx dx.Context, in sessStep) (string, error) {
			sessions := []string{"aff-1", "aff-2", "aff-3", "aff-4"}
			for round := 0; round < 2; round++ {
				var fs []dx.Awaitable
				for _, s := range sessions {
					fs = append(fs, dx.Call[string](ctx, "Where", s, dx.OnSession(s)), dx.Call[string](ctx, "Where", s, dx.OnSession(s)))
				}
				if err := dx.Join(ctx, fs...); err != nil {
					return "", err
				}
			}
			if in.Step == 0 {
				return "", dx.ContinueAsNew(ctx, sessStep{Step: 1})
			}
			return "done", nil
		})
		return rt
	}
	a, b := mk("node-a"), mk("node-b")
	startRuntime(t, a)
	startRuntime(t, b)
	c := dx.NewClient(p)
	if _, err := c.Start(ctx, "Affine", sessStep{}, dx.WithInstanceID("affine")); err != nil {
		t.Fatal(err)
	}
	st, err := c.Wait(ctx, "affine")
	if err != nil || st.State != dx.StateCompleted {
		t.Fatalf("affine: %v %v", st.State, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var keys []string
	for s := range ran {
		keys = append(keys, s)
	}
	sort.Strings(keys)
	for _, s := range keys {
		nodes := ran[s]
		if len(nodes) != 8 {
			t.Errorf("session %s: want 8 activity runs, got %d", s, len(nodes))
		}
		for _, n := range nodes {
			if n != nodes[0] {
				t.Errorf("session %s ran on several nodes: %v", s, nodes)
				break
			}
		}
		t.Logf("session %s → %s", s, nodes[0])
	}
	if len(keys) != 4 {
		t.Errorf("want 4 sessions, got %v", keys)
	}
}

// ---- versions: latest with prereleases, CallSub / detached / continue-as-new with a version ----

func registerPre(g *goldenEnv, versions ...string) {
	for _, v := range versions {
		dx.RegisterVersion(g.rt, "Pre", v, func(ctx dx.Context, in sessStep) (string, error) {
			switch in.Step {
			case 0:
				if err := ctx.StartOrchestration("Pre", "ver-detached", sessStep{Step: 9}, dx.WithVersion("2.0.0-alpha.2")); err != nil {
					return "", err
				}
				child, err := dx.CallSub[string](ctx, "Pre", sessStep{Step: 9}, dx.WithVersion("1.0.0")).Await(ctx)
				if err != nil {
					return "", err
				}
				return "", dx.ContinueAsNew(ctx, sessStep{Step: 1, Child: child}, dx.WithVersion("2.0.0-alpha.2"))
			case 1:
				return "", dx.ContinueAsNew(ctx, sessStep{Step: 2})
			}
			return ctx.Version(), nil
		})
	}
}

func TestAuditSessVersions(t *testing.T) {
	t.Parallel()
	// Latest among 1.0.0 < 2.0.0-alpha.2 < 2.0.0-alpha.10 is 2.0.0-alpha.10 (numeric prerelease
	// identifiers compare numerically). Versions show only in OrchestrationStarted.version.
	i, child, det := "ver-pre", "ver-pre::sub::3", "ver-detached"
	prog := goldenProgram{
		register: func(g *goldenEnv) { registerPre(g, "1.0.0", "2.0.0-alpha.2", "2.0.0-alpha.10") },
		drive: func(g *goldenEnv) {
			g.startRuntime()
			g.start("Pre", i, sessStep{})
			g.wait(i, child, det)
		},
	}
	runCanCase(t, "sess02-versions", prog, []canInst{
		{id: i, name: "Pre", version: "2.0.0-alpha.10", status: "Completed", text: `"2.0.0-alpha.10"`, execs: []canExec{
			{"ContinuedAsNew", `{"step":1,"child":"1.0.0"}`, []string{
				cStarted(i, 1, "Pre", "2.0.0-alpha.10", `{"step":0}`, "", 0, ""),
				cev(i, 1, 2, 0, "OrchestrationChained", `"name":"Pre","instance":"ver-detached","input":"{\"step\":9}"`),
				cev(i, 1, 3, 0, "SubOrchestrationScheduled", `"name":"Pre","instance":"sub::3","input":"{\"step\":9}"`),
				cev(i, 1, 4, 3, "SubOrchestrationCompleted", `"result":"\"1.0.0\""`),
				cev(i, 1, 5, 0, "OrchestrationContinuedAsNew", `"input":"{\"step\":1,\"child\":\"1.0.0\"}"`),
			}},
			{"ContinuedAsNew", `{"step":2}`, []string{
				cStarted(i, 2, "Pre", "2.0.0-alpha.2", `{"step":1,"child":"1.0.0"}`, "", 0, ""),
				cev(i, 2, 2, 0, "OrchestrationContinuedAsNew", `"input":"{\"step\":2}"`),
			}},
			{"Completed", `"2.0.0-alpha.10"`, []string{
				cStarted(i, 3, "Pre", "2.0.0-alpha.10", `{"step":2}`, "", 0, ""),
				cev(i, 3, 2, 0, "OrchestrationCompleted", `"output":"\"2.0.0-alpha.10\""`),
			}},
		}},
		{id: child, name: "Pre", version: "1.0.0", parent: i, status: "Completed", text: `"1.0.0"`, execs: []canExec{
			{"Completed", `"1.0.0"`, []string{
				cStarted(child, 1, "Pre", "1.0.0", `{"step":9}`, i, 3, ""),
				cev(child, 1, 2, 0, "OrchestrationCompleted", `"output":"\"1.0.0\""`),
			}},
		}},
		{id: det, name: "Pre", version: "2.0.0-alpha.2", status: "Completed", text: `"2.0.0-alpha.2"`, execs: []canExec{
			{"Completed", `"2.0.0-alpha.2"`, []string{
				cStarted(det, 1, "Pre", "2.0.0-alpha.2", `{"step":9}`, "", 0, ""),
				cev(det, 1, 2, 0, "OrchestrationCompleted", `"output":"\"2.0.0-alpha.2\""`),
			}},
		}},
	})
}

// ---- versions that no node registers ----

func registerVx(g *goldenEnv) {
	for _, v := range []string{"1.0.0", "2.0.0"} {
		dx.RegisterVersion(g.rt, "Vx", v, func(ctx dx.Context, in sessStep) (string, error) {
			switch in.Step {
			case 1: // continue as new onto a version nobody registers
				return "", dx.ContinueAsNew(ctx, sessStep{Step: 2}, dx.WithVersion("9.0.0"))
			case 3: // a sub-orchestration on a version nobody registers
				return dx.CallSub[string](ctx, "Vx", sessStep{Step: 9}, dx.WithVersion("9.9.9")).Await(ctx)
			}
			return ctx.Version(), nil
		})
	}
}

func startMsg(inst, version, input, parent string, parentID int) string {
	s := fmt.Sprintf(`{"StartOrchestration":{"instance":%s,"orchestration":"Vx","input":%s,"version":%s,`, jstr(inst), jstr(input), jstr(version))
	if parent == "" {
		return s + `"parent_instance":null,"parent_id":null,"execution_id":1}}`
	}
	return s + fmt.Sprintf(`"parent_instance":%s,"parent_id":%d,"parent_execution_id":1,"execution_id":1}}`, jstr(parent), parentID)
}

func TestAuditSessVersionUnregistered(t *testing.T) {
	t.Parallel()
	poisonText := func(inst string) string {
		return "poison: orchestration " + inst + " exceeded 3 attempts (max 2)"
	}
	// 1. Client start with an explicit version nobody registers: abandoned with backoff, then
	// poison; the poison path records OrchestrationStarted with the requested version.
	t.Run("u01-start", func(t *testing.T) {
		t.Parallel()
		i := "ver-missing"
		d := pPoison(3, 2, pOrchType(i), "["+startMsg(i, "3.0.0", `{"step":5}`, "", 0)+"]")
		runPoisonCase(t, "u01-start", goldenProgram{
			register: registerVx,
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Vx", i, sessStep{Step: 5}, dx.WithVersion("3.0.0"))
				g.waitUpTo(5*time.Second, i)
			},
		}, []canInst{one(canInst{id: i, name: "Vx", version: "3.0.0", status: "Failed", text: poisonText(i)},
			cStarted(i, 1, "Vx", "3.0.0", `{"step":5}`, "", 0, ""),
			aev(i, 2, 0, "OrchestrationFailed", `"details":`+d),
		)})
	})

	// 2. The same with build metadata: semver 1.x's Version Eq/Ord include build metadata, so
	// "1.0.0+meta" is not the registered "1.0.0" (BTreeMap::get misses): unregistered → poison.
	t.Run("u02-start-build-metadata", func(t *testing.T) {
		t.Parallel()
		i := "ver-meta"
		d := pPoison(3, 2, pOrchType(i), "["+startMsg(i, "1.0.0+meta", `{"step":5}`, "", 0)+"]")
		runPoisonCase(t, "u02-start-build-metadata", goldenProgram{
			register: registerVx,
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Vx", i, sessStep{Step: 5}, dx.WithVersion("1.0.0+meta"))
				g.waitUpTo(5*time.Second, i)
			},
		}, []canInst{one(canInst{id: i, name: "Vx", version: "1.0.0+meta", status: "Failed", text: poisonText(i)},
			cStarted(i, 1, "Vx", "1.0.0+meta", `{"step":5}`, "", 0, ""),
			aev(i, 2, 0, "OrchestrationFailed", `"details":`+d),
		)})
	})

	// 3. Continue-as-new onto a version nobody registers: the ContinueAsNew item is abandoned, then
	// poisoned; the poison path sees the OLD execution's history (non-empty), so it appends
	// OrchestrationFailed to execution 1 after OrchestrationContinuedAsNew; no execution 2.
	t.Run("u03-continue-as-new", func(t *testing.T) {
		t.Parallel()
		i := "ver-can-missing"
		msg := `[{"ContinueAsNew":{"instance":"ver-can-missing","orchestration":"Vx","input":"{\"step\":2}","version":"9.0.0","carry_forward_events":[]}}]`
		d := pPoison(3, 2, pOrchType(i), msg)
		runPoisonCase(t, "u03-continue-as-new", goldenProgram{
			register: registerVx,
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Vx", i, sessStep{Step: 1})
				// duroxide poisons it on the third fetch (~20 ms here); dx never terminates it.
				g.waitUpTo(1500*time.Millisecond, i)
			},
		}, []canInst{one(canInst{id: i, name: "Vx", version: "2.0.0", status: "Failed", text: poisonText(i)},
			cStarted(i, 1, "Vx", "2.0.0", `{"step":1}`, "", 0, ""),
			aev(i, 2, 0, "OrchestrationContinuedAsNew", `"input":"{\"step\":2}"`),
			aev(i, 3, 0, "OrchestrationFailed", `"details":`+d),
		)})
	})

	// 4. A sub-orchestration on a version nobody registers: the child is poisoned with the
	// requested version; the parent gets SubOrchFailed{Poison} and fails with those details.
	t.Run("u04-suborchestration", func(t *testing.T) {
		t.Parallel()
		p, c := "ver-subpar", "ver-subpar::sub::2"
		d := pPoison(3, 2, pOrchType(c), "["+startMsg(c, "9.9.9", `{"step":9}`, p, 2)+"]")
		runPoisonCase(t, "u04-suborchestration", goldenProgram{
			register: registerVx,
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("Vx", p, sessStep{Step: 3}, dx.WithVersion("1.0.0"))
				g.waitUpTo(5*time.Second, c)
				g.waitUpTo(1500*time.Millisecond, p)
			},
		}, []canInst{
			one(canInst{id: p, name: "Vx", version: "1.0.0", status: "Failed", text: poisonText(c)},
				cStarted(p, 1, "Vx", "1.0.0", `{"step":3}`, "", 0, ""),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"Vx","instance":"sub::2","input":"{\"step\":9}"`),
				aev(p, 3, 2, "SubOrchestrationFailed", `"details":`+d),
				aev(p, 4, 0, "OrchestrationFailed", `"details":`+d),
			),
			one(canInst{id: c, name: "Vx", version: "9.9.9", parent: p, status: "Failed", text: poisonText(c)},
				cStarted(c, 1, "Vx", "9.9.9", `{"step":9}`, p, 2, ""),
				aev(c, 2, 0, "OrchestrationFailed", `"details":`+d),
			),
		})
	})
}

// ---- build metadata in registrations ----

func TestAuditSessVersionBuildMetadataLatest(t *testing.T) {
	t.Parallel()
	// duroxide registers 1.0.0+build.1 then 1.0.0+build.2 (strictly later under semver 1.x Ord,
	// registry.rs:342-345) and Latest picks 1.0.0+build.2.
	i := "ver-build"
	prog := goldenProgram{
		register: func(g *goldenEnv) {
			for _, v := range []string{"1.0.0+build.1", "1.0.0+build.2"} {
				func() {
					defer func() {
						if r := recover(); r != nil {
							g.t.Errorf("RegisterVersion(%q) after 1.0.0+build.1: dx panics (%v); duroxide accepts it as a later version", v, r)
						}
					}()
					dx.RegisterVersion(g.rt, "Built", v, func(ctx dx.Context, _ dx.Raw) (string, error) { return ctx.Version(), nil })
				}()
			}
		},
		drive: func(g *goldenEnv) {
			if g.t.Failed() {
				return
			}
			g.startRuntime()
			g.start("Built", i, nil)
			g.wait(i)
		},
	}
	dir := writeCanFolder(t, "sess03-build-metadata", []canInst{
		one(canInst{id: i, name: "Built", version: "1.0.0+build.2", status: "Completed", text: `"1.0.0+build.2"`},
			cStarted(i, 1, "Built", "1.0.0+build.2", "null", "", 0, ""),
			aev(i, 2, 0, "OrchestrationCompleted", `"output":"\"1.0.0+build.2\""`),
		),
	})
	runGolden(t, dir, prog, 0, false)
}
