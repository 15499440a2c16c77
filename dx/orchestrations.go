package dx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

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
	lite, _ := rt.p.(provider.LiteFetcher)
	dispatch(rt, ctx, "orchestrator", rt.opts.OrchestrationPollers, rt.opts.OrchestrationConcurrency, 1, func(int) ([]*provider.LockedOrchestrationItem, error) {
		began := time.Now()
		var item *provider.LockedOrchestrationItem
		var err error
		if lite != nil {
			item, err = lite.FetchOrchestrationItemLite(ctx, rt.opts.OrchestrationLockTimeout, rt.opts.PollTimeout, capabilityFilter)
		} else {
			item, err = rt.p.FetchOrchestrationItem(ctx, rt.opts.OrchestrationLockTimeout, rt.opts.PollTimeout, capabilityFilter)
		}
		rt.opts.Metrics.Observe(MetricFetchWait, time.Since(began), Labels{Queue: "orchestrator"})
		if item == nil {
			return nil, err
		}
		return []*provider.LockedOrchestrationItem{item}, err
	}, func(item *provider.LockedOrchestrationItem) {
		// With ack-and-fetch, each ack hands over the next turn: no fetch in between.
		for at := time.Now(); item != nil; {
			item, at = rt.processOrchestration(ctx, item, at)
		}
	})
}

func (rt *Runtime) turnEnv() turnEnv {
	return turnEnv{reg: rt.reg, clock: rt.opts.Clock, guard: rt.opts.BlockingGuard, logger: rt.opts.Logger}
}

// processOrchestration runs one turn (fetched at at) and acknowledges it. It returns the next turn,
// and when it was fetched, when the acknowledgement fetched one (provider.OrchestrationAckFetcher).
func (rt *Runtime) processOrchestration(ctx context.Context, locked *provider.LockedOrchestrationItem, at time.Time) (*provider.LockedOrchestrationItem, time.Time) {
	item := &locked.Item
	// The logger with the item's attributes is built only when a record is logged: most turns
	// log nothing above Debug.
	// Once the turn ran, it names the execution and version it resolved (an item's may be 0 and
	// "unknown"): the logger is built again with them, so that no record repeats an attribute.
	var logger *slog.Logger
	logExec, logVersion := item.ExecutionID, item.Version
	log := func() *slog.Logger {
		if logger == nil {
			logger = rt.opts.Logger.With("instance", item.Instance, "execution", logExec,
				"orchestration", item.OrchestrationName, "version", logVersion, "delivery", locked.AttemptCount)
		}
		return logger
	}
	// Acks and abandons must not be cut short by a shutdown that stops fetching.
	bg := context.WithoutCancel(ctx)
	token := locked.LockToken
	fl, finish := rt.track(func(c context.Context) { rt.abandonTurn(c, log(), token, 0, true) })
	defer finish()
	if ctx.Err() != nil {
		// Shutting down: a turn handed over by the last ack goes back at once.
		rt.abandonTurn(bg, log(), token, 0, true)
		return nil, time.Time{}
	}
	held := newLease(at, rt.opts.OrchestrationLockTimeout)
	stopRenew := renewing(held, renewEvery(rt.opts.OrchestrationLockTimeout, rt.opts.OrchestrationLockRenewalBuffer),
		func() error { return rt.p.RenewOrchestrationItemLock(bg, token, rt.opts.OrchestrationLockTimeout) },
		func(err error) {
			log().Warn("dx: orchestration lock renewal failed; the turn's ack will be refused", "error", err)
		})
	defer stopRenew()

	labels := Labels{Orchestration: item.OrchestrationName}
	if locked.AttemptCount > rt.opts.MaxAttempts {
		if h, ok := rt.p.(provider.Holder); ok && rt.opts.OnPoison == HoldPoison {
			// Held (nothing written) until an operator redrives it (dxctl dead), looked at again
			// every HoldRetryDelay without running its code.
			reason := fmt.Sprintf("poison: orchestration item delivered %d times (max %d), held until redriven (dxctl dead)",
				locked.AttemptCount, rt.opts.MaxAttempts)
			if err := h.HoldOrchestrationItem(bg, token, rt.opts.HoldRetryDelay, reason); err != nil {
				log().Warn("dx: holding the poison orchestration item failed; its lock expires instead", "error", err)
				return nil, time.Time{}
			}
			log().Warn("dx: orchestration item exceeded max attempts: held instead of failing (OnPoison: HoldPoison); redrive it (dxctl dead)",
				"max_deliveries", rt.opts.MaxAttempts)
			rt.opts.Metrics.Count(MetricPoison, 1, Labels{Queue: "orchestrator", Orchestration: item.OrchestrationName, Result: "held"})
			return nil, time.Time{}
		}
		pl := Labels{Queue: "orchestrator", Orchestration: item.OrchestrationName}
		if rt.orchestrationRegistered(item) {
			log().Error("dx: orchestration item exceeded max attempts: failing it as poison", "max_deliveries", rt.opts.MaxAttempts)
		} else {
			pl.Result = "not_registered"
			log().Error("dx: orchestration not registered: failing it as poison after max attempts (no runtime took it); register it, or check the name",
				"max_deliveries", rt.opts.MaxAttempts)
		}
		rt.opts.Metrics.Count(MetricPoison, 1, pl)
		err := rt.loadHistory(bg, item, nil)
		if err == nil && continuesAsNew(item) && len(item.History) == 0 {
			// A lite fetch skips the history a continue-as-new leaves behind; the poison fails
			// that execution (as duroxide does), so it needs it.
			item.History, err = rt.p.ReadWithExecution(bg, item.Instance, item.ExecutionID)
		}
		if err == nil {
			next, at, _ := rt.ackTurn(ctx, log(), held, fl, token, rt.poisonAck(item, locked.AttemptCount), labels)
			return next, at
		}
		return nil, time.Time{}
	}
	if item.HistoryError != "" {
		log().Warn("dx: history does not decode; abandoning so a node that can read it may take it (poison after max attempts)",
			"error", item.HistoryError)
		rt.abandonTurn(bg, log(), token, time.Second, false)
		return nil, time.Time{}
	}
	began := time.Now()
	env := rt.turnEnv()
	env.cached, env.keep = rt.cache.take(item.Instance), rt.cache != nil
	if err := rt.loadHistory(bg, item, env.cached); err != nil {
		log().Warn("dx: reading the history failed; abandoning the turn", "error", err)
		if env.cached != nil {
			env.cached.stop()
		}
		rt.abandonTurn(bg, log(), token, 50*time.Millisecond, false)
		return nil, time.Time{}
	}
	if lost := historyLost(item); lost != "" {
		// The record counts events the stored history no longer holds (a key lost, a partial
		// restore): no replay can rebuild the orchestration's state, and none ever will. It ends
		// now, loudly, instead of replaying a stump or waiting forever.
		log().Warn("dx: the instance's history is lost; failing it", "error", lost)
		rt.opts.Metrics.Count(MetricHistoryLost, 1, labels)
		if env.cached != nil {
			env.cached.stop()
		}
		next, at, _ := rt.ackTurn(ctx, log(), held, fl, token, rt.lostAck(bg, item, lost), labels)
		return next, at
	}
	out := runTurn(env, item)
	if out.exec != 0 && out.exec != logExec {
		logExec, logger = out.exec, nil
	}
	if out.version != "" && out.version != logVersion {
		logVersion, logger = out.version, nil
	}
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
		rt.reportUnregistered(log(), "orchestration", out.name, out.version)
		log().Debug("dx: orchestration (or this version) not registered on this node; abandoning with backoff",
			"wanted_version", out.version, "retry_in", delay, "deliveries_left", int(rt.opts.MaxAttempts)-int(locked.AttemptCount))
		rt.opts.Metrics.Count(MetricUnregistered, 1, Labels{Queue: "orchestrator", Orchestration: out.name, Version: out.version})
		rt.abandonTurn(bg, log(), token, delay, false)
		return nil, time.Time{}
	}
	if out.name != "" && checkable(out.outcome) && rt.checkDue() { // out.name: the code ran
		checked := rt.checkTurn(bg, log(), item, out)
		if checked.eng != out.eng && out.eng != nil {
			out.eng.stop()
		}
		out = checked
	}
	if out.outcome.nondet && rt.onNondeterminism(bg, log(), token, out) {
		return nil, time.Time{}
	}
	o := out.outcome
	labels.Version, labels.Result = out.version, o.result.String()
	rt.opts.Metrics.Observe(MetricTurnDuration, time.Since(began), labels)
	if o.panic != nil {
		log().Error("dx: orchestration panicked", "error", displayMessage(o.details), "stack", string(o.panic))
	}
	if o.result == turnCompleted || o.result == turnFailed || o.result == turnCancelled {
		out.ack.OrchestratorItems = append(out.ack.OrchestratorItems, scheduleRunEnded(item.Instance)...)
	}
	next, nextAt, ok := rt.ackTurn(ctx, log(), held, fl, token, out.ack, labels)
	if !ok {
		return nil, time.Time{}
	}
	for _, name := range out.lostEvents {
		log().Warn("dx: external event dropped: the orchestration was not waiting for it (raised before its WaitEvent, or after the wait ended); "+
			"for events that may come early use Dequeue in the orchestration and Client.EnqueueEvent (dxctl enqueue) to send them",
			"event", name)
		rt.opts.Metrics.Count(MetricDroppedEvents, 1, Labels{Queue: "orchestrator", Orchestration: item.OrchestrationName, Version: out.version})
	}
	for _, d := range out.unstarted {
		log().Warn("dx: detached start dropped: recorded (OrchestrationChained) but never started, because the turn that made it "+
			"also ended the execution ("+o.result.String()+"); as in duroxide, detached orchestrations are started only by a turn that "+
			"goes on, completes or fails: start it in an earlier turn (await something between it and ContinueAsNew), or in the next execution",
			"detached", d.instance, "detached_orchestration", d.name)
	}
	if out.eng != nil {
		out.eng.commit()
		rt.cache.put(out.eng)
		kept = true
	}
	rt.opts.Metrics.Count(MetricTurns, 1, labels)
	switch o.result {
	case turnCompleted:
		log().Debug("dx: orchestration completed")
	case turnFailed:
		lvl := slog.LevelWarn
		if _, app := o.details.Kind.(provider.ApplicationError); !app {
			lvl = slog.LevelError
		}
		log().Log(bg, lvl, "dx: orchestration failed", "error", displayMessage(o.details))
	case turnContinuedAsNew:
		log().Debug("dx: orchestration continued as new")
	case turnCancelled:
		log().Info("dx: orchestration cancelled", "reason", o.reason)
	default:
		if rt.opts.Logger.Enabled(bg, slog.LevelDebug) {
			log().Debug("dx: orchestration turn", "events", len(out.ack.HistoryDelta))
		}
	}
	return next, nextAt
}

// loadHistory completes an item fetched without its history (provider.LiteFetcher): when the kept
// engine holds exactly the stored history it is used as is, otherwise the history and KV snapshot
// are read (a new execution's first turn needs only the KV snapshot, and a new instance nothing).
func (rt *Runtime) loadHistory(ctx context.Context, item *provider.OrchestrationItem, kept *engine) error {
	lite, ok := rt.p.(provider.LiteFetcher)
	if !ok || item.History != nil || item.HistoryLen == 0 && !beginsExecution(item) {
		return nil // (a History that is not nil was read by the fetch, even empty: it is the stored one)
	}
	if kept != nil && kept.holdsLite(item) {
		item.History = kept.history
		return nil
	}
	if item.HistoryLen == 0 && item.ExecutionID <= 1 && !continuesAsNew(item) {
		return nil // a new instance: nothing stored yet
	}
	h, kv, tag, err := lite.ReadForReplay(ctx, item.Instance, item.ExecutionID)
	if err != nil {
		return err
	}
	if !continuesAsNew(item) {
		item.History, item.ExecutionTag = h, tag
	}
	item.KVSnapshot = kv
	return nil
}

func beginsExecution(item *provider.OrchestrationItem) bool {
	for _, m := range item.Messages {
		switch m.Kind.(type) {
		case provider.StartOrchestration, provider.ContinueAsNew:
			return true
		}
	}
	return false
}

func continuesAsNew(item *provider.OrchestrationItem) bool {
	for _, m := range item.Messages {
		if _, ok := m.Kind.(provider.ContinueAsNew); ok {
			return true
		}
	}
	return false
}

func (r turnResult) String() string {
	return [...]string{"continue", "completed", "failed", "continued_as_new", "cancelled"}[r]
}

// ackTurn acknowledges a turn. A retryable failure is retried with the same token for as long as
// the turn's lock is held (see lease) and shutdown has not abandoned the turn, with one attempt
// id for all tries (provider.WithAttemptID), so that a try whose reply was lost is recognised as
// done by the next; if it still fails it abandons the turn so that it runs again (the ack changed
// nothing). With a provider that fetches in the same call (provider.OrchestrationAckFetcher) it
// also returns the next turn and when it was fetched, unless the runtime is shutting down.
func (rt *Runtime) ackTurn(ctx context.Context, log *slog.Logger, held *lease, fl *flight, token string, ack provider.OrchestrationAck,
	labels Labels) (*provider.LockedOrchestrationItem, time.Time, bool) {
	if !rt.owned(fl) {
		log.Warn("dx: turn finished after shutdown abandoned it; its result is dropped (the turn runs again elsewhere)")
		return nil, time.Time{}, false
	}
	bg := context.WithoutCancel(ctx)
	attemptID := uuid.NewString()
	af, fetchNext := rt.p.(provider.OrchestrationAckFetcher)
	_, lite := rt.p.(provider.LiteFetcher)
	var unknown bool // a try may have committed although it failed (its reply was lost)
	for try := 1; ; try++ {
		actx := attemptContext(bg, attemptID, try)
		var next *provider.LockedOrchestrationItem
		var err error
		if fetchNext && ctx.Err() == nil {
			next, err = af.AckOrchestrationItemAndFetch(actx, token, ack, rt.opts.OrchestrationLockTimeout, capabilityFilter,
				provider.FetchOptions{Lite: lite, NextPoll: rt.opts.PollTimeout})
		} else {
			err = rt.p.AckOrchestrationItem(actx, token, ack)
		}
		if err == nil {
			if try > 1 {
				log.Info("dx: orchestration ack succeeded after retries", "tries", try)
			}
			return next, time.Now(), true
		}
		rt.opts.Metrics.Count(MetricAckFailures, 1, Labels{Queue: "orchestrator", Orchestration: labels.Orchestration})
		unknown = unknown || errors.Is(err, provider.ErrOutcomeUnknown)
		if unknown && errors.Is(err, provider.ErrInvalidLockToken) {
			log.Warn("dx: orchestration ack: an earlier try whose reply was lost probably committed it (its lock is gone)", "error", err, "tries", try)
			return nil, time.Time{}, false
		}
		if !provider.IsRetryable(err) && !errors.Is(err, provider.ErrInvalidLockToken) {
			// The store refuses this turn (e.g. a payload over its limit): as duroxide does, fail
			// the execution with an Infrastructure error instead of running the turn again forever.
			if fail, ok := infrastructureFailure(ack, err); ok && rt.p.AckOrchestrationItem(bg, token, fail) == nil {
				log.Error("dx: the store refused the turn; the orchestration failed with an infrastructure error", "error", err)
				return nil, time.Time{}, false
			}
		}
		if try == 1 && provider.IsRetryable(err) {
			log.Warn("dx: orchestration ack failed; retrying with the same token while its lock is held", "error", err, "lock_left", held.left())
		}
		if !rt.owned(fl) || !held.retryAfter(err, try) {
			log.Error("dx: orchestration ack failed; abandoning the turn", "error", err, "tries", try)
			rt.abandonTurn(bg, log, token, 50*time.Millisecond, false)
			return nil, time.Time{}, false
		}
	}
}

// infrastructureFailure is the ack that ends an execution whose turn the store refused: the
// turn's start event (if it began the execution) and an OrchestrationFailed with Infrastructure
// details, on top of the stored history.
func infrastructureFailure(refused provider.OrchestrationAck, err error) (provider.OrchestrationAck, bool) {
	if len(refused.HistoryDelta) == 0 {
		return provider.OrchestrationAck{}, false
	}
	first := refused.HistoryDelta[0]
	var delta []provider.Event
	if _, ok := first.Kind.(provider.OrchestrationStartedEvent); ok {
		delta = append(delta, first)
	}
	d := provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "ack_orchestration_item", Message: err.Error()}}
	failed := first
	failed.EventID = first.EventID + uint64(len(delta))
	failed.SourceEventID = nil
	failed.Kind = provider.OrchestrationFailedEvent{Details: d}
	msg := displayMessage(d)
	md := refused.Metadata
	md.Status, md.Output = provider.StatusFailed, &msg
	return provider.OrchestrationAck{ExecutionID: refused.ExecutionID, HistoryDelta: append(delta, failed), Metadata: md}, true
}

func (rt *Runtime) abandonTurn(ctx context.Context, log *slog.Logger, token string, delay time.Duration, ignoreAttempt bool) {
	if err := rt.p.AbandonOrchestrationItem(ctx, token, delay, ignoreAttempt); err != nil {
		log.Warn("dx: abandon failed; the lock expires instead", "error", err)
		return
	}
	log.Debug("dx: orchestration item abandoned", "delay", delay)
}

// poisonAck fails an execution whose item was fetched more than MaxAttempts times, as duroxide's
// fail_orchestration_as_poison does: the Poison error's message is the item's messages as JSON; a
// never-started execution gets its OrchestrationStarted first (from the start message, with the
// item's version); a child tells its parent (SubOrchFailed). A history that does not decode gets
// the failure at event id 99999 (the events before it cannot be read to number it).
func (rt *Runtime) poisonAck(item *provider.OrchestrationItem, attempts uint32) provider.OrchestrationAck {
	env := rt.turnEnv()
	poison := func(kind provider.PoisonKind, msg string) provider.ErrorDetails {
		return provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: attempts, MaxAttempts: rt.opts.MaxAttempts,
			MessageType: provider.PoisonMessageType{Kind: kind}, Message: msg}}
	}
	md := provider.ExecutionMetadata{OrchestrationName: item.OrchestrationName, OrchestrationVersion: item.Version}
	if item.HistoryError != "" {
		d := poison(provider.PoisonFailedDeserialization{Instance: item.Instance, ExecutionID: item.ExecutionID,
			Error: item.HistoryError}, item.HistoryError)
		ack := failAck(env, item.Instance, item.ExecutionID, nil, d)
		ack.HistoryDelta[0].EventID = undecodableFailureID
		md.Status, md.Output = ack.Metadata.Status, ack.Metadata.Output
		ack.Metadata = md
		return ack
	}
	d := poison(provider.PoisonOrchestration{Instance: item.Instance, ExecutionID: item.ExecutionID}, poisonMessage(item.Messages))
	history := item.History
	var delta []provider.Event
	if len(history) == 0 {
		// Never started: record the start so the failure belongs to a real execution.
		st := provider.OrchestrationStartedEvent{Name: item.OrchestrationName, Version: item.Version}
		for _, m := range item.Messages {
			if s, ok := m.Kind.(provider.StartOrchestration); ok {
				st.Name, st.Input = s.Orchestration, s.Input
				st.ParentInstance, st.ParentID, st.ParentExecutionID = s.ParentInstance, s.ParentID, s.ParentExecutionID
				break
			}
			if c, ok := m.Kind.(provider.ContinueAsNew); ok {
				st.Name, st.Input, st.CarryForwardEvents = c.Orchestration, c.Input, c.CarryForwardEvents
				break
			}
		}
		start := provider.Event{EventID: 1, InstanceID: item.Instance, ExecutionID: item.ExecutionID,
			TimestampMs: uint64(env.clock().UnixMilli()), DuroxideVersion: DuroxideVersion, Kind: st}
		delta, history = []provider.Event{start}, []provider.Event{start}
	}
	ack := failAck(env, item.Instance, item.ExecutionID, history, d)
	ack.HistoryDelta = append(delta, ack.HistoryDelta...)
	md.Status, md.Output = ack.Metadata.Status, ack.Metadata.Output
	if f, ok := parentFailed(history, d); ok {
		md.ParentInstanceID = f.ParentInstance
		ack.OrchestratorItems = append(ack.OrchestratorItems, provider.WorkItem{Kind: f})
	}
	ack.Metadata = md
	return ack
}

// parentFailed is the SubOrchFailed that tells the parent named by a history's start event that
// the child failed with d; false when the history names no parent (or is empty).
func parentFailed(history []provider.Event, d provider.ErrorDetails) (provider.SubOrchFailed, bool) {
	if len(history) == 0 {
		return provider.SubOrchFailed{}, false
	}
	st, ok := history[0].Kind.(provider.OrchestrationStartedEvent)
	if !ok || st.ParentInstance == nil || st.ParentID == nil {
		return provider.SubOrchFailed{}, false
	}
	pexec := uint64(1)
	if st.ParentExecutionID != nil {
		pexec = *st.ParentExecutionID
	}
	return provider.SubOrchFailed{ParentInstance: *st.ParentInstance, ParentExecutionID: pexec, ParentID: *st.ParentID, Details: d}, true
}

// historyLost says why the item's history cannot be the execution's ("" when it can): the record
// counts more events (HistoryLen) than the history holds. A continue-as-new begins a new execution,
// whose history is not the one counted.
func historyLost(item *provider.OrchestrationItem) string {
	if item.HistoryError != "" || continuesAsNew(item) || item.HistoryLen <= len(item.History) {
		return ""
	}
	return fmt.Sprintf("history lost: instance %q execution %d: its record counts %d events but the stored history holds %d (a lost or cut key; see dxctl fsck --deep)",
		item.Instance, item.ExecutionID, item.HistoryLen, len(item.History))
}

// lostAck fails an execution whose history is lost (historyLost) with an InfrastructureError
// naming the loss, at the event id after the record's count. What is left of the history names the
// parent, if any: it learns of the failure (SubOrchFailed), as for any failed child.
func (rt *Runtime) lostAck(ctx context.Context, item *provider.OrchestrationItem, why string) provider.OrchestrationAck {
	d := provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "replay", Message: why}}
	ack := failAck(rt.turnEnv(), item.Instance, item.ExecutionID, nil, d)
	ack.HistoryDelta[0].EventID = uint64(item.HistoryLen) + 1
	md := provider.ExecutionMetadata{OrchestrationName: item.OrchestrationName, OrchestrationVersion: item.Version,
		Status: ack.Metadata.Status, Output: ack.Metadata.Output}
	if f, ok := parentFailed(item.History, d); ok {
		md.ParentInstanceID = f.ParentInstance
		ack.OrchestratorItems = append(ack.OrchestratorItems, provider.WorkItem{Kind: f})
	} else if len(item.History) == 0 {
		if w, ok := rt.parentWaiting(ctx, item.Instance); ok {
			w.Details = d
			ack.OrchestratorItems = append(ack.OrchestratorItems, provider.WorkItem{Kind: w})
		}
	}
	ack.Metadata = md
	return ack
}

// parentWaiting finds, for a child whose history (which held the link to its parent) is gone,
// the parent that waits for it: the record names the parent, whose current history holds the
// SubOrchestrationScheduled of this child, still open. The SubOrchFailed it returns lacks
// Details. Best effort: a provider without management support, or a read that fails, finds none.
func (rt *Runtime) parentWaiting(ctx context.Context, child string) (provider.SubOrchFailed, bool) {
	admin, ok := rt.p.Admin()
	if !ok {
		return provider.SubOrchFailed{}, false
	}
	info, err := admin.GetInstanceInfo(ctx, child)
	if err != nil || info.ParentInstanceID == "" {
		return provider.SubOrchFailed{}, false
	}
	parent := info.ParentInstanceID
	pinfo, err := admin.GetInstanceInfo(ctx, parent)
	if err != nil || pinfo.Status != provider.StatusRunning {
		return provider.SubOrchFailed{}, false
	}
	h, err := rt.p.ReadWithExecution(ctx, parent, pinfo.CurrentExecutionID)
	if err != nil {
		return provider.SubOrchFailed{}, false
	}
	var id uint64
	for _, e := range h {
		switch k := e.Kind.(type) {
		case provider.SubOrchestrationScheduledEvent:
			if childInstanceID(parent, k.Instance) == child {
				id = e.EventID
			}
		case provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent, provider.SubOrchestrationCancelRequestedEvent:
			if e.SourceEventID != nil && *e.SourceEventID == id {
				id = 0
			}
		}
	}
	if id == 0 {
		return provider.SubOrchFailed{}, false
	}
	return provider.SubOrchFailed{ParentInstance: parent, ParentExecutionID: pinfo.CurrentExecutionID, ParentID: id}, true
}

// undecodableFailureID is duroxide's event id for the failure of a history that does not decode.
const undecodableFailureID = 99999

// orchestrationRegistered reports whether this runtime has a handler for the item's orchestration
// and version (any version when the item names none).
func (rt *Runtime) orchestrationRegistered(item *provider.OrchestrationItem) bool {
	var version *string
	if item.Version != "" && item.Version != "unknown" {
		version = &item.Version
	}
	_, ok := rt.reg.resolve(item.OrchestrationName, version)
	return ok
}

// reportUnregistered logs, once per name and version for this runtime, at warning level, that an
// item names an orchestration (version) or activity this runtime does not register, with the names
// it does register: a typo or a missing registration shows at the first fetch, not as a poison
// failure minutes later.
func (rt *Runtime) reportUnregistered(log *slog.Logger, what, name, version string) {
	id := what + "\x00" + name + "\x00" + version
	rt.unregMu.Lock()
	seen := rt.unreg[id]
	if len(rt.unreg) < 4096 { // bounded: names come from the store
		rt.unreg[id] = true
	}
	rt.unregMu.Unlock()
	if seen {
		return
	}
	orchs, acts := rt.reg.names()
	key, registered := "registered_activities", acts
	if what == "orchestration" {
		key, registered = "registered_orchestrations", orchs
	}
	const maxNames = 20
	list := strings.Join(registered[:min(len(registered), maxNames)], ", ")
	if len(registered) > maxNames {
		list += fmt.Sprintf(", ... (%d more)", len(registered)-maxNames)
	}
	msg := fmt.Sprintf("dx: %s %q is not registered on this runtime", what, name)
	if version != "" {
		msg = fmt.Sprintf("dx: %s %q version %s is not registered on this runtime", what, name, version)
	}
	log.Warn(msg+"; its work is abandoned with backoff for a runtime that registers it, and fails as poison after MaxAttempts",
		key, list)
}
