package provider

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// goldenLines returns the lines of testdata/golden files matching pattern (copied from a real
// duroxide 0.1.30 run; see testdata/golden/README.md).
func goldenLines(t testing.TB, pattern string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "golden", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files for %s: %v", pattern, err)
	}
	var lines [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if len(bytes.TrimSpace(sc.Bytes())) > 0 {
				lines = append(lines, append([]byte(nil), sc.Bytes()...))
			}
		}
	}
	return lines
}

// roundTrip decodes line into a fresh *T, re-encodes it and checks bytes and value equality.
func roundTrip[T any](t *testing.T, line []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(line, &v); err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	out, err := Marshal(v)
	if err != nil {
		t.Fatalf("encode %s: %v", line, err)
	}
	if !bytes.Equal(out, line) {
		t.Fatalf("re-encoded bytes differ\n got: %s\nwant: %s", out, line)
	}
	std, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	for _, enc := range [][]byte{out, std} {
		var again T
		if err := json.Unmarshal(enc, &again); err != nil {
			t.Fatalf("decode again: %v", err)
		}
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("value changed on round trip\n got: %#v\nwant: %#v", again, v)
		}
	}
	return v
}

func TestGoldenEventsRoundTrip(t *testing.T) {
	types := map[string]bool{}
	for _, line := range goldenLines(t, "events*.jsonl") {
		ev := roundTrip[Event](t, line)
		types[ev.EventType()] = true
	}
	if len(types) != 26 {
		t.Errorf("golden files cover %d event types, want all 26: %v", len(types), types)
	}
}

func TestGoldenWorkItemsRoundTrip(t *testing.T) {
	variants := map[string]bool{}
	for _, line := range goldenLines(t, "workitems.jsonl") {
		wi := roundTrip[WorkItem](t, line)
		variants[wi.Variant()] = true
	}
	if len(variants) != 11 {
		t.Errorf("golden files cover %d work item variants, want 11: %v", len(variants), variants)
	}
}

func TestWireShapesNotInGolden(t *testing.T) {
	// Poison and Infrastructure details, and the 0.1.31 parent_execution_id on StartOrchestration,
	// are not in the golden run; their shapes come from duroxide-facts.md §2.3/§2.4.
	for _, line := range []string{
		`{"event_id":99999,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":5,"duroxide_version":"0.1.31","type":"OrchestrationFailed","details":{"Poison":{"attempt_count":11,"max_attempts":10,"message_type":{"FailedDeserialization":{"instance":"i","execution_id":1,"error":"bad"}},"message":"m"}}}`,
		`{"event_id":3,"source_event_id":2,"instance_id":"i","execution_id":1,"timestamp_ms":5,"duroxide_version":"0.1.31","type":"ActivityFailed","details":{"Poison":{"attempt_count":1,"max_attempts":1,"message_type":{"Activity":{"instance":"i","execution_id":1,"activity_name":"A","activity_id":2}},"message":"<&>"}}}`,
		`{"event_id":3,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":5,"duroxide_version":"0.1.31","type":"OrchestrationFailed","details":{"Application":{"kind":"Panicked","message":"p","retryable":true}}}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"","execution_id":0,"timestamp_ms":0,"duroxide_version":"","type":"CustomStatusUpdated","status":null}`,
	} {
		roundTrip[Event](t, []byte(line))
	}
	for _, line := range []string{
		`{"StartOrchestration":{"instance":"c","orchestration":"O","input":"","version":"1.0.0","parent_instance":"p","parent_id":2,"parent_execution_id":3,"execution_id":1}}`,
		`{"ActivityFailed":{"instance":"i","execution_id":1,"id":2,"details":{"Poison":{"attempt_count":1,"max_attempts":1,"message_type":{"Orchestration":{"instance":"i","execution_id":1}},"message":"m"}}}}`,
		`{"SubOrchFailed":{"parent_instance":"p","parent_execution_id":1,"parent_id":2,"details":{"Infrastructure":{"operation":"ack","message":"m","retryable":true}}}}`,
		`{"ContinueAsNew":{"instance":"i","orchestration":"O","input":"","version":"2.0.0","carry_forward_events":[]}}`,
	} {
		roundTrip[WorkItem](t, []byte(line))
	}
}

func TestWireRejectsBadInput(t *testing.T) {
	badEvents := []string{
		``, `null`, `[]`, `{`, `{"event_id":1}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.30","type":"NoSuchKind"}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.30"}`,
		`{"event_id":"x","source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.30","type":"KeyValuesCleared"}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.30","type":"OrchestrationFailed","details":{"Nope":{}}}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":1,"duroxide_version":"0.1.30","type":"OrchestrationFailed","details":{"Application":{"kind":"Weird","message":"","retryable":false}}}`,
		`NOT_VALID_JSON{{{`, `{"garbage": true}`,
	}
	for _, s := range badEvents {
		var ev Event
		if err := json.Unmarshal([]byte(s), &ev); err == nil {
			t.Errorf("Event %q: decoded without error", s)
		}
	}
	badItems := []string{
		``, `null`, `{}`, `{"StartOrchestration":null}`, `{"A":{},"B":{}}`, `{"Bogus":{}}`, `"StartOrchestration"`,
		`{"ContinueAsNew":{"instance":"i","orchestration":"O","input":"","version":null,"carry_forward_events":[["only-one"]]}}`,
	}
	for _, s := range badItems {
		var wi WorkItem
		if err := json.Unmarshal([]byte(s), &wi); err == nil {
			t.Errorf("WorkItem %q: decoded without error", s)
		}
	}
	if _, err := Marshal(Event{}); err == nil {
		t.Error("an Event without kind encoded without error")
	}
	if _, err := Marshal(WorkItem{}); err == nil {
		t.Error("a WorkItem without kind encoded without error")
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, line := range goldenLines(f, "events*.jsonl") {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev Event
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		out, err := Marshal(ev)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		var again Event
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-encoded value does not decode: %v\n%s", err, out)
		}
	})
}

func FuzzDecodeWorkItem(f *testing.F) {
	for _, line := range goldenLines(f, "workitems.jsonl") {
		f.Add(line)
	}
	for _, s := range []string{`{"A":{"x":1},"A":{"y":2}}`, `{"A": {}}`, `{"A":{} }`, `{"A":1,"B":2}`, `{"A\u0041":{}}`, `{"A":{}}}`, `{"":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The compact fast path accepts only what the general one does, with the same result.
		if tag, body, ok := compactTagged(data); ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(data, &m); err != nil || len(m) != 1 || string(m[tag]) != string(body) {
				t.Fatalf("compactTagged(%s) = %q, %s; the general path: %v, %v", data, tag, body, m, err)
			}
		}
		var wi WorkItem
		if json.Unmarshal(data, &wi) != nil {
			return
		}
		out, err := Marshal(wi)
		if err != nil {
			t.Fatalf("decoded value does not encode: %v", err)
		}
		var again WorkItem
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-encoded value does not decode: %v\n%s", err, out)
		}
	})
}

func TestWireRejectsMissingRequiredUnions(t *testing.T) {
	// Found by fuzzing: a missing "details" decoded to a value that could not be encoded again.
	for _, s := range []string{
		`{"event_id":1,"source_event_id":null,"instance_id":"","execution_id":0,"timestamp_ms":0,"duroxide_version":"","type":"OrchestrationFailed"}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"","execution_id":0,"timestamp_ms":0,"duroxide_version":"","type":"ActivityFailed","details":{"Application":{"message":"m","retryable":false}}}`,
		`{"event_id":1,"source_event_id":null,"instance_id":"","execution_id":0,"timestamp_ms":0,"duroxide_version":"","type":"SubOrchestrationFailed","details":{"Poison":{"attempt_count":1,"max_attempts":1,"message":"m"}}}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(s), &ev); err == nil {
			t.Errorf("Event %s: decoded without error", s)
		}
	}
	for _, s := range []string{`{"ActivityFailed":{}}`, `{"SubOrchFailed":{"parent_instance":"p","parent_execution_id":1,"parent_id":1}}`} {
		var wi WorkItem
		if err := json.Unmarshal([]byte(s), &wi); err == nil {
			t.Errorf("WorkItem %s: decoded without error", s)
		}
	}
}

func BenchmarkDecodeEvent(b *testing.B) {
	lines := goldenLines(b, "events.jsonl")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeEvent(lines[i%len(lines)]); err != nil {
			b.Fatal(err)
		}
	}
}
