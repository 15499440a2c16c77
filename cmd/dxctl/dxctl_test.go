package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/duroxide-go/dxredis/cmd/dxctl/web"
	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// The tests drive dxctl end to end against miniredis: instances are created through the provider
// API, then commands run through run() and their output and exit status are checked.

const testNS = "ctl"

func ptr[T any](v T) *T { return &v }

type fixture struct {
	t    *testing.T
	addr string
	p    *redisprovider.Provider
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: mr.Addr(), Namespace: testNS,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &fixture{t: t, addr: mr.Addr(), p: p}
}

// dxctl runs the command line against the fixture's server and namespace, with nothing on stdin.
func (f *fixture) dxctl(args ...string) (stdout, stderr string, code int) {
	return f.dxctlIn("", args...)
}

// dxctlIn is dxctl with stdin reading input.
func (f *fixture) dxctlIn(input string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = run(append([]string{"--addr", f.addr, "--ns", testNS}, args...), strings.NewReader(input), &out, &errOut)
	return out.String(), errOut.String(), code
}

// ok runs a command that must succeed and returns its output.
func (f *fixture) ok(args ...string) string {
	f.t.Helper()
	out, errOut, code := f.dxctl(args...)
	if code != 0 || errOut != "" {
		f.t.Fatalf("dxctl %q: exit %d, stderr %q", args, code, errOut)
	}
	return out
}

// fails runs a command that must fail with one line on stderr containing want.
func (f *fixture) fails(want string, args ...string) {
	f.t.Helper()
	f.failsIn("", want, args...)
}

// failsIn is fails with stdin reading input.
func (f *fixture) failsIn(input, want string, args ...string) {
	f.t.Helper()
	out, errOut, code := f.dxctlIn(input, args...)
	if code != 1 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "dxctl: ") ||
		!strings.Contains(strings.ToLower(errOut), strings.ToLower(want)) {
		f.t.Fatalf("dxctl %q: exit %d, stdout %q, stderr %q; want exit 1 and one line mentioning %q", args, code, out, errOut, want)
	}
	// Errors speak the user's words: no provider operation names such as "get_instance_info:".
	if op := internalOp.FindString(errOut); op != "" {
		f.t.Fatalf("dxctl %q: stderr %q shows the internal operation %q", args, errOut, op)
	}
}

var internalOp = regexp.MustCompile(`\b[a-z]+(_[a-z]+)+:`)

func ev(id string, exec, eid uint64, k provider.EventKind) provider.Event {
	return provider.Event{EventID: eid, InstanceID: id, ExecutionID: exec, TimestampMs: uint64(time.Now().UnixMilli()),
		DuroxideVersion: "0.1.29", Kind: k}
}

// turn enqueues item, fetches the turn (which must be id's) and acks it.
func (f *fixture) turn(id string, item provider.WorkItem, ack provider.OrchestrationAck) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.p.EnqueueForOrchestrator(ctx, item, 0); err != nil {
		f.t.Fatal(err)
	}
	it, err := f.p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != id {
		f.t.Fatalf("fetch for %q: %+v, %v", id, it, err)
	}
	if err := f.p.AckOrchestrationItem(ctx, it.LockToken, ack); err != nil {
		f.t.Fatal(err)
	}
}

func start(id, name, parent string) provider.WorkItem {
	s := provider.StartOrchestration{Instance: id, Orchestration: name, Input: `{"n":1}`, Version: ptr("1.0.0"), ExecutionID: 1}
	if parent != "" {
		s.ParentInstance, s.ParentID = ptr(parent), ptr(uint64(2))
	}
	return provider.WorkItem{Kind: s}
}

func meta(name, status, output, parent string) provider.ExecutionMetadata {
	m := provider.ExecutionMetadata{Status: status, OrchestrationName: name, OrchestrationVersion: "1.0.0", ParentInstanceID: parent}
	if output != "" {
		m.Output = ptr(output)
	}
	return m
}

// populate creates: order-1 (2 executions, KV, custom status, Completed), report-7 (Failed),
// order-2 (Running, a worker item, a timer an hour away, a child order-2::sub::2 that is
// Running) and a start queued for queued-1.
func (f *fixture) populate() {
	f.t.Helper()
	ctx := context.Background()
	const o1 = "order-1"
	f.turn(o1, start(o1, "ProcessOrder", ""), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev(o1, 1, 1, provider.OrchestrationStartedEvent{Name: "ProcessOrder", Version: "1.0.0", Input: `{"n":1}`}),
		ev(o1, 1, 2, provider.OrchestrationContinuedAsNewEvent{Input: `{"n":2}`}),
	}, Metadata: meta("ProcessOrder", provider.StatusContinuedAsNew, `{"n":2}`, "")})
	charged := ev(o1, 2, 3, provider.ActivityCompletedEvent{Result: "charged 5 EUR"})
	charged.SourceEventID = ptr(uint64(2))
	f.turn(o1, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: o1, Orchestration: "ProcessOrder", Input: `{"n":2}`,
		Version: ptr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{}}}, provider.OrchestrationAck{ExecutionID: 2, HistoryDelta: []provider.Event{
		ev(o1, 2, 1, provider.OrchestrationStartedEvent{Name: "ProcessOrder", Version: "1.0.0", Input: `{"n":2}`}),
		ev(o1, 2, 2, provider.ActivityScheduledEvent{Name: "Charge", Input: `{"amount":5}`}),
		charged,
		ev(o1, 2, 4, provider.KeyValueSetEvent{Key: "receipt", Value: "R-123"}),
		ev(o1, 2, 5, provider.CustomStatusUpdatedEvent{Status: ptr("charged")}),
		ev(o1, 2, 6, provider.OrchestrationCompletedEvent{Output: `"ok"`}),
	}, Metadata: meta("ProcessOrder", provider.StatusCompleted, `"ok"`, "")})

	f.turn("report-7", start("report-7", "Report", ""), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev("report-7", 1, 1, provider.OrchestrationStartedEvent{Name: "Report", Version: "1.0.0", Input: `{"n":1}`}),
		ev("report-7", 1, 2, provider.OrchestrationFailedEvent{Details: provider.ErrorDetails{Kind: provider.ApplicationError{
			Kind: provider.AppErrorKind{Name: provider.AppOrchestrationFailed}, Message: "no data"}}}),
	}, Metadata: meta("Report", provider.StatusFailed, "no data", "")})

	const o2, kid = "order-2", "order-2::sub::2"
	f.turn(o2, start(o2, "ProcessOrder", ""), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev(o2, 1, 1, provider.OrchestrationStartedEvent{Name: "ProcessOrder", Version: "1.0.0", Input: `{"n":1}`}),
		ev(o2, 1, 2, provider.SubOrchestrationScheduledEvent{Name: "Ship", Instance: kid, Input: "{}"}),
		ev(o2, 1, 3, provider.TimerCreatedEvent{FireAtMs: uint64(time.Now().Add(time.Hour).UnixMilli())}),
	}, OrchestratorItems: []provider.WorkItem{
		start(kid, "Ship", o2),
		{Kind: provider.TimerFired{Instance: o2, ExecutionID: 1, ID: 3, FireAtMs: uint64(time.Now().Add(time.Hour).UnixMilli())}},
	}, Metadata: meta("ProcessOrder", "", "", "")})
	it, err := f.p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != kid {
		f.t.Fatalf("fetch child: %+v, %v", it, err)
	}
	if err := f.p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{
		ev(kid, 1, 1, provider.OrchestrationStartedEvent{Name: "Ship", Version: "1.0.0", Input: "{}", ParentInstance: ptr(o2), ParentID: ptr(uint64(2))}),
		ev(kid, 1, 2, provider.ActivityScheduledEvent{Name: "Label", Input: "{}"}),
	}, WorkerItems: []provider.WorkItem{{Kind: provider.ActivityExecute{Instance: kid, ExecutionID: 1, ID: 2, Name: "Label", Input: "{}"}}},
		Metadata: meta("Ship", "", "", o2)}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.p.EnqueueForOrchestrator(ctx, start("queued-1", "Report", ""), 0); err != nil {
		f.t.Fatal(err)
	}
}

func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, nil, &out, &errOut); code != 0 || errOut.Len() != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, errOut.String())
	}
	for _, c := range commands {
		if !strings.Contains(out.String(), "\n  "+c.name) {
			t.Errorf("--help does not document %q:\n%s", c.name, out.String())
		}
		var cout bytes.Buffer
		for _, args := range [][]string{{"help", c.name}, {c.name, "--help"}} {
			cout.Reset()
			if code := run(args, nil, &cout, &errOut); code != 0 || !strings.Contains(cout.String(), "Usage: dxctl "+c.name) {
				t.Errorf("dxctl %q: exit %d, output %q", args, code, cout.String())
			}
		}
	}
	var hout bytes.Buffer
	run([]string{"help", "purge"}, nil, &hout, &errOut)
	if !strings.Contains(hout.String(), "--completed-before") || !strings.Contains(hout.String(), "--limit") {
		t.Errorf("help purge does not list its flags:\n%s", hout.String())
	}
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	f.fails("no command", []string{}...)
	f.fails("unknown command", "frobnicate")
	f.fails("not defined", "--bogus", "metrics")
	f.fails("not defined", "instances", "--bogus")
	f.fails("want 1 argument", "show")
	f.fails("want 1 argument", "delete", "a", "b")
	f.fails("--keep", "prune", "order-1")
	f.fails("--completed-before is required", "purge")
	f.fails("want an age", "purge", "--completed-before", "yesterday")
	f.fails("negative", "purge", "--completed-before", "-1h")
	f.fails("--limit", "instances", "--limit", "0")
	f.fails("unknown command", "help", "nope")
}

func TestUnreachable(t *testing.T) {
	redis.SetLogger(silent{}) // as main does
	var out, errOut bytes.Buffer
	code := run([]string{"--addr", "127.0.0.1:1", "--timeout", "5s", "metrics"}, nil, &out, &errOut)
	if code != 1 || out.Len() != 0 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), "unreachable") {
		t.Fatalf("unreachable server: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

func TestInstances(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("instances")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "INSTANCE") {
		t.Fatalf("instances:\n%s", out)
	}
	// Aligned columns: STATUS starts at the same offset on every line. (Every instance, in
	// creation order; the fixture creates some within one millisecond, so their order is not checked.)
	col := strings.Index(lines[0], "STATUS")
	var ids []string
	for i, l := range lines[1:] {
		ids = append(ids, strings.Fields(l)[0])
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Fatalf("line %d %q: STATUS column not at %d\n%s", i+1, l, col, out)
		}
		if strings.HasPrefix(l, "order-2::sub::2 ") && (!strings.Contains(l, "order-2") || !strings.Contains(l, "Running")) {
			t.Fatalf("child line %q", l)
		}
	}
	slices.Sort(ids)
	if want := []string{"order-1", "order-2", "order-2::sub::2", "queued-1", "report-7"}; !slices.Equal(ids, want) {
		t.Fatalf("instances %v, want %v\n%s", ids, want, out)
	}
	// Pending starts come first.
	if !strings.HasPrefix(lines[1], "queued-1 ") || !strings.Contains(lines[1], "Pending") || !strings.Contains(lines[1], "Report") {
		t.Fatalf("pending line %q", lines[1])
	}

	out = f.ok("instances", "--status", "Completed")
	if !strings.Contains(out, "order-1") || strings.Contains(out, "order-2") || strings.Contains(out, "report-7") {
		t.Fatalf("instances --status Completed:\n%s", out)
	}
	if out := f.ok("instances", "--status", "ContinuedAsNew"); !strings.Contains(out, "(no instances)") {
		t.Fatalf("empty listing:\n%s", out)
	}

	f.fails("--cursor \"%%%\" is not a cursor dxctl printed", "instances", "--cursor", "%%%")

	// Paging: two pages of 2; the first ends with the command that continues, which repeats
	// every flag needed and runs as printed (here: without the fixture's --addr and --ns).
	// The pages hold every instance once (their order within one creation millisecond is by id).
	out = f.ok("instances", "--limit", "2")
	out2 := f.runHint(out)
	var paged []string
	for _, page := range []string{out, out2} {
		for _, l := range strings.Split(strings.TrimSpace(page), "\n")[1:] {
			if !strings.HasPrefix(l, "more:") && l != "" {
				paged = append(paged, strings.Fields(l)[0])
			}
		}
	}
	slices.Sort(paged)
	if want := []string{"order-1", "order-2", "order-2::sub::2", "queued-1", "report-7"}; !slices.Equal(paged, want) ||
		!strings.Contains(out, "more:") || strings.Contains(out2, "more:") {
		t.Fatalf("pages (want %v once each, then no more):\n%s\nthen\n%s", want, out, out2)
	}
	out = f.ok("instances", "--status", "Running", "--limit", "1")
	if out2 := f.runHint(out); !strings.Contains(out2, "order-2::sub::2") || strings.Contains(out2, "order-1") {
		t.Fatalf("pages of Running:\n%s\nthen\n%s", out, out2)
	}

	var js struct {
		Instances []struct {
			ID     string  `json:"instance_id"`
			Status string  `json:"status"`
			Output *string `json:"output"`
			Parent string  `json:"parent_instance_id"`
		} `json:"instances"`
		Next string `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "instances", "--limit", "3")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Instances) != 4 || js.Next == "" || js.Instances[0].Status != "Pending" || js.Instances[1].ID != "order-1" ||
		js.Instances[1].Output == nil || *js.Instances[1].Output != `"ok"` || js.Instances[2].Status != "Failed" {
		t.Fatalf("instances --json: %+v", js)
	}
	// Global flags are accepted after the command too.
	next := js.Next
	js.Instances, js.Next = nil, ""
	if err := json.Unmarshal([]byte(f.ok("instances", "--cursor", next, "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Instances) != 1 || js.Instances[0].Parent != "order-2" || js.Next != "" {
		t.Fatalf("instances --json page 2: %+v", js)
	}
}

func TestShow(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("show", "order-1")
	for _, want := range []string{
		"Instance:       order-1", "Orchestration:  ProcessOrder 1.0.0", "Status:         Completed",
		"Execution:      2 (2 stored)", `Custom status:  charged (version 1)`, "receipt  R-123",
		"History of execution 2 (6 events):",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show order-1 lacks %q:\n%s", want, out)
		}
	}
	hist := out[strings.Index(out, "History of execution 2"):]
	lines := strings.Split(strings.TrimSpace(hist), "\n")[1:]
	if len(lines) != 6 {
		t.Fatalf("history has %d lines, want one per event:\n%s", len(lines), hist)
	}
	for i, want := range []string{
		`#1  `, `#2  `, `#3  `, `#4  `, `#5  `, `#6  `,
	} {
		if !strings.HasPrefix(lines[i], want) {
			t.Fatalf("history line %d %q, want prefix %q", i, lines[i], want)
		}
	}
	for i, want := range []string{
		`OrchestrationStarted  name=ProcessOrder version=1.0.0 input={"n":2}`,
		`ActivityScheduled     name=Charge input={"amount":5}`,
		`ActivityCompleted     source=#2 result="charged 5 EUR"`,
		`KeyValueSet           key=receipt value=R-123`,
		`CustomStatusUpdated   status=charged`,
		`OrchestrationCompleted  output="ok"`,
	} {
		if !strings.Contains(strings.Join(strings.Fields(lines[i]), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("history line %d %q does not show %q", i, lines[i], want)
		}
	}
	if !strings.Contains(out, "1          ContinuedAsNew") || !strings.Contains(out, "2          Completed") {
		t.Errorf("executions table:\n%s", out)
	}

	out = f.ok("show", "order-1", "--exec", "1")
	if !strings.Contains(out, "History of execution 1 (2 events):") || !strings.Contains(out, "OrchestrationContinuedAsNew") {
		t.Fatalf("show --exec 1:\n%s", out)
	}
	out = f.ok("show", "order-2")
	if !strings.Contains(out, "Children:       order-2::sub::2") || !strings.Contains(out, "Status:         Running") {
		t.Fatalf("show order-2:\n%s", out)
	}
	out = f.ok("show", "order-2::sub::2")
	if !strings.Contains(out, "Parent:         order-2") {
		t.Fatalf("show child:\n%s", out)
	}

	var js struct {
		Instance struct {
			ID     string `json:"instance_id"`
			Status string `json:"status"`
		} `json:"instance"`
		CustomStatus *struct {
			Status  string `json:"status"`
			Version uint64 `json:"version"`
		} `json:"custom_status"`
		KV         map[string]string `json:"kv"`
		Executions []struct {
			ID     uint64 `json:"execution_id"`
			Events uint64 `json:"event_count"`
		} `json:"executions"`
		History []provider.Event `json:"history"`
	}
	if err := json.Unmarshal([]byte(f.ok("show", "order-1", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if js.Instance.Status != "Completed" || js.CustomStatus == nil || js.CustomStatus.Status != "charged" || js.KV["receipt"] != "R-123" ||
		len(js.Executions) != 2 || js.Executions[1].Events != 6 || len(js.History) != 6 || js.History[2].Kind.EventType() != "ActivityCompleted" {
		t.Fatalf("show --json: %+v", js)
	}

	f.fails(`instance "nope" not found in namespace "ctl"`, "show", "nope")

	// A start queued and not run yet is shown as Pending, not as not found.
	out = f.ok("show", "queued-1")
	if !regexpLine(out, `^Status:\s+Pending \(its start is queued`) || !regexpLine(out, `^Orchestration:\s+Report 1.0.0$`) {
		t.Fatalf("show queued-1:\n%s", out)
	}
	var pending struct {
		Instance struct {
			ID     string `json:"instance_id"`
			Status string `json:"status"`
		} `json:"instance"`
	}
	if err := json.Unmarshal([]byte(f.ok("show", "queued-1", "--json")), &pending); err != nil ||
		pending.Instance.ID != "queued-1" || pending.Instance.Status != "Pending" {
		t.Fatalf("show queued-1 --json: %+v %v", pending, err)
	}
	f.fails(`execution 9 of instance "order-1" not found`, "show", "order-1", "--exec", "9")
}

func TestQueuesAndMetrics(t *testing.T) {
	f := newFixture(t)
	f.populate()
	// Two items tagged "gpu", one of them locked.
	ctx := context.Background()
	for id := uint64(8); id <= 9; id++ {
		if err := f.p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: "order-2::sub::2",
			ExecutionID: 1, ID: id, Name: "Print", Input: "{}", Tag: ptr("gpu")}}); err != nil {
			t.Fatal(err)
		}
	}
	gpu, err := provider.TagFilterTags("gpu")
	if err != nil {
		t.Fatal(err)
	}
	if it, err := f.p.FetchWorkItem(ctx, time.Minute, 0, nil, gpu); err != nil || it == nil {
		t.Fatalf("fetch gpu item: %+v, %v", it, err)
	}
	out := f.ok("queues")
	// orchestrator: queued-1's start (visible) and order-2's timer (delayed); worker: Label
	// (untagged) and the gpu items.
	if !regexpLine(out, `^orchestrator\s+2\s+1\s+1\s+0\s+\S+$`) || !regexpLine(out, `^worker\s+2\s+-\s+-\s+1\s+\S+$`) ||
		!regexpLine(out, `^\s+untagged\s+1\s+1\s+0\s+0\s+-$`) || !regexpLine(out, `^\s+tag "gpu"\s+1\s+1\s+0\s+1\s+-$`) ||
		!strings.Contains(out, "Locked instances: 0") {
		t.Fatalf("queues:\n%s", out)
	}
	var q struct {
		Orchestrator struct {
			Visible, Delayed, Unlocked, Locked uint64
		} `json:"orchestrator"`
		WorkerUnlocked uint64          `json:"worker_unlocked"`
		WorkerTags     []web.WorkerTag `json:"worker_tags"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "queues")), &q); err != nil {
		t.Fatal(err)
	}
	wantTags := []web.WorkerTag{{Tag: "", Queued: 1, Ready: 1}, {Tag: "gpu", Queued: 2, Ready: 1, Locked: 1}}
	if q.Orchestrator.Visible != 1 || q.Orchestrator.Delayed != 1 || q.Orchestrator.Unlocked != 2 || q.WorkerUnlocked != 2 ||
		!slices.Equal(q.WorkerTags, wantTags) {
		t.Fatalf("queues --json: %+v", q)
	}

	out = f.ok("metrics")
	for _, re := range []string{`^instances\s+4$`, `^\s+running\s+2$`, `^\s+completed\s+1$`, `^\s+failed\s+1$`,
		`^executions\s+5$`, `^history events\s+15$`} {
		if !regexpLine(out, re) {
			t.Fatalf("metrics lacks a line matching %s:\n%s", re, out)
		}
	}
	var m map[string]uint64
	if err := json.Unmarshal([]byte(f.ok("metrics", "--json")), &m); err != nil {
		t.Fatal(err)
	}
	if m["total_instances"] != 4 || m["total_events"] != 15 || m["running_instances"] != 2 {
		t.Fatalf("metrics --json: %v", m)
	}
}

func TestDeletePurgePrune(t *testing.T) {
	f := newFixture(t)
	f.populate()
	f.fails("rerun with --force", "delete", "order-2")
	f.fails("sub-orchestration", "delete", "order-2::sub::2")
	f.fails(`instance "nope" not found in namespace "ctl"`, "delete", "nope")
	out := f.ok("delete", "order-2", "--force")
	for _, re := range []string{`^instances\s+2$`, `^executions\s+2$`, `^history events\s+5$`, `^queue messages\s+2$`} {
		if !regexpLine(out, re) {
			t.Fatalf("delete --force lacks a line matching %s:\n%s", re, out)
		}
	}

	var pr map[string]uint64
	if err := json.Unmarshal([]byte(f.ok("--json", "prune", "order-1", "--keep", "1")), &pr); err != nil {
		t.Fatal(err)
	}
	if pr["executions_deleted"] != 1 || pr["events_deleted"] != 2 {
		t.Fatalf("prune --json: %v", pr)
	}
	f.fails(`not found in namespace "ctl"`, "prune", "nope", "--keep", "1")

	// Nothing completed more than an hour ago; then everything finished before now (the queued
	// start of queued-1 is not an instance yet).
	if out := f.ok("purge", "--completed-before", "1h"); !regexpLine(out, `^instances\s+0$`) {
		t.Fatalf("purge 1h:\n%s", out)
	}
	future := time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	var del map[string]uint64
	if err := json.Unmarshal([]byte(f.ok("purge", "--completed-before", future, "--limit", "1", "--json")), &del); err != nil {
		t.Fatal(err)
	}
	if del["instances_deleted"] != 1 {
		t.Fatalf("purge --limit 1: %v", del)
	}
	if out := f.ok("purge", "--completed-before", "0s"); !regexpLine(out, `^instances\s+1$`) {
		t.Fatalf("purge 0s:\n%s", out)
	}
	if out := f.ok("instances"); strings.Count(strings.TrimSpace(out), "\n") != 1 || !regexpLine(out, `^queued-1\s+Pending\s`) {
		t.Fatalf("instances after deleting everything but a queued start:\n%s", out)
	}
}

func TestParseBefore(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"1d12h":                now.Add(-36 * time.Hour),
		"90m":                  now.Add(-90 * time.Minute),
		"0s":                   now,
		"2026-01-02T15:04:05Z": time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC),
	} {
		got, err := parseBefore(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseBefore(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "d", "7x", "-2h", "3dd", "yesterday"} {
		if _, err := parseBefore(in, now); err == nil {
			t.Errorf("parseBefore(%q): no error", in)
		}
	}
}

// runHint runs the "more: dxctl ..." line that ends out as printed, and returns its output.
func (f *fixture) runHint(out string) string {
	f.t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	hint, ok := strings.CutPrefix(lines[len(lines)-1], "more: dxctl ")
	if !ok {
		f.t.Fatalf("no paging hint:\n%s", out)
	}
	for _, flag := range []string{"--addr " + f.addr, "--ns " + testNS} {
		if !strings.Contains(hint, flag) {
			f.t.Fatalf("paging hint %q lacks %q", hint, flag)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(strings.Fields(hint), nil, &stdout, &stderr); code != 0 {
		f.t.Fatalf("dxctl %s: exit %d, %s", hint, code, stderr.String())
	}
	return stdout.String()
}

// regexpLine reports whether a line of out matches re.
func regexpLine(out, re string) bool {
	r := regexp.MustCompile(re)
	for _, l := range strings.Split(out, "\n") {
		if r.MatchString(l) {
			return true
		}
	}
	return false
}

// Every help lists every flag: the overview each command's flags and the global ones, a
// command's help its own flags and the global ones.
func TestHelpListsEveryFlag(t *testing.T) {
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		if code := run(args, nil, &out, &errOut); code != 0 {
			t.Fatalf("dxctl %q: exit %d, %s", args, code, errOut.String())
		}
		return out.String()
	}
	var global []string
	gfs := flag.NewFlagSet("", flag.ContinueOnError)
	(&app{}).globalFlags(gfs)
	gfs.VisitAll(func(f *flag.Flag) { global = append(global, "--"+f.Name) })
	if len(global) < 5 {
		t.Fatalf("global flags: %v", global)
	}
	overview := help("--help")
	for _, f := range global {
		if !strings.Contains(overview, f+" ") {
			t.Errorf("--help does not list the global flag %s", f)
		}
	}
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.setup(fs)
		var own []string
		fs.VisitAll(func(f *flag.Flag) { own = append(own, "--"+f.Name) })
		i := strings.Index(overview, "\n\n  "+c.name)
		if i < 0 {
			t.Fatalf("--help does not document %s:\n%s", c.name, overview)
		}
		section, _, _ := strings.Cut(overview[i+2:], "\n\n") // up to the next command
		ch := help("help", c.name)
		for _, f := range own {
			if !strings.Contains(section, f) {
				t.Errorf("--help does not list %s's flag %s:\n%s", c.name, f, section)
			}
			if !strings.Contains(ch, "  "+f+" ") {
				t.Errorf("help %s does not list its flag %s:\n%s", c.name, f, ch)
			}
		}
		for _, f := range global {
			if !strings.Contains(ch, "  "+f+" ") {
				t.Errorf("help %s does not list the global flag %s:\n%s", c.name, f, ch)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, nil, &out, &errOut); code != 0 || errOut.Len() != 0 ||
		!regexp.MustCompile(`^dxctl \S+ \(`).MatchString(out.String()) || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	for _, tt := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "(devel)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, "v0.3.1"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}, "(devel) 0123456789ab-dirty"},
	} {
		if got := moduleVersion(tt.info); got != tt.want {
			t.Errorf("moduleVersion(%+v) = %q, want %q", tt.info, got, tt.want)
		}
	}
}

func TestUnknownStatus(t *testing.T) {
	f := newFixture(t)
	f.populate()
	f.fails("unknown status \"Nope\": want one of Pending, Running, Completed, Failed, ContinuedAsNew", "instances", "--status", "Nope")
	// Case does not matter; the listing shows the canonical name.
	if out := f.ok("instances", "--status", "completed"); !strings.Contains(out, "order-1") || strings.Contains(out, "order-2") {
		t.Fatalf("instances --status completed:\n%s", out)
	}
}

// A namespace that holds nothing at all (most likely a misspelt --ns) is an error for every
// command, with a hint, instead of an empty answer.
func TestEmptyNamespace(t *testing.T) {
	f := newFixture(t)
	f.populate()
	for _, args := range [][]string{{"instances"}, {"--json", "instances"}, {"queues"}, {"metrics"}, {"show", "order-1"},
		{"delete", "order-1"}, {"purge", "--completed-before", "0s"}, {"prune", "order-1", "--keep", "1"}, {"drop", "--yes"},
		{"raise", "order-2", "ev"}, {"enqueue", "order-2", "q"}, {"cancel", "order-2"}, {"wait", "order-1"}} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"--addr", f.addr, "--ns", "ctI"}, args...), nil, &out, &errOut)
		if code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), `namespace "ctI" holds nothing`) ||
			!strings.Contains(errOut.String(), "--ns") {
			t.Errorf("dxctl --ns ctI %q: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

func TestDrop(t *testing.T) {
	f := newFixture(t)
	f.populate()
	ctx := context.Background()
	keys := func() int {
		n, err := redisprovider.DropNamespace(ctx, noDelete{f.p.Client()}, testNS)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := keys()
	if before == 0 {
		t.Fatal("populate wrote no keys")
	}
	// No answer (stdin closed), a wrong answer and stdin from a pipe are refusals: exit 1, the
	// reason on stderr's last line.
	refused := func(stdin io.Reader, want string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run([]string{"--addr", f.addr, "--ns", testNS, "drop"}, stdin, &out, &errOut)
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		if last := lines[len(lines)-1]; code != 1 || out.Len() != 0 || !strings.HasPrefix(last, "dxctl: ") || !strings.Contains(last, want) {
			t.Fatalf("drop: exit %d, stdout %q, stderr %q; want exit 1 and a last line mentioning %q", code, out.String(), errOut.String(), want)
		}
	}
	refused(strings.NewReader(""), "pass --yes")
	refused(nil, "pass --yes")
	refused(strings.NewReader("yes\n"), `"yes" is not the namespace's name: namespace "ctl" not dropped`)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(w, "ctl\n")
	_ = w.Close()
	refused(r, "stdin is not a terminal")
	_ = r.Close()
	if n := keys(); n != before {
		t.Fatalf("refused drops changed the namespace: %d keys, had %d", n, before)
	}

	out2, errOut2, code := f.dxctlIn("ctl\n", "drop")
	if code != 0 || !strings.Contains(errOut2, `Drop namespace "ctl"`) || !regexpLine(out2, fmt.Sprintf(`^dropped namespace "ctl": %d keys deleted$`, before)) {
		t.Fatalf("drop confirmed: exit %d, stdout %q, stderr %q", code, out2, errOut2)
	}
	if n := keys(); n != 0 {
		t.Fatalf("%d keys left after drop", n)
	}
	f.fails(`namespace "ctl" holds nothing`, "drop", "--yes")

	f.populate()
	var js struct {
		Namespace   string `json:"namespace"`
		KeysDeleted int    `json:"keys_deleted"`
	}
	if err := json.Unmarshal([]byte(f.ok("drop", "--yes", "--json")), &js); err != nil || js.KeysDeleted != before || js.Namespace != testNS {
		t.Fatalf("drop --yes --json: %v, %v", js, err)
	}
}

// noDelete counts a namespace's keys through DropNamespace without deleting them.
type noDelete struct{ redis.UniversalClient }

func (c noDelete) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return redis.NewIntResult(int64(len(keys)), nil)
}

// runtime starts a dx runtime over the fixture's namespace with the orchestrations the
// start/raise/enqueue/cancel/wait tests use, and a client for the test's own checks.
func (f *fixture) runtime() *dx.Client {
	f.t.Helper()
	rt := dx.NewRuntime(f.p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	dx.RegisterActivity(rt, "Greet", func(_ context.Context, name string) (string, error) { return "Hello, " + name + "!", nil })
	dx.Register(rt, "Hello", func(ctx dx.Context, name string) (string, error) {
		return dx.Call[string](ctx, "Greet", name).Await(ctx)
	})
	dx.RegisterVersion(rt, "Hello", "0.9.0", func(ctx dx.Context, name string) (string, error) { return "old " + name, nil })
	dx.Register(rt, "Fail", func(ctx dx.Context, _ dx.Raw) (string, error) { return "", errors.New("out of paper") })
	type order struct {
		Item string `json:"item"`
		Qty  int    `json:"qty"`
	}
	// Approve waits for the event "approve" (its custom status says when it waits) and returns its data.
	dx.Register(rt, "Approve", func(ctx dx.Context, _ dx.Raw) (order, error) {
		ctx.SetCustomStatus("waiting")
		return dx.WaitEvent[order](ctx, "approve").Await(ctx)
	})
	// Inbox returns the first message of its queue "inbox".
	dx.Register(rt, "Inbox", func(ctx dx.Context, _ dx.Raw) (order, error) {
		return dx.Dequeue[order](ctx, "inbox").Await(ctx)
	})
	if err := rt.Start(context.Background()); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	return dx.NewClient(f.p)
}

// start runs dxctl start and returns the id it printed (its whole output).
func (f *fixture) startInstance(args ...string) string {
	f.t.Helper()
	out := f.ok(append([]string{"start"}, args...)...)
	id := strings.TrimSpace(out)
	if id == "" || strings.ContainsAny(id, " \n") {
		f.t.Fatalf("dxctl start %q printed %q, want the instance id alone", args, out)
	}
	return id
}

func TestStartAndWait(t *testing.T) {
	f := newFixture(t)
	f.runtime()
	// start works on an empty namespace: it creates the first instance.
	id := f.startInstance("Hello", "--input", `"world"`)
	out := f.ok("wait", id, "--timeout", "20s")
	if !regexpLine(out, `^Status:\s+Completed$`) || !regexpLine(out, `^Output:\s+"Hello, world!"$`) || !strings.Contains(out, id) {
		t.Fatalf("wait:\n%s", out)
	}

	// --id, --version; --json output of start and wait.
	var started struct {
		ID string `json:"instance_id"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "start", "Hello", "--id", "hello-2", "--version", "0.9.0", "--input", `"two"`)), &started); err != nil || started.ID != "hello-2" {
		t.Fatalf("start --json: %+v, %v", started, err)
	}
	var st struct {
		ID      string          `json:"instance_id"`
		Status  string          `json:"status"`
		Name    string          `json:"orchestration_name"`
		Version string          `json:"orchestration_version"`
		Output  json.RawMessage `json:"output"`
		Error   *string         `json:"error"`
	}
	if err := json.Unmarshal([]byte(f.ok("wait", "hello-2", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.ID != "hello-2" || st.Status != "Completed" || st.Name != "Hello" || st.Version != "0.9.0" || string(st.Output) != `"old two"` || st.Error != nil {
		t.Fatalf("wait --json: %+v (output %s)", st, st.Output)
	}
	f.fails(`instance "hello-2" already exists`, "start", "Hello", "--id", "hello-2")
}

// A second start of an id whose start is still queued (no runtime runs) is refused like a start
// of an existing instance, and says so.
func TestStartQueuedTwice(t *testing.T) {
	f := newFixture(t)
	if id := f.startInstance("Hello", "--id", "queued-1"); id != "queued-1" {
		t.Fatalf("start printed %q", id)
	}
	f.fails(`instance "queued-1" already exists in namespace "`+testNS+`" (or its start is queued)`, "start", "Hello", "--id", "queued-1")
}

// wait exits 2 for a failed instance (its error on stdout) and 1 when --timeout passes first.
func TestWaitFailedAndTimeout(t *testing.T) {
	f := newFixture(t)
	f.runtime()
	id := f.startInstance("Fail")
	out, errOut, code := f.dxctl("wait", id)
	if code != 2 || errOut != "" || !regexpLine(out, `^Status:\s+Failed$`) || !regexpLine(out, `^Error:\s+out of paper$`) {
		t.Fatalf("wait on a failed instance: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = f.dxctl("--json", "wait", id)
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); code != 2 || err != nil || st["status"] != "Failed" || st["error"] != "out of paper" {
		t.Fatalf("wait --json on a failed instance: exit %d, %v, %v", code, st, err)
	}

	id = f.startInstance("Approve")
	f.fails(fmt.Sprintf("instance %q is still Running after --timeout 300ms", id), "wait", id, "--timeout", "300ms")
	f.fails(`instance "nope" does not exist after --timeout 100ms`, "wait", "nope", "--timeout", "100ms")
}

func TestRaiseEnqueueCancel(t *testing.T) {
	f := newFixture(t)
	c := f.runtime()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// raise reaches a waiting instance (an event raised before the wait is not delivered: wait
	// for the custom status its first turn sets).
	id := f.startInstance("Approve", "--id", "approve-1")
	if _, err := c.WaitForStatusChange(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("raise", id, "approve", "--data", `{"item":"paper","qty":3}`); !strings.Contains(out, `"approve"`) || !strings.Contains(out, id) {
		t.Fatalf("raise: %q", out)
	}
	if out := f.ok("wait", id); !regexpLine(out, `^Output:\s+\{"item":"paper","qty":3\}$`) {
		t.Fatalf("wait after raise:\n%s", out)
	}
	f.fails(`instance "approve-1" has already finished (Completed)`, "raise", id, "approve")

	// enqueue reaches the instance's queue (once a runtime has run its start: dxctl refuses
	// instances it cannot find).
	id = f.startInstance("Inbox")
	for st, err := c.Status(ctx, id); st.State == dx.StateNotFound; st, err = c.Status(ctx, id) {
		if err != nil || ctx.Err() != nil {
			t.Fatalf("instance %s never appeared: %v %v", id, err, ctx.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var js map[string]string
	if err := json.Unmarshal([]byte(f.ok("--json", "enqueue", id, "inbox", "--data", `{"item":"ink","qty":1}`)), &js); err != nil ||
		js["instance_id"] != id || js["queue"] != "inbox" {
		t.Fatalf("enqueue --json: %v, %v", js, err)
	}
	if out := f.ok("wait", id); !regexpLine(out, `^Output:\s+\{"item":"ink","qty":1\}$`) {
		t.Fatalf("wait after enqueue:\n%s", out)
	}

	// cancel fails a waiting instance with a Cancelled error carrying the reason.
	id = f.startInstance("Approve")
	if _, err := c.WaitForStatusChange(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	f.ok("cancel", id, "--reason", "no longer needed")
	out, _, code := f.dxctl("wait", id)
	if code != 2 || !regexpLine(out, `^Status:\s+Failed$`) || !strings.Contains(out, "no longer needed") {
		t.Fatalf("wait after cancel: exit %d\n%s", code, out)
	}

	f.fails(`instance "nope" not found in namespace "ctl"`, "raise", "nope", "approve")
	f.fails(`instance "nope" not found`, "enqueue", "nope", "inbox")
	f.fails(`instance "nope" not found`, "cancel", "nope")
}

// JSON inputs are checked before anything is sent (no server needed).
func TestInvalidJSON(t *testing.T) {
	f := newFixture(t)
	f.fails(`--input is not valid JSON`, "start", "Hello", "--input", `{"a":`)
	f.fails(`--input is not valid JSON`, "start", "Hello", "--input", `world`)
	f.fails(`--data is not valid JSON`, "raise", "x", "ev", "--data", `{nope}`)
	f.fails(`--data is not valid JSON`, "enqueue", "x", "q", "--data", `[1,`)
	f.fails(`--version "two" is not a semantic version`, "start", "Hello", "--version", "two")
	f.fails("want 2 argument(s)", "raise", "x")
	f.fails("want 1 argument(s)", "start")
	var out, errOut bytes.Buffer
	if code := run([]string{"--addr", "127.0.0.1:1", "start", "Hello", "--input", "{"}, nil, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "not valid JSON") {
		t.Fatalf("invalid JSON with no server: exit %d, stderr %q", code, errOut.String())
	}
	// The global --version still prints dxctl's version; start's --version is the orchestration's.
	if out := f.ok("--version"); !strings.HasPrefix(out, "dxctl ") {
		t.Fatalf("--version: %q", out)
	}
	if h := f.ok("help", "start"); !strings.Contains(h, "--version V") || strings.Contains(h, "print dxctl's version") {
		t.Fatalf("help start:\n%s", h)
	}
}

// fsck: a populated namespace is clean (exit 0, the counts), a damaged one lists each violation
// with its instance and exits 1, in text and JSON.
func TestFsck(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("fsck")
	if !regexpLine(out, `^checked \d+ keys, 5 instances, 1 worker items: 0 violation\(s\)$`) {
		t.Fatalf("fsck of a healthy namespace:\n%s", out)
	}
	ctx := context.Background()
	prefix := f.p.Keyspace().Prefix(0)
	if err := f.p.Client().ZRem(ctx, prefix+"oq:ready:-", "queued-1").Err(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := f.dxctl("fsck")
	if code != 1 || !strings.Contains(errOut, "breaks its invariants") ||
		!regexpLine(out, `^messages_stranded "queued-1": .*`+regexp.QuoteMeta(prefix+"q:queued-1")+` holds 1 message`) ||
		!regexpLine(out, `1 violation\(s\)$`) {
		t.Fatalf("fsck of a damaged namespace: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	out, _, code = f.dxctl("--json", "fsck")
	var rep struct {
		Instances  int `json:"instances"`
		Violations []struct {
			Code, Subject, Detail string
		} `json:"violations"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Instances != 5 ||
		len(rep.Violations) != 1 || rep.Violations[0].Code != "messages_stranded" || rep.Violations[0].Subject != "queued-1" {
		t.Fatalf("fsck --json: exit %d, %+v, %v\n%s", code, rep, err, out)
	}
}

// fsck --repair asks first (a refusal changes nothing), repairs what it can and checks again:
// exit 0 when clean after it, 1 when something was left (listed with why), in text and JSON.
func TestFsckRepair(t *testing.T) {
	f := newFixture(t)
	f.populate()
	if out := f.ok("fsck", "--repair"); !regexpLine(out, `^checked \d+ keys, 5 instances, 1 worker items: 0 violation\(s\)$`) {
		t.Fatalf("fsck --repair of a healthy namespace:\n%s", out)
	}
	f.fails("--yes goes with --repair", "fsck", "--yes")
	ctx := context.Background()
	ks := f.p.Keyspace()
	prefix := ks.Prefix(0)
	damage := func() {
		t.Helper()
		if err := f.p.Client().ZRem(ctx, prefix+"oq:ready:-", "queued-1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	damage()
	for _, answer := range []string{"", "yes\n"} {
		out, errOut, code := f.dxctlIn(answer, "fsck", "--repair")
		if code != 1 || !strings.Contains(errOut, "Repair 1 violation(s)") || !strings.Contains(errOut, "nothing repaired") ||
			!regexpLine(out, `^messages_stranded "queued-1": `) {
			t.Fatalf("fsck --repair answered %q: exit %d\nstdout:\n%s\nstderr:\n%s", answer, code, out, errOut)
		}
	}
	if _, _, code := f.dxctl("fsck"); code != 1 {
		t.Fatal("a refused repair changed the namespace")
	}
	out, errOut, code := f.dxctlIn(testNS+"\n", "fsck", "--repair")
	if code != 0 || !regexpLine(out, `^repaired messages_stranded "queued-1": made ready under pin -$`) ||
		!regexpLine(out, `^after repair: checked \d+ keys, 5 instances, 1 worker items: 0 violation\(s\)$`) {
		t.Fatalf("fsck --repair confirmed: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	f.ok("fsck")

	// Something repair cannot tell is left: exit 1, in JSON too.
	damage()
	if err := f.p.Client().HSet(ctx, ks.Instance("queued-1"), "parent", "elsewhere").Err(); err != nil {
		t.Fatal(err)
	}
	first, err := f.p.Client().ZRange(ctx, prefix+"idx:instances", 0, 0).Result()
	if err != nil || len(first) != 1 {
		t.Fatalf("instances: %q, %v", first, err)
	}
	if err := f.p.Client().SAdd(ctx, ks.Children(first[0]), "queued-1").Err(); err != nil {
		t.Fatal(err)
	}
	out, _, code = f.dxctl("--json", "fsck", "--repair", "--yes")
	var rep struct {
		Found   []struct{ Code, Subject string } `json:"found"`
		Repairs []struct {
			Code, Subject, Outcome, Detail string
		} `json:"repairs"`
		After struct {
			Violations []struct{ Code, Subject string } `json:"violations"`
		} `json:"after"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || len(rep.Found) < 2 ||
		len(rep.After.Violations) != 1 || rep.After.Violations[0].Code != "child_parent_mismatch" {
		t.Fatalf("fsck --repair --json: exit %d, %+v, %v\n%s", code, rep, err, out)
	}
	outcomes := map[string]string{}
	for _, r := range rep.Repairs {
		outcomes[r.Code] = r.Outcome
	}
	if outcomes["messages_stranded"] != "repaired" || outcomes["child_parent_mismatch"] != "left" {
		t.Fatalf("repairs: %+v", rep.Repairs)
	}
}

// raise warns when the instance is not waiting for the event (it would be dropped), and only then.
func TestRaiseWarnsWhenNotWaiting(t *testing.T) {
	f := newFixture(t)
	c := f.runtime()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := f.startInstance("Approve", "--id", "approve-w")
	if _, err := c.WaitForStatusChange(ctx, id, 0); err != nil { // its first turn waits for "approve"
		t.Fatal(err)
	}
	out := f.ok("raise", id, "shipped")
	if !strings.Contains(out, `raised event "shipped"`) || !strings.Contains(out, `warning: instance "approve-w" is not waiting for event "shipped"`) ||
		!strings.Contains(out, "dxctl enqueue") {
		t.Fatalf("raise of an event nobody waits for: %q", out)
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(f.ok("--json", "raise", id, "shipped")), &js); err != nil || js["waiting"] != false || js["event"] != "shipped" {
		t.Fatalf("raise --json of an event nobody waits for: %v, %v", js, err)
	}
	if out := f.ok("raise", id, "approve", "--data", `{"item":"a","qty":1}`); strings.Contains(out, "warning") {
		t.Fatalf("raise of the awaited event warns: %q", out)
	}
	if _, err := c.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// The history scan behind raise's warning: waits, their events and cancellations, per name.
func TestWaitsFor(t *testing.T) {
	sub := func(id uint64, name string) provider.Event {
		return provider.Event{EventID: id, Kind: provider.ExternalSubscribedEvent{Name: name}}
	}
	raised := func(id uint64, name string) provider.Event {
		return provider.Event{EventID: id, Kind: provider.ExternalEventEvent{Name: name}}
	}
	cancelled := func(id, src uint64) provider.Event {
		return provider.Event{EventID: id, SourceEventID: &src, Kind: provider.ExternalSubscribedCancelledEvent{Reason: "dropped"}}
	}
	for _, c := range []struct {
		name string
		h    []provider.Event
		want bool
	}{
		{"no wait", nil, false},
		{"pending wait", []provider.Event{sub(2, "a")}, true},
		{"other name", []provider.Event{sub(2, "b")}, false},
		{"answered", []provider.Event{sub(2, "a"), raised(3, "a")}, false},
		{"early event then wait", []provider.Event{raised(2, "a"), sub(3, "a")}, true},
		{"cancelled wait", []provider.Event{sub(2, "a"), cancelled(3, 2)}, false},
		{"two waits, one answered", []provider.Event{sub(2, "a"), sub(3, "a"), raised(4, "a")}, true},
	} {
		if got := waitsFor(c.h, "a"); got != c.want {
			t.Errorf("%s: waitsFor = %v, want %v", c.name, got, c.want)
		}
	}
}

// wait and show explain a poison failure: most often a name no runtime registers. The recorded
// error stays duroxide's.
func TestPoisonHint(t *testing.T) {
	f := newFixture(t)
	rt := dx.NewRuntime(f.p, dx.Options{PollTimeout: 200 * time.Millisecond, MinPollInterval: 5 * time.Millisecond,
		MaxAttempts: 1, UnregisteredBackoff: time.Millisecond, UnregisteredBackoffMax: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := dx.Register(rt, "CallsMissing", func(ctx dx.Context, _ dx.Raw) (string, error) {
		return dx.Call[string](ctx, "Missing", nil).Await(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Shutdown(context.Background()) })
	for _, c := range []struct{ orch, what string }{
		{"CallsMissing", `activity "Missing"`},
		{"NoSuchOrch", `orchestration "NoSuchOrch"`},
	} {
		id := f.startInstance(c.orch)
		out, _, code := f.dxctl("wait", id, "--timeout", "20s")
		if code != 2 || !regexpLine(out, `^Error:\s+poison: `) || !regexpLine(out, `^Hint:\s+poison: .*not registered`) || !strings.Contains(out, c.what) {
			t.Fatalf("wait on %s: exit %d\n%s", c.orch, code, out)
		}
		var js map[string]any
		out, _, _ = f.dxctl("--json", "wait", id)
		if err := json.Unmarshal([]byte(out), &js); err != nil || !strings.Contains(fmt.Sprint(js["hint"]), "not registered") ||
			strings.Contains(fmt.Sprint(js["error"]), "registered") {
			t.Fatalf("wait --json on %s: %v, %v", c.orch, js, err)
		}
		if out := f.ok("show", id); !regexpLine(out, `^Hint:\s+poison: .*not registered`) {
			t.Fatalf("show of %s:\n%s", c.orch, out)
		}
	}
	// Other failures get no hint (the runtime above, which registers no Fail, is stopped first).
	if err := rt.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.runtime()
	id := f.startInstance("Fail")
	if out, _, _ := f.dxctl("wait", id); strings.Contains(out, "Hint:") {
		t.Fatalf("wait on an ordinary failure:\n%s", out)
	}
}

// show says when a runtime holds the instance, and why (provider.Holder), in text and JSON.
func TestShowHeld(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fetchTurn := func() string {
		t.Helper()
		it, err := f.p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %+v, %v", it, err)
		}
		return it.LockToken
	}
	start := provider.WorkItem{Kind: provider.StartOrchestration{Instance: "held-1", Orchestration: "O", Input: "{}", ExecutionID: 1}}
	if err := f.p.EnqueueForOrchestrator(ctx, start, 0); err != nil {
		t.Fatal(err)
	}
	started := provider.Event{EventID: 1, InstanceID: "held-1", ExecutionID: 1, TimestampMs: 1, DuroxideVersion: "0.1.30",
		Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}
	if err := f.p.AckOrchestrationItem(ctx, fetchTurn(), provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{started},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}}); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("show", "held-1"); strings.Contains(out, "Held:") {
		t.Fatalf("show of an instance not held:\n%s", out)
	}
	if err := f.p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "held-1", Name: "e", Data: "1"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.p.HoldOrchestrationItem(ctx, fetchTurn(), time.Hour, "nondeterminism at event 2"); err != nil {
		t.Fatal(err)
	}
	if out := f.ok("show", "held-1"); !regexpLine(out, `^Held:\s+nondeterminism at event 2 \(since \S+; it resumes when`) {
		t.Fatalf("show of a held instance:\n%s", out)
	}
	var got struct {
		Held string `json:"held"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "show", "held-1")), &got); err != nil || got.Held != "nondeterminism at event 2" {
		t.Fatalf("show --json: %+v, %v", got, err)
	}
}

// migrate: a format-1 namespace is refused by every other command with the hint to migrate;
// migrate converts it and says so; run again it does nothing; --json reports the same.
func TestMigrate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.p.Client().Set(ctx, f.p.Keyspace().Prefix(0)+"seq", "7", 0).Err(); err != nil { // format 1's sequence
		t.Fatal(err)
	}
	f.fails("run `dxctl migrate --ns ctl`", "queues")
	f.fails("--partitions must be 1-256", "migrate", "--partitions", "-1")
	f.fails("--partitions must be 1-256", "migrate", "--partitions", "257")
	out := f.ok("migrate")
	if !regexpLine(out, `^namespace "ctl" migrated from format 1 to format 2 in .*: start its runtimes with this release$`) {
		t.Fatalf("migrate:\n%s", out)
	}
	if out := f.ok("migrate"); !strings.Contains(out, "format 2 already: nothing to do") {
		t.Fatalf("migrate again:\n%s", out)
	}
	var rep struct {
		From  int      `json:"from_format"`
		To    int      `json:"to_format"`
		Steps []string `json:"steps"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "migrate")), &rep); err != nil || rep.From != 2 || rep.To != 2 || rep.Steps == nil || len(rep.Steps) != 0 {
		t.Fatalf("migrate --json: %+v %v", rep, err)
	}
	f.ok("queues")
}

// toOldLayout rewrites an instance's execution records as releases before the one record layout
// kept them (scripts/lib_admin.lua, record_convert): the current execution's record in
// x:<e>:<id> and not in the instance hash, a pin field beside pink, no hd (the id set he: holds
// the event ids), no hn (the id set counts them), no hb, no out where there is no output.
func toOldLayout(t *testing.T, p *redisprovider.Provider, id string) {
	t.Helper()
	ctx := context.Background()
	ks, c := p.Keyspace(), p.Client()
	v := c.HMGet(ctx, ks.Instance(id), "exec", "status", "xs", "done", "out", "hn", "hd", "pink", "created", "updated").Val()
	str := func(i int) string { s, _ := v[i].(string); return s }
	cur, err := strconv.ParseUint(str(0), 10, 64)
	if err != nil {
		t.Fatalf("%s: exec %q", id, str(0))
	}
	started, completed := str(2), str(3)
	if started == "" {
		started = str(8)
	}
	if completed == "" && provider.IsTerminalStatus(str(1)) {
		completed = str(9)
	}
	rec := map[string]any{"status": str(1), "started": started, "hn": str(5), "hd": str(6), "out": str(4), "pink": str(7)}
	if completed != "" {
		rec["completed"] = completed
	}
	ids := func(e uint64, n string) { // the event ids of a dense execution, as an id set
		count, _ := strconv.Atoi(n)
		for i := 1; i <= count; i++ {
			c.SAdd(ctx, ks.HistoryIDs(id, e), i)
		}
	}
	execs := c.ZRange(ctx, ks.Executions(id), 0, -1).Val()
	for _, s := range append(execs, str(0)) {
		e, _ := strconv.ParseUint(s, 10, 64)
		x := rec
		if e != cur {
			x = map[string]any{}
			for f, val := range c.HGetAll(ctx, ks.Execution(id, e)).Val() {
				x[f] = val
			}
		}
		if x["hd"] == "1" {
			ids(e, x["hn"].(string))
		}
		delete(x, "hd")
		delete(x, "hn")
		if x["out"] == "-" {
			delete(x, "out")
		}
		if x["pink"] == "" {
			delete(x, "pink")
		}
		x["pin"] = "1.0.0"
		c.Del(ctx, ks.Execution(id, e))
		c.HSet(ctx, ks.Execution(id, e), x)
		c.ZAdd(ctx, ks.Executions(id), redis.Z{Score: float64(e), Member: s})
	}
	c.HDel(ctx, ks.Instance(id), "xs", "done", "out", "hd", "hn", "hb")
	c.HSet(ctx, ks.Instance(id), "pin", "1.0.0")
}

// migrate on a format-2 namespace converts the execution records an earlier build wrote in an
// older layout: fsck reports them before, show prints exactly what it printed before they were
// rewritten, and fsck finds nothing after.
func TestMigrateOldRecordLayouts(t *testing.T) {
	f := newFixture(t)
	f.populate()
	ids, err := f.p.ListInstances(context.Background())
	if err != nil || len(ids) < 3 {
		t.Fatalf("instances: %v %v", ids, err)
	}
	before := map[string]string{}
	for _, id := range ids {
		before[id] = f.ok("show", id)
		toOldLayout(t, f.p, id)
	}
	if out, _, code := f.dxctl("fsck"); code != 1 || strings.Count(out, "record_layout") != len(ids) {
		t.Fatalf("fsck of the older layouts: exit %d\n%s", code, out)
	}
	out := f.ok("migrate")
	if !regexpLine(out, fmt.Sprintf(`^namespace "ctl" \(format 2\): converted what an older release wrote in .* \(steps: records of %d instances\): start its runtimes with this release$`, len(ids))) {
		t.Fatalf("migrate:\n%s", out)
	}
	for _, id := range ids {
		if got := f.ok("show", id); got != before[id] {
			t.Errorf("show %s after migrate:\n%s\nbefore:\n%s", id, got, before[id])
		}
	}
	f.ok("fsck")
}

// migrate --partitions moves the namespace to another partition count: every command then reads
// it as before, "partitions" describes each partition, and a second run does nothing.
func TestMigratePartitions(t *testing.T) {
	f := newFixture(t)
	f.populate()
	before := f.ok("instances")
	out := f.ok("migrate", "--partitions", "3")
	if !regexpLine(out, `^namespace "ctl" moved from 1 to 3 partitions in .*: start its runtimes \(Options.Partitions 0 or 3\)$`) {
		t.Fatalf("migrate --partitions 3:\n%s", out)
	}
	if got := f.ok("instances"); got != before {
		t.Fatalf("instances after the move:\n%s\nbefore:\n%s", got, before)
	}
	if out := f.ok("fsck"); !strings.Contains(out, ": 0 violation(s)") {
		t.Fatalf("fsck after the move:\n%s", out)
	}
	if out := f.ok("migrate", "--partitions", "3"); !strings.Contains(out, "nothing to do") {
		t.Fatalf("migrate --partitions 3 again:\n%s", out)
	}
	out = f.ok("partitions")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "PARTITION  TAG") || !regexpLine(out, `^2 +ctl:2/\d+ +\d+ +127\.0\.0\.1:\d+ `) {
		t.Fatalf("partitions:\n%s", out)
	}
	var ps web.Partitions
	if err := json.Unmarshal([]byte(f.ok("--json", "partitions")), &ps); err != nil || ps.Namespace != "ctl" || len(ps.Partitions) != 3 {
		t.Fatalf("partitions --json: %+v %v", ps, err)
	}
	var inst uint64
	for _, p := range ps.Partitions {
		inst += p.Instances
	}
	if inst != 4 {
		t.Fatalf("partitions --json: %d instances, want the 4 created: %+v", inst, ps)
	}
	var rep struct {
		From int `json:"from_partitions"`
		To   int `json:"to_partitions"`
	}
	if err := json.Unmarshal([]byte(f.ok("--json", "migrate", "--partitions", "1")), &rep); err != nil || rep.From != 3 || rep.To != 1 {
		t.Fatalf("migrate --json --partitions 1: %+v %v", rep, err)
	}
	if got := f.ok("instances"); got != before {
		t.Fatalf("instances after the move back:\n%s\nbefore:\n%s", got, before)
	}
}

// fsck --deep reads the histories too: a lost timer message is reported (text and JSON) and
// --repair arms it again from its TimerCreated event; --rate must not be negative.
func TestFsckDeep(t *testing.T) {
	f := newFixture(t)
	f.populate()
	out := f.ok("fsck", "--deep")
	if !regexpLine(out, `^checked \d+ keys, 5 instances, 1 worker items, \d+ histories: 0 violation\(s\)$`) {
		t.Fatalf("fsck --deep of a healthy namespace:\n%s", out)
	}
	f.fails("--rate must be 0 or more", "fsck", "--deep", "--rate", "-1")
	ctx := context.Background()
	if err := f.p.Client().Del(ctx, f.p.Keyspace().Messages("order-2")).Err(); err != nil {
		t.Fatal(err)
	}
	out, _, code := f.dxctl("fsck", "--deep", "--rate", "0")
	if code != 1 || !regexpLine(out, `^timer_lost "order-2": timer 3 of execution 1 `) {
		t.Fatalf("fsck --deep of a lost timer: exit %d\n%s", code, out)
	}
	out, _, code = f.dxctl("--json", "fsck", "--deep")
	var rep struct {
		Histories  int `json:"histories"`
		Violations []struct{ Code, Subject string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.Histories == 0 ||
		!slices.ContainsFunc(rep.Violations, func(v struct{ Code, Subject string }) bool { return v.Code == "timer_lost" && v.Subject == "order-2" }) {
		t.Fatalf("fsck --deep --json: exit %d, %+v, %v\n%s", code, rep, err, out)
	}
	out = f.ok("fsck", "--deep", "--repair", "--yes")
	if !regexpLine(out, `^repaired timer_lost "order-2": armed timer 3 of execution 1 again, to fire at \d+$`) ||
		!regexpLine(out, `^after repair: checked \d+ keys, 5 instances, 1 worker items, \d+ histories: 0 violation\(s\)$`) {
		t.Fatalf("fsck --deep --repair:\n%s", out)
	}
	f.ok("fsck", "--deep")
}

// dxctl stats prints the outcome counts the acks keep in the namespace.
func TestStats(t *testing.T) {
	f := newFixture(t)
	f.populate() // order-1 completed, report-7 failed
	out := f.ok("stats")
	if !regexpLine(out, `^total\s+1\s+1\s+0\s+0$`) || !strings.Contains(out, "Last 1h0m0s from ") {
		t.Fatalf("stats:\n%s", out)
	}
	var js struct {
		StepMs  int64 `json:"step_ms"`
		Buckets []struct {
			OrchestrationsCompleted uint64 `json:"orchestrations_completed"`
		} `json:"buckets"`
		Totals struct {
			OrchestrationsCompleted uint64 `json:"orchestrations_completed"`
			OrchestrationsFailed    uint64 `json:"orchestrations_failed"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(f.ok("stats", "--last", "24h", "--step", "1h", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Buckets) != 24 || js.StepMs != 3_600_000 || js.Totals.OrchestrationsCompleted != 1 || js.Totals.OrchestrationsFailed != 1 {
		t.Fatalf("stats --json: %+v", js)
	}
	f.fails("the range must be whole minutes from 1m to 24h", "stats", "--last", "48h")
	f.fails("the step must be whole minutes that divide the range", "stats", "--step", "7m")
}

// dxctl set-limit sets a tag's caps, limits lists them, queues shows running against the cap and the
// items waiting because of it.
func TestLimits(t *testing.T) {
	f := newFixture(t)
	f.populate()
	ctx := context.Background()
	if out := f.ok("set-limit", "api", "--concurrency", "2", "--rate", "5", "--burst", "3"); !strings.Contains(out, `tag "api": concurrency 2, rate 5/s, burst 3`) {
		t.Fatalf("limit: %s", out)
	}
	for i := range 3 {
		tag := "api"
		it := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "order-2", ExecutionID: 1, ID: uint64(50 + i), Name: "Call", Input: "{}", Tag: &tag}}
		if err := f.p.EnqueueForWorker(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	api, _ := provider.TagFilterTags("api")
	for range 3 {
		if _, err := f.p.FetchWorkItem(ctx, time.Minute, 0, nil, api); err != nil {
			t.Fatal(err)
		}
	}
	if out := f.ok("limits"); !regexpLine(out, `^tag "api"\s+2\s+2\s+5\s+3$`) {
		t.Fatalf("limits:\n%s", out)
	}
	if out := f.ok("queues"); !regexpLine(out, `^tag "api"\s+2\s+2\s+5\s+1 \(capped\)$`) {
		t.Fatalf("queues:\n%s", out)
	}
	var js struct {
		Caps []struct {
			Tag     string `json:"tag"`
			Running int    `json:"running"`
			Waiting int    `json:"waiting_capped"`
		} `json:"caps"`
	}
	if err := json.Unmarshal([]byte(f.ok("queues", "--json")), &js); err != nil || len(js.Caps) != 1 || js.Caps[0].Running != 2 || js.Caps[0].Waiting != 1 {
		t.Fatalf("queues --json caps: %+v %v", js, err)
	}
	if out := f.ok("set-limit", "api"); !strings.Contains(out, `tag "api": no caps`) {
		t.Fatalf("limit without limits: %s", out)
	}
	if out := f.ok("limits"); strings.Contains(out, "api") {
		t.Fatalf("limits after the removal:\n%s", out)
	}
	f.fails("a burst needs a rate", "set-limit", "api", "--burst", "2")
	f.fails("must not be negative", "set-limit", "api", "--concurrency", "-1")
}

// dxctl dead lists, shows, redrives and discards dead letters.
func TestDead(t *testing.T) {
	f := newFixture(t)
	f.populate()
	ctx := context.Background()
	for i := range 3 {
		it := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "order-2", ExecutionID: 1, ID: uint64(60 + i), Name: "Pay", Input: "{}"}}
		if err := f.p.EnqueueForWorker(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		it, err := f.p.FetchWorkItem(ctx, time.Minute, 0, nil, provider.TagFilterDefaultOnly())
		if err != nil || it == nil {
			t.Fatalf("fetch: %v %v", it, err)
		}
		a := it.Item.Kind.(provider.ActivityExecute)
		if a.Name != "Pay" { // the fixture's own item (Label) stays queued
			if err := f.p.AbandonWorkItem(ctx, it.LockToken, time.Hour, true); err != nil {
				t.Fatal(err)
			}
			continue
		}
		d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 11, MaxAttempts: 10,
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: a.Instance, ExecutionID: 1, ActivityName: a.Name, ActivityID: a.ID}},
			Message:     "{}"}}
		if err := f.p.ParkWorkItem(ctx, it.LockToken, d); err != nil {
			t.Fatal(err)
		}
	}
	out := f.ok("dead", "list")
	if strings.Count(out, "Pay#") < 2 || !strings.Contains(out, "poison: activity Pay#") {
		t.Fatalf("dead list:\n%s", out)
	}
	var js struct {
		DeadLetters []struct {
			ID string `json:"id"`
		} `json:"dead_letters"`
	}
	if err := json.Unmarshal([]byte(f.ok("dead", "list", "--json")), &js); err != nil || len(js.DeadLetters) < 2 {
		t.Fatalf("dead list --json: %+v %v", js, err)
	}
	n := len(js.DeadLetters)
	first := js.DeadLetters[0].ID
	if out := f.ok("dead", "show", first); !regexpLine(out, `^Failure:\s+poison: activity Pay#`) || !regexpLine(out, `^Instance:\s+order-2$`) {
		t.Fatalf("dead show:\n%s", out)
	}
	if out := f.ok("dead", "redrive", first); !strings.Contains(out, "1 dead letter(s) redriven") {
		t.Fatalf("dead redrive: %s", out)
	}
	f.fails("not a dead letter", "dead", "redrive", first)
	if out := f.ok("dead", "redrive", "--all", "--activity", "Other"); !strings.Contains(out, "0 dead letter(s) redriven") {
		t.Fatalf("dead redrive --all --activity Other: %s", out)
	}
	if out := f.ok("dead", "list", "--instance", "nope"); strings.Contains(out, "Pay#") {
		t.Fatalf("dead list --instance nope:\n%s", out)
	}
	f.fails("go with --all", "dead", "redrive", first, "--activity", "Pay")
	f.fails("pass --yes", "dead", "discard", "--all")
	if out := f.ok("dead", "discard", "--all", "--yes"); !strings.Contains(out, fmt.Sprintf("%d dead letter(s) discarded", n-1)) {
		t.Fatalf("dead discard --all: %s", out)
	}
	if out := f.ok("dead", "list"); strings.Contains(out, "Pay#") {
		t.Fatalf("dead letters left:\n%s", out)
	}
	f.fails("unknown action", "dead", "bury")
	f.fails("want IDs or --all", "dead", "redrive")
}
