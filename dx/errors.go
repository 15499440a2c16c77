package dx

import (
	"fmt"
	"strings"

	"github.com/duroxide-go/dxredis/provider"
)

// Errors that crossed the wire, and the text duroxide shows for them.

// Error is a failure that crossed the wire: a failed activity or sub-orchestration as Await returns
// it, or a failed orchestration as the client reports it. Details are duroxide's ErrorDetails.
type Error struct {
	Details provider.ErrorDetails
}

// Error renders the details as duroxide's display_message does.
func (e *Error) Error() string { return displayMessage(e.Details) }

// Is lets errors.Is match ErrCanceled for a cancelled orchestration or sub-orchestration, and
// ErrPermanent for an activity that failed with a Permanent error.
func (e *Error) Is(target error) bool {
	a, ok := e.Details.Kind.(provider.ApplicationError)
	switch target {
	case ErrCanceled:
		return ok && a.Kind.Name == provider.AppCancelled
	case ErrPermanent:
		return ok && a.Kind.Name == provider.AppActivityFailed && strings.HasPrefix(a.Message, permanentMark)
	}
	return false
}

// displayMessage is duroxide's ErrorDetails::display_message: the text clients and parents see.
func displayMessage(d provider.ErrorDetails) string {
	switch k := d.Kind.(type) {
	case provider.InfrastructureError:
		return fmt.Sprintf("infrastructure:%s: %s", k.Operation, k.Message)
	case provider.ConfigurationError:
		if k.Message != nil {
			return "nondeterministic: " + *k.Message
		}
		return "nondeterministic in " + k.Resource
	case provider.ApplicationError:
		switch k.Kind.Name {
		case provider.AppCancelled:
			return "canceled: " + k.Kind.Reason
		case provider.AppPanicked:
			return "orchestration panicked: " + k.Message
		}
		return k.Message
	case provider.PoisonError:
		switch m := k.MessageType.Kind.(type) {
		case provider.PoisonOrchestration:
			return fmt.Sprintf("poison: orchestration %s exceeded %d attempts (max %d)", m.Instance, k.AttemptCount, k.MaxAttempts)
		case provider.PoisonActivity:
			return fmt.Sprintf("poison: activity %s#%d exceeded %d attempts (max %d)", m.ActivityName, m.ActivityID, k.AttemptCount, k.MaxAttempts)
		case provider.PoisonFailedDeserialization:
			return fmt.Sprintf("poison: orchestration %s history deserialization failed after %d attempts (max %d): %s",
				m.Instance, k.AttemptCount, k.MaxAttempts, m.Error)
		}
		return k.Message
	}
	return "unknown error"
}

// appError builds Application error details.
func appError(kind, msg string) provider.ErrorDetails {
	return provider.ErrorDetails{Kind: provider.ApplicationError{Kind: provider.AppErrorKind{Name: kind}, Message: msg}}
}
