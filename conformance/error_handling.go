package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("error_handling",
		test{"test_invalid_lock_token_on_ack", InvalidLockTokenOnAck},
		test{"test_duplicate_event_id_rejection", DuplicateEventIDRejection},
		test{"test_missing_instance_metadata", MissingInstanceMetadata},
		test{"test_corrupted_serialization_data", CorruptedSerializationData},
		test{"test_lock_expiration_during_ack", LockExpirationDuringAck},
		test{"test_read_corrupted_history_returns_error", ReadCorruptedHistoryReturnsError},
		test{"test_read_with_execution_corrupted_history_returns_error", ReadWithExecutionCorruptedHistoryReturnsError},
	)
}

// InvalidLockTokenOnAck proves an ack with an unknown token fails with a message naming the lock token.
func InvalidLockTokenOnAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	err := p.AckOrchestrationItem(ctx(t), "invalid-token", provider.OrchestrationAck{ExecutionID: 1})
	wantErr(t, err, "ack with invalid token")
	pe, ok := provider.AsProviderError(err)
	if !ok {
		t.Fatalf("ack with invalid token: error %T (%v) is not a *ProviderError", err, err)
	}
	if !strings.Contains(pe.Message, "Invalid lock token") && !strings.Contains(pe.Message, "lock_token") {
		t.Fatalf("ack with invalid token: message %q contains neither %q nor %q", pe.Message, "Invalid lock token", "lock_token")
	}
}

// DuplicateEventIDRejection proves an ack reusing an existing event id fails and leaves history unchanged.
func DuplicateEventIDRejection(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "instance-A"
	atomStartAck(t, p, inst)

	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, longLock)
	err := p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID:  1,
		HistoryDelta: []provider.Event{ev(inst, 1, provider.ActivityScheduledEvent{Name: "Activity", Input: "{}"})},
	})
	wantErr(t, err, "ack with duplicate event_id 1")

	h := mustRead(t, p, inst)
	if len(h) != 1 {
		t.Fatalf("history: got %d events, want 1", len(h))
	}
	if _, ok := h[0].Kind.(provider.OrchestrationStartedEvent); !ok {
		t.Fatalf("history[0]: got %s, want OrchestrationStarted", h[0].EventType())
	}
}

// MissingInstanceMetadata proves reading an unknown instance yields no events (an error is tolerated).
func MissingInstanceMetadata(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	h, err := p.Read(ctx(t), "non-existent-instance")
	if err != nil {
		h = nil // duroxide tolerates an error here (unwrap_or_default)
	}
	if len(h) != 0 {
		t.Fatalf("read unknown instance: got %d events, want 0", len(h))
	}
}

// CorruptedSerializationData proves a fetch on an empty store answers without failing.
func CorruptedSerializationData(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	fetchOrch(t, p, longLock)
}

// LockExpirationDuringAck proves an ack after the lock expired fails.
func LockExpirationDuringAck(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	l := f.LockTimeout()
	const inst = "instance-A"
	mustEnqueueOrch(t, p, startItem(inst))
	it := mustFetchOrch(t, p, l)

	time.Sleep(l + 100*time.Millisecond)
	err := p.AckOrchestrationItem(ctx(t), it.LockToken, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: []provider.Event{started(inst)},
	})
	wantErr(t, err, "ack after lock expiry")
}

// ReadCorruptedHistoryReturnsError proves read fails on undecodable history instead of dropping events.
func ReadCorruptedHistoryReturnsError(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "inst-read-corrupt"
	createInstance(t, p, inst)
	if len(mustRead(t, p, inst)) == 0 {
		t.Fatal("history is empty before corruption")
	}
	f.CorruptInstanceHistory(t, p, inst)
	if h, err := p.Read(ctx(t), inst); err == nil {
		t.Fatalf("read of corrupted history: got Ok with %d events, want an error", len(h))
	}
}

// ReadWithExecutionCorruptedHistoryReturnsError proves read_with_execution fails on undecodable history.
func ReadWithExecutionCorruptedHistoryReturnsError(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "inst-rwe-corrupt"
	createInstance(t, p, inst)
	h, err := p.ReadWithExecution(ctx(t), inst, 1)
	wantNoErr(t, err, "read_with_execution before corruption")
	if len(h) == 0 {
		t.Fatal("history is empty before corruption")
	}
	f.CorruptInstanceHistory(t, p, inst)
	if h, err := p.ReadWithExecution(ctx(t), inst, 1); err == nil {
		t.Fatalf("read_with_execution of corrupted history: got Ok with %d events, want an error", len(h))
	}
}
