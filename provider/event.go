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

func (OrchestrationStartedEvent) EventType() string      { return "OrchestrationStarted" }
func (OrchestrationCompletedEvent) EventType() string    { return "OrchestrationCompleted" }
func (OrchestrationFailedEvent) EventType() string       { return "OrchestrationFailed" }
func (ActivityScheduledEvent) EventType() string         { return "ActivityScheduled" }
func (ActivityCompletedEvent) EventType() string         { return "ActivityCompleted" }
func (ActivityFailedEvent) EventType() string            { return "ActivityFailed" }
func (ActivityCancelRequestedEvent) EventType() string   { return "ActivityCancelRequested" }
func (TimerCreatedEvent) EventType() string              { return "TimerCreated" }
func (TimerFiredEvent) EventType() string                { return "TimerFired" }
func (ExternalSubscribedEvent) EventType() string        { return "ExternalSubscribed" }
func (ExternalEventEvent) EventType() string             { return "ExternalEvent" }
func (OrchestrationChainedEvent) EventType() string      { return "OrchestrationChained" }
func (SubOrchestrationScheduledEvent) EventType() string { return "SubOrchestrationScheduled" }
func (SubOrchestrationCompletedEvent) EventType() string { return "SubOrchestrationCompleted" }
func (SubOrchestrationFailedEvent) EventType() string    { return "SubOrchestrationFailed" }
func (SubOrchestrationCancelRequestedEvent) EventType() string {
	return "SubOrchestrationCancelRequested"
}
func (OrchestrationContinuedAsNewEvent) EventType() string  { return "OrchestrationContinuedAsNew" }
func (OrchestrationCancelRequestedEvent) EventType() string { return "OrchestrationCancelRequested" }
func (ExternalSubscribedCancelledEvent) EventType() string  { return "ExternalSubscribedCancelled" }
func (QueueSubscribedEvent) EventType() string              { return "ExternalSubscribedPersistent" }
func (QueueEventDeliveredEvent) EventType() string          { return "ExternalEventPersistent" }
func (QueueSubscriptionCancelledEvent) EventType() string {
	return "ExternalSubscribedPersistentCancelled"
}
func (CustomStatusUpdatedEvent) EventType() string { return "CustomStatusUpdated" }
func (KeyValueSetEvent) EventType() string         { return "KeyValueSet" }
func (KeyValueClearedEvent) EventType() string     { return "KeyValueCleared" }
func (KeyValuesClearedEvent) EventType() string    { return "KeyValuesCleared" }

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

var eventDecoders = map[string]func([]byte) (EventKind, error){}

func registerKind[T EventKind]() {
	var zero T
	typ := zero.EventType()
	eventDecoders[typ] = func(b []byte) (EventKind, error) {
		var k T
		if err := json.Unmarshal(b, &k); err != nil {
			return nil, fmt.Errorf("Event %s: %w", typ, err)
		}
		if err := checked(k); err != nil {
			return nil, fmt.Errorf("Event %s: %w", typ, err)
		}
		return k, nil
	}
}

func init() {
	registerKind[OrchestrationStartedEvent]()
	registerKind[OrchestrationCompletedEvent]()
	registerKind[OrchestrationFailedEvent]()
	registerKind[ActivityScheduledEvent]()
	registerKind[ActivityCompletedEvent]()
	registerKind[ActivityFailedEvent]()
	registerKind[ActivityCancelRequestedEvent]()
	registerKind[TimerCreatedEvent]()
	registerKind[TimerFiredEvent]()
	registerKind[ExternalSubscribedEvent]()
	registerKind[ExternalEventEvent]()
	registerKind[OrchestrationChainedEvent]()
	registerKind[SubOrchestrationScheduledEvent]()
	registerKind[SubOrchestrationCompletedEvent]()
	registerKind[SubOrchestrationFailedEvent]()
	registerKind[SubOrchestrationCancelRequestedEvent]()
	registerKind[OrchestrationContinuedAsNewEvent]()
	registerKind[OrchestrationCancelRequestedEvent]()
	registerKind[ExternalSubscribedCancelledEvent]()
	registerKind[QueueSubscribedEvent]()
	registerKind[QueueEventDeliveredEvent]()
	registerKind[QueueSubscriptionCancelledEvent]()
	registerKind[CustomStatusUpdatedEvent]()
	registerKind[KeyValueSetEvent]()
	registerKind[KeyValueClearedEvent]()
	registerKind[KeyValuesClearedEvent]()
}

// UnmarshalJSON reads serde's form. Malformed JSON, a missing envelope field or an unknown
// "type" is an error (duroxide fails the same way; the provider reports it as history_error).
func (e *Event) UnmarshalJSON(b []byte) error {
	var env eventEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("Event: %w", err)
	}
	if env.EventID == nil || env.InstanceID == nil || env.ExecutionID == nil || env.TimestampMs == nil ||
		env.DuroxideVersion == nil {
		return fmt.Errorf("Event: missing envelope field (event_id, instance_id, execution_id, timestamp_ms, duroxide_version)")
	}
	dec, ok := eventDecoders[env.Type]
	if !ok {
		return fmt.Errorf("Event: unknown type %q", env.Type)
	}
	kind, err := dec(b)
	if err != nil {
		return err
	}
	*e = Event{*env.EventID, env.SourceEventID, *env.InstanceID, *env.ExecutionID, *env.TimestampMs,
		*env.DuroxideVersion, kind}
	return nil
}
