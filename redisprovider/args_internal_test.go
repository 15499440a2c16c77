package redisprovider

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// decodeInLua runs a schema's unpacking code (the code the library puts before the operation's
// body) on args in a script, and returns what the Lua locals hold: name -> value for scalars
// (tostring: a Flag is "true"/"false", a Num its number), "name.<k>.<field>" for entry k (1-based)
// of a section (read in place) or rest, and "#name" for its length.
func decodeInLua(t *testing.T, rdb *redis.Client, s *luascripts.Schema, args []any) map[string]string {
	t.Helper()
	var b strings.Builder
	b.WriteString(s.Lua())
	b.WriteString("local out = {}\nlocal function put(k, v) out[#out + 1] = k; out[#out + 1] = tostring(v) end\n")
	for _, a := range s.Args {
		switch a.Kind {
		case luascripts.Section: // read in place: name_at, name_n
			w := strconv.Itoa(len(a.Entry))
			b.WriteString("put('#" + a.Name + "', " + a.Name + "_n)\n")
			b.WriteString("for k = 1, " + a.Name + "_n do\n")
			for j, f := range a.Entry {
				b.WriteString("  put('" + a.Name + ".' .. k .. '." + f + "', ARGV[" + a.Name + "_at + " + w + " * (k - 1) + " + strconv.Itoa(j+1) + "])\n")
			}
			b.WriteString("end\n")
		case luascripts.Rest:
			b.WriteString("put('#" + a.Name + "', #" + a.Name + ")\n")
			b.WriteString("for k, e in ipairs(" + a.Name + ") do\n")
			for j, f := range a.Entry {
				v := "e"
				if len(a.Entry) > 1 {
					v = "e[" + strconv.Itoa(j+1) + "]"
				}
				b.WriteString("  put('" + a.Name + ".' .. k .. '." + f + "', " + v + ")\n")
			}
			b.WriteString("end\n")
		default:
			b.WriteString("put('" + a.Name + "', " + a.Name + ")\n")
		}
	}
	b.WriteString("return out\n")
	res, err := rdb.Eval(context.Background(), b.String(), []string{"k"}, append([]any{"prefix"}, args...)...).StringSlice()
	if err != nil {
		t.Fatalf("%s: %v\n%s", s.Op, err, b.String())
	}
	out := map[string]string{}
	for i := 0; i+1 < len(res); i += 2 {
		out[res[i]] = res[i+1]
	}
	return out
}

func wantValues(t *testing.T, op string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", op, k, got[k], v)
		}
	}
}

// TestArgsRoundTrip: what the Go call sites encode, the Lua unpacking written from the same
// schema reads back under the same names, sections and rests included (orch_ack's seven sections,
// orch_fetch's scalars after a section, work_fetch's rest, orch_append's section, the composed
// ack-and-fetch layout).
func TestArgsRoundTrip(t *testing.T) {
	mr := miniredis.RunT(t)
	p, err := New(context.Background(), Options{Addr: mr.Addr(), Namespace: "args", Retention: 90 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	out, status, session, tag := `"done"`, "cs", "s1", "gpu"
	token := "0123456789abcdef0123456789abcdef0123.inst-1"
	ack := provider.OrchestrationAck{
		ExecutionID: 3,
		HistoryDelta: []provider.Event{
			{EventID: 7, Kind: provider.CustomStatusUpdatedEvent{Status: &status}},
			{EventID: 8, Kind: provider.KeyValueSetEvent{Key: "k", Value: "v", LastUpdatedAtMs: 123}},
			{EventID: 9, Kind: provider.KeyValueClearedEvent{Key: "k2"}},
		},
		WorkerItems: []provider.WorkItem{{Kind: provider.ActivityExecute{Instance: "inst-1", ExecutionID: 3, ID: 4, Name: "A",
			Input: "1", SessionID: &session, Tag: &tag}}},
		CancelledActivities: []provider.ScheduledActivityIdentifier{{Instance: "inst-1", ExecutionID: 3, ActivityID: 2}},
		OrchestratorItems:   []provider.WorkItem{{Kind: provider.TimerFired{Instance: "inst-1", ExecutionID: 3, ID: 5, FireAtMs: 4242}}},
		Metadata: provider.ExecutionMetadata{Status: "Completed", Output: &out, OrchestrationName: "O", OrchestrationVersion: "1.0.0",
			ParentInstanceID: "par", PinnedDuroxideVersion: semver.MustParse("0.1.30")},
	}
	args, err := p.ackArgs("t", token, ack)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeInLua(t, rdb, luascripts.OrchAck, args)
	wantValues(t, "orch_ack", got, map[string]string{
		"token": token, "exec": "3", "status": "Completed", "has_output": "true", "output": out, "name": "O", "ver": "1.0.0",
		"parent": "par", "pin": "0.1.30", "pink": pinKey(semver.MustParse("0.1.30")), "cs_op": "s", "cs_val": "cs",
		"terminal": "true", "retention": "90000",
		"#hist": "3", "hist.1.event_id": "7", "hist.3.event_id": "9",
		"#kvops": "2", "kvops.1.op": "s", "kvops.1.key": "k", "kvops.1.value": "123|v", "kvops.2.op": "c", "kvops.2.key": "k2",
		"#witems": "1", "witems.1.instance": "inst-1", "witems.1.execution": "3", "witems.1.activity": "4",
		"witems.1.session": "s1", "witems.1.tag": "gpu",
		"#cancels": "1", "cancels.1.instance": "inst-1", "cancels.1.execution": "3", "cancels.1.activity": "2",
		"#oitems": "1", "oitems.1.target": "inst-1", "oitems.1.code": "O", "oitems.1.visible_at": "4242",
	})
	if !strings.Contains(got["hist.2.json"], `"KeyValueSet"`) || !strings.Contains(got["witems.1.json"], `"ActivityExecute"`) ||
		!strings.Contains(got["oitems.1.json"], `"TimerFired"`) {
		t.Errorf("orch_ack: entries' JSON: %q, %q, %q", got["hist.2.json"], got["witems.1.json"], got["oitems.1.json"])
	}

	filter := &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{
		{Min: semver.MustParse("0.1.0"), Max: semver.MustParse("0.1.9")}, {Min: semver.MustParse("1.0.0"), Max: semver.MustParse("1.2.0")}}}
	fargs, _, _, _, err := p.fetchArgs("t", 0, 30*time.Second, 0, filter, true, "")
	if err != nil {
		t.Fatal(err)
	}
	wantFetch := map[string]string{
		"lock_ms": "30000", "filtered": "true", "#ranges": "2", "ranges.1.lo": pinKey(semver.MustParse("0.1.0")),
		"ranges.2.hi": pinKey(semver.MustParse("1.2.0")), "wait_ms": "0", "lite": "true",
	}
	got = decodeInLua(t, rdb, luascripts.OrchFetch, fargs)
	wantValues(t, "orch_fetch", got, wantFetch)
	if got["token"] != fargs[fetchToken] || len(got["token"]) != 36 {
		t.Errorf("orch_fetch: token %q, encoded %v", got["token"], fargs[fetchToken])
	}

	// orch_ack_fetch: the ack reads its own arguments from the front; lib.lua's ack_then_fetch
	// hands the fetch the prefix and the arguments between the ack's and the count.
	all, err := composed("t", luascripts.OrchAckFetch, args, fargs)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "orch_ack_fetch's ack", decodeInLua(t, rdb, luascripts.OrchAck, all), map[string]string{"token": token, "#oitems": "1", "oitems.1.visible_at": "4242"})
	n, _ := strconv.Atoi(all[len(all)-1].(string))
	wantValues(t, "orch_ack_fetch's fetch", decodeInLua(t, rdb, luascripts.OrchFetch, all[n:len(all)-1]), wantFetch)

	tags, err := provider.TagFilterTags("a", "bb")
	if err != nil {
		t.Fatal(err)
	}
	wargs, _, _, _, _, err := p.workFetchArgs("t", 0, time.Second, 0, &provider.SessionFetchConfig{OwnerID: "w1", LockTimeout: 2 * time.Second}, tags, "")
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "work_fetch", decodeInLua(t, rdb, luascripts.WorkFetch, wargs), map[string]string{
		"lock_ms": "1000", "owner": "w1", "slock_ms": "2000", "any": "", "#tks": "2", "tks.1.tag_key": dxredis.WorkTagKey("a"), "tks.2.tag_key": dxredis.WorkTagKey("bb"),
	})

	e := luascripts.OrchAppend.Encoder(0)
	e.Set("id", "i")
	e.Set("exec", "2")
	e.Section("hist")
	e.Entry("1", "a")
	e.Entry("2", "b")
	aargs, err := encoded("t", e)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "orch_append", decodeInLua(t, rdb, luascripts.OrchAppend, aargs), map[string]string{
		"id": "i", "exec": "2", "#hist": "2", "hist.1.event_id": "1", "hist.2.json": "b",
	})

	// Every shape the unpacking handles: scalars after a section, a rest after both.
	mixed := &luascripts.Schema{Op: "mixed", Args: []luascripts.Arg{luascripts.N("a"), luascripts.Sec("s", "x", "y"),
		luascripts.F("b"), luascripts.Sec("one", "v"), luascripts.S("c"), luascripts.All("r", "p", "q")}}
	e = mixed.Encoder(0)
	e.Set("a", "5")
	e.Section("s")
	e.Entry("x1", "y1")
	e.Flag("b", true)
	e.Section("one")
	e.Entry("v1")
	e.Entry("v2")
	e.Set("c", "C")
	e.Section("r")
	e.Entry("p1", "q1")
	e.Entry("p2", "q2")
	margs, err := encoded("t", e)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "mixed", decodeInLua(t, rdb, mixed, margs), map[string]string{
		"a": "5", "#s": "1", "s.1.x": "x1", "s.1.y": "y1", "b": "true", "#one": "2", "one.2.v": "v2", "c": "C",
		"#r": "2", "r.1.p": "p1", "r.2.q": "q2",
	})
}
