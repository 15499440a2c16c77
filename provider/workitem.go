package provider

import (
	"encoding/json"
	"fmt"
)

// WorkItem is a message in one of the provider's two queues. Kind holds one of the eleven
// variants below (value types). JSON is serde's externally tagged form, e.g.
// {"ActivityExecute":{"instance":"order-7","execution_id":1,"id":2,"name":"Charge","input":"{}"}},
// with null-versus-omitted exactly as duroxide writes it.
type WorkItem struct {
	Kind WorkItemKind
}

// WorkItemKind is one WorkItem variant.
type WorkItemKind interface {
	// Variant is the serde tag, e.g. "StartOrchestration".
	Variant() string
	// TargetInstance is the instance whose queue the item belongs to: the parent for
	// SubOrchCompleted/SubOrchFailed, the instance field for every other variant.
	TargetInstance() string
}

// StartOrchestration starts (or, for a child, creates) an orchestration instance.
type StartOrchestration struct {
	Instance          string  `json:"instance"`
	Orchestration     string  `json:"orchestration"`
	Input             string  `json:"input"`
	Version           *string `json:"version"`
	ParentInstance    *string `json:"parent_instance"`
	ParentID          *uint64 `json:"parent_id"`
	ParentExecutionID *uint64 `json:"parent_execution_id,omitempty"`
	ExecutionID       uint64  `json:"execution_id"`
}

// ActivityExecute asks a worker to run an activity. It is the only worker-queue variant.
type ActivityExecute struct {
	Instance    string `json:"instance"`
	ExecutionID uint64 `json:"execution_id"`
	// ID is the event_id of the ActivityScheduled event.
	ID        uint64  `json:"id"`
	Name      string  `json:"name"`
	Input     string  `json:"input"`
	SessionID *string `json:"session_id,omitempty"`
	Tag       *string `json:"tag,omitempty"`
}

// ActivityCompleted reports an activity's result.
type ActivityCompleted struct {
	Instance    string `json:"instance"`
	ExecutionID uint64 `json:"execution_id"`
	ID          uint64 `json:"id"`
	Result      string `json:"result"`
}

// ActivityFailed reports an activity's failure.
type ActivityFailed struct {
	Instance    string       `json:"instance"`
	ExecutionID uint64       `json:"execution_id"`
	ID          uint64       `json:"id"`
	Details     ErrorDetails `json:"details"`
}

// TimerFired is a durable timer's expiry; enqueued by an ack it becomes visible at FireAtMs.
type TimerFired struct {
	Instance    string `json:"instance"`
	ExecutionID uint64 `json:"execution_id"`
	ID          uint64 `json:"id"`
	FireAtMs    uint64 `json:"fire_at_ms"`
}

// ExternalRaised is an external event raised by a client.
type ExternalRaised struct {
	Instance string `json:"instance"`
	Name     string `json:"name"`
	Data     string `json:"data"`
}

// SubOrchCompleted reports a child orchestration's result to its parent.
type SubOrchCompleted struct {
	ParentInstance    string `json:"parent_instance"`
	ParentExecutionID uint64 `json:"parent_execution_id"`
	ParentID          uint64 `json:"parent_id"`
	Result            string `json:"result"`
}

// SubOrchFailed reports a child orchestration's failure to its parent.
type SubOrchFailed struct {
	ParentInstance    string       `json:"parent_instance"`
	ParentExecutionID uint64       `json:"parent_execution_id"`
	ParentID          uint64       `json:"parent_id"`
	Details           ErrorDetails `json:"details"`
}

// CancelInstance asks an orchestration to cancel.
type CancelInstance struct {
	Instance string `json:"instance"`
	Reason   string `json:"reason"`
}

// ContinueAsNew starts the next execution of an instance. CarryForwardEvents is always written
// (as [] when empty); the parent fields and InitialCustomStatus are omitted when nil.
type ContinueAsNew struct {
	Instance            string         `json:"instance"`
	Orchestration       string         `json:"orchestration"`
	Input               string         `json:"input"`
	Version             *string        `json:"version"`
	ParentInstance      *string        `json:"parent_instance,omitempty"`
	ParentID            *uint64        `json:"parent_id,omitempty"`
	ParentExecutionID   *uint64        `json:"parent_execution_id,omitempty"`
	CarryForwardEvents  []CarriedEvent `json:"carry_forward_events"`
	InitialCustomStatus *string        `json:"initial_custom_status,omitempty"`
}

// QueueMessage is a message for an orchestration's persistent event queue (dequeueEvent).
type QueueMessage struct {
	Instance string `json:"instance"`
	Name     string `json:"name"`
	Data     string `json:"data"`
}

// CarriedEvent is an unconsumed queue message carried into the next execution; JSON [name, data].
type CarriedEvent struct {
	Name string
	Data string
}

// MarshalJSON writes the pair as a two-element array.
func (c CarriedEvent) MarshalJSON() ([]byte, error) { return Marshal([2]string{c.Name, c.Data}) }

// UnmarshalJSON reads a two-element array of strings.
func (c *CarriedEvent) UnmarshalJSON(b []byte) error {
	var pair []string
	if err := json.Unmarshal(b, &pair); err != nil {
		return fmt.Errorf("carried event: %w", err)
	}
	if len(pair) != 2 {
		return fmt.Errorf("carried event: want [name, data], got %d elements", len(pair))
	}
	*c = CarriedEvent{Name: pair[0], Data: pair[1]}
	return nil
}

// Variant implements WorkItemKind.
func (StartOrchestration) Variant() string { return "StartOrchestration" }

// Variant implements WorkItemKind.
func (ActivityExecute) Variant() string { return "ActivityExecute" }

// Variant implements WorkItemKind.
func (ActivityCompleted) Variant() string { return "ActivityCompleted" }

// Variant implements WorkItemKind.
func (ActivityFailed) Variant() string { return "ActivityFailed" }

// Variant implements WorkItemKind.
func (TimerFired) Variant() string { return "TimerFired" }

// Variant implements WorkItemKind.
func (ExternalRaised) Variant() string { return "ExternalRaised" }

// Variant implements WorkItemKind.
func (SubOrchCompleted) Variant() string { return "SubOrchCompleted" }

// Variant implements WorkItemKind.
func (SubOrchFailed) Variant() string { return "SubOrchFailed" }

// Variant implements WorkItemKind.
func (CancelInstance) Variant() string { return "CancelInstance" }

// Variant implements WorkItemKind.
func (ContinueAsNew) Variant() string { return "ContinueAsNew" }

// Variant implements WorkItemKind.
func (QueueMessage) Variant() string { return "QueueMessage" }

// TargetInstance implements WorkItemKind.
func (w StartOrchestration) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w ActivityExecute) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w ActivityCompleted) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w ActivityFailed) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w TimerFired) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w ExternalRaised) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w SubOrchCompleted) TargetInstance() string { return w.ParentInstance }

// TargetInstance implements WorkItemKind.
func (w SubOrchFailed) TargetInstance() string { return w.ParentInstance }

// TargetInstance implements WorkItemKind.
func (w CancelInstance) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w ContinueAsNew) TargetInstance() string { return w.Instance }

// TargetInstance implements WorkItemKind.
func (w QueueMessage) TargetInstance() string { return w.Instance }

// Variant returns the variant tag, or "" when Kind is nil.
func (w WorkItem) Variant() string {
	if w.Kind == nil {
		return ""
	}
	return w.Kind.Variant()
}

// TargetInstance returns the instance the item is routed to, or "" when Kind is nil.
func (w WorkItem) TargetInstance() string {
	if w.Kind == nil {
		return ""
	}
	return w.Kind.TargetInstance()
}

// MarshalJSON writes serde's externally tagged form.
func (w WorkItem) MarshalJSON() ([]byte, error) {
	switch k := w.Kind.(type) {
	case nil:
		return nil, fmt.Errorf("WorkItem: no variant set")
	case ContinueAsNew:
		if k.CarryForwardEvents == nil {
			k.CarryForwardEvents = []CarriedEvent{}
		}
		return marshalTagged(k.Variant(), k)
	default:
		return marshalTagged(k.Variant(), k)
	}
}

// UnmarshalJSON reads serde's externally tagged form. An unknown variant or malformed JSON is an
// error; unknown fields inside a variant are ignored, as serde does.
func (w *WorkItem) UnmarshalJSON(b []byte) error {
	const what = "WorkItem"
	tag, body, err := unmarshalTagged(what, b)
	if err != nil {
		return err
	}
	var k WorkItemKind
	switch tag {
	case "StartOrchestration":
		k, err = decodeBody[StartOrchestration](what, tag, body)
	case "ActivityExecute":
		k, err = decodeBody[ActivityExecute](what, tag, body)
	case "ActivityCompleted":
		k, err = decodeBody[ActivityCompleted](what, tag, body)
	case "ActivityFailed":
		k, err = decodeBody[ActivityFailed](what, tag, body)
	case "TimerFired":
		k, err = decodeBody[TimerFired](what, tag, body)
	case "ExternalRaised":
		k, err = decodeBody[ExternalRaised](what, tag, body)
	case "SubOrchCompleted":
		k, err = decodeBody[SubOrchCompleted](what, tag, body)
	case "SubOrchFailed":
		k, err = decodeBody[SubOrchFailed](what, tag, body)
	case "CancelInstance":
		k, err = decodeBody[CancelInstance](what, tag, body)
	case "ContinueAsNew":
		var c ContinueAsNew
		c, err = decodeBody[ContinueAsNew](what, tag, body)
		if c.CarryForwardEvents == nil {
			c.CarryForwardEvents = []CarriedEvent{}
		}
		k = c
	case "QueueMessage":
		k, err = decodeBody[QueueMessage](what, tag, body)
	default:
		return fmt.Errorf("%s: unknown variant %q", what, tag)
	}
	if err == nil {
		err = checked(k)
	}
	if err != nil {
		return err
	}
	w.Kind = k
	return nil
}
