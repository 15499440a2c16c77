package provider

import (
	"encoding/json"
	"fmt"
)

// Event is one entry of an orchestration's append-only history. JSON is serde's form: the
// envelope fields, then "type" and the kind's fields flattened into the same object:
//
//	{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":0,
//	 "duroxide_version":"0.1.30","type":"OrchestrationCompleted","output":"42"}
//
// The provider never interprets events except CustomStatusUpdatedEvent and the three KeyValue
// kinds during ack; everything else is stored and returned exactly as given.
type Event struct {
	EventID uint64
	// SourceEventID links a completion to its scheduling event; nil is written as null.
	SourceEventID   *uint64
	InstanceID      string
	ExecutionID     uint64
	TimestampMs     uint64
	DuroxideVersion string
	// Kind is one of the 26 *Event kinds below.
	Kind EventKind
}

// EventKind is the kind-specific part of an Event.
type EventKind interface {
	// EventType is the serde "type" tag of the kind.
	EventType() string
}

// OrchestrationStartedEvent starts an execution. ParentInstance and ParentID are always written
// (null when nil); the other optional fields are omitted when nil or empty.
type OrchestrationStartedEvent struct {
	Name                string         `json:"name"`
	Version             string         `json:"version"`
	Input               string         `json:"input"`
	ParentInstance      *string        `json:"parent_instance"`
	ParentID            *uint64        `json:"parent_id"`
	ParentExecutionID   *uint64        `json:"parent_execution_id,omitempty"`
	CarryForwardEvents  []CarriedEvent `json:"carry_forward_events,omitempty"`
	InitialCustomStatus *string        `json:"initial_custom_status,omitempty"`
}

// OrchestrationCompletedEvent ends an execution successfully (terminal).
type OrchestrationCompletedEvent struct {
	Output string `json:"output"`
}

// OrchestrationFailedEvent ends an execution with an error (terminal).
type OrchestrationFailedEvent struct {
	Details ErrorDetails `json:"details"`
}

// ActivityScheduledEvent records an activity call; SessionID and Tag are omitted when nil.
type ActivityScheduledEvent struct {
	Name      string  `json:"name"`
	Input     string  `json:"input"`
	SessionID *string `json:"session_id,omitempty"`
	Tag       *string `json:"tag,omitempty"`
}

// ActivityCompletedEvent records an activity result.
type ActivityCompletedEvent struct {
	Result string `json:"result"`
}

// ActivityFailedEvent records an activity failure.
type ActivityFailedEvent struct {
	Details ErrorDetails `json:"details"`
}

// ActivityCancelRequestedEvent records the cancellation of a scheduled activity.
type ActivityCancelRequestedEvent struct {
	Reason string `json:"reason"`
}

// TimerCreatedEvent records a durable timer.
type TimerCreatedEvent struct {
	FireAtMs uint64 `json:"fire_at_ms"`
}

// TimerFiredEvent records a timer's expiry.
type TimerFiredEvent struct {
	FireAtMs uint64 `json:"fire_at_ms"`
}

// ExternalSubscribedEvent records a wait for an external event.
type ExternalSubscribedEvent struct {
	Name string `json:"name"`
}

// ExternalEventEvent records a delivered external event.
type ExternalEventEvent struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// OrchestrationChainedEvent records a detached orchestration start.
type OrchestrationChainedEvent struct {
	Name     string `json:"name"`
	Instance string `json:"instance"`
	Input    string `json:"input"`
}

// SubOrchestrationScheduledEvent records a child orchestration start.
type SubOrchestrationScheduledEvent struct {
	Name     string `json:"name"`
	Instance string `json:"instance"`
	Input    string `json:"input"`
}

// SubOrchestrationCompletedEvent records a child's result.
type SubOrchestrationCompletedEvent struct {
	Result string `json:"result"`
}

// SubOrchestrationFailedEvent records a child's failure.
type SubOrchestrationFailedEvent struct {
	Details ErrorDetails `json:"details"`
}

// SubOrchestrationCancelRequestedEvent records the cancellation of a child.
type SubOrchestrationCancelRequestedEvent struct {
	Reason string `json:"reason"`
}

// OrchestrationContinuedAsNewEvent ends an execution by continuing as new (terminal).
type OrchestrationContinuedAsNewEvent struct {
	Input string `json:"input"`
}

// OrchestrationCancelRequestedEvent records a cancellation request.
type OrchestrationCancelRequestedEvent struct {
	Reason string `json:"reason"`
}

// ExternalSubscribedCancelledEvent records a dropped external-event wait.
type ExternalSubscribedCancelledEvent struct {
	Reason string `json:"reason"`
}

// QueueSubscribedEvent records a dequeueEvent wait (stored type "ExternalSubscribedPersistent").
type QueueSubscribedEvent struct {
	Name string `json:"name"`
}

// QueueEventDeliveredEvent records a delivered queue message (stored type "ExternalEventPersistent").
type QueueEventDeliveredEvent struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// QueueSubscriptionCancelledEvent records a dropped queue wait
// (stored type "ExternalSubscribedPersistentCancelled").
type QueueSubscriptionCancelledEvent struct {
	Reason string `json:"reason"`
}

// CustomStatusUpdatedEvent sets (or, with a nil Status, clears) the custom status. Status is
// always written, as null when nil.
type CustomStatusUpdatedEvent struct {
	Status *string `json:"status"`
}

// KeyValueSetEvent sets one KV entry of the instance.
type KeyValueSetEvent struct {
	Key             string `json:"key"`
	Value           string `json:"value"`
	LastUpdatedAtMs uint64 `json:"last_updated_at_ms"`
}

// KeyValueClearedEvent removes one KV entry.
type KeyValueClearedEvent struct {
	Key string `json:"key"`
}

// KeyValuesClearedEvent removes every KV entry of the instance.
type KeyValuesClearedEvent struct{}

// EventType implements EventKind.
func (OrchestrationStartedEvent) EventType() string { return "OrchestrationStarted" }

// EventType implements EventKind.
func (OrchestrationCompletedEvent) EventType() string { return "OrchestrationCompleted" }

// EventType implements EventKind.
func (OrchestrationFailedEvent) EventType() string { return "OrchestrationFailed" }

// EventType implements EventKind.
func (ActivityScheduledEvent) EventType() string { return "ActivityScheduled" }

// EventType implements EventKind.
func (ActivityCompletedEvent) EventType() string { return "ActivityCompleted" }

// EventType implements EventKind.
func (ActivityFailedEvent) EventType() string { return "ActivityFailed" }

// EventType implements EventKind.
func (ActivityCancelRequestedEvent) EventType() string { return "ActivityCancelRequested" }

// EventType implements EventKind.
func (TimerCreatedEvent) EventType() string { return "TimerCreated" }

// EventType implements EventKind.
func (TimerFiredEvent) EventType() string { return "TimerFired" }

// EventType implements EventKind.
func (ExternalSubscribedEvent) EventType() string { return "ExternalSubscribed" }

// EventType implements EventKind.
func (ExternalEventEvent) EventType() string { return "ExternalEvent" }

// EventType implements EventKind.
func (OrchestrationChainedEvent) EventType() string { return "OrchestrationChained" }

// EventType implements EventKind.
func (SubOrchestrationScheduledEvent) EventType() string { return "SubOrchestrationScheduled" }

// EventType implements EventKind.
func (SubOrchestrationCompletedEvent) EventType() string { return "SubOrchestrationCompleted" }

// EventType implements EventKind.
func (SubOrchestrationFailedEvent) EventType() string { return "SubOrchestrationFailed" }

// EventType implements EventKind.
func (SubOrchestrationCancelRequestedEvent) EventType() string {
	return "SubOrchestrationCancelRequested"
}

// EventType implements EventKind.
func (OrchestrationContinuedAsNewEvent) EventType() string { return "OrchestrationContinuedAsNew" }

// EventType implements EventKind.
func (OrchestrationCancelRequestedEvent) EventType() string { return "OrchestrationCancelRequested" }

// EventType implements EventKind.
func (ExternalSubscribedCancelledEvent) EventType() string { return "ExternalSubscribedCancelled" }

// EventType implements EventKind.
func (QueueSubscribedEvent) EventType() string { return "ExternalSubscribedPersistent" }

// EventType implements EventKind.
func (QueueEventDeliveredEvent) EventType() string { return "ExternalEventPersistent" }

// EventType implements EventKind.
func (QueueSubscriptionCancelledEvent) EventType() string {
	return "ExternalSubscribedPersistentCancelled"
}

// EventType implements EventKind.
func (CustomStatusUpdatedEvent) EventType() string { return "CustomStatusUpdated" }

// EventType implements EventKind.
func (KeyValueSetEvent) EventType() string { return "KeyValueSet" }

// EventType implements EventKind.
func (KeyValueClearedEvent) EventType() string { return "KeyValueCleared" }

// EventType implements EventKind.
func (KeyValuesClearedEvent) EventType() string { return "KeyValuesCleared" }

// IsTerminal reports whether the event ends an execution (Completed, Failed, ContinuedAsNew).
func (e Event) IsTerminal() bool {
	switch e.Kind.(type) {
	case OrchestrationCompletedEvent, OrchestrationFailedEvent, OrchestrationContinuedAsNewEvent:
		return true
	}
	return false
}

// EventType returns the kind's "type" tag, or "" when Kind is nil.
func (e Event) EventType() string {
	if e.Kind == nil {
		return ""
	}
	return e.Kind.EventType()
}

type eventEnvelope struct {
	EventID         *uint64 `json:"event_id"`
	SourceEventID   *uint64 `json:"source_event_id"`
	InstanceID      *string `json:"instance_id"`
	ExecutionID     *uint64 `json:"execution_id"`
	TimestampMs     *uint64 `json:"timestamp_ms"`
	DuroxideVersion *string `json:"duroxide_version"`
	Type            string  `json:"type"`
}

// MarshalJSON writes the envelope followed by the flattened kind.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Kind == nil {
		return nil, fmt.Errorf("Event %d: no kind set", e.EventID)
	}
	env, err := Marshal(eventEnvelope{&e.EventID, e.SourceEventID, &e.InstanceID, &e.ExecutionID,
		&e.TimestampMs, &e.DuroxideVersion, e.Kind.EventType()})
	if err != nil {
		return nil, err
	}
	kind, err := Marshal(e.Kind)
	if err != nil {
		return nil, err
	}
	if len(kind) <= 2 { // "{}": a kind without fields
		return env, nil
	}
	out := make([]byte, 0, len(env)+len(kind))
	out = append(out, env[:len(env)-1]...)
	out = append(out, ',')
	return append(out, kind[1:]...), nil
}

// flatEvent has every field any event kind writes (no two kinds use one name with different
// types), so an event decodes in one pass instead of an envelope pass plus a kind pass.
type flatEvent struct {
	eventEnvelope
	Name                *string        `json:"name"`
	Version             *string        `json:"version"`
	Input               *string        `json:"input"`
	Output              *string        `json:"output"`
	Result              *string        `json:"result"`
	Reason              *string        `json:"reason"`
	Data                *string        `json:"data"`
	Instance            *string        `json:"instance"`
	Key                 *string        `json:"key"`
	Value               *string        `json:"value"`
	Status              *string        `json:"status"`
	SessionID           *string        `json:"session_id"`
	Tag                 *string        `json:"tag"`
	ParentInstance      *string        `json:"parent_instance"`
	InitialCustomStatus *string        `json:"initial_custom_status"`
	ParentID            *uint64        `json:"parent_id"`
	ParentExecutionID   *uint64        `json:"parent_execution_id"`
	FireAtMs            *uint64        `json:"fire_at_ms"`
	LastUpdatedAtMs     *uint64        `json:"last_updated_at_ms"`
	Details             *ErrorDetails  `json:"details"`
	CarryForwardEvents  []CarriedEvent `json:"carry_forward_events"`
}

// kind builds the EventKind for f.Type. Missing string and number fields decode to zero values
// (serde would refuse them; the provider only stores what it was given); a missing ErrorDetails
// is an error because it could not be encoded again.
func (f *flatEvent) kind() (EventKind, error) {
	s := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	n := func(p *uint64) uint64 {
		if p == nil {
			return 0
		}
		return *p
	}
	details := func() (ErrorDetails, error) {
		if f.Details == nil {
			return ErrorDetails{}, fmt.Errorf("ErrorDetails: missing or empty")
		}
		return *f.Details, f.Details.valid()
	}
	switch f.Type {
	case "OrchestrationStarted":
		return OrchestrationStartedEvent{Name: s(f.Name), Version: s(f.Version), Input: s(f.Input),
			ParentInstance: f.ParentInstance, ParentID: f.ParentID, ParentExecutionID: f.ParentExecutionID,
			CarryForwardEvents: f.CarryForwardEvents, InitialCustomStatus: f.InitialCustomStatus}, nil
	case "OrchestrationCompleted":
		return OrchestrationCompletedEvent{Output: s(f.Output)}, nil
	case "OrchestrationFailed":
		d, err := details()
		return OrchestrationFailedEvent{Details: d}, err
	case "ActivityScheduled":
		return ActivityScheduledEvent{Name: s(f.Name), Input: s(f.Input), SessionID: f.SessionID, Tag: f.Tag}, nil
	case "ActivityCompleted":
		return ActivityCompletedEvent{Result: s(f.Result)}, nil
	case "ActivityFailed":
		d, err := details()
		return ActivityFailedEvent{Details: d}, err
	case "ActivityCancelRequested":
		return ActivityCancelRequestedEvent{Reason: s(f.Reason)}, nil
	case "TimerCreated":
		return TimerCreatedEvent{FireAtMs: n(f.FireAtMs)}, nil
	case "TimerFired":
		return TimerFiredEvent{FireAtMs: n(f.FireAtMs)}, nil
	case "ExternalSubscribed":
		return ExternalSubscribedEvent{Name: s(f.Name)}, nil
	case "ExternalEvent":
		return ExternalEventEvent{Name: s(f.Name), Data: s(f.Data)}, nil
	case "OrchestrationChained":
		return OrchestrationChainedEvent{Name: s(f.Name), Instance: s(f.Instance), Input: s(f.Input)}, nil
	case "SubOrchestrationScheduled":
		return SubOrchestrationScheduledEvent{Name: s(f.Name), Instance: s(f.Instance), Input: s(f.Input)}, nil
	case "SubOrchestrationCompleted":
		return SubOrchestrationCompletedEvent{Result: s(f.Result)}, nil
	case "SubOrchestrationFailed":
		d, err := details()
		return SubOrchestrationFailedEvent{Details: d}, err
	case "SubOrchestrationCancelRequested":
		return SubOrchestrationCancelRequestedEvent{Reason: s(f.Reason)}, nil
	case "OrchestrationContinuedAsNew":
		return OrchestrationContinuedAsNewEvent{Input: s(f.Input)}, nil
	case "OrchestrationCancelRequested":
		return OrchestrationCancelRequestedEvent{Reason: s(f.Reason)}, nil
	case "ExternalSubscribedCancelled":
		return ExternalSubscribedCancelledEvent{Reason: s(f.Reason)}, nil
	case "ExternalSubscribedPersistent":
		return QueueSubscribedEvent{Name: s(f.Name)}, nil
	case "ExternalEventPersistent":
		return QueueEventDeliveredEvent{Name: s(f.Name), Data: s(f.Data)}, nil
	case "ExternalSubscribedPersistentCancelled":
		return QueueSubscriptionCancelledEvent{Reason: s(f.Reason)}, nil
	case "CustomStatusUpdated":
		return CustomStatusUpdatedEvent{Status: f.Status}, nil
	case "KeyValueSet":
		return KeyValueSetEvent{Key: s(f.Key), Value: s(f.Value), LastUpdatedAtMs: n(f.LastUpdatedAtMs)}, nil
	case "KeyValueCleared":
		return KeyValueClearedEvent{Key: s(f.Key)}, nil
	case "KeyValuesCleared":
		return KeyValuesClearedEvent{}, nil
	}
	return nil, fmt.Errorf("unknown type %q", f.Type)
}

// DecodeEvent decodes one serde-encoded event. It is what UnmarshalJSON does, minus the separate
// validation pass json.Unmarshal makes first: use it to decode many stored events fast. Malformed
// JSON, a missing envelope field, an unknown "type" or a missing ErrorDetails is an error.
func DecodeEvent(b []byte) (Event, error) {
	return decodeEvent(b, nil, nil, nil)
}

// DecodeEventIn is DecodeEvent for a store that leaves the envelope's instance_id,
// execution_id and a common duroxide_version out of the events it keeps under their own
// instance and execution: an absent instance_id is instance, an absent execution_id is
// execution, an absent duroxide_version is version. Fields present are decoded as they are.
func DecodeEventIn(b []byte, instance string, execution uint64, version string) (Event, error) {
	return decodeEvent(b, &instance, &execution, &version)
}

func decodeEvent(b []byte, instance *string, execution *uint64, version *string) (Event, error) {
	var f flatEvent
	if err := json.Unmarshal(b, &f); err != nil {
		return Event{}, fmt.Errorf("Event: %w", err)
	}
	env := f.eventEnvelope
	if env.InstanceID == nil {
		env.InstanceID = instance
	}
	if env.ExecutionID == nil {
		env.ExecutionID = execution
	}
	if env.DuroxideVersion == nil {
		env.DuroxideVersion = version
	}
	if env.EventID == nil || env.InstanceID == nil || env.ExecutionID == nil || env.TimestampMs == nil ||
		env.DuroxideVersion == nil {
		return Event{}, fmt.Errorf("Event: missing envelope field (event_id, instance_id, execution_id, timestamp_ms, duroxide_version)")
	}
	kind, err := f.kind()
	if err != nil {
		return Event{}, fmt.Errorf("Event %s: %w", f.Type, err)
	}
	return Event{*env.EventID, env.SourceEventID, *env.InstanceID, *env.ExecutionID, *env.TimestampMs,
		*env.DuroxideVersion, kind}, nil
}

// UnmarshalJSON reads serde's form; see DecodeEvent.
func (e *Event) UnmarshalJSON(b []byte) error {
	ev, err := DecodeEvent(b)
	if err != nil {
		return err
	}
	*e = ev
	return nil
}
