package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// A start queued but not run yet (no instance record) is listed, as Pending, first.
func TestInstancesListsPending(t *testing.T) {
	f := newFixture(t)
	f.populate()                                                             // queued-1's start is queued
	id := f.startInstance("Hello", "--id", "hello-queued", "--input", `"x"`) // no runtime: it stays queued
	out := f.ok("instances")
	if !regexpLine(out, `^hello-queued\s+Pending\s+Hello\s+-\s+-\s+\d{4}-`) || !regexpLine(out, `^order-1\s+Completed`) {
		t.Fatalf("instances:\n%s", out)
	}
	out = f.ok("instances", "--status", "pending")
	if !regexpLine(out, `^`+id+`\s+Pending`) || !regexpLine(out, `^queued-1\s+Pending\s+Report\s+1\.0\.0`) || strings.Contains(out, "order-1") {
		t.Fatalf("instances --status pending:\n%s", out)
	}
	var js struct {
		Instances []struct {
			ID     string `json:"instance_id"`
			Status string `json:"status"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "instances", "--status", "Pending")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Instances) != 2 || js.Instances[0].ID != "queued-1" || js.Instances[1].Status != "Pending" || js.Instances[1].ID != id {
		t.Fatalf("instances --json --status Pending: %+v", js)
	}
}

// namespaces lists the namespaces of the server with their instance counts.
func TestNamespaces(t *testing.T) {
	f := newFixture(t)
	f.populate()
	other, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: f.addr, Namespace: "billing",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.EnqueueForOrchestrator(context.Background(), start("b-1", "Bill", ""), 0); err != nil {
		t.Fatal(err)
	}
	out := f.ok("namespaces")
	if !regexpLine(out, `^billing\s+0$`) || !regexpLine(out, `^`+testNS+`\s+4$`) || !strings.HasPrefix(out, "NAMESPACE") {
		t.Fatalf("namespaces:\n%s", out)
	}
	var js struct {
		Namespaces []struct {
			Name      string `json:"namespace"`
			Instances int64  `json:"instances"`
		} `json:"namespaces"`
		Complete bool `json:"complete"`
	}
	if err := json.Unmarshal([]byte(f.ok("namespaces", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Namespaces) != 2 || js.Namespaces[0].Name != "billing" || !js.Complete {
		t.Fatalf("namespaces --json: %+v", js)
	}
	f.fails("--max-keys must be positive", "namespaces", "--max-keys", "0")
}

// A failed instance's error is shown as an error, not as its output.
func TestShowFailedError(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("show", "report-7")
	if !regexpLine(out, `^Error:\s+no data$`) || regexpLine(out, `^Output:`) || !regexpLine(out, `^1\s+Failed\s.*\serror: no data$`) {
		t.Fatalf("show report-7:\n%s", out)
	}
}

// Values are rendered by one rule in show, its history and wait: JSON as compact JSON (a JSON
// string keeps its quotes, whether or not it holds a space), other text as it is.
func TestOneRenderingOfValues(t *testing.T) {
	f := newFixture(t)
	const id = "render-1"
	done := func(eid uint64, result string) provider.Event {
		e := ev(id, 1, eid, provider.ActivityCompletedEvent{Result: result})
		e.SourceEventID = ptr(eid - 1)
		return e
	}
	f.turn(id, start(id, "Render", ""), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev(id, 1, 1, provider.OrchestrationStartedEvent{Name: "Render", Version: "1.0.0", Input: `{"n": 1}`}),
		ev(id, 1, 2, provider.ActivityScheduledEvent{Name: "Reserve", Input: `"order-000"`}),
		done(3, `"ch-order-000"`),
		ev(id, 1, 4, provider.ActivityScheduledEvent{Name: "Release", Input: `"order-010"`}),
		done(5, `"released res-order-010"`),
		ev(id, 1, 6, provider.KeyValueSetEvent{Key: "k", Value: `{"a": [1, 2]}`}),
		ev(id, 1, 7, provider.OrchestrationCompletedEvent{Output: `{"id": "a b"}`}),
	}, Metadata: meta("Render", provider.StatusCompleted, `{"id": "a b"}`, "")})
	out := f.ok("show", id)
	for _, want := range []string{`^Output:\s+\{"id":"a b"\}$`, `ActivityCompleted\s+source=#2 result="ch-order-000"$`,
		`ActivityCompleted\s+source=#4 result="released res-order-010"$`, `KeyValueSet\s+key=k value=\{"a":\[1,2\]\}\s`,
		`OrchestrationStarted\s+name=Render version=1\.0\.0 input=\{"n":1\}$`, `^k\s+\{"a":\[1,2\]\}$`,
		`^1\s+Completed\s.*\{"id":"a b"\}$`} {
		if !regexpLine(out, want) {
			t.Errorf("show lacks %s:\n%s", want, out)
		}
	}
	if out := f.ok("wait", id); !regexpLine(out, `^Output:\s+\{"id":"a b"\}$`) {
		t.Errorf("wait:\n%s", out)
	}
}
