package dx_test

// The compatibility test: every reference program in testdata/golden (recorded with the real duroxide
// runtime, see testdata/golden/README.md) is run on a fresh namespace with its Go port from
// golden_programs_test.go, and every stored history and final state is compared with the recording,
// ignoring only what the README says varies from run to run or is specific to the Node binding.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

const goldenDir = "testdata/golden"

// goldenSums lists every file of goldenDir with its SHA-256, as copied from the recordings
// (duroxide's runtime-0.1.29 golden folder); TestGoldenCopiesUnchanged checks the copies against it.
const goldenSums = goldenDir + "/SHA256SUMS"

func TestGolden(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		folder := e.Name()
		t.Run(folder, func(t *testing.T) {
			t.Parallel() // each program and each mode runs on its own namespace, runtime and registrations
			prog, ok := goldenPrograms[folder]
			if !ok {
				t.Fatalf("no Go program for golden folder %s: add one to goldenPrograms in golden_programs_test.go", folder)
			}
			// Every program with the executor cache off (every turn replays the whole history) and
			// on (kept instances run only their new events), except 19: its nondeterminism only
			// shows when the code really replays, which a kept instance never does.
			// And once more through a provider offering the optional extensions (ack-and-fetch,
			// lite fetches), with the cache on.
			t.Run("replay", func(t *testing.T) { t.Parallel(); runGolden(t, filepath.Join(goldenDir, folder), prog, -1, false) })
			if folder != "19-nondeterminism" {
				t.Run("cached", func(t *testing.T) { t.Parallel(); runGolden(t, filepath.Join(goldenDir, folder), prog, 0, false) })
				t.Run("extensions", func(t *testing.T) { t.Parallel(); runGolden(t, filepath.Join(goldenDir, folder), prog, 0, true) })
			}
		})
	}
	if n == 0 {
		t.Fatalf("no program folders in %s", goldenDir)
	}
	for name := range goldenPrograms {
		if _, err := os.Stat(filepath.Join(goldenDir, name)); err != nil {
			t.Errorf("goldenPrograms has %s, which is not a folder of %s", name, goldenDir)
		}
	}
}

// TestGoldenCopiesUnchanged checks that testdata/golden holds exactly the files SHA256SUMS lists,
// unchanged: the recordings are copied, never edited. (To renew them, copy README.md and every
// program.md, history.jsonl and result.json of the recordings, then run sha256sum over them.)
func TestGoldenCopiesUnchanged(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(goldenSums)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("%s: bad line %q", goldenSums, line)
		}
		want[name] = sum
	}
	got := map[string]string{}
	err = filepath.WalkDir(goldenDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == goldenSums {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(goldenDir, path)
		got[filepath.ToSlash(rel)] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, sum := range want {
		switch g, ok := got[name]; {
		case !ok:
			t.Errorf("%s is missing", name)
		case g != sum:
			t.Errorf("%s differs from the recording", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s is not in %s: the copies hold only the recordings", name, goldenSums)
		}
	}
}

// goldenProgram is the Go port of one reference program.
type goldenProgram struct {
	// workerTags, when set, makes the worker take untagged activities and these tags.
	workerTags []string
	// register registers the program's orchestrations and activities.
	register func(g *goldenEnv)
	// drive drives the program; it must call g.startRuntime (before or after its first steps).
	drive func(g *goldenEnv)
	// racy, when set, says which race of real time the recording's outcome depends on (a timer
	// of a few hundred ms against an activity or a blocker): a run on a loaded machine may
	// legitimately take the other side. runGolden then runs the program again, up to
	// racyRuns times, while its histories differ from the recording, and reports the last run.
	racy string
}

// racyRuns is how often runGolden runs a racy program before it reports a difference: a
// behaviour that is wrong fails every run; a race lost to a loaded machine rarely three times.
const racyRuns = 3

// goldenEnv is what a program runs against: a fresh namespace, a runtime with the golden README's
// default settings, and a client.
type goldenEnv struct {
	t   *testing.T
	ctx context.Context
	p   *redisprovider.Provider
	rt  *dx.Runtime
	c   *dx.Client
}

func runGolden(t *testing.T, dir string, prog goldenProgram, cacheSize int, extensions bool) {
	want := loadGolden(t, dir)
	if want.result.Program != filepath.Base(dir) {
		t.Fatalf("result.json is for program %q, not %q", want.result.Program, filepath.Base(dir))
	}
	for id := range want.histories {
		if !slices.ContainsFunc(want.result.Instances, func(i goldenInstance) bool { return i.InstanceID == id }) {
			t.Fatalf("history.jsonl has instance %s, which result.json does not list", id)
		}
	}
	for run := 1; ; run++ {
		g := newGoldenEnv(t, prog, cacheSize, extensions)
		prog.register(g)
		prog.drive(g)
		if t.Failed() {
			return
		}
		if prog.racy == "" || run == racyRuns || historiesMatch(g, want) {
			compareGolden(t, g, want)
			return
		}
		t.Logf("run %d took the other side of a race of real time (%s): running the program again", run, prog.racy)
	}
}

// newGoldenEnv returns a fresh namespace and a runtime with the golden README's default settings.
func newGoldenEnv(t *testing.T, prog goldenProgram, cacheSize int, extensions bool) *goldenEnv {
	p := newProvider(t)
	opts := dx.Options{
		OrchestrationConcurrency: 1,
		WorkerConcurrency:        1,
		MinPollInterval:          20 * time.Millisecond,
		PollTimeout:              200 * time.Millisecond,
		Logger:                   testLogger(),
		ExecutorCacheSize:        cacheSize,
	}
	if len(prog.workerTags) > 0 {
		f, err := provider.TagFilterDefaultAnd(prog.workerTags...)
		if err != nil {
			t.Fatal(err)
		}
		opts.WorkerTagFilter = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	var rp provider.Provider = p
	if extensions {
		rp = newExtProvider(p)
	}
	return &goldenEnv{t: t, ctx: ctx, p: p, rt: dx.NewRuntime(rp, opts), c: dx.NewClient(rp)}
}

func (g *goldenEnv) startRuntime() { g.t.Helper(); startRuntime(g.t, g.rt) }

func (g *goldenEnv) start(name, instance string, input any, opts ...dx.StartOption) {
	g.t.Helper()
	if _, err := g.c.Start(g.ctx, name, input, append([]dx.StartOption{dx.WithInstanceID(instance)}, opts...)...); err != nil {
		g.t.Fatalf("start %s: %v", instance, err)
	}
}

func (g *goldenEnv) enqueue(instance, queue string, data any) {
	g.t.Helper()
	if err := g.c.EnqueueEvent(g.ctx, instance, queue, data); err != nil {
		g.t.Fatalf("enqueue on %s: %v", instance, err)
	}
}

// wait waits until every instance is terminal.
func (g *goldenEnv) wait(instances ...string) {
	g.t.Helper()
	for _, id := range instances {
		st, err := g.c.Wait(g.ctx, id)
		if err != nil {
			g.t.Fatalf("wait for %s: %v (last state %s)", id, err, st.State)
		}
	}
}

// waitHistory polls the instance's history every 10 ms until it holds n events of eventType.
func (g *goldenEnv) waitHistory(instance, eventType string, n int) {
	g.t.Helper()
	g.waitExec(instance, 0, eventType, n)
}

// waitExec is waitHistory for execution exec of instance (0: the latest).
func (g *goldenEnv) waitExec(instance string, exec uint64, eventType string, n int) {
	g.t.Helper()
	for {
		var hist []provider.Event
		var err error
		if exec == 0 {
			hist, err = g.p.Read(g.ctx, instance)
		} else {
			hist, err = g.p.ReadWithExecution(g.ctx, instance, exec)
		}
		if err != nil {
			g.t.Fatalf("read history of %s: %v", instance, err)
		}
		count := 0
		for _, ev := range hist {
			if ev.EventType() == eventType {
				count++
			}
		}
		if count >= n {
			return
		}
		select {
		case <-g.ctx.Done():
			g.t.Fatalf("history of %s (execution %d, 0: latest) never held %d %s events (it has %d)", instance, exec, n, eventType, count)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ---- the recordings ----

type goldenData struct {
	// histories[instance][execution] are the recorded events, decoded.
	histories map[string]map[uint64][]jsonObject
	result    goldenResult
}

type jsonObject = map[string]any

type goldenResult struct {
	Program   string           `json:"program"`
	Instances []goldenInstance `json:"instances"`
	All       []string         `json:"all_instances_in_store"`
}

type goldenInstance struct {
	InstanceID          string            `json:"instance_id"`
	Name                string            `json:"orchestration_name"`
	Version             string            `json:"orchestration_version"`
	Parent              *string           `json:"parent_instance_id"`
	CurrentExecution    uint64            `json:"current_execution_id"`
	Status              string            `json:"status"`
	Output              *string           `json:"output"`
	Error               *string           `json:"error"`
	CustomStatus        *string           `json:"custom_status"`
	CustomStatusVersion uint64            `json:"custom_status_version"`
	Executions          []goldenExecution `json:"executions"`
	KV                  map[string]string `json:"kv"`
}

type goldenExecution struct {
	ExecutionID uint64  `json:"execution_id"`
	Status      string  `json:"status"`
	Output      *string `json:"output"`
	EventCount  uint64  `json:"event_count"`
}

func loadGolden(t *testing.T, dir string) goldenData {
	t.Helper()
	d := goldenData{histories: map[string]map[uint64][]jsonObject{}}
	raw, err := os.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		ev, err := decodeObject(line)
		if err != nil {
			t.Fatalf("history.jsonl line %d: %v", i+1, err)
		}
		inst, _ := ev["instance_id"].(string)
		exec, err := strconv.ParseUint(fmt.Sprint(ev["execution_id"]), 10, 64)
		if inst == "" || err != nil {
			t.Fatalf("history.jsonl line %d has no instance_id/execution_id", i+1)
		}
		if d.histories[inst] == nil {
			d.histories[inst] = map[uint64][]jsonObject{}
		}
		d.histories[inst][exec] = append(d.histories[inst][exec], ev)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d.result); err != nil {
		t.Fatalf("result.json: %v", err)
	}
	return d
}

func decodeObject(b []byte) (jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m jsonObject
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// ---- comparison ----

func compareGolden(t *testing.T, g *goldenEnv, want goldenData) {
	admin, ok := g.p.Admin()
	if !ok {
		t.Fatal("provider has no Admin")
	}
	ctx := g.ctx

	all, err := admin.ListInstances(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSet(all, want.result.All) {
		t.Errorf("all_instances_in_store: want %v, got %v", sorted(want.result.All), sorted(all))
	}

	for _, wi := range want.result.Instances {
		id := wi.InstanceID
		execs, err := admin.ListExecutions(ctx, id)
		if err != nil {
			t.Errorf("%s: list executions: %v", id, err)
			continue
		}
		wantExecs := make([]uint64, 0, len(want.histories[id]))
		for e := range want.histories[id] {
			wantExecs = append(wantExecs, e)
		}
		slices.Sort(wantExecs)
		if !slices.Equal(execs, wantExecs) {
			t.Errorf("%s: executions: want %v, got %v", id, wantExecs, execs)
		}
		for _, ex := range wantExecs {
			hist, err := admin.ReadHistoryWithExecutionID(ctx, id, ex)
			if err != nil {
				t.Errorf("%s execution %d: read history: %v", id, ex, err)
				continue
			}
			for _, d := range compareHistory(want.histories[id][ex], eventObjects(t, id, hist)) {
				t.Errorf("%s execution %d: %s", id, ex, d)
			}
		}
		compareInstance(t, g, admin, wi)
	}
}

// historiesMatch says, reporting nothing, whether every recorded history was reproduced.
func historiesMatch(g *goldenEnv, want goldenData) bool {
	admin, _ := g.p.Admin()
	for id, execs := range want.histories {
		for ex, events := range execs {
			hist, err := admin.ReadHistoryWithExecutionID(g.ctx, id, ex)
			if err != nil || len(compareHistory(events, eventObjects(g.t, id, hist))) > 0 {
				return false
			}
		}
	}
	return true
}

// eventObjects turns a history into the JSON objects compareHistory compares.
func eventObjects(t *testing.T, id string, hist []provider.Event) []jsonObject {
	t.Helper()
	got := make([]jsonObject, 0, len(hist))
	for _, ev := range hist {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("%s: marshal event %d: %v", id, ev.EventID, err)
		}
		m, err := decodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	return got
}

// diff is one difference: an event (or a result field), a field path, and both values.
type diff struct {
	where, field string
	want, got    any
}

func (d diff) String() string {
	if d.field == "" {
		return fmt.Sprintf("%s: want %s, got %s", d.where, show(d.want), show(d.got))
	}
	return fmt.Sprintf("%s, field %s: want %s, got %s", d.where, d.field, show(d.want), show(d.got))
}

// absent marks a field missing on one side.
type absentT struct{}

var absent = absentT{}

func show(v any) string {
	if _, ok := v.(absentT); ok {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

var (
	uuidV4    = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	nodeError = regexp.MustCompile(`^(Error: )?Activity '[^']*' JS execution failed: GenericFailure, Error: `)
)

// stripNodePrefix removes the Node binding's wrapping of activity error messages (README,
// "binding-specific").
func stripNodePrefix(s string) string { return nodeError.ReplaceAllString(s, "") }

const (
	syscallNewGUID  = "__duroxide_syscall:new_guid"
	syscallUtcNowMs = "__duroxide_syscall:utc_now_ms"
)

// compareHistory compares one execution's events, after normalising both sides.
func compareHistory(want, got []jsonObject) []diff {
	var out []diff
	// Checks of the varying values on the Go side, before they are dropped.
	out = append(out, checkVarying(got)...)
	w := normalise(want, true)
	g := normalise(got, false)
	// Event ids contiguous from 1 on the Go side.
	for i, ev := range got {
		if id := fmt.Sprint(ev["event_id"]); id != strconv.Itoa(i+1) {
			out = append(out, diff{fmt.Sprintf("event #%d", i+1), "event_id", i + 1, ev["event_id"]})
		}
	}
	// The trailing cancellation block (after the terminal event) is compared as a set.
	wHead, wTail := splitTrailing(w)
	gHead, gTail := splitTrailing(g)
	out = append(out, checkTimerDelays(want, got)...)
	n := max(len(wHead), len(gHead))
	for i := range n {
		where := fmt.Sprintf("event %d", i+1)
		switch {
		case i >= len(wHead):
			out = append(out, diff{where, "", absent, gHead[i]})
		case i >= len(gHead):
			out = append(out, diff{where, "", wHead[i], absent})
		default:
			if t := fmt.Sprint(wHead[i]["type"]); t != "" {
				where += " (" + t + ")"
			}
			out = append(out, objectDiff(where, "", wHead[i], gHead[i])...)
		}
	}
	if len(wTail)+len(gTail) > 0 {
		strip := func(evs []jsonObject) []string {
			var s []string
			for _, ev := range evs {
				c := cloneObject(ev)
				delete(c, "event_id")
				b, _ := json.Marshal(c)
				s = append(s, string(b))
			}
			slices.Sort(s)
			return s
		}
		ws, gs := strip(wTail), strip(gTail)
		if !slices.Equal(ws, gs) {
			out = append(out, diff{"trailing cancellation block (compared as a set)", "", ws, gs})
		}
	}
	return out
}

func splitTrailing(evs []jsonObject) (head, tail []jsonObject) {
	for i, ev := range evs {
		switch ev["type"] {
		case "OrchestrationCompleted", "OrchestrationFailed", "OrchestrationContinuedAsNew":
			return evs[:i+1], evs[i+1:]
		}
	}
	return evs, nil
}

// checkVarying checks the fields that vary from run to run on the Go side: builtin results, timer
// fire times, KV update times.
func checkVarying(got []jsonObject) []diff {
	var out []diff
	byID := map[string]jsonObject{}
	for _, ev := range got {
		byID[fmt.Sprint(ev["event_id"])] = ev
	}
	now := time.Now().UnixMilli()
	for _, ev := range got {
		where := fmt.Sprintf("event %v (%v)", ev["event_id"], ev["type"])
		switch ev["type"] {
		case "ActivityCompleted":
			sched := byID[fmt.Sprint(ev["source_event_id"])]
			res, _ := ev["result"].(string)
			switch sched["name"] {
			case syscallNewGUID:
				if !uuidV4.MatchString(res) {
					out = append(out, diff{where, "result", "a bare UUID v4 text", res})
				}
			case syscallUtcNowMs:
				ms, err := strconv.ParseInt(res, 10, 64)
				if err != nil || ms < now-10*60*1000 || ms > now+60*1000 {
					out = append(out, diff{where, "result", "decimal milliseconds near now", res})
				}
			}
		case "TimerFired":
			created := byID[fmt.Sprint(ev["source_event_id"])]
			if created["type"] != "TimerCreated" || fmt.Sprint(created["fire_at_ms"]) != fmt.Sprint(ev["fire_at_ms"]) {
				out = append(out, diff{where, "fire_at_ms", "the fire_at_ms of its TimerCreated", ev["fire_at_ms"]})
			}
		case "KeyValueSet":
			if _, ok := ev["last_updated_at_ms"].(json.Number); !ok {
				out = append(out, diff{where, "last_updated_at_ms", "a number", ev["last_updated_at_ms"]})
			}
		}
	}
	return out
}

// checkTimerDelays checks that each TimerCreated asks for the recorded delay (fire_at_ms minus
// timestamp_ms), within a generous second: both are wall-clock readings.
func checkTimerDelays(want, got []jsonObject) []diff {
	var out []diff
	delay := func(ev jsonObject) (int64, bool) {
		f, err1 := strconv.ParseInt(fmt.Sprint(ev["fire_at_ms"]), 10, 64)
		ts, err2 := strconv.ParseInt(fmt.Sprint(ev["timestamp_ms"]), 10, 64)
		return f - ts, err1 == nil && err2 == nil
	}
	for i := range min(len(want), len(got)) {
		if want[i]["type"] != "TimerCreated" || got[i]["type"] != "TimerCreated" {
			continue
		}
		wd, ok1 := delay(want[i])
		gd, ok2 := delay(got[i])
		if !ok1 || !ok2 || gd < wd-1000 || gd > wd+1000 {
			out = append(out, diff{fmt.Sprintf("event %d (TimerCreated)", i+1), "fire_at_ms - timestamp_ms", wd, gd})
		}
	}
	return out
}

// normalise drops what varies and what is binding-specific. golden marks the recorded side.
func normalise(evs []jsonObject, golden bool) []jsonObject {
	builtin := map[string]bool{}
	for _, ev := range evs {
		if ev["type"] == "ActivityScheduled" && (ev["name"] == syscallNewGUID || ev["name"] == syscallUtcNowMs) {
			builtin[fmt.Sprint(ev["event_id"])] = true
		}
	}
	out := make([]jsonObject, len(evs))
	for i, ev := range evs {
		c := cloneObject(ev)
		delete(c, "timestamp_ms")
		switch c["type"] {
		case "TimerCreated", "TimerFired":
			delete(c, "fire_at_ms")
		case "KeyValueSet":
			delete(c, "last_updated_at_ms")
		case "ActivityCompleted":
			if builtin[fmt.Sprint(c["source_event_id"])] {
				delete(c, "result")
			}
		}
		if d, ok := c["details"].(jsonObject); ok {
			c["details"] = normaliseDetails(d, golden)
		}
		out[i] = c
	}
	return out
}

func normaliseDetails(d jsonObject, golden bool) jsonObject {
	d = cloneObject(d)
	if app, ok := d["Application"].(jsonObject); ok && golden {
		if m, ok := app["message"].(string); ok {
			app["message"] = stripNodePrefix(m)
		}
	}
	if cfg, ok := d["Configuration"].(jsonObject); ok {
		// Nondeterminism messages are Rust Debug renderings: compare kind and resource only.
		delete(cfg, "message")
	}
	return d
}

func cloneObject(m jsonObject) jsonObject {
	c := make(jsonObject, len(m))
	for k, v := range m {
		if o, ok := v.(jsonObject); ok {
			v = cloneObject(o)
		}
		c[k] = v
	}
	return c
}

// objectDiff reports every field whose value differs, with its path.
func objectDiff(where, path string, want, got jsonObject) []diff {
	var out []diff
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		field := k
		if path != "" {
			field = path + "." + k
		}
		wv, wok := want[k]
		gv, gok := got[k]
		switch {
		case !wok:
			out = append(out, diff{where, field, absent, gv})
		case !gok:
			out = append(out, diff{where, field, wv, absent})
		default:
			wo, wIsObj := wv.(jsonObject)
			gobj, gIsObj := gv.(jsonObject)
			if wIsObj && gIsObj {
				out = append(out, objectDiff(where, field, wo, gobj)...)
			} else if show(wv) != show(gv) {
				out = append(out, diff{where, field, wv, gv})
			}
		}
	}
	return out
}

// compareInstance compares an instance's final state with result.json.
func compareInstance(t *testing.T, g *goldenEnv, admin provider.Admin, wi goldenInstance) {
	ctx, id := g.ctx, wi.InstanceID
	where := id + " (result.json)"
	check := func(field string, want, got any) {
		if show(want) != show(got) {
			t.Error(diff{where, field, want, got})
		}
	}
	info, err := admin.GetInstanceInfo(ctx, id)
	if err != nil {
		t.Errorf("%s: instance info: %v", id, err)
		return
	}
	st, err := g.c.Status(ctx, id)
	if err != nil {
		t.Errorf("%s: status: %v", id, err)
		return
	}
	check("orchestration_name", wi.Name, info.OrchestrationName)
	check("orchestration_version", wi.Version, info.OrchestrationVersion)
	var parent *string
	if info.ParentInstanceID != "" {
		parent = &info.ParentInstanceID
	}
	check("parent_instance_id", wi.Parent, parent)
	check("current_execution_id", wi.CurrentExecution, info.CurrentExecutionID)
	check("status", wi.Status, string(st.State))
	var output, errText *string
	switch st.State {
	case dx.StateCompleted:
		output = &st.Output
	case dx.StateFailed:
		if st.Err != nil {
			s := st.Err.Error()
			errText = &s
		}
	}
	check("output", wi.Output, output)
	check("error", normaliseErrorText(wi.Error, errText), errText)
	check("custom_status", wi.CustomStatus, st.CustomStatus)
	check("custom_status_version", wi.CustomStatusVersion, st.CustomStatusVersion)
	for _, we := range wi.Executions {
		ei, err := admin.GetExecutionInfo(ctx, id, we.ExecutionID)
		if err != nil {
			t.Errorf("%s execution %d: info: %v", id, we.ExecutionID, err)
			continue
		}
		ew := fmt.Sprintf("%s execution %d (result.json)", id, we.ExecutionID)
		if we.Status != ei.Status {
			t.Error(diff{ew, "status", we.Status, ei.Status})
		}
		wout := we.Output
		if we.Status == provider.StatusFailed {
			wout = normaliseErrorText(we.Output, ei.Output)
		}
		if show(wout) != show(ei.Output) {
			t.Error(diff{ew, "output", wout, ei.Output})
		}
		if we.EventCount != ei.EventCount {
			t.Error(diff{ew, "event_count", we.EventCount, ei.EventCount})
		}
	}
	if wi.KV != nil {
		kv, err := g.c.KVAll(ctx, id)
		if err != nil {
			t.Errorf("%s: KV: %v", id, err)
		} else if show(wi.KV) != show(kv) {
			t.Error(diff{where, "kv", wi.KV, kv})
		}
	}
}

// normaliseErrorText strips the Node binding's prefixes from a recorded error text; a
// nondeterminism error (a Rust Debug rendering) only needs the same "nondeterministic: " prefix,
// so the Go text is accepted when it has it.
func normaliseErrorText(want, got *string) *string {
	if want == nil {
		return nil
	}
	const nd = "nondeterministic: "
	if strings.HasPrefix(*want, nd) {
		if got != nil && strings.HasPrefix(*got, nd) {
			return got
		}
		s := nd + "…"
		return &s
	}
	s := stripNodePrefix(*want)
	return &s
}

func sameSet(a, b []string) bool { return slices.Equal(sorted(a), sorted(b)) }

func sorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestGoldenComparator checks the comparison itself: it ignores only what varies and reports every
// other difference.
func TestGoldenComparator(t *testing.T) {
	t.Parallel()
	hist := func(lines ...string) []jsonObject {
		var out []jsonObject
		for _, l := range lines {
			m, err := decodeObject([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	const (
		started   = `{"event_id":1,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":100,"duroxide_version":"0.1.30","type":"OrchestrationStarted","name":"O","version":"1.0.0","input":"null","parent_instance":null,"parent_id":null}`
		timer     = `{"event_id":2,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":100,"duroxide_version":"0.1.30","type":"TimerCreated","fire_at_ms":350}`
		fired     = `{"event_id":3,"source_event_id":2,"instance_id":"i","execution_id":1,"timestamp_ms":360,"duroxide_version":"0.1.30","type":"TimerFired","fire_at_ms":350}`
		guid      = `{"event_id":4,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":360,"duroxide_version":"0.1.30","type":"ActivityScheduled","name":"__duroxide_syscall:new_guid","input":""}`
		guidDone  = `{"event_id":5,"source_event_id":4,"instance_id":"i","execution_id":1,"timestamp_ms":370,"duroxide_version":"0.1.30","type":"ActivityCompleted","result":"ac7f54be-b88b-4f87-975f-ca3f36fe3219"}`
		act       = `{"event_id":6,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":370,"duroxide_version":"0.1.30","type":"ActivityScheduled","name":"Fail","input":"\"m\""}`
		actFailed = `{"event_id":7,"source_event_id":6,"instance_id":"i","execution_id":1,"timestamp_ms":380,"duroxide_version":"0.1.30","type":"ActivityFailed","details":{"Application":{"kind":"ActivityFailed","message":"Activity 'Fail' JS execution failed: GenericFailure, Error: m","retryable":false}}}`
		failed    = `{"event_id":8,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":380,"duroxide_version":"0.1.30","type":"OrchestrationFailed","details":{"Application":{"kind":"OrchestrationFailed","message":"Error: Activity 'Fail' JS execution failed: GenericFailure, Error: m","retryable":false}}}`
		cancelA   = `{"event_id":9,"source_event_id":6,"instance_id":"i","execution_id":1,"timestamp_ms":380,"duroxide_version":"0.1.30","type":"ActivityCancelRequested","reason":"orchestration_terminal_failed"}`
		cancelB   = `{"event_id":10,"source_event_id":4,"instance_id":"i","execution_id":1,"timestamp_ms":380,"duroxide_version":"0.1.30","type":"ActivityCancelRequested","reason":"orchestration_terminal_failed"}`
	)
	want := hist(started, timer, fired, guid, guidDone, act, actFailed, failed, cancelA, cancelB)
	goText := func(s string) string {
		s = strings.ReplaceAll(s, "Activity 'Fail' JS execution failed: GenericFailure, Error: ", "")
		return strings.ReplaceAll(s, `"message":"Error: m"`, `"message":"m"`)
	}
	// What a Go run legitimately produces: other times, another GUID, Go error texts, the trailing
	// block in another order.
	sameGo := func() []jsonObject {
		return hist(
			strings.ReplaceAll(started, `"timestamp_ms":100`, `"timestamp_ms":5000`),
			`{"event_id":2,"source_event_id":null,"instance_id":"i","execution_id":1,"timestamp_ms":5000,"duroxide_version":"0.1.30","type":"TimerCreated","fire_at_ms":5250}`,
			`{"event_id":3,"source_event_id":2,"instance_id":"i","execution_id":1,"timestamp_ms":5260,"duroxide_version":"0.1.30","type":"TimerFired","fire_at_ms":5250}`,
			guid,
			strings.ReplaceAll(guidDone, "ac7f54be-b88b-4f87-975f-ca3f36fe3219", "0b6e3c1e-9a0e-4d7f-8a51-2b9f0c7d1e42"),
			act, goText(actFailed), goText(failed),
			strings.ReplaceAll(cancelB, `"event_id":10`, `"event_id":9`),
			strings.ReplaceAll(cancelA, `"event_id":9`, `"event_id":10`),
		)
	}
	if d := compareHistory(want, sameGo()); len(d) != 0 {
		t.Errorf("equivalent histories reported different: %v", d)
	}
	mutations := []struct {
		name   string
		mutate func(h []jsonObject) []jsonObject
		want   string
	}{
		{"input", func(h []jsonObject) []jsonObject { h[5]["input"] = `"n"`; return h }, "event 6 (ActivityScheduled), field input"},
		{"extra field", func(h []jsonObject) []jsonObject { h[5]["tag"] = "gpu"; return h }, `field tag: want (absent), got "gpu"`},
		{"missing field", func(h []jsonObject) []jsonObject { delete(h[0], "parent_id"); return h }, "field parent_id: want null, got (absent)"},
		{"error kind", func(h []jsonObject) []jsonObject {
			h[6]["details"].(jsonObject)["Application"].(jsonObject)["retryable"] = true
			return h
		}, "field details.Application.retryable"},
		{"error message", func(h []jsonObject) []jsonObject {
			h[7]["details"].(jsonObject)["Application"].(jsonObject)["message"] = "other"
			return h
		}, "field details.Application.message"},
		{"missing event", func(h []jsonObject) []jsonObject { return slices.Delete(h, 1, 3) }, "event_id"},
		{"bad guid", func(h []jsonObject) []jsonObject { h[4]["result"] = `"0b6e3c1e-9a0e-4d7f-8a51-2b9f0c7d1e42"`; return h }, "a bare UUID v4 text"},
		{"fired at another time", func(h []jsonObject) []jsonObject { h[2]["fire_at_ms"] = json.Number("5251"); return h }, "the fire_at_ms of its TimerCreated"},
		{"other delay", func(h []jsonObject) []jsonObject { h[1]["fire_at_ms"] = json.Number("9000"); return h }, "fire_at_ms - timestamp_ms"},
		{"trailing block", func(h []jsonObject) []jsonObject { h[9]["reason"] = "dropped_future"; return h }, "trailing cancellation block"},
		{"source id", func(h []jsonObject) []jsonObject { h[6]["source_event_id"] = json.Number("4"); return h }, "field source_event_id"},
		{"version stamp", func(h []jsonObject) []jsonObject { h[0]["duroxide_version"] = "0.1.31"; return h }, "field duroxide_version"},
	}
	for _, m := range mutations {
		ds := compareHistory(want, m.mutate(sameGo()))
		found := false
		for _, d := range ds {
			if strings.Contains(d.String(), m.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want a difference mentioning %q, got %v", m.name, m.want, ds)
		}
	}
	// Error texts of result.json.
	goErr := "m"
	if got := normaliseErrorText(ptr("Error: Activity 'Fail' JS execution failed: GenericFailure, Error: m"), &goErr); *got != "m" {
		t.Errorf("node prefixes not stripped: %q", *got)
	}
	nd := "nondeterministic: event 2: history has activity Echo(\"v1\") but the code now calls activity Echo(\"v2\")"
	if got := normaliseErrorText(ptr("nondeterministic: schedule mismatch: ..."), &nd); *got != nd {
		t.Errorf("nondeterminism text not accepted: %q", *got)
	}
	other := "boom"
	if got := normaliseErrorText(ptr("nondeterministic: schedule mismatch: ..."), &other); *got == other {
		t.Error("a non-nondeterminism error accepted for a nondeterminism one")
	}
}

func ptr[T any](v T) *T { return &v }
