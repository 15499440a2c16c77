package redisprovider

import (
	"reflect"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
)

// A stored event leaves out a null source_event_id, its own instance and execution and the
// common duroxide_version, and decodes to the event it was; an event of another instance or
// execution is kept whole, and another version stays.
func TestStoredEventRoundTrip(t *testing.T) {
	t.Parallel()
	src := uint64(2)
	for _, inst := range []string{"hello-1", `a"b\c`, "日本", "a,b:c{d}", `"instance_id":"x"`} {
		for _, e := range []provider.Event{
			{EventID: 1, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.1.30", Kind: provider.ActivityCompletedEvent{Result: `"x"`}},
			{EventID: 3, SourceEventID: &src, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.1.30", Kind: provider.ActivityCompletedEvent{Result: `,"instance_id":"z"`}},
			{EventID: 4, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.2.0", Kind: provider.ActivityCompletedEvent{Result: `"duroxide_version":"0.1.30",`}},
			{EventID: 5, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.1.30", Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: `,"parent_instance":null,"parent_id":null}`}},
			{EventID: 6, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.1.30", Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}", ParentInstance: &inst, ParentID: &src}},
			{EventID: 7, InstanceID: inst, ExecutionID: 3, TimestampMs: 5, DuroxideVersion: "0.1.30", Kind: provider.ExternalEventEvent{Name: "O", Data: `,"parent_instance":null,"parent_id":null}`}},
		} {
			b, err := provider.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			js := string(b)
			stored := storedEvent(js, quoteInstance(inst), 3)
			if strings.Contains(stored, `"execution_id"`) || strings.Contains(stored, `"source_event_id":null`) || len(stored) >= len(js) ||
				strings.Contains(stored, `"duroxide_version"`) != (e.DuroxideVersion != storedVersion) ||
				strings.HasSuffix(stored, `,"parent_id":null}`) {
				t.Errorf("%q: stored %s", inst, stored)
			}
			got, err := provider.DecodeEventIn([]byte(stored), inst, 3, storedVersion)
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Errorf("%q: %s decodes to %+v, %v; want %+v", inst, stored, got, err, e)
			}
			if other := storedEvent(js, quoteInstance(inst+"x"), 3); other != js {
				t.Errorf("%q: another instance's history stores %s", inst, other)
			}
			if other := storedEvent(js, quoteInstance(inst), 4); other != js {
				t.Errorf("%q: another execution's history stores %s", inst, other)
			}
			if got, err := provider.DecodeEventIn(b, "other", 9, "9.9.9"); err != nil || !reflect.DeepEqual(got, e) {
				t.Errorf("%q: a whole event decodes to %+v, %v", inst, got, err)
			}
		}
	}
}
