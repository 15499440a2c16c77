package conformance

import (
	"fmt"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

func init() {
	register("custom_status",
		test{"test_custom_status_set", CustomStatusSet},
		test{"test_custom_status_clear", CustomStatusClear},
		test{"test_custom_status_none_preserves", CustomStatusNonePreserves},
		test{"test_custom_status_version_increments", CustomStatusVersionIncrements},
		test{"test_custom_status_polling_no_change", CustomStatusPollingNoChange},
		test{"test_custom_status_nonexistent_instance", CustomStatusNonexistentInstance},
		test{"test_custom_status_default_on_new_instance", CustomStatusDefaultOnNewInstance},
	)
}

// customStatusTurn acks delta on execution 1 in a poked turn.
func customStatusTurn(t *testing.T, p provider.Provider, instance string, delta ...provider.Event) {
	t.Helper()
	pokeTurn(t, p, instance, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta})
}

// customStatusEvent is a CustomStatusUpdated event (status nil: cleared).
func customStatusEvent(instance string, eventID uint64, status *string) provider.Event {
	return ev(instance, eventID, provider.CustomStatusUpdatedEvent{Status: status})
}

// customStatusGet calls get_custom_status, failing the test on error.
func customStatusGet(t *testing.T, p provider.Provider, instance string, lastSeen uint64) *provider.CustomStatus {
	t.Helper()
	cs, err := p.GetCustomStatus(ctx(t), instance, lastSeen)
	wantNoErr(t, err, "get_custom_status")
	return cs
}

// customStatusFmt renders a get_custom_status result for messages.
func customStatusFmt(cs *provider.CustomStatus) string {
	if cs == nil {
		return "nothing"
	}
	return fmt.Sprintf("status %s version %d", sessionStr(cs.Status), cs.Version)
}

// customStatusWant fails the test unless get_custom_status(instance, 0) returns status (nil:
// cleared) at version.
func customStatusWant(t *testing.T, p provider.Provider, instance string, status *string, version uint64) {
	t.Helper()
	cs := customStatusGet(t, p, instance, 0)
	if cs == nil {
		t.Fatalf("get_custom_status(%q, 0): got nothing, want status %s version %d", instance, sessionStr(status), version)
	}
	if (cs.Status == nil) != (status == nil) || (status != nil && *cs.Status != *status) || cs.Version != version {
		t.Fatalf("get_custom_status(%q, 0) = %s, want status %s version %d",
			instance, customStatusFmt(cs), sessionStr(status), version)
	}
}

// CustomStatusSet proves a CustomStatusUpdated event in an ack sets the custom status at version 1.
func CustomStatusSet(t *testing.T, f Factory) {
	const instance = "cs-set"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	customStatusTurn(t, p, instance, customStatusEvent(instance, 100, ptr("progress")))
	customStatusWant(t, p, instance, ptr("progress"), 1)
}

// CustomStatusClear proves a CustomStatusUpdated event with a null status clears it and bumps the version.
func CustomStatusClear(t *testing.T, f Factory) {
	const instance = "cs-clear"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	customStatusTurn(t, p, instance, customStatusEvent(instance, 100, ptr("temp")))
	cs := customStatusGet(t, p, instance, 0)
	if cs == nil || cs.Status == nil || *cs.Status != "temp" {
		t.Fatalf("get_custom_status after set = %s, want status \"temp\"", customStatusFmt(cs))
	}
	customStatusTurn(t, p, instance, customStatusEvent(instance, 101, nil))
	customStatusWant(t, p, instance, nil, 2)
}

// CustomStatusNonePreserves proves an ack without a CustomStatusUpdated event keeps status and version.
func CustomStatusNonePreserves(t *testing.T, f Factory) {
	const instance = "cs-noop"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	customStatusTurn(t, p, instance, customStatusEvent(instance, 100, ptr("keep-me")))
	customStatusTurn(t, p, instance)
	customStatusWant(t, p, instance, ptr("keep-me"), 1)
}

// CustomStatusVersionIncrements proves every set or clear increments the version by one.
func CustomStatusVersionIncrements(t *testing.T, f Factory) {
	const instance = "cs-ver"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	steps := []struct {
		eventID uint64
		status  *string
	}{{100, ptr("a")}, {101, ptr("b")}, {102, nil}}
	for i, s := range steps {
		customStatusTurn(t, p, instance, customStatusEvent(instance, s.eventID, s.status))
		if i < len(steps)-1 {
			cs := customStatusGet(t, p, instance, 0)
			if cs == nil || cs.Version != uint64(i+1) {
				t.Fatalf("get_custom_status after update %d = %s, want version %d", i+1, customStatusFmt(cs), i+1)
			}
		}
	}
	customStatusWant(t, p, instance, nil, 3)
}

// CustomStatusPollingNoChange proves get_custom_status returns nothing unless the version is newer than last seen.
func CustomStatusPollingNoChange(t *testing.T, f Factory) {
	const instance = "cs-poll"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	customStatusTurn(t, p, instance, customStatusEvent(instance, 100, ptr("v1")))
	if cs := customStatusGet(t, p, instance, 1); cs != nil {
		t.Fatalf("get_custom_status(last seen 1) = %s, want nothing (no change since version 1)", customStatusFmt(cs))
	}
	if cs := customStatusGet(t, p, instance, 0); cs == nil {
		t.Fatal("get_custom_status(last seen 0): got nothing, want version 1")
	}
}

// CustomStatusNonexistentInstance proves get_custom_status of an unknown instance returns nothing.
func CustomStatusNonexistentInstance(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	if cs := customStatusGet(t, p, "does-not-exist", 0); cs != nil {
		t.Fatalf("get_custom_status(unknown) = %s, want nothing", customStatusFmt(cs))
	}
}

// CustomStatusDefaultOnNewInstance proves a new instance has custom status version 0 (nothing newer than 0).
func CustomStatusDefaultOnNewInstance(t *testing.T, f Factory) {
	const instance = "cs-default"
	p := f.CreateProvider(t)
	createInstance(t, p, instance)
	if cs := customStatusGet(t, p, instance, 0); cs != nil {
		t.Fatalf("get_custom_status(new instance, 0) = %s, want nothing (version 0)", customStatusFmt(cs))
	}
}
