package provider

import (
	"encoding/json"
	"fmt"
)

// ErrorDetails is duroxide's structured failure (ActivityFailed, OrchestrationFailed,
// SubOrchestrationFailed events; ActivityFailed and SubOrchFailed work items). Kind holds one of
// InfrastructureError, ConfigurationError, ApplicationError or PoisonError. JSON is serde's
// externally tagged form, e.g. {"Application":{"kind":"ActivityFailed","message":"x","retryable":false}}.
type ErrorDetails struct {
	Kind ErrorKind
}

// ErrorKind is one variant of ErrorDetails.
type ErrorKind interface {
	errorVariant() string
}

// InfrastructureError is a provider or infrastructure failure (variant "Infrastructure").
type InfrastructureError struct {
	Operation string `json:"operation"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// ConfigurationError is a configuration problem such as nondeterminism (variant "Configuration").
type ConfigurationError struct {
	// Kind is the ConfigErrorKind; duroxide 0.1.29–0.1.31 define only "Nondeterminism".
	Kind     string  `json:"kind"`
	Resource string  `json:"resource"`
	Message  *string `json:"message"`
}

// ApplicationError is a failure raised by user code (variant "Application").
type ApplicationError struct {
	Kind      AppErrorKind `json:"kind"`
	Message   string       `json:"message"`
	Retryable bool         `json:"retryable"`
}

// PoisonError reports a message that exceeded its attempt budget (variant "Poison").
type PoisonError struct {
	AttemptCount uint32            `json:"attempt_count"`
	MaxAttempts  uint32            `json:"max_attempts"`
	MessageType  PoisonMessageType `json:"message_type"`
	Message      string            `json:"message"`
}

func (InfrastructureError) errorVariant() string { return "Infrastructure" }
func (ConfigurationError) errorVariant() string  { return "Configuration" }
func (ApplicationError) errorVariant() string    { return "Application" }
func (PoisonError) errorVariant() string         { return "Poison" }

// AppErrorKind names the kind of an ApplicationError.
type AppErrorKind struct {
	// Name is one of AppActivityFailed, AppOrchestrationFailed, AppPanicked, AppCancelled.
	Name string
	// Reason is the cancellation reason; used only when Name is AppCancelled.
	Reason string
}

// The AppErrorKind names duroxide defines.
const (
	AppActivityFailed      = "ActivityFailed"
	AppOrchestrationFailed = "OrchestrationFailed"
	AppPanicked            = "Panicked"
	AppCancelled           = "Cancelled"
)

// MarshalJSON writes a unit variant as a string and Cancelled as {"Cancelled":{"reason":...}}.
func (k AppErrorKind) MarshalJSON() ([]byte, error) {
	switch k.Name {
	case AppActivityFailed, AppOrchestrationFailed, AppPanicked:
		return Marshal(k.Name)
	case AppCancelled:
		return marshalTagged(AppCancelled, struct {
			Reason string `json:"reason"`
		}{k.Reason})
	}
	return nil, fmt.Errorf("AppErrorKind: unknown kind %q", k.Name)
}

// UnmarshalJSON accepts the forms MarshalJSON writes.
func (k *AppErrorKind) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		switch name {
		case AppActivityFailed, AppOrchestrationFailed, AppPanicked:
			*k = AppErrorKind{Name: name}
			return nil
		}
		return fmt.Errorf("AppErrorKind: unknown kind %q", name)
	}
	tag, body, err := unmarshalTagged("AppErrorKind", b)
	if err != nil {
		return err
	}
	if tag != AppCancelled {
		return fmt.Errorf("AppErrorKind: unknown kind %q", tag)
	}
	v, err := decodeBody[struct {
		Reason string `json:"reason"`
	}]("AppErrorKind", tag, body)
	if err != nil {
		return err
	}
	*k = AppErrorKind{Name: AppCancelled, Reason: v.Reason}
	return nil
}

// PoisonMessageType says what kind of message was poisoned. Kind holds one of PoisonOrchestration,
// PoisonActivity or PoisonFailedDeserialization.
type PoisonMessageType struct {
	Kind PoisonKind
}

// PoisonKind is one variant of PoisonMessageType.
type PoisonKind interface {
	poisonVariant() string
}

// PoisonOrchestration is an orchestration turn that kept failing (variant "Orchestration").
type PoisonOrchestration struct {
	Instance    string `json:"instance"`
	ExecutionID uint64 `json:"execution_id"`
}

// PoisonActivity is an activity that kept failing (variant "Activity").
type PoisonActivity struct {
	Instance     string `json:"instance"`
	ExecutionID  uint64 `json:"execution_id"`
	ActivityName string `json:"activity_name"`
	ActivityID   uint64 `json:"activity_id"`
}

// PoisonFailedDeserialization is history that kept failing to decode (variant "FailedDeserialization").
type PoisonFailedDeserialization struct {
	Instance    string `json:"instance"`
	ExecutionID uint64 `json:"execution_id"`
	Error       string `json:"error"`
}

func (PoisonOrchestration) poisonVariant() string         { return "Orchestration" }
func (PoisonActivity) poisonVariant() string              { return "Activity" }
func (PoisonFailedDeserialization) poisonVariant() string { return "FailedDeserialization" }

// MarshalJSON writes the externally tagged form.
func (p PoisonMessageType) MarshalJSON() ([]byte, error) {
	if p.Kind == nil {
		return nil, fmt.Errorf("PoisonMessageType: no variant set")
	}
	return marshalTagged(p.Kind.poisonVariant(), p.Kind)
}

// UnmarshalJSON reads the externally tagged form; an unknown variant is an error.
func (p *PoisonMessageType) UnmarshalJSON(b []byte) error {
	const what = "PoisonMessageType"
	tag, body, err := unmarshalTagged(what, b)
	if err != nil {
		return err
	}
	var k PoisonKind
	switch tag {
	case "Orchestration":
		k, err = decodeBody[PoisonOrchestration](what, tag, body)
	case "Activity":
		k, err = decodeBody[PoisonActivity](what, tag, body)
	case "FailedDeserialization":
		k, err = decodeBody[PoisonFailedDeserialization](what, tag, body)
	default:
		return fmt.Errorf("%s: unknown variant %q", what, tag)
	}
	if err != nil {
		return err
	}
	p.Kind = k
	return nil
}

// MarshalJSON writes the externally tagged form.
func (d ErrorDetails) MarshalJSON() ([]byte, error) {
	if d.Kind == nil {
		return nil, fmt.Errorf("ErrorDetails: no variant set")
	}
	return marshalTagged(d.Kind.errorVariant(), d.Kind)
}

// UnmarshalJSON reads the externally tagged form; an unknown variant is an error.
func (d *ErrorDetails) UnmarshalJSON(b []byte) error {
	const what = "ErrorDetails"
	tag, body, err := unmarshalTagged(what, b)
	if err != nil {
		return err
	}
	var k ErrorKind
	switch tag {
	case "Infrastructure":
		k, err = decodeBody[InfrastructureError](what, tag, body)
	case "Configuration":
		k, err = decodeBody[ConfigurationError](what, tag, body)
	case "Application":
		k, err = decodeBody[ApplicationError](what, tag, body)
	case "Poison":
		k, err = decodeBody[PoisonError](what, tag, body)
	default:
		return fmt.Errorf("%s: unknown variant %q", what, tag)
	}
	if err != nil {
		return err
	}
	if err := (ErrorDetails{k}).valid(); err != nil {
		return err
	}
	d.Kind = k
	return nil
}

// valid reports whether d holds a complete variant (decoding leaves a missing "details" or
// "kind" at its zero value, which could not be encoded again).
func (d ErrorDetails) valid() error {
	switch k := d.Kind.(type) {
	case nil:
		return fmt.Errorf("ErrorDetails: missing or empty")
	case ApplicationError:
		if k.Kind.Name == "" {
			return fmt.Errorf("ErrorDetails Application: missing kind")
		}
	case PoisonError:
		if k.MessageType.Kind == nil {
			return fmt.Errorf("ErrorDetails Poison: missing message_type")
		}
	}
	return nil
}

// checker is implemented by work item variants with required nested values (events check
// theirs in flatEvent.kind).
type checker interface{ check() error }

func (k ActivityFailed) check() error { return k.Details.valid() }
func (k SubOrchFailed) check() error  { return k.Details.valid() }

// checked runs v's check when it has one.
func checked(v any) error {
	if c, ok := v.(checker); ok {
		return c.check()
	}
	return nil
}
