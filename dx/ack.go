package dx

import (
	"fmt"
	"maps"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// Building a turn's ack: the work items of new actions, the side effects of the code's
// cancellations, and when the execution ends, the records of its open schedules, the terminal
// event, the parent's notification and the execution metadata; then duroxide's runtime limits.

// duroxide's runtime limits (runtime/limits.rs), checked before each ack: a turn that exceeds one
// fails the orchestration.
const (
	maxCustomStatusBytes = 256 << 10
	maxTagNameBytes      = 256
	maxKVValueBytes      = 64 << 10
	maxKVKeys            = 150
)

// output builds the turn's ack. The engine is handed to the caller (to keep for the instance's next
// turn) only when env.keep asks for it and the execution goes on; otherwise its goroutines end here.
func (e *engine) output(env turnEnv, o outcome) turnOutput {
	out := turnOutput{plan: planAck, name: e.name, version: e.version, exec: e.executionID}
	out.ack = e.ackFor(o, e.name, e.version, e.parentInstance, e.parentID)
	if msg := e.limitViolation(); msg != "" {
		e.log().Error("dx: orchestration exceeds a runtime limit; failing it", "error", msg)
		continuing := o.result == turnContinue
		o = e.fail(provider.AppOrchestrationFailed, msg)
		e.failForLimit(&out.ack, o.details, continuing)
	}
	out.outcome = o
	out.terminal = o.result != turnContinue
	out.lostEvents = e.lostEvents
	if env.keep && !out.terminal {
		out.eng = e
	} else {
		e.stop()
	}
	return out
}

// ackFor adds the terminal bookkeeping to the turn's delta and builds the ack: work items, cancelled
// activities and the execution metadata.
func (e *engine) ackFor(o outcome, name, version string, parentInstance *string, parentID *uint64) provider.OrchestrationAck {
	ack := provider.OrchestrationAck{ExecutionID: e.executionID}
	var work, orch []provider.WorkItem
	var cancelled []provider.ScheduledActivityIdentifier

	// Side effects of futures the code cancelled: steal the activities' locks, cancel the children.
	for _, a := range e.dropped {
		if a.kind == actActivity {
			cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: a.scheduleID})
		}
	}
	var dropCancels []provider.WorkItem
	for _, a := range e.dropped {
		if a.kind == actSubOrch {
			dropCancels = append(dropCancels, provider.WorkItem{Kind: provider.CancelInstance{
				Instance: childInstanceID(e.instance, a.instance), Reason: "parent dropped sub-orchestration future"}})
		}
	}
	detached := func() {
		for _, a := range e.pending {
			if a.kind == actDetached {
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: a.instance,
					Orchestration: a.name, Input: a.input, Version: a.version, ExecutionID: 1}})
			}
		}
	}
	toParent := func(ok bool, output string, d provider.ErrorDetails) {
		if parentInstance == nil || parentID == nil {
			return
		}
		// The parent's current execution: a parent only waits on children of its running execution.
		pexec := e.parentExecution()
		if ok {
			orch = append(orch, provider.WorkItem{Kind: provider.SubOrchCompleted{ParentInstance: *parentInstance,
				ParentExecutionID: pexec, ParentID: *parentID, Result: output}})
		} else {
			orch = append(orch, provider.WorkItem{Kind: provider.SubOrchFailed{ParentInstance: *parentInstance,
				ParentExecutionID: pexec, ParentID: *parentID, Details: d}})
		}
	}

	// What is still open when the execution ends; its own breadcrumbs change none of it.
	var open outstandingSchedules
	if o.result != turnContinue {
		open = e.outstanding()
	}
	var status, output string
	switch o.result {
	case turnContinue:
		for _, a := range e.pending {
			switch a.kind {
			case actActivity:
				work = append(work, provider.WorkItem{Kind: provider.ActivityExecute{Instance: e.instance, ExecutionID: e.executionID,
					ID: a.scheduleID, Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}})
			case actTimer:
				orch = append(orch, provider.WorkItem{Kind: provider.TimerFired{Instance: e.instance, ExecutionID: e.executionID,
					ID: a.scheduleID, FireAtMs: a.fireAtMs}})
			case actSubOrch:
				pi, pid, pex := e.instance, a.scheduleID, e.executionID
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: childInstanceID(e.instance, a.instance),
					Orchestration: a.name, Input: a.input, Version: a.version, ParentInstance: &pi, ParentID: &pid,
					ParentExecutionID: &pex, ExecutionID: 1}})
			case actDetached:
				orch = append(orch, provider.WorkItem{Kind: provider.StartOrchestration{Instance: a.instance,
					Orchestration: a.name, Input: a.input, Version: a.version, ExecutionID: 1}})
			}
		}
	case turnCompleted:
		detached()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationCompletedEvent{Output: o.output}))
		toParent(true, o.output, provider.ErrorDetails{})
		status, output = provider.StatusCompleted, o.output
	case turnFailed:
		detached()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationFailedEvent{Details: o.details}))
		toParent(false, "", o.details)
		status, output = provider.StatusFailed, displayMessage(o.details)
	case turnContinuedAsNew:
		carry := e.unmatchedQueueMessages()
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationContinuedAsNewEvent{Input: o.can.input}))
		if len(carry) > maxCarryForward {
			e.log().Warn("dropping queue messages beyond the carry-forward limit", "dropped", len(carry)-maxCarryForward, "limit", maxCarryForward)
			carry = carry[:maxCarryForward]
		}
		orch = append(orch, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: e.instance, Orchestration: name,
			Input: o.can.input, Version: o.can.version, ParentInstance: parentInstance, ParentID: parentID,
			ParentExecutionID: e.startedParentExecution(), CarryForwardEvents: carry, InitialCustomStatus: e.lastCustomStatus()}})
		status, output = provider.StatusContinuedAsNew, o.can.input
	case turnCancelled:
		d := provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: provider.AppCancelled, Reason: o.reason}}}
		e.terminalBreadcrumbs(open)
		e.record(e.newEvent(nil, provider.OrchestrationFailedEvent{Details: d}))
		for _, child := range open.subOrchs {
			orch = append(orch, provider.WorkItem{Kind: provider.CancelInstance{Instance: childInstanceID(e.instance, child), Reason: "parent canceled"}})
		}
		toParent(false, "", d)
		status, output = provider.StatusFailed, displayMessage(d)
	}
	orch = append(orch, dropCancels...)

	// In-flight activities of a finished execution are cancelled, recorded after the terminal event.
	if status != "" {
		reason := map[string]string{provider.StatusCompleted: "orchestration_terminal_completed",
			provider.StatusFailed: "orchestration_terminal_failed", provider.StatusContinuedAsNew: "orchestration_terminal_continued_as_new"}[status]
		for _, id := range open.activities {
			src := id
			e.record(e.newEvent(&src, provider.ActivityCancelRequestedEvent{Reason: reason}))
			cancelled = append(cancelled, provider.ScheduledActivityIdentifier{Instance: e.instance, ExecutionID: e.executionID, ActivityID: id})
		}
	}

	ack.HistoryDelta = e.delta
	ack.WorkerItems = work
	ack.OrchestratorItems = orch
	ack.CancelledActivities = dedupeCancelled(cancelled)
	ack.Metadata = e.metadata(name, version, status, output, parentInstance)
	return ack
}

const maxCarryForward = 100

// failForLimit turns the ack of a turn that exceeds a runtime limit into duroxide's limit failure:
// the turn's events stay as they are (a terminal event included) and an OrchestrationFailed
// follows them; then, as for any failed execution, its in-flight activities are cancelled
// (recorded last, reason orchestration_terminal_failed); no other work item goes out (a parent is
// not told, as in duroxide); the status is Failed.
func (e *engine) failForLimit(ack *provider.OrchestrationAck, d provider.ErrorDetails, continuing bool) {
	var inflight []uint64
	if continuing {
		inflight = e.outstanding().activities
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

func (e *engine) metadata(name, version, status, output string, parentInstance *string) provider.ExecutionMetadata {
	md := provider.ExecutionMetadata{Status: status}
	if status != "" {
		o := output
		md.Output = &o
	}
	for _, ev := range e.delta {
		if st, ok := ev.Kind.(provider.OrchestrationStartedEvent); ok {
			md.OrchestrationName, md.OrchestrationVersion = name, version
			if st.ParentInstance != nil {
				md.ParentInstanceID = *st.ParentInstance
			}
			md.PinnedDuroxideVersion = semver.MustParse(ev.DuroxideVersion)
		}
	}
	_ = parentInstance
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

// lastCustomStatus is the custom status at the end of the execution, carried to the next one.
func (e *engine) lastCustomStatus() *string {
	var s *string
	for _, ev := range e.allEvents() {
		switch k := ev.Kind.(type) {
		case provider.OrchestrationStartedEvent:
			if k.InitialCustomStatus != nil {
				s = k.InitialCustomStatus
			}
		case provider.CustomStatusUpdatedEvent:
			s = k.Status
		}
	}
	return s
}

// outstandingSchedules are the schedules of the execution nothing answered or cancelled yet.
type outstandingSchedules struct {
	activities []uint64
	subOrchs   []string // recorded child instance ids
	waits      []uint64
	queues     []uint64
}

func (e *engine) outstanding() outstandingSchedules {
	var o outstandingSchedules
	events := e.allEvents()
	resolved := map[uint64]bool{}
	cancelled := map[uint64]bool{}
	pendingWaits := map[string][]uint64{}
	arrivals := map[string]int{}
	for _, ev := range events {
		src := ev.SourceEventID
		switch k := ev.Kind.(type) {
		case provider.ActivityCompletedEvent, provider.ActivityFailedEvent, provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent:
			resolved[*src] = true
		case provider.ActivityCancelRequestedEvent, provider.SubOrchestrationCancelRequestedEvent, provider.QueueSubscriptionCancelledEvent:
			if src != nil {
				cancelled[*src] = true
			}
		case provider.ExternalSubscribedEvent:
			pendingWaits[k.Name] = append(pendingWaits[k.Name], ev.EventID)
		case provider.ExternalEventEvent:
			if q := pendingWaits[k.Name]; len(q) > 0 {
				resolved[q[0]] = true
				pendingWaits[k.Name] = q[1:]
			}
		case provider.ExternalSubscribedCancelledEvent:
			if src != nil {
				cancelled[*src] = true
				for n, q := range pendingWaits {
					for i, id := range q {
						if id == *src {
							pendingWaits[n] = append(q[:i:i], q[i+1:]...)
							break
						}
					}
				}
			}
		case provider.QueueEventDeliveredEvent:
			arrivals[k.Name]++
		}
	}
	consumed := map[string]int{}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueSubscribedEvent); ok && !cancelled[ev.EventID] {
			if consumed[k.Name] < arrivals[k.Name] {
				consumed[k.Name]++
				resolved[ev.EventID] = true
			}
		}
	}
	for _, ev := range events {
		open := !resolved[ev.EventID] && !cancelled[ev.EventID]
		if !open {
			continue
		}
		switch k := ev.Kind.(type) {
		case provider.ActivityScheduledEvent:
			o.activities = append(o.activities, ev.EventID)
		case provider.SubOrchestrationScheduledEvent:
			o.subOrchs = append(o.subOrchs, k.Instance)
		case provider.ExternalSubscribedEvent:
			o.waits = append(o.waits, ev.EventID)
		case provider.QueueSubscribedEvent:
			o.queues = append(o.queues, ev.EventID)
		}
	}
	return o
}

// terminalBreadcrumbs cancels the subscriptions still open (o) when the execution ends.
func (e *engine) terminalBreadcrumbs(o outstandingSchedules) {
	for _, id := range o.waits {
		src := id
		e.record(e.newEvent(&src, provider.ExternalSubscribedCancelledEvent{Reason: "orchestration_terminal"}))
	}
	for _, id := range o.queues {
		src := id
		e.record(e.newEvent(&src, provider.QueueSubscriptionCancelledEvent{Reason: "orchestration_terminal"}))
	}
}

// unmatchedQueueMessages are the queue messages no active subscription consumed, in arrival order:
// continue-as-new carries them to the next execution.
func (e *engine) unmatchedQueueMessages() []provider.CarriedEvent {
	events := e.allEvents()
	cancelled := map[uint64]bool{}
	active := map[string]int{}
	for _, ev := range events {
		if _, ok := ev.Kind.(provider.QueueSubscriptionCancelledEvent); ok && ev.SourceEventID != nil {
			cancelled[*ev.SourceEventID] = true
		}
	}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueSubscribedEvent); ok && !cancelled[ev.EventID] {
			active[k.Name]++
		}
	}
	var out []provider.CarriedEvent
	consumed := map[string]int{}
	for _, ev := range events {
		if k, ok := ev.Kind.(provider.QueueEventDeliveredEvent); ok {
			if consumed[k.Name] < active[k.Name] {
				consumed[k.Name]++
			} else {
				out = append(out, provider.CarriedEvent(k))
			}
		}
	}
	return out
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
