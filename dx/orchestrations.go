package dx

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The orchestration dispatcher: fetch a turn, run it, acknowledge it.

// capabilityFilter is sent on every orchestration fetch: executions pinned to a duroxide version
// this engine reproduces.
var capabilityFilter = func() *provider.DispatcherCapabilityFilter {
	r, err := provider.NewSemverRange("0.0.0", DuroxideVersion)
	if err != nil {
		panic(err)
	}
	return &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r}}
}()

func (rt *Runtime) orchestrationLoop(ctx context.Context) {
	rt.pollLoop(ctx, "orchestrator", func() (bool, error) {
		began := time.Now()
		item, err := rt.p.FetchOrchestrationItem(ctx, rt.opts.OrchestrationLockTimeout, rt.opts.PollTimeout, capabilityFilter)
		rt.opts.Metrics.Observe(MetricFetchWait, time.Since(began), Labels{Queue: "orchestrator"})
		if err != nil || item == nil {
			return false, err
		}
		rt.processOrchestration(ctx, item)
		return true, nil
	})
}

func (rt *Runtime) turnEnv() turnEnv {
	return turnEnv{reg: rt.reg, clock: rt.opts.Clock, guard: rt.opts.BlockingGuard, logger: rt.opts.Logger}
}

// processOrchestration runs one fetched turn and acknowledges it.
func (rt *Runtime) processOrchestration(ctx context.Context, locked *provider.LockedOrchestrationItem) {
	item := &locked.Item
	log := rt.opts.Logger.With("instance", item.Instance, "execution", item.ExecutionID,
		"orchestration", item.OrchestrationName, "version", item.Version, "attempt", locked.AttemptCount)
	// Acks and abandons must not be cut short by a shutdown that stops fetching.
	bg := context.WithoutCancel(ctx)
	token := locked.LockToken
	fl, finish := rt.track(func(c context.Context) { rt.abandonTurn(c, log, token, 0, true) })
	defer finish()
	stopRenew := renewing(renewEvery(rt.opts.OrchestrationLockTimeout, rt.opts.OrchestrationLockRenewalBuffer),
		func() error { return rt.p.RenewOrchestrationItemLock(bg, token, rt.opts.OrchestrationLockTimeout) },
		func(err error) {
			log.Warn("dx: orchestration lock renewal failed; the turn's ack will be refused", "error", err)
		})
	defer stopRenew()

	labels := Labels{Orchestration: item.OrchestrationName}
	if locked.AttemptCount > rt.opts.MaxAttempts {
		log.Error("dx: orchestration item exceeded max attempts: failing it as poison", "max_attempts", rt.opts.MaxAttempts)
		rt.opts.Metrics.Count(MetricPoison, 1, Labels{Queue: "orchestrator", Orchestration: item.OrchestrationName})
		rt.ackTurn(bg, log, fl, token, rt.poisonAck(item, locked.AttemptCount), labels)
		return
	}
	if item.HistoryError != "" {
		log.Warn("dx: history does not decode; abandoning so a node that can read it may take it (poison after max attempts)",
			"error", item.HistoryError)
		rt.abandonTurn(bg, log, token, time.Second, false)
		return
	}
	began := time.Now()
	env := rt.turnEnv()
	env.cached, env.keep = rt.cache.take(item.Instance), rt.cache != nil
	out := runTurn(env, item)
	kept := false
	defer func() {
		if !kept && out.eng != nil {
			out.eng.stop()
		}
	}()
	if env.cached != nil {
		rt.opts.Metrics.Count(MetricCacheHits, 1, Labels{Orchestration: item.OrchestrationName})
	}
	if out.plan == planAbandon {
		delay := rt.unregisteredDelay(locked.AttemptCount)
		log.Warn("dx: orchestration (or this version) not registered on this node; abandoning with backoff",
			"wanted_version", out.version, "retry_in", delay, "attempts_left", int(rt.opts.MaxAttempts)-int(locked.AttemptCount))
		rt.opts.Metrics.Count(MetricUnregistered, 1, Labels{Queue: "orchestrator", Orchestration: out.name, Version: out.version})
		rt.abandonTurn(bg, log, token, delay, false)
		return
	}
	o := out.outcome
	labels.Version, labels.Result = out.version, o.result.String()
	rt.opts.Metrics.Observe(MetricTurnDuration, time.Since(began), labels)
	if o.panic != nil {
		log.Error("dx: orchestration panicked", "error", displayMessage(o.details), "stack", string(o.panic))
	}
	if !rt.ackTurn(bg, log, fl, token, out.ack, labels) {
		return
	}
	if out.eng != nil {
		out.eng.commit()
		rt.cache.put(out.eng)
		kept = true
	}
	rt.opts.Metrics.Count(MetricTurns, 1, labels)
	switch o.result {
	case turnCompleted:
		log.Info("dx: orchestration completed", "execution", out.exec, "version", out.version)
	case turnFailed:
		lvl := slog.LevelWarn
		if _, app := o.details.Kind.(provider.ApplicationError); !app {
			lvl = slog.LevelError
		}
		log.Log(bg, lvl, "dx: orchestration failed", "execution", out.exec, "version", out.version, "error", displayMessage(o.details))
	case turnContinuedAsNew:
		log.Info("dx: orchestration continued as new", "execution", out.exec, "version", out.version)
	case turnCancelled:
		log.Info("dx: orchestration cancelled", "execution", out.exec, "reason", o.reason)
	default:
		log.Debug("dx: orchestration turn", "execution", out.exec, "version", out.version, "events", len(out.ack.HistoryDelta))
	}
}

func (r turnResult) String() string {
	return [...]string{"continue", "completed", "failed", "continued_as_new", "cancelled"}[r]
}

// ackTurn acknowledges a turn, retrying retryable failures with the same token; if it still fails
// it abandons the turn so that it runs again (the ack changed nothing).
func (rt *Runtime) ackTurn(ctx context.Context, log *slog.Logger, fl *flight, token string, ack provider.OrchestrationAck, labels Labels) bool {
	if !rt.owned(fl) {
		log.Warn("dx: turn finished after shutdown abandoned it; its result is dropped (the turn runs again elsewhere)")
		return false
	}
	const tries = 5
	for i := 1; ; i++ {
		err := rt.p.AckOrchestrationItem(ctx, token, ack)
		if err == nil {
			return true
		}
		rt.opts.Metrics.Count(MetricAckFailures, 1, Labels{Queue: "orchestrator", Orchestration: labels.Orchestration})
		if !provider.IsRetryable(err) || i == tries {
			log.Error("dx: orchestration ack failed; abandoning the turn", "error", err, "tries", i)
			rt.abandonTurn(ctx, log, token, 50*time.Millisecond, false)
			return false
		}
		log.Warn("dx: orchestration ack failed, retrying with the same token", "error", err, "try", i)
		time.Sleep(time.Duration(i) * 20 * time.Millisecond)
	}
}

func (rt *Runtime) abandonTurn(ctx context.Context, log *slog.Logger, token string, delay time.Duration, ignoreAttempt bool) {
	if err := rt.p.AbandonOrchestrationItem(ctx, token, delay, ignoreAttempt); err != nil {
		log.Warn("dx: abandon failed; the lock expires instead", "error", err)
		return
	}
	log.Debug("dx: orchestration item abandoned", "delay", delay)
}

// poisonAck fails an execution whose item was fetched more than MaxAttempts times.
func (rt *Runtime) poisonAck(item *provider.OrchestrationItem, attempts uint32) provider.OrchestrationAck {
	var kind provider.PoisonKind = provider.PoisonOrchestration{Instance: item.Instance, ExecutionID: item.ExecutionID}
	msg := fmt.Sprintf("orchestration %s was fetched %d times without completing a turn", item.Instance, attempts)
	if item.HistoryError != "" {
		kind = provider.PoisonFailedDeserialization{Instance: item.Instance, ExecutionID: item.ExecutionID, Error: item.HistoryError}
		msg = "history does not decode: " + item.HistoryError
	}
	d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: attempts, MaxAttempts: rt.opts.MaxAttempts,
		MessageType: provider.PoisonMessageType{Kind: kind}, Message: msg}}
	ack := failAck(rt.turnEnv(), item.Instance, item.ExecutionID, item.History, d)
	if len(item.History) == 0 {
		// Never started: record the start so the failure belongs to a real execution.
		for _, m := range item.Messages {
			if s, ok := m.Kind.(provider.StartOrchestration); ok {
				ack.HistoryDelta[0].EventID = 2
				start := provider.Event{EventID: 1, InstanceID: item.Instance, ExecutionID: item.ExecutionID,
					TimestampMs: ack.HistoryDelta[0].TimestampMs, DuroxideVersion: DuroxideVersion,
					Kind: provider.OrchestrationStartedEvent{Name: s.Orchestration, Version: deref(s.Version), Input: s.Input,
						ParentInstance: s.ParentInstance, ParentID: s.ParentID, ParentExecutionID: s.ParentExecutionID}}
				ack.HistoryDelta = append([]provider.Event{start}, ack.HistoryDelta...)
				ack.Metadata.OrchestrationName = s.Orchestration
				ack.Metadata.OrchestrationVersion = deref(s.Version)
				if ack.Metadata.OrchestrationVersion == "" {
					ack.Metadata.OrchestrationVersion = DefaultVersion
					ack.HistoryDelta[0].Kind = provider.OrchestrationStartedEvent{Name: s.Orchestration, Version: DefaultVersion,
						Input: s.Input, ParentInstance: s.ParentInstance, ParentID: s.ParentID, ParentExecutionID: s.ParentExecutionID}
				}
				break
			}
		}
	}
	return ack
}
