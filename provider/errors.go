package provider

import (
	"context"
	"errors"
	"io"
	"net"
)

// ProviderError is the error every Provider and Admin method returns. Retryable tells the runtime
// whether calling again (for an ack: with the same lock token) can succeed: connection failures
// and timeouts are retryable; lost or invalid locks, duplicates, missing instances and bad input
// are permanent. A retryable error is only reported when the failed call changed nothing.
type ProviderError struct {
	// Operation is the provider method that failed, e.g. "ack_orchestration_item".
	Operation string
	// Message says what went wrong.
	Message string
	// Retryable is true when the same call may succeed later.
	Retryable bool
	// Kind, when set, is one of the Err* sentinels; errors.Is(err, Kind) is true.
	Kind error
	// Cause, when set, is the underlying error; errors.Is/As see it too.
	Cause error
}

// Sentinels for the common permanent failures; match them with errors.Is.
var (
	// ErrInvalidLockToken: the lock token is unknown, was already used, or its lock expired.
	ErrInvalidLockToken = errors.New("invalid lock token")
	// ErrNotFound: the instance (or execution, or work item) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrDuplicateEvent: the history already holds an event with this (execution, event_id).
	ErrDuplicateEvent = errors.New("duplicate event")
	// ErrInstanceRunning: the instance is still running and force was not given.
	ErrInstanceRunning = errors.New("instance running")
	// ErrInvalidInput: an argument is malformed (empty id, event_id 0, wrong work item variant, oversized payload...).
	ErrInvalidInput = errors.New("invalid input")
	// ErrOutcomeUnknown (retryable): the call reached the store but its reply was lost, and the
	// provider's own retries (which cannot apply it twice) got no answer either, so it may or may
	// not have been applied. Calling again is a new call: an enqueue may then be stored twice, and
	// an ack that had committed reports ErrInvalidLockToken.
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// Error formats the error as "operation: message".
func (e *ProviderError) Error() string { return e.Operation + ": " + e.Message }

// Unwrap exposes Kind and Cause to errors.Is and errors.As.
func (e *ProviderError) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// NewRetryableError returns a retryable error.
func NewRetryableError(op, msg string) *ProviderError {
	return &ProviderError{Operation: op, Message: msg, Retryable: true}
}

// NewPermanentError returns a permanent error.
func NewPermanentError(op, msg string) *ProviderError {
	return &ProviderError{Operation: op, Message: msg}
}

// WithKind sets the sentinel kind and returns e.
func (e *ProviderError) WithKind(kind error) *ProviderError { e.Kind = kind; return e }

// WithCause sets the underlying error and returns e.
func (e *ProviderError) WithCause(cause error) *ProviderError { e.Cause = cause; return e }

// ToErrorDetails maps the error to duroxide's ErrorDetails Infrastructure variant.
func (e *ProviderError) ToErrorDetails() ErrorDetails {
	return ErrorDetails{Kind: InfrastructureError{Operation: e.Operation, Message: e.Message, Retryable: e.Retryable}}
}

// AsProviderError returns the *ProviderError in err's chain, if any.
func AsProviderError(err error) (*ProviderError, bool) {
	var pe *ProviderError
	ok := errors.As(err, &pe)
	return pe, ok
}

// IsRetryable classifies any error: a ProviderError by its flag; a deadline, a network error or an
// unexpected EOF as retryable; a cancelled context and anything else as permanent.
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if pe, ok := AsProviderError(err); ok {
		return pe.Retryable
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
