package provider_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

var sentinels = []struct {
	name string
	err  error
}{
	{"ErrInvalidLockToken", provider.ErrInvalidLockToken},
	{"ErrNotFound", provider.ErrNotFound},
	{"ErrDuplicateEvent", provider.ErrDuplicateEvent},
	{"ErrInstanceRunning", provider.ErrInstanceRunning},
	{"ErrInvalidInput", provider.ErrInvalidInput},
}

func TestProviderErrorError(t *testing.T) {
	tests := []struct {
		err  *provider.ProviderError
		want string
	}{
		{&provider.ProviderError{Operation: "ack_orchestration_item", Message: "lock expired"}, "ack_orchestration_item: lock expired"},
		{provider.NewRetryableError("fetch_work_item", "connection refused"), "fetch_work_item: connection refused"},
		{provider.NewPermanentError("enqueue_for_worker", "bad input"), "enqueue_for_worker: bad input"},
		// Kind and Cause do not change the text: the message already says what went wrong.
		{provider.NewPermanentError("read", "no such instance").WithKind(provider.ErrNotFound).WithCause(io.EOF), "read: no such instance"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestProviderErrorConstructors(t *testing.T) {
	r := provider.NewRetryableError("op_r", "msg r")
	if r.Operation != "op_r" || r.Message != "msg r" || !r.Retryable || r.Kind != nil || r.Cause != nil {
		t.Errorf("NewRetryableError = %+v", *r)
	}
	p := provider.NewPermanentError("op_p", "msg p")
	if p.Operation != "op_p" || p.Message != "msg p" || p.Retryable || p.Kind != nil || p.Cause != nil {
		t.Errorf("NewPermanentError = %+v", *p)
	}
	if got := p.WithKind(provider.ErrNotFound); got != p || p.Kind != provider.ErrNotFound {
		t.Error("WithKind does not set Kind on and return the same error")
	}
	if got := p.WithCause(io.EOF); got != p || p.Cause != io.EOF {
		t.Error("WithCause does not set Cause on and return the same error")
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	for i, a := range sentinels {
		for j, b := range sentinels {
			if i != j && errors.Is(a.err, b.err) {
				t.Errorf("%s matches %s", a.name, b.name)
			}
		}
	}
}

func TestProviderErrorIsKind(t *testing.T) {
	for _, s := range sentinels {
		t.Run(s.name, func(t *testing.T) {
			base := provider.NewPermanentError("op", "msg").WithKind(s.err)
			for _, err := range []error{base, fmt.Errorf("outer: %w", base), fmt.Errorf("a: %w", fmt.Errorf("b: %w", base))} {
				if !errors.Is(err, s.err) {
					t.Errorf("errors.Is(%q, %s) = false", err, s.name)
				}
				for _, other := range sentinels {
					if other.err != s.err && errors.Is(err, other.err) {
						t.Errorf("errors.Is(%q, %s) = true", err, other.name)
					}
				}
			}
		})
	}

	bare := provider.NewPermanentError("op", "msg")
	for _, s := range sentinels {
		if errors.Is(bare, s.err) {
			t.Errorf("an error without Kind matches %s", s.name)
		}
	}
	if errors.Is(bare, io.EOF) {
		t.Error("an error without Cause matches io.EOF")
	}
}

func TestProviderErrorCause(t *testing.T) {
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	err := fmt.Errorf("wrapped: %w",
		provider.NewRetryableError("fetch", "dial failed").WithKind(provider.ErrNotFound).WithCause(opErr))

	// Kind and Cause are both visible.
	if !errors.Is(err, provider.ErrNotFound) {
		t.Error("Kind not visible when Cause is set")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Error("errors.Is does not reach through Cause")
	}
	var gotOp *net.OpError
	if !errors.As(err, &gotOp) || gotOp != opErr {
		t.Errorf("errors.As(*net.OpError) = %v, want the cause", gotOp)
	}
}

func TestProviderErrorAs(t *testing.T) {
	pe := provider.NewPermanentError("ack_work_item", "lock lost").WithKind(provider.ErrInvalidLockToken)
	for _, err := range []error{pe, fmt.Errorf("x: %w", pe), fmt.Errorf("y: %w", fmt.Errorf("x: %w", pe)), errors.Join(io.EOF, pe)} {
		var got *provider.ProviderError
		if !errors.As(err, &got) || got != pe {
			t.Errorf("errors.As(%q) = %v, want the ProviderError", err, got)
		}
		if got, ok := provider.AsProviderError(err); !ok || got != pe {
			t.Errorf("AsProviderError(%q) = %v, %v", err, got, ok)
		}
	}
	for _, err := range []error{nil, io.EOF, errors.New("plain"), fmt.Errorf("w: %w", provider.ErrNotFound)} {
		if got, ok := provider.AsProviderError(err); ok || got != nil {
			t.Errorf("AsProviderError(%v) = %v, %v; want nil, false", err, got, ok)
		}
	}
}

func TestProviderErrorToErrorDetails(t *testing.T) {
	for _, retryable := range []bool{true, false} {
		pe := &provider.ProviderError{Operation: "ack", Message: "boom", Retryable: retryable}
		want := provider.InfrastructureError{Operation: "ack", Message: "boom", Retryable: retryable}
		if got := pe.ToErrorDetails().Kind; got != want {
			t.Errorf("ToErrorDetails().Kind = %#v, want %#v", got, want)
		}
	}
}

func TestIsRetryable(t *testing.T) {
	expired, cancelExpired := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancelExpired()
	<-expired.Done()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	opErr := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6379}, Err: syscall.ECONNREFUSED}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},

		// A ProviderError is classified by its flag, both ways, whatever it wraps.
		{"retryable ProviderError", provider.NewRetryableError("fetch", "timeout"), true},
		{"permanent ProviderError", provider.NewPermanentError("ack", "lock lost"), false},
		{"wrapped retryable ProviderError", fmt.Errorf("ctx: %w", provider.NewRetryableError("fetch", "timeout")), true},
		{"wrapped permanent ProviderError", fmt.Errorf("ctx: %w", provider.NewPermanentError("ack", "lock lost")), false},
		{"permanent ProviderError with a kind", provider.NewPermanentError("ack", "x").WithKind(provider.ErrInvalidLockToken), false},
		{"permanent ProviderError caused by a network error", provider.NewPermanentError("ack", "x").WithCause(opErr), false},
		{"permanent ProviderError caused by a deadline", provider.NewPermanentError("ack", "x").WithCause(context.DeadlineExceeded), false},
		{"retryable ProviderError caused by cancellation", provider.NewRetryableError("fetch", "x").WithCause(context.Canceled), true},
		{"retryable ProviderError with a permanent kind", provider.NewRetryableError("fetch", "x").WithKind(provider.ErrNotFound), true},

		{"context.Canceled", context.Canceled, false},
		{"wrapped context.Canceled", fmt.Errorf("fetch: %w", context.Canceled), false},
		{"cancelled context", cancelled.Err(), false},
		// A dial or read interrupted by the caller's cancellation is not worth retrying, although it is a net.Error.
		{"net.OpError caused by cancellation", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}, false},
		{"wrapped net.OpError caused by cancellation", fmt.Errorf("redis: %w", &net.OpError{Op: "read", Net: "tcp", Err: cancelled.Err()}), false},
		{"context.DeadlineExceeded", context.DeadlineExceeded, true},
		{"wrapped context.DeadlineExceeded", fmt.Errorf("fetch: %w", context.DeadlineExceeded), true},
		{"expired context", expired.Err(), true},

		{"net.OpError dial refused", opErr, true},
		{"wrapped net.OpError", fmt.Errorf("redis: %w", opErr), true},
		{"net.OpError read timeout", readTimeout, true},
		{"net.DNSError", &net.DNSError{Err: "no such host", Name: "redis.invalid", IsNotFound: true}, true},
		{"io.EOF", io.EOF, true},
		{"io.ErrUnexpectedEOF", io.ErrUnexpectedEOF, true},

		{"plain error", errors.New("boom"), false},
		{"formatted error", fmt.Errorf("boom %d", 1), false},
		{"bare ErrInvalidLockToken", provider.ErrInvalidLockToken, false},
		{"bare ErrNotFound", provider.ErrNotFound, false},
		{"bare ErrDuplicateEvent", provider.ErrDuplicateEvent, false},
		{"bare ErrInvalidInput", provider.ErrInvalidInput, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.IsRetryable(tt.err); got != tt.want {
				t.Errorf("IsRetryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
