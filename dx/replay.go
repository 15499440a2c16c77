package dx

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// ReplayError says where the registered code stops reproducing a recorded history: the first
// event that differs, what the history records there and what the code does now.
type ReplayError struct {
	Instance    string
	ExecutionID uint64
	// EventID is the first event that differs (0 when the failure is not tied to one event).
	EventID uint64
	// History is what the history records at EventID, Code what the code does there now.
	History, Code string
	// Message is the whole explanation.
	Message string
}

func (e *ReplayError) Error() string {
	if e.EventID == 0 {
		return fmt.Sprintf("dx: replay of %s execution %d: %s", e.Instance, e.ExecutionID, e.Message)
	}
	return fmt.Sprintf("dx: replay of %s execution %d: nondeterminism at event %d\n  history: %s\n  code:    %s",
		e.Instance, e.ExecutionID, e.EventID, e.History, e.Code)
}

// Replay re-runs a recorded history against the orchestrations registered on rt, without a
// provider, and reports the first place where the code no longer does what the history records
// (a *ReplayError), so a code change that would break running instances fails a test instead.
// Nothing is written and no activity runs; rt need not be started (NewRuntime(nil, ...) will do).
//
// history holds the events of one instance: one execution, or several (continue-as-new) in order,
// oldest first; each execution is replayed with the KV store the earlier ones left. An execution
// whose predecessors are missing is replayed with an empty KV store. The last turn of each
// execution is re-run as new work, so its schedules and its outcome (output, failure,
// continue-as-new input) are compared too. An execution that ended in a system failure
// (nondeterminism, poison) is compared up to that failure.
func Replay(rt *Runtime, history []provider.Event) error {
	if rt == nil {
		return fmt.Errorf("dx: Replay needs a runtime with the orchestrations registered (%w)", ErrInvalidInput)
	}
	if len(history) == 0 {
		return fmt.Errorf("dx: Replay was given an empty history (%w)", ErrInvalidInput)
	}
	kv := map[string]provider.KVEntry{}
	for start := 0; start < len(history); {
		end := start
		for end < len(history) && history[end].ExecutionID == history[start].ExecutionID {
			end++
		}
		exec := history[start:end]
		if err := replayExecution(rt, exec, kv, true); err != nil {
			return err
		}
		applyKV(kv, exec)
		start = end
	}
	return nil
}

// fromMessage reports whether an event records a message (a completion, an arrival, the start)
// rather than something the code did. Each turn's events are its messages', then the code's.
func fromMessage(ev provider.Event) bool {
	switch ev.Kind.(type) {
	case provider.OrchestrationStartedEvent, provider.ActivityCompletedEvent, provider.ActivityFailedEvent,
		provider.TimerFiredEvent, provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent,
		provider.ExternalEventEvent, provider.QueueEventDeliveredEvent, provider.OrchestrationCancelRequestedEvent:
		return true
	}
	return false
}

// replayExecution replays one execution's events with the KV store kv. With last, the events of
// its last turn are compared too (what a running instance's next turn replays); without, only
// the turns before it (what a live instance that had not run that turn yet would replay).
func replayExecution(rt *Runtime, hist []provider.Event, kv map[string]provider.KVEntry, last bool) error {
	first := hist[0]
	rerr := func(id uint64, h, c, msg string) *ReplayError {
		return &ReplayError{Instance: first.InstanceID, ExecutionID: first.ExecutionID, EventID: id, History: h, Code: c, Message: msg}
	}
	if _, ok := first.Kind.(provider.OrchestrationStartedEvent); !ok {
		return rerr(0, "", "", fmt.Sprintf("the history starts with %s, not OrchestrationStarted (give every event of the execution)", first.EventType()))
	}
	for i, ev := range hist {
		if ev.InstanceID != first.InstanceID {
			return rerr(0, "", "", fmt.Sprintf("the history mixes instances %q and %q: replay one instance at a time", first.InstanceID, ev.InstanceID))
		}
		if i > 0 && ev.EventID <= hist[i-1].EventID {
			return rerr(0, "", "", fmt.Sprintf("event ids are not increasing at position %d (%d after %d)", i, ev.EventID, hist[i-1].EventID))
		}
	}
	// The last turn: what follows the last message event is what the code did in it.
	cut := len(hist) - 1
	for !fromMessage(hist[cut]) {
		cut--
	}
	prefix, want := hist[:cut+1], hist[cut+1:]
	systemFailure := false
	if n := len(want); n > 0 {
		if f, ok := want[n-1].Kind.(provider.OrchestrationFailedEvent); ok {
			if _, app := f.Details.Kind.(provider.ApplicationError); !app {
				systemFailure, want = true, want[:n-1]
			}
		}
	}
	at := prefix[len(prefix)-1].TimestampMs
	if len(want) > 0 {
		at = want[0].TimestampMs
	}
	env := turnEnv{reg: rt.reg, clock: func() time.Time { return time.UnixMilli(int64(at)) }, guard: rt.opts.BlockingGuard, logger: rt.opts.Logger}
	item := &provider.OrchestrationItem{Instance: first.InstanceID, ExecutionID: first.ExecutionID,
		History: prefix[:len(prefix):len(prefix)], KVSnapshot: kv}
	out := runTurn(env, item)
	if out.plan == planAbandon {
		return rerr(0, "", "", fmt.Sprintf("orchestration %q version %s is not registered on this runtime", out.name, out.version))
	}
	got := out.ack.HistoryDelta
	if out.outcome.result == turnFailed {
		if c, ok := out.outcome.details.Kind.(provider.ConfigurationError); ok && c.Message != nil {
			if m := out.outcome.mismatch; m != nil {
				return rerr(m.eventID, m.history, m.code, *c.Message)
			}
			if !systemFailure {
				return rerr(0, "", "", *c.Message)
			}
		}
	}
	if !last {
		return nil
	}
	if systemFailure && len(got) > 0 && got[len(got)-1].IsTerminal() {
		got = got[:len(got)-1]
	}
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(want):
			return rerr(got[i].EventID, "nothing (the history ends here)", describeCode(got[i]), "the code does more than the history records")
		case i >= len(got):
			return rerr(want[i].EventID, describeRecorded(want[i]), "nothing (the code stops here)", "the code does less than the history records")
		case !sameEvent(want[i], got[i]):
			return rerr(want[i].EventID, describeRecorded(want[i]), describeCode(got[i]), "the code does something else")
		}
	}
	return nil
}

// sameEvent compares what two events record, ignoring when (timestamps, a timer's fire time:
// timers match by position, as in the engine).
func sameEvent(a, b provider.Event) bool {
	if a.EventType() != b.EventType() || (a.SourceEventID == nil) != (b.SourceEventID == nil) ||
		a.SourceEventID != nil && *a.SourceEventID != *b.SourceEventID {
		return false
	}
	switch a.Kind.(type) {
	case provider.TimerCreatedEvent:
		return true
	case provider.KeyValueSetEvent:
		x, y := a.Kind.(provider.KeyValueSetEvent), b.Kind.(provider.KeyValueSetEvent)
		return x.Key == y.Key && x.Value == y.Value
	}
	x, errX := json.Marshal(a.Kind)
	y, errY := json.Marshal(b.Kind)
	return errX == nil && errY == nil && string(x) == string(y)
}

// describeRecorded renders what a history event records.
func describeRecorded(ev provider.Event) string {
	switch k := ev.Kind.(type) {
	case provider.OrchestrationCompletedEvent:
		return "the orchestration completes with output " + k.Output
	case provider.OrchestrationFailedEvent:
		return "the orchestration fails: " + displayMessage(k.Details)
	case provider.OrchestrationContinuedAsNewEvent:
		return "the orchestration continues as new with input " + k.Input
	case provider.CustomStatusUpdatedEvent:
		return "custom status " + describeStatus(k.Status)
	}
	if ev.SourceEventID != nil && !fromMessage(ev) {
		return fmt.Sprintf("%s of event %d", ev.EventType(), *ev.SourceEventID)
	}
	return describeEvent(&ev)
}

// describeCode renders an event the code produced in the replay, as something the code does.
func describeCode(ev provider.Event) string {
	switch k := ev.Kind.(type) {
	case provider.OrchestrationCompletedEvent:
		return "completes with output " + k.Output
	case provider.OrchestrationFailedEvent:
		return "fails: " + displayMessage(k.Details)
	case provider.OrchestrationContinuedAsNewEvent:
		return "continues as new with input " + k.Input
	case provider.ActivityScheduledEvent:
		return "calls activity " + describeActivity(k.Name, k.Input, k.SessionID, k.Tag)
	case provider.TimerCreatedEvent:
		return "creates a timer"
	case provider.ExternalSubscribedEvent:
		return fmt.Sprintf("waits for event %q", k.Name)
	case provider.QueueSubscribedEvent:
		return fmt.Sprintf("dequeues from %q", k.Name)
	case provider.SubOrchestrationScheduledEvent:
		return fmt.Sprintf("calls sub-orchestration %s(%s)", k.Name, k.Input)
	case provider.OrchestrationChainedEvent:
		return fmt.Sprintf("starts orchestration %s(%s) as %q", k.Name, k.Input, k.Instance)
	case provider.CustomStatusUpdatedEvent:
		return "sets custom status " + describeStatus(k.Status)
	case provider.KeyValueSetEvent:
		return fmt.Sprintf("sets KV %q=%q", k.Key, k.Value)
	case provider.KeyValueClearedEvent:
		return fmt.Sprintf("clears KV %q", k.Key)
	case provider.KeyValuesClearedEvent:
		return "clears all KV"
	}
	if ev.SourceEventID != nil {
		return fmt.Sprintf("records %s of event %d", ev.EventType(), *ev.SourceEventID)
	}
	return "records " + ev.EventType()
}

func describeStatus(s *string) string {
	if s == nil {
		return "cleared"
	}
	return strconv.Quote(*s)
}

// describeEvent renders a schedule event for nondeterminism messages.
func describeEvent(ev *provider.Event) string {
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		return "activity " + describeActivity(k.Name, k.Input, k.SessionID, k.Tag)
	case provider.TimerCreatedEvent:
		return "a timer"
	case provider.ExternalSubscribedEvent:
		return fmt.Sprintf("a wait for event %q", k.Name)
	case provider.QueueSubscribedEvent:
		return fmt.Sprintf("a dequeue from %q", k.Name)
	case provider.SubOrchestrationScheduledEvent:
		return fmt.Sprintf("sub-orchestration %s(%s)", k.Name, k.Input)
	case provider.OrchestrationChainedEvent:
		return fmt.Sprintf("a start of orchestration %s(%s) as %q", k.Name, k.Input, k.Instance)
	case provider.CustomStatusUpdatedEvent:
		return "a custom status update"
	case provider.KeyValueSetEvent:
		return fmt.Sprintf("KV set %q=%q", k.Key, k.Value)
	case provider.KeyValueClearedEvent:
		return fmt.Sprintf("KV clear %q", k.Key)
	case provider.KeyValuesClearedEvent:
		return "KV clear all"
	}
	return ev.EventType()
}

func describeActivity(name, input string, session, tag *string) string {
	s := fmt.Sprintf("%s(%s)", name, input)
	if session != nil {
		s += fmt.Sprintf(" on session %q", *session)
	}
	if tag != nil {
		s += fmt.Sprintf(" tagged %q", *tag)
	}
	return s
}
