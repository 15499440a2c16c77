package dx

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"

	"github.com/duroxide-go/dxredis/provider"
)

// Nondeterminism: what finds it (the replay engine, when the code no longer reproduces a stored
// history; a replay check, when a turn and a fresh replay of the same stored history differ) and
// what the runtime does then (Options.OnNondeterminism).

// PoisonPolicy says what happens to an item (activity or orchestration turn) delivered more often
// than Options.MaxAttempts.
type PoisonPolicy int

const (
	// FailPoison fails it with a poison error (duroxide's rule; the default).
	FailPoison PoisonPolicy = iota
	// HoldPoison parks it as a dead letter: nothing is written to its history until it is
	// redriven (run again with a fresh delivery count) or, for an activity, discarded (failed as
	// FailPoison would).
	HoldPoison
)

// NondeterminismPolicy says what a turn does when its code no longer reproduces the history.
type NondeterminismPolicy int

const (
	// FailOnNondeterminism records the nondeterminism failure: the instance fails for good, as in
	// duroxide. The default.
	FailOnNondeterminism NondeterminismPolicy = iota
	// HoldOnNondeterminism writes nothing: the turn is abandoned (without counting an attempt, so
	// it never becomes poison) and tried again after HoldRetryDelay, with a warning log naming the
	// instance, the event and both sides, and MetricNondeterminism (Result "held"). The instance
	// stays Running, its history untouched, until code that reproduces its history takes the turn:
	// rolling back a bad deploy resumes it. With a provider that implements provider.Holder
	// (redisprovider does) the hold and its reason show in Client.Status (Held) and dxctl show
	// until the next stored turn. An instance held by a replay check (ReplayCheckRate) is tried
	// again from a fresh replay, the cache dropped: from there on it goes on as a restart would.
	HoldOnNondeterminism
)

// nondetReport names where a turn's code stopped reproducing what it should: the event and both
// sides, for the log.
type nondetReport struct {
	event        uint64
	want, got    string // the history's (or the turn's) side, the code's (or the replay's) side
	wantK, gotK  string // the log's names for them
	foundByCheck bool
}

// report describes a nondeterminism outcome for the log.
func (o outcome) report() nondetReport {
	if m := o.mismatch; m != nil {
		return nondetReport{event: m.eventID, want: m.history, got: m.code, wantK: "history", gotK: "code"}
	}
	return nondetReport{want: displayMessage(o.details), wantK: "error"}
}

// checkDue decides whether this turn is checked against a replay.
func (rt *Runtime) checkDue() bool {
	r := rt.opts.ReplayCheckRate
	return r > 0 && (r >= 1 || rand.Float64() < r)
}

// checkTurn runs the turn's item again, ReplayCheckRuns times, from a fresh replay of its stored
// history, and compares the events each run records with the turn's. When they all agree it
// returns the turn unchanged. Otherwise the code is nondeterministic: it returns the turn that
// fails the instance (the replay's own failure when the replay no longer matches the stored
// history, else a nondeterminism failure naming the first event that differs), marked nondet so
// that OnNondeterminism may hold it instead.
func (rt *Runtime) checkTurn(ctx context.Context, log *slog.Logger, item *provider.OrchestrationItem, out turnOutput) turnOutput {
	ref := *item
	if lite, ok := rt.p.(provider.LiteFetcher); ok && len(ref.KVSnapshot) == 0 && ref.ExecutionID > 1 && !continuesAsNew(&ref) {
		// A kept engine's turn skipped reading the KV that earlier executions left; a replay needs it.
		_, kv, _, err := lite.ReadForReplay(ctx, ref.Instance, ref.ExecutionID)
		if err != nil {
			log.Debug("dx: replay check skipped: reading the KV snapshot failed", "error", err)
			return out
		}
		ref.KVSnapshot = kv
	}
	env := rt.turnEnv()
	env.logger = slog.New(slog.DiscardHandler) // the turn itself logged what the code logs
	labels := Labels{Queue: "orchestrator", Orchestration: out.name, Version: out.version}
	for range rt.opts.ReplayCheckRuns {
		again := runTurn(env, &ref)
		if again.outcome.nondet {
			// The replay no longer matches the stored history: what a restart would record.
			labels.Result = "mismatch"
			rt.opts.Metrics.Count(MetricReplayChecks, 1, labels)
			return again
		}
		i, differs := firstDifference(out.ack.HistoryDelta, again.ack.HistoryDelta)
		if !differs {
			continue
		}
		labels.Result = "mismatch"
		rt.opts.Metrics.Count(MetricReplayChecks, 1, labels)
		r := nondetReport{want: "nothing", got: "nothing", wantK: "turn", gotK: "replay", foundByCheck: true}
		if i < len(out.ack.HistoryDelta) {
			r.event, r.want = out.ack.HistoryDelta[i].EventID, describeCode(out.ack.HistoryDelta[i])
		}
		if i < len(again.ack.HistoryDelta) {
			r.event, r.got = again.ack.HistoryDelta[i].EventID, describeCode(again.ack.HistoryDelta[i])
		}
		env.failWith = nondeterminism("event %d: this turn %s, but a replay of the same history %s: the code reads "+
			"something a replay does not reproduce (time.Now, a map's order, a random number, a global...)", r.event, r.want, r.got)
		failed := runTurn(env, &ref)
		failed.outcome.mismatch = nil
		failed.check = &r
		return failed
	}
	labels.Result = "ok"
	rt.opts.Metrics.Count(MetricReplayChecks, 1, labels)
	return out
}

// firstDifference returns the first position where two turns' events record different things
// (sameEvent: timestamps and timer fire times aside), and whether there is one.
func firstDifference(a, b []provider.Event) (int, bool) {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || !sameEvent(a[i], b[i]) {
			return i, true
		}
	}
	return 0, false
}

// onNondeterminism handles a turn whose code no longer reproduces its history: it counts and,
// under HoldOnNondeterminism, abandons the turn (nothing written) and reports true; under
// FailOnNondeterminism it reports false and the caller acknowledges the failure.
func (rt *Runtime) onNondeterminism(ctx context.Context, log *slog.Logger, token string, out turnOutput) bool {
	r := out.outcome.report()
	if out.check != nil {
		r = *out.check
	}
	hold := rt.opts.OnNondeterminism == HoldOnNondeterminism
	labels := Labels{Queue: "orchestrator", Orchestration: out.name, Version: out.version, Result: "failed"}
	if hold {
		labels.Result = "held"
	}
	rt.opts.Metrics.Count(MetricNondeterminism, 1, labels)
	attrs := []any{"event", r.event, r.wantK, r.want}
	if r.gotK != "" {
		attrs = append(attrs, r.gotK, r.got)
	}
	if r.foundByCheck {
		attrs = append(attrs, "found_by", "replay check")
	}
	if !hold {
		log.Error("dx: nondeterminism: the orchestration fails (Options.OnNondeterminism: HoldOnNondeterminism would hold it instead)", attrs...)
		return false
	}
	attrs = append(attrs, "retry_in", rt.opts.HoldRetryDelay)
	log.Warn("dx: nondeterminism: the instance is held, nothing written; it resumes when code that replays its history "+
		"(the previous deploy) takes the turn", attrs...)
	if h, ok := rt.p.(provider.Holder); ok {
		// Operators see the hold (Client.Status's Held, dxctl show) until a turn is acknowledged.
		if err := h.HoldOrchestrationItem(ctx, token, rt.opts.HoldRetryDelay, r.holdReason()); err != nil {
			log.Warn("dx: hold failed; the lock expires instead", "error", err)
		}
		return true
	}
	rt.abandonTurn(ctx, log, token, rt.opts.HoldRetryDelay, true)
	return true
}

// holdReason is the note a held instance shows (provider.Holder): what the history has and what
// the code does instead, at most 1,024 bytes.
func (r nondetReport) holdReason() string {
	s := "nondeterminism"
	if r.event != 0 {
		s += fmt.Sprintf(" at event %d", r.event)
	}
	s += ": " + r.wantK + " " + r.want
	if r.gotK != "" {
		s += "; " + r.gotK + " " + r.got
	}
	if len(s) > 1024 {
		s = strings.ToValidUTF8(s[:1021], "") + "..."
	}
	return s
}

// checkable reports whether a turn's outcome is worth a replay check: not one that already failed
// for a reason other than the code's (a system failure: nondeterminism found, an activity's poison,
// code that blocked until the BlockingGuard).
func checkable(o outcome) bool {
	if o.result != turnFailed {
		return true
	}
	_, app := o.details.Kind.(provider.ApplicationError)
	return app
}
