package dx

import (
	"fmt"
	"maps"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// Building a turn's ack: what the turn sends (each new action's work, the side effects of the
// code's cancellations), and when the execution ends, what each kind records for its schedules
// still open, the terminal event, the parent's notification and the execution metadata; then
// duroxide's runtime limits.

// output builds the turn's ack. The engine is handed to the caller (to keep for the instance's next
// turn) only when env.keep asks for it and the execution goes on; otherwise its goroutines end here.
func (e *engine) output(env turnEnv, o outcome) turnOutput {
	out := turnOutput{plan: planAck, name: e.name, version: e.version, exec: e.executionID}
	out.ack, out.unstarted = e.ackFor(o)
	if msg := e.limitViolation(); msg != "" {
		e.log().Error("dx: orchestration exceeds a runtime limit; failing it", "error", msg)
		continuing := o.result == turnContinue
		o = e.fail(provider.AppOrchestrationFailed, msg)
		e.failForLimit(&out.ack, o.details, continuing)
	}
	out.outcome = o
	out.terminal = o.result != turnContinue
	out.lostEvents = e.waits.lost
	if env.keep && !out.terminal {
		out.eng = e
	} else {
		e.stop()
	}
	return out
}

// ackFor adds the execution's end to the turn's delta when the turn ends it, and builds the ack:
// work items, cancelled activities and the execution metadata. It also returns the detached starts
// the turn recorded but does not send.
func (e *engine) ackFor(o outcome) (provider.OrchestrationAck, []*detached) {
	var out ackItems
	for _, a := range e.dropped {
		a.dropped(e, &out)
	}
	for _, a := range e.pending {
		a.send(e, o.result, &out)
	}
	var status, output string
	if o.result != turnContinue {
		var terminal provider.EventKind
		var then []provider.WorkItem // sent after the kinds' end
		switch o.result {
		case turnCompleted:
			terminal = provider.OrchestrationCompletedEvent{Output: o.output}
			then = e.toParent(true, o.output, provider.ErrorDetails{})
			status, output = provider.StatusCompleted, o.output
		case turnFailed:
			terminal = provider.OrchestrationFailedEvent{Details: o.details}
			then = e.toParent(false, "", o.details)
			status, output = provider.StatusFailed, displayMessage(o.details)
		case turnContinuedAsNew:
			var can provider.WorkItem
			terminal, can = o.can.ending(e)
			then = []provider.WorkItem{can}
			status, output = provider.StatusContinuedAsNew, o.can.input
		case turnCancelled:
			d := provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppCancelled, Reason: o.reason}}}
			terminal = provider.OrchestrationFailedEvent{Details: d}
			then = e.toParent(false, "", d)
			status, output = provider.StatusFailed, displayMessage(d)
		}
		for _, k := range kinds {
			k.end(e, o.result, true, &out)
		}
		e.record(e.newEvent(nil, terminal))
		for _, k := range kinds {
			k.end(e, o.result, false, &out)
		}
		out.orch = append(out.orch, then...)
	}
	out.orch = append(out.orch, out.dropCancels...)
	return provider.OrchestrationAck{ExecutionID: e.executionID, HistoryDelta: e.delta, WorkerItems: out.worker,
		OrchestratorItems: out.orch, CancelledActivities: dedupeCancelled(out.cancelled),
		Metadata: e.metadata(status, output)}, out.unstarted
}

// toParent is the notification of a child's end to its parent (none for an orchestration without
// a parent).
func (e *engine) toParent(ok bool, output string, d provider.ErrorDetails) []provider.WorkItem {
	if e.parentInstance == nil || e.parentID == nil {
		return nil
	}
	// The parent's current execution: a parent only waits on children of its running execution.
	pexec := e.parentExecution()
	if ok {
		return []provider.WorkItem{{Kind: provider.SubOrchCompleted{ParentInstance: *e.parentInstance,
			ParentExecutionID: pexec, ParentID: *e.parentID, Result: output}}}
	}
	return []provider.WorkItem{{Kind: provider.SubOrchFailed{ParentInstance: *e.parentInstance,
		ParentExecutionID: pexec, ParentID: *e.parentID, Details: d}}}
}

// duroxide's runtime limits (runtime/limits.rs), checked before each ack: a turn that exceeds one
// fails the orchestration.
const (
	maxCustomStatusBytes = 256 << 10
	maxTagNameBytes      = 256
	maxKVValueBytes      = 64 << 10
	maxKVKeys            = 150
)

// failForLimit turns the ack of a turn that exceeds a runtime limit into duroxide's limit failure:
// the turn's events stay as they are (a terminal event included) and an OrchestrationFailed
// follows them; then, as for any failed execution, its in-flight activities are cancelled
// (recorded last, reason orchestration_terminal_failed); no other work item goes out (a parent is
// not told, as in duroxide); the status is Failed.
func (e *engine) failForLimit(ack *provider.OrchestrationAck, d provider.ErrorDetails, continuing bool) {
	var inflight []uint64
	if continuing {
		inflight = openActivities(e.allEvents())
	}
	at := len(e.delta)
	for at > 0 { // a finished turn's cancellations: recorded again below, after the failure
		k, ok := e.delta[at-1].Kind.(provider.ActivityCancelRequestedEvent)
		if !ok || !strings.HasPrefix(k.Reason, "orchestration_terminal_") {
			break
		}
		at--
		inflight = append([]uint64{*e.delta[at].SourceEventID}, inflight...)
	}
	if at < len(e.delta) {
		e.nextID = e.delta[at].EventID
		e.delta = e.delta[:at]
	}
	e.delta = append(e.delta, e.newEvent(nil, provider.OrchestrationFailedEvent{Details: d}))
	var cancelled []provider.ScheduledActivityIdentifier
	for _, id := range inflight {
		src := id
		e.delta = append(e.delta, e.newEvent(&src, provider.ActivityCancelRequestedEvent{Reason: "orchestration_terminal_failed"}))
		cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: id})
	}
	msg := displayMessage(d)
	ack.HistoryDelta = e.delta
	ack.WorkerItems, ack.OrchestratorItems, ack.CancelledActivities = nil, nil, cancelled
	ack.Metadata.Status, ack.Metadata.Output = provider.StatusFailed, &msg
}

// limitViolation describes the first runtime limit this turn exceeds, or returns "" (duroxide's
// validate_limits: the last custom status set, tags and KV values written this turn, and the keys
// of earlier executions with this turn's writes applied).
func (e *engine) limitViolation() string {
	for i := len(e.delta) - 1; i >= 0; i-- {
		if k, ok := e.delta[i].Kind.(provider.CustomStatusUpdatedEvent); ok && k.Status != nil {
			if len(*k.Status) > maxCustomStatusBytes {
				return fmt.Sprintf("Custom status size (%d bytes) exceeds limit (%d bytes)", len(*k.Status), maxCustomStatusBytes)
			}
			break
		}
	}
	for _, ev := range e.delta {
		switch k := ev.Kind.(type) {
		case provider.ActivityScheduledEvent:
			if k.Tag != nil && len(*k.Tag) > maxTagNameBytes {
				return fmt.Sprintf("Activity '%s' tag size (%d bytes) exceeds limit (%d bytes)", k.Name, len(*k.Tag), maxTagNameBytes)
			}
		case provider.KeyValueSetEvent:
			if len(k.Value) > maxKVValueBytes {
				return fmt.Sprintf("KV value for key '%s' (%d bytes) exceeds limit (%d bytes)", k.Key, len(k.Value), maxKVValueBytes)
			}
		}
	}
	var keys map[string]bool // copied only in a turn that writes KV: most turns do not
	write := func() map[string]bool {
		if keys == nil {
			keys = maps.Clone(e.kvBase)
		}
		return keys
	}
	for _, ev := range e.delta {
		switch k := ev.Kind.(type) {
		case provider.KeyValueSetEvent:
			write()[k.Key] = true
		case provider.KeyValueClearedEvent:
			delete(write(), k.Key)
		case provider.KeyValuesClearedEvent:
			clear(write())
		}
	}
	if len(keys) > maxKVKeys {
		return fmt.Sprintf("KV key count (%d) exceeds limit (%d)", len(keys), maxKVKeys)
	}
	return ""
}

func dedupeCancelled(in []provider.ScheduledActivityIdentifier) []provider.ScheduledActivityIdentifier {
	seen := map[uint64]bool{}
	out := in[:0]
	for _, c := range in {
		if !seen[c.ActivityID] {
			seen[c.ActivityID] = true
			out = append(out, c)
		}
	}
	return out
}

func (e *engine) metadata(status, output string) provider.ExecutionMetadata {
	md := provider.ExecutionMetadata{Status: status}
	if status != "" {
		o := output
		md.Output = &o
	}
	for _, ev := range e.delta {
		if st, ok := ev.Kind.(provider.OrchestrationStartedEvent); ok {
			md.OrchestrationName, md.OrchestrationVersion = e.name, e.version
			if st.ParentInstance != nil {
				md.ParentInstanceID = *st.ParentInstance
			}
			md.PinnedDuroxideVersion = semver.MustParse(ev.DuroxideVersion)
		}
	}
	return md
}

// parentExecution is the execution of the parent that started this child.
func (e *engine) parentExecution() uint64 {
	if p := e.startedParentExecution(); p != nil {
		return *p
	}
	return 1
}

func (e *engine) startedParentExecution() *uint64 {
	if len(e.history) > 0 {
		if st, ok := e.history[0].Kind.(provider.OrchestrationStartedEvent); ok {
			return st.ParentExecutionID
		}
	}
	return nil
}

// failAck is the ack that fails an execution with details, for histories the engine cannot run.
func failAck(env turnEnv, instance string, exec uint64, history []provider.Event, d provider.ErrorDetails) provider.OrchestrationAck {
	next := uint64(1)
	if n := len(history); n > 0 {
		next = history[n-1].EventID + 1
	}
	ev := provider.Event{EventID: next, InstanceID: instance, ExecutionID: exec, TimestampMs: uint64(env.clock().UnixMilli()),
		DuroxideVersion: DuroxideVersion, Kind: provider.OrchestrationFailedEvent{Details: d}}
	msg := displayMessage(d)
	return provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: []provider.Event{ev},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusFailed, Output: &msg}}
}
