package dx_test

// Audit: failure paths (poison messages, unregistered handlers, panics, retry edge cases, error
// display texts), compared with what duroxide 0.1.30 would store. Expected histories derived by
// hand from duroxide's source (alpinevm/duroxide @ 23063eb, 0.1.29+, plus 0.1.30's
// parent_execution_id as recorded in shared/golden/duroxide-0.1.30):
//   - runtime/dispatchers/worker.rs:370-445 handle_poison_message: attempt_count > max_attempts →
//     ActivityFailed{Poison{attempt_count, max_attempts, Activity{instance, execution_id,
//     activity_name, activity_id}, message: serde JSON of the fetched WorkItem}} (line 315/428).
//   - worker.rs:498-503, 700-729: an unregistered activity is abandoned with backoff (attempt kept).
//   - worker.rs:546-556: an activity runs in tokio::spawn; a panic is a JoinError, reported through
//     handle_activity_error as Application{ActivityFailed, join_error.to_string(), retryable false}.
//   - runtime/dispatchers/orchestration.rs:549-560, 1209-1404 fail_orchestration_as_poison: message =
//     serde JSON of item.messages; empty history → OrchestrationStarted{version: item.version} (the
//     provider's "unknown" for a start without version); parent gets SubOrchFailed{Poison}
//     (1370-1388); metadata parent_instance_id. history_error → OrchestrationFailed at event_id 99999
//     with FailedDeserialization{error}, message = the error (1237-1280).
//   - orchestration.rs:679-704: an unregistered orchestration is abandoned with backoff.
//   - runtime/replay_engine.rs:274-303, 356-380: an ActivityFailed / SubOrchFailed whose details are
//     not Application aborts the turn; the orchestration fails with those details.
//   - replay_engine.rs:561-577, 665-684: an orchestration panic → Application{Panicked, msg}; the
//     panicking poll's emitted actions are discarded (return before convert_emitted_actions).
//   - lib.rs:2926-2985 schedule_activity_with_retry: per-attempt timeout = select2(activity, timer);
//     a timeout returns Err("timeout: activity timed out") at once; the dropped activity leaves
//     ActivityCancelRequested "dropped_future" (finalize_turn → collect_cancelled_from_context)
//     before OrchestrationFailed; a zero backoff schedules no timer.
//   - lib.rs:1000-1046 display_message.
// Expected folders are written to a temp dir and compared exactly as TestGolden compares.

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// ---- runner: runGolden with poison-friendly runtime options ----

func poisonOptions(cacheSize int) dx.Options {
	return dx.Options{
		OrchestrationConcurrency: 1,
		WorkerConcurrency:        1,
		MinPollInterval:          20 * time.Millisecond,
		PollTimeout:              200 * time.Millisecond,
		Logger:                   testLogger(),
		ExecutorCacheSize:        cacheSize,
		MaxAttempts:              2,
		UnregisteredBackoff:      5 * time.Millisecond,
		UnregisteredBackoffMax:   20 * time.Millisecond,
	}
}

func newPoisonEnv(t *testing.T, cacheSize int, extensions bool) *goldenEnv {
	p := newProvider(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	var rp provider.Provider = p
	if extensions {
		rp = newExtProvider(p)
	}
	return &goldenEnv{t: t, ctx: ctx, p: p, rt: dx.NewRuntime(rp, poisonOptions(cacheSize)), c: dx.NewClient(rp)}
}

// runPoisonCase writes the expected folder and runs it in the three modes; unlike runGolden it
// always compares (a case whose instance never finishes shows its differences).
func runPoisonCase(t *testing.T, folder string, prog goldenProgram, insts []canInst) {
	dir := writeCanFolder(t, folder, insts)
	modes := []struct {
		name  string
		cache int
		ext   bool
	}{{"replay", -1, false}, {"cached", 0, false}, {"extensions", 0, true}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			want := loadGolden(t, dir)
			g := newPoisonEnv(t, m.cache, m.ext)
			prog.register(g)
			prog.drive(g)
			compareGolden(t, g, want)
		})
	}
}

// waitUpTo waits at most d for each instance to finish; it reports the ones that did not.
func (g *goldenEnv) waitUpTo(d time.Duration, instances ...string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(g.ctx, d)
	defer cancel()
	for _, id := range instances {
		if st, err := g.c.Wait(ctx, id); err != nil {
			g.t.Errorf("%s did not finish within %s (state %s): %v", id, d, st.State, err)
		}
	}
}

// ---- expected-detail builders ----

func pPoison(attempts, max int, messageType, message string) string {
	return fmt.Sprintf(`{"Poison":{"attempt_count":%d,"max_attempts":%d,"message_type":%s,"message":%s}}`,
		attempts, max, messageType, jstr(message))
}

func pActivityType(inst, name string, id int) string {
	return fmt.Sprintf(`{"Activity":{"instance":%s,"execution_id":1,"activity_name":%s,"activity_id":%d}}`, jstr(inst), jstr(name), id)
}

func pOrchType(inst string) string {
	return fmt.Sprintf(`{"Orchestration":{"instance":%s,"execution_id":1}}`, jstr(inst))
}

func pPanicked(msg string) string {
	return `{"Application":{"kind":"Panicked","message":` + jstr(msg) + `,"retryable":false}}`
}

func pActFailed(msg string) string {
	return `{"Application":{"kind":"ActivityFailed","message":` + jstr(msg) + `,"retryable":false}}`
}

func one(in canInst, events ...string) canInst {
	in.execs = []canExec{{status: in.status, output: in.text, events: events}}
	return in
}

// ---- poison and unregistered handlers ----

func TestAuditPoisonUnregistered(t *testing.T) {
	t.Parallel()
	// 1. An activity no node registers: abandoned with backoff, poison on fetch max_attempts+1;
	// the poison ActivityFailed aborts the orchestration with the Poison details themselves.
	t.Run("p01-activity-unregistered", func(t *testing.T) {
		t.Parallel()
		i := "poison-act"
		msg := `{"ActivityExecute":{"instance":"poison-act","execution_id":1,"id":2,"name":"Missing","input":"\"x\""}}`
		d := pPoison(3, 2, pActivityType(i, "Missing", 2), msg)
		runPoisonCase(t, "p01-activity-unregistered", goldenProgram{
			register: func(g *goldenEnv) {
				dx.Register(g.rt, "CallsMissing", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Missing", "x").Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("CallsMissing", i, nil)
				g.waitUpTo(5*time.Second, i)
			},
		}, []canInst{one(canInst{id: i, name: "CallsMissing", status: "Failed",
			text: "poison: activity Missing#2 exceeded 3 attempts (max 2)"},
			aStarted(i, "CallsMissing", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Missing","input":"\"x\""`),
			aev(i, 3, 2, "ActivityFailed", `"details":`+d),
			aev(i, 4, 0, "OrchestrationFailed", `"details":`+d),
		)})
	})

	// 2. An orchestration no node registers, started without a version: the provider's item
	// version is "unknown", and the poison path records it in OrchestrationStarted and metadata.
	t.Run("p02-orchestration-unregistered", func(t *testing.T) {
		t.Parallel()
		i := "poison-orch"
		msg := `[{"StartOrchestration":{"instance":"poison-orch","orchestration":"MissingOrch","input":"null","version":null,"parent_instance":null,"parent_id":null,"execution_id":1}}]`
		d := pPoison(3, 2, pOrchType(i), msg)
		runPoisonCase(t, "p02-orchestration-unregistered", goldenProgram{
			register: func(g *goldenEnv) {},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("MissingOrch", i, nil)
				g.waitUpTo(5*time.Second, i)
			},
		}, []canInst{one(canInst{id: i, name: "MissingOrch", version: "unknown", status: "Failed",
			text: "poison: orchestration poison-orch exceeded 3 attempts (max 2)"},
			cStarted(i, 1, "MissingOrch", "unknown", "null", "", 0, ""),
			aev(i, 2, 0, "OrchestrationFailed", `"details":`+d),
		)})
	})

	// 3. A sub-orchestration no node registers: the poisoned child tells its parent
	// (SubOrchFailed with the Poison details), which aborts with those details.
	t.Run("p03-suborchestration-unregistered", func(t *testing.T) {
		t.Parallel()
		p, c := "poison-parent", "poison-parent::sub::2"
		msg := `[{"StartOrchestration":{"instance":"poison-parent::sub::2","orchestration":"MissingChild","input":"null","version":null,"parent_instance":"poison-parent","parent_id":2,"parent_execution_id":1,"execution_id":1}}]`
		d := pPoison(3, 2, pOrchType(c), msg)
		text := "poison: orchestration poison-parent::sub::2 exceeded 3 attempts (max 2)"
		runPoisonCase(t, "p03-suborchestration-unregistered", goldenProgram{
			register: func(g *goldenEnv) {
				dx.Register(g.rt, "ParentOfMissing", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.CallSub[dx.Raw](ctx, "MissingChild", nil).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("ParentOfMissing", p, nil)
				g.waitUpTo(5*time.Second, c)
				g.waitUpTo(1500*time.Millisecond, p)
			},
		}, []canInst{
			one(canInst{id: p, name: "ParentOfMissing", status: "Failed", text: text},
				aStarted(p, "ParentOfMissing", "null", "", 0),
				aev(p, 2, 0, "SubOrchestrationScheduled", `"name":"MissingChild","instance":"sub::2","input":"null"`),
				aev(p, 3, 2, "SubOrchestrationFailed", `"details":`+d),
				aev(p, 4, 0, "OrchestrationFailed", `"details":`+d),
			),
			one(canInst{id: c, name: "MissingChild", version: "unknown", parent: p, status: "Failed", text: text},
				cStarted(c, 1, "MissingChild", "unknown", "null", p, 2, ""),
				aev(c, 2, 0, "OrchestrationFailed", `"details":`+d),
			),
		})
	})
}

// ---- panics ----

func TestAuditPoisonPanics(t *testing.T) {
	t.Parallel()
	// 4. An orchestration that panics after scheduling more work in the same turn: Panicked with
	// the panic message; the panicking poll's new schedules are not recorded.
	t.Run("p04-orchestration-panic", func(t *testing.T) {
		t.Parallel()
		i := "panic-orch"
		runPoisonCase(t, "p04-orchestration-panic", goldenProgram{
			register: func(g *goldenEnv) {
				registerEcho(g)
				dx.Register(g.rt, "PanicsLate", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					if _, err := dx.Call[dx.Raw](ctx, "Echo", "a").Await(ctx); err != nil {
						return "", err
					}
					_ = dx.Call[dx.Raw](ctx, "Echo", "b")
					_ = ctx.Timer(time.Hour)
					panic("boom")
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("PanicsLate", i, nil)
				g.waitUpTo(5*time.Second, i)
				g.settle()
			},
		}, []canInst{one(canInst{id: i, name: "PanicsLate", status: "Failed", text: "orchestration panicked: boom"},
			aStarted(i, "PanicsLate", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Echo","input":"\"a\""`),
			aev(i, 3, 2, "ActivityCompleted", `"result":"\"a\""`),
			aev(i, 4, 0, "OrchestrationFailed", `"details":`+pPanicked("boom")),
		)})
	})

	// 5. An activity that panics: duroxide reports the tokio JoinError as an ordinary activity
	// failure, Application{ActivityFailed, "task <id> panicked with message \"kaboom\""}; the
	// orchestration sees that text. The task id varies, so kind and text shape are checked.
	t.Run("p05-activity-panic", func(t *testing.T) {
		t.Parallel()
		g := newPoisonEnv(t, -1, false)
		dx.RegisterActivity(g.rt, "Boom", func(context.Context, dx.Raw) (dx.Raw, error) { panic("kaboom") })
		dx.Register(g.rt, "CallsBoom", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
			return dx.Call[dx.Raw](ctx, "Boom", nil).Await(ctx)
		})
		g.startRuntime()
		g.start("CallsBoom", "panic-act", nil)
		g.waitUpTo(5*time.Second, "panic-act")
		hist, err := g.p.Read(g.ctx, "panic-act")
		if err != nil {
			t.Fatal(err)
		}
		rust := regexp.MustCompile(`^task \d+ panicked with message "kaboom"$`)
		for _, ev := range hist {
			var d provider.ErrorDetails
			switch k := ev.Kind.(type) {
			case provider.ActivityFailedEvent:
				d = k.Details
			case provider.OrchestrationFailedEvent:
				d = k.Details
			default:
				continue
			}
			b, _ := json.Marshal(d)
			a, ok := d.Kind.(provider.ApplicationError)
			wantKind := provider.AppActivityFailed
			if ev.EventType() == "OrchestrationFailed" {
				wantKind = provider.AppOrchestrationFailed
			}
			if !ok || a.Kind.Name != wantKind || !rust.MatchString(a.Message) {
				t.Errorf("%s: duroxide stores Application{kind %s, message like %q}; dx stores %s",
					ev.EventType(), wantKind, `task 7 panicked with message "kaboom"`, b)
			}
		}
	})
}

// ---- retry policy edge cases ----

func TestAuditPoisonRetry(t *testing.T) {
	t.Parallel()
	// 6. A retried activity whose attempt times out: no further attempt; the dropped attempt is
	// cancelled ("dropped_future") before the failure.
	t.Run("p06-retry-attempt-timeout", func(t *testing.T) {
		t.Parallel()
		i := "retry-timeout"
		var b *blocker
		runPoisonCase(t, "p06-retry-attempt-timeout", goldenProgram{
			register: func(g *goldenEnv) {
				b = registerBlock(g)
				dx.Register(g.rt, "RetryTimesOut", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Block", "x",
						dx.WithRetry(dx.RetryPolicy{MaxAttempts: 3, Timeout: 300 * time.Millisecond})).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("RetryTimesOut", i, nil)
				g.waitUpTo(5*time.Second, i)
				b.free() // the stolen lock is noticed only at the next renewal
				g.settle()
			},
		}, []canInst{one(canInst{id: i, name: "RetryTimesOut", status: "Failed", text: "timeout: activity timed out"},
			aStarted(i, "RetryTimesOut", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Block","input":"\"x\""`),
			aev(i, 3, 0, "TimerCreated", `"fire_at_ms":300`),
			aev(i, 4, 3, "TimerFired", `"fire_at_ms":300`),
			aev(i, 5, 2, "ActivityCancelRequested", `"reason":"dropped_future"`),
			aev(i, 6, 0, "OrchestrationFailed", `"details":`+aAppFailed("timeout: activity timed out")),
		)})
	})

	// 7. A zero backoff schedules no timer between attempts.
	t.Run("p07-retry-zero-backoff", func(t *testing.T) {
		t.Parallel()
		i := "retry-zero"
		runPoisonCase(t, "p07-retry-zero-backoff", goldenProgram{
			register: func(g *goldenEnv) {
				registerFail(g)
				dx.Register(g.rt, "RetryNoWait", func(ctx dx.Context, _ dx.Raw) (dx.Raw, error) {
					return dx.Call[dx.Raw](ctx, "Fail", "nope",
						dx.WithRetry(dx.RetryPolicy{MaxAttempts: 2, Backoff: dx.FixedBackoff(0)})).Await(ctx)
				})
			},
			drive: func(g *goldenEnv) {
				g.startRuntime()
				g.start("RetryNoWait", i, nil)
				g.waitUpTo(5*time.Second, i)
			},
		}, []canInst{one(canInst{id: i, name: "RetryNoWait", status: "Failed", text: "nope"},
			aStarted(i, "RetryNoWait", "null", "", 0),
			aev(i, 2, 0, "ActivityScheduled", `"name":"Fail","input":"\"nope\""`),
			aev(i, 3, 2, "ActivityFailed", `"details":`+pActFailed("nope")),
			aev(i, 4, 0, "ActivityScheduled", `"name":"Fail","input":"\"nope\""`),
			aev(i, 5, 4, "ActivityFailed", `"details":`+pActFailed("nope")),
			aev(i, 6, 0, "OrchestrationFailed", `"details":`+aAppFailed("nope")),
		)})
	})
}

// ---- corrupted history: FailedDeserialization poison ----

func TestAuditPoisonCorruptHistory(t *testing.T) {
	t.Parallel()
	// 8. History that stops decoding (an event kind from a newer duroxide): abandoned with a 1 s
	// backoff until attempt max_attempts+1, then OrchestrationFailed at the sentinel event_id 99999
	// with Poison{FailedDeserialization{error}, message: error}, appended after the stored rows.
	// (The extensions mode behaves the same; one mode keeps the run short.)
	for _, m := range []struct {
		name string
		ext  bool
	}{{"replay", false}} {
		t.Run(m.name, func(t *testing.T) {
			i := "corrupt"
			g := newPoisonEnv(t, -1, m.ext)
			registerChildWaits(g)
			g.startRuntime()
			g.start("ChildWaits", i, nil)
			g.waitHistory(i, "ExternalSubscribed", 1)
			ks := g.p.Keyspace()
			bad := `{"event_id":3,"source_event_id":null,"instance_id":"corrupt","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.99","type":"FromTheFuture"}` + "\n"
			if err := g.p.Client().Append(g.ctx, ks.History(i, 1), bad).Err(); err != nil {
				t.Fatal(err)
			}
			g.raise(i, "go", `"now"`)
			admin, _ := g.p.Admin()
			deadline := time.Now().Add(3500 * time.Millisecond)
			var info provider.ExecutionInfo
			for {
				var err error
				info, err = admin.GetExecutionInfo(g.ctx, i, 1)
				if err == nil && info.Status == provider.StatusFailed || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if info.Status != provider.StatusFailed {
				t.Fatalf("execution status %q after 3.5 s; duroxide poisons it after 2 abandons of 1 s", info.Status)
			}
			out := ""
			if info.Output != nil {
				out = *info.Output
			}
			const prefix = "poison: orchestration corrupt history deserialization failed after 3 attempts (max 2): "
			if !strings.HasPrefix(out, prefix) {
				t.Errorf("execution output %q; want it to start with %q", out, prefix)
			}
			raw, err := g.p.Client().Get(g.ctx, ks.History(i, 1)).Result()
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
			var last map[string]any
			_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
			if fmt.Sprint(last["type"]) != "OrchestrationFailed" || fmt.Sprint(last["event_id"]) != "99999" {
				t.Errorf("last stored row %s; duroxide appends OrchestrationFailed with event_id 99999", lines[len(lines)-1])
			}
			poison, _ := last["details"].(map[string]any)["Poison"].(map[string]any)
			fd, _ := poison["message_type"].(map[string]any)["FailedDeserialization"].(map[string]any)
			if fd == nil || poison["message"] != fd["error"] || fmt.Sprint(poison["attempt_count"]) != "3" {
				t.Errorf("poison details %v; duroxide: FailedDeserialization{instance, execution_id, error: E}, message: E, attempt_count 3", last["details"])
			}
		})
	}
}

// ---- display texts ----

func TestAuditPoisonDisplayTexts(t *testing.T) {
	t.Parallel()
	msg := "bad replay"
	cases := []struct {
		d    provider.ErrorDetails
		want string
	}{
		{provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "ack_orchestration_item", Message: "database is locked", Retryable: true}},
			"infrastructure:ack_orchestration_item: database is locked"},
		{provider.ErrorDetails{Kind: provider.ConfigurationError{Kind: "Nondeterminism", Resource: "r", Message: &msg}}, "nondeterministic: bad replay"},
		{provider.ErrorDetails{Kind: provider.ConfigurationError{Kind: "Nondeterminism", Resource: "r"}}, "nondeterministic in r"},
		{provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppActivityFailed}, Message: "m1"}}, "m1"},
		{provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppOrchestrationFailed}, Message: "m2"}}, "m2"},
		{provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppPanicked}, Message: "p"}}, "orchestration panicked: p"},
		{provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppCancelled, Reason: "why"}}}, "canceled: why"},
		{provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 11, MaxAttempts: 10, Message: "{}",
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonOrchestration{Instance: "i", ExecutionID: 1}}}},
			"poison: orchestration i exceeded 11 attempts (max 10)"},
		{provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 5, MaxAttempts: 3, Message: "{}",
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: "i", ExecutionID: 1, ActivityName: "A", ActivityID: 42}}}},
			"poison: activity A#42 exceeded 5 attempts (max 3)"},
		{provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 3, MaxAttempts: 2, Message: "e",
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonFailedDeserialization{Instance: "i", ExecutionID: 1, Error: "e"}}}},
			"poison: orchestration i history deserialization failed after 3 attempts (max 2): e"},
	}
	for _, c := range cases {
		if got := (&dx.Error{Details: c.d}).Error(); got != c.want {
			t.Errorf("display of %+v: want %q, got %q", c.d, c.want, got)
		}
	}
	// Serde shape of a Poison detail.
	b, err := json.Marshal(cases[8].d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"Poison":{"attempt_count":5,"max_attempts":3,"message_type":{"Activity":{"instance":"i","execution_id":1,"activity_name":"A","activity_id":42}},"message":"{}"}}`
	if string(b) != want {
		t.Errorf("Poison JSON: want %s, got %s", want, b)
	}
}
