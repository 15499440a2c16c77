package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

func TestVersions(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("versions")
	if !regexpLine(out, `^ORCHESTRATION\s+VERSION\s+RUNNING\s+HELD\s+OLDEST START\s+NEWEST START$`) ||
		!regexpLine(out, `^ProcessOrder\s+1\.0\.0\s+1\s+0\s+\d{4}-\S+Z\s+\d{4}-\S+Z$`) || !regexpLine(out, `^Ship\s+1\.0\.0\s+1\s+0\s`) {
		t.Fatalf("versions:\n%s", out)
	}
	var vs []versionOut
	if err := json.Unmarshal([]byte(f.ok("--json", "versions")), &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Orchestration != "ProcessOrder" || vs[0].Running != 1 || vs[1].Orchestration != "Ship" ||
		time.Since(vs[0].NewestStart) > time.Minute || vs[0].OldestStart != vs[0].NewestStart {
		t.Fatalf("versions --json: %+v", vs)
	}
	f.fails("holds nothing", "--ns", "nothing-here", "versions")
}

func TestVersionsNoneInFlight(t *testing.T) {
	f := newFixture(t)
	f.turn("done", start("done", "Report", ""), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev("done", 1, 1, provider.OrchestrationStartedEvent{Name: "Report", Version: "1.0.0", Input: `{"n":1}`}),
		ev("done", 1, 2, provider.OrchestrationCompletedEvent{Output: "1"}),
	}, Metadata: meta("Report", provider.StatusCompleted, "1", "")})
	if out := f.ok("versions"); out != "no instance in flight\n" {
		t.Fatalf("versions: %q", out)
	}
	if out := f.ok("versions", "--json"); out != "[]\n" {
		t.Fatalf("versions --json: %q", out)
	}
}
