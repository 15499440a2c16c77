package dx

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// DuroxideVersion is the version of duroxide's semantics this engine reproduces, stamped as
// duroxide_version on every event it writes (so capability filters see which engine wrote an
// execution). Releases of your own code are told apart by orchestration versions, not by this.
const DuroxideVersion = "0.1.30"

// Raw is a payload passed as it is: as an input it is sent without JSON encoding, as a result type it
// receives the stored text without decoding. Use it for payloads that are not JSON or that you
// decode yourself.
type Raw string

// encode encodes a payload as JSON text the way duroxide stores it (no HTML escaping).
func encode(v any) (string, error) {
	switch r := v.(type) {
	case Raw:
		return string(r), nil
	case json.RawMessage:
		return string(r), nil
	}
	b, err := provider.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("dx: input %T does not encode as JSON (%w): %w", v, ErrInvalidInput, err)
	}
	return string(b), nil
}

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

func parseVersion(v string) (*semver.Version, error) {
	sv, err := semver.StrictNewVersion(v)
	if err != nil {
		return nil, fmt.Errorf("dx: version %q is not a semantic version like 1.2.0: %w (%w)", v, err, ErrInvalidInput)
	}
	return sv, nil
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

// userLogger is the orchestration's logger: it drops records while the code replays (checked when
// a record is logged, so a logger kept in a variable behaves too).
func (e *engine) userLogger() *slog.Logger {
	if e.userLog == nil {
		e.userLog = slog.New(replayHandler{e, e.log().Handler()})
	}
	return e.userLog
}

type replayHandler struct {
	e *engine
	h slog.Handler
}

func (r replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !r.e.replaying && !r.e.teardown && r.h.Enabled(ctx, l)
}
func (r replayHandler) Handle(ctx context.Context, rec slog.Record) error {
	return r.h.Handle(ctx, rec)
}
func (r replayHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return replayHandler{r.e, r.h.WithAttrs(as)}
}
func (r replayHandler) WithGroup(g string) slog.Handler { return replayHandler{r.e, r.h.WithGroup(g)} }
