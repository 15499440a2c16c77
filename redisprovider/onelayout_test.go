package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// oldLayoutEvents is a stored history of n ExternalEvent lines with ids 1..n.
func oldLayoutEvents(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"event_id":%d,"timestamp_ms":5,"type":"ExternalEvent","name":"e","data":"{}"}`+"\n", i)
	}
	return b.String()
}

// writeOldLayouts writes, by hand, instances in the record layouts of releases before the one
// layout (scripts/lib_admin.lua, record_convert), with what those releases' reads returned:
//   - legacy: created, its current record in x:1:<id> (no hd in the instance hash), pin fields,
//     no hn in the execution hash (the id set counts);
//   - bare: acked without a name (no instance hash): both records in x:, the current execution
//     the highest of xs:<id>, outputs in xo: with no out field;
//   - implied: the record in the instance hash (hd) with the fields that meant by absence (no
//     xs: started at created; no done while Completed: completed at updated; no out: xo:);
//   - appended: an execution appended beside the current one, without any record.
//
// format2 writes the format record first (a format-2 namespace written before the one layout);
// without it the namespace is left to the caller (format 1).
func writeOldLayouts(t *testing.T, p *redisprovider.Provider, format2 bool) map[string]string {
	t.Helper()
	ctx := context.Background()
	ks, c := p.Keyspace(), p.Client()
	prefix := ks.Prefix(0)
	const pink = "0000000000.0000000001.0000000030~"
	ok := func(errs ...error) {
		t.Helper()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	index := func(id, status string, score float64) {
		ok(c.ZAdd(ctx, prefix+"idx:instances", redis.Z{Score: score, Member: id}).Err(),
			c.ZAdd(ctx, prefix+"idx:status:"+status, redis.Z{Score: score, Member: id}).Err())
	}
	h2, h1 := oldLayoutEvents(2), oldLayoutEvents(1)
	if format2 { // its first write script writes the format record (an event it drops: no such instance)
		layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "none", Name: "e", Data: "{}"}})
	}

	ok(c.HSet(ctx, ks.Instance("legacy"), "name", "O", "ver", "1.0.0", "created", "5", "updated", "6", "status", "Running",
		"exec", "1", "pin", "0.1.30", "pink", pink, "tag", "0123456789ab", "hn", "2", "hb", len(h2)).Err(),
		c.ZAdd(ctx, ks.Executions("legacy"), redis.Z{Score: 1, Member: "1"}).Err(),
		c.HSet(ctx, ks.Execution("legacy", 1), "started", "5", "status", "Running", "pin", "0.1.30", "pink", pink).Err(),
		c.Set(ctx, ks.History("legacy", 1), h2, 0).Err(),
		c.SAdd(ctx, ks.HistoryIDs("legacy", 1), "1", "2").Err())
	index("legacy", "Running", 5)

	ok(c.ZAdd(ctx, ks.Executions("bare"), redis.Z{Score: 1, Member: "1"}, redis.Z{Score: 2, Member: "2"}).Err(),
		c.HSet(ctx, ks.Execution("bare", 1), "status", "ContinuedAsNew", "started", "10", "completed", "20", "out", "k",
			"hn", "1", "hd", "1", "pin", "0.1.30", "pink", pink).Err(),
		c.Set(ctx, ks.ExecutionOutput("bare", 1), "out1", 0).Err(),
		c.Set(ctx, ks.History("bare", 1), h1, 0).Err(),
		c.HSet(ctx, ks.Execution("bare", 2), "status", "Completed", "started", "20", "completed", "30").Err(),
		c.Set(ctx, ks.ExecutionOutput("bare", 2), "res2", 0).Err(),
		c.Set(ctx, ks.History("bare", 2), h2, 0).Err(),
		c.SAdd(ctx, ks.HistoryIDs("bare", 2), "1", "2").Err())

	ok(c.HSet(ctx, ks.Instance("implied"), "name", "O", "ver", "1.0.0", "created", "100", "updated", "200",
		"status", "Completed", "exec", "1", "hd", "1", "hn", "2", "hb", len(h2), "tag", "0123456789ab", "pin", "0.1.30",
		"pink", pink).Err(),
		c.Set(ctx, ks.ExecutionOutput("implied", 1), "resC", 0).Err(),
		c.Set(ctx, ks.History("implied", 1), h2, 0).Err())
	index("implied", "Completed", 200)

	ok(c.HSet(ctx, ks.Instance("appended"), "name", "O", "ver", "1.0.0", "created", "300", "updated", "300",
		"status", "Running", "exec", "1", "xs", "300", "hd", "1", "hn", "1", "hb", len(h1), "out", "-", "tag", "0123456789ab").Err(),
		c.Set(ctx, ks.History("appended", 1), h1, 0).Err(),
		c.ZAdd(ctx, ks.Executions("appended"), redis.Z{Score: 1, Member: "1"}, redis.Z{Score: 3, Member: "3"}).Err(),
		c.Set(ctx, ks.History("appended", 3), h1, 0).Err(),
		c.SAdd(ctx, ks.HistoryIDs("appended", 3), "1").Err())
	index("appended", "Running", 300)

	// What the releases that wrote them read: info, then each execution (status, output, started,
	// completed, events, history ids).
	return map[string]string{
		"legacy": "O 1.0.0 exec 1 Running <nil> created 5 updated 6 parent  | execs [1] latest 1" +
			" | 1 Running <nil> 5 0 2 [1 2]",
		"bare": "  exec 2 Completed res2 created 20 updated 20 parent  | execs [1 2] latest 2" +
			" | 1 ContinuedAsNew out1 10 20 1 [1] | 2 Completed res2 20 30 2 [1 2]",
		"implied": "O 1.0.0 exec 1 Completed resC created 100 updated 200 parent  | execs [1] latest 1" +
			" | 1 Completed resC 100 200 2 [1 2]",
		"appended": "O 1.0.0 exec 1 Running <nil> created 300 updated 300 parent  | execs [1 3] latest 1" +
			" | 1 Running <nil> 300 0 1 [1] | 3  <nil> 0 0 1 [1]",
	}
}

// layoutReads describes an instance through every read API, in writeOldLayouts's format.
func layoutReads(t *testing.T, p *redisprovider.Provider, id string) string {
	t.Helper()
	ctx := context.Background()
	str := func(s *string) string {
		if s == nil {
			return "<nil>"
		}
		return *s
	}
	info, err := p.GetInstanceInfo(ctx, id)
	if err != nil {
		return err.Error()
	}
	execs, err := p.ListExecutions(ctx, id)
	if err != nil {
		return err.Error()
	}
	latest, err := p.LatestExecutionID(ctx, id)
	if err != nil {
		return err.Error()
	}
	out := fmt.Sprintf("%s %s exec %d %s %s created %d updated %d parent %s | execs %v latest %d", info.OrchestrationName,
		info.OrchestrationVersion, info.CurrentExecutionID, info.Status, str(info.Output), info.CreatedAt, info.UpdatedAt,
		info.ParentInstanceID, execs, latest)
	for _, e := range execs {
		x, err := p.GetExecutionInfo(ctx, id, e)
		if err != nil {
			return err.Error()
		}
		h, err := p.ReadHistoryWithExecutionID(ctx, id, e)
		if err != nil {
			return err.Error()
		}
		ids := []uint64{}
		for _, ev := range h {
			ids = append(ids, ev.EventID)
		}
		out += fmt.Sprintf(" | %d %s %s %d %d %d %v", e, x.Status, str(x.Output), x.StartedAt, x.CompletedAt, x.EventCount, ids)
	}
	return out
}

// Records in the layouts of older releases are reported by fsck (record_layout) and converted to
// the one layout by dxctl migrate, and by fsck --repair, after which every read (the provider's,
// its listings, the dx client's) returns what the releases that wrote them read, fsck finds nothing, no record is left in x: for a current
// execution and no pin field anywhere, and the instances go on: a duplicate is refused, a turn
// finishes one.
func TestOldRecordLayoutsConverted(t *testing.T) {
	onePartitionOnly(t, "builds older record layouts, which only namespaces of one partition had")
	t.Parallel()
	ctx := context.Background()
	for _, how := range []string{"migrate", "repair"} {
		t.Run(how, func(t *testing.T) {
			p := newTestProvider(t)
			want := writeOldLayouts(t, p, true)
			got := fsckCodes(t, p)
			for id := range want {
				if !slices.Contains(got, "record_layout "+id) {
					t.Errorf("fsck did not report record_layout for %s: %v", id, got)
				}
			}
			switch how {
			case "migrate":
				rep, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{})
				if err != nil || rep.From != 2 || rep.To != 2 || fmt.Sprint(rep.Steps) != "[records of 4 instances]" {
					t.Fatalf("migrate: %+v %v", rep, err)
				}
				if rep, err := redisprovider.Migrate(ctx, p.Client(), p.Keyspace().Namespace(), redisprovider.MigrateOptions{}); err != nil || len(rep.Steps) != 0 {
					t.Fatalf("migrate again: %+v %v", rep, err)
				}
			case "repair":
				rep, err := p.Repair(ctx)
				if err != nil || len(rep.After.Violations) != 0 {
					t.Fatalf("repair: %+v %v", rep, err)
				}
			}
			if got := fsckCodes(t, p); len(got) != 0 {
				t.Fatalf("fsck after %s: %v", how, got)
			}
			for id, w := range want {
				if got := layoutReads(t, p, id); got != w {
					t.Errorf("%s after %s:\n got %s\nwant %s", id, how, got, w)
				}
			}
			// Listings (an instance acked without a name is listed nowhere) and the dx client.
			for status, want := range map[string]string{"": "[appended implied legacy]", "Running": "[appended legacy]", "Completed": "[implied]"} {
				ids, err := p.ListInstancesByStatus(ctx, status)
				if status == "" {
					ids, err = p.ListInstances(ctx)
				}
				slices.Sort(ids)
				if err != nil || fmt.Sprint(ids) != want {
					t.Errorf("instances %q: %v %v, want %s", status, ids, err, want)
				}
			}
			client := dx.NewClient(p)
			for id, want := range map[string]string{"bare": "Completed res2 2", "implied": "Completed resC 1", "legacy": "Running  1"} {
				st, err := client.Status(ctx, id)
				if got := fmt.Sprintf("%s %s %d", st.State, st.Output, st.ExecutionID); err != nil || got != want {
					t.Errorf("dx client status of %s: %s %v, want %s", id, got, err, want)
				}
			}
			ks, c := p.Keyspace(), p.Client()
			for _, k := range namespaceKeys(t, p) {
				if c.Type(ctx, ks.Prefix(0)+k).Val() == "hash" && c.HExists(ctx, ks.Prefix(0)+k, "pin").Val() {
					t.Errorf("%s still has a pin field", k)
				}
			}
			if n := c.Exists(ctx, ks.Execution("bare", 2), ks.Execution("legacy", 1)).Val(); n != 0 {
				t.Errorf("%d current executions' records left in x:", n)
			}
			if r := c.HMGet(ctx, ks.Instance("bare"), "exec", "hd", "out", "hn", "name").Val(); fmt.Sprint(r) != "[2 0 k 2 <nil>]" {
				t.Errorf("bare's record: %v", r)
			}

			md := layoutRunning()
			layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "legacy", Name: "e", Data: "{}"}})
			if err := layoutTurn(t, p, "legacy", 1, []provider.Event{layoutEvent("legacy", 1, 2, provider.ExternalEventEvent{Name: "e", Data: "{}"})}, md); !errors.Is(err, provider.ErrDuplicateEvent) {
				t.Fatalf("duplicate of a stored event: %v", err)
			}
			out := `"done"`
			md.Status, md.Output = provider.StatusCompleted, &out
			if err := layoutTurn(t, p, "legacy", 1, []provider.Event{
				layoutEvent("legacy", 1, 3, provider.ExternalEventEvent{Name: "e", Data: "{}"}),
				layoutEvent("legacy", 1, 4, provider.OrchestrationCompletedEvent{Output: out}),
			}, md); err != nil {
				t.Fatal(err)
			}
			x, err := p.GetExecutionInfo(ctx, "legacy", 1)
			if err != nil || x.Status != provider.StatusCompleted || x.EventCount != 4 || x.StartedAt != 5 || x.CompletedAt == 0 ||
				x.Output == nil || *x.Output != out {
				t.Fatalf("execution info after a turn: %+v %v", x, err)
			}
		})
	}
}

// The one record layout (scripts/lib.lua, Executions): whatever wrote an execution (an ack with or
// without a name and version, an append), the current execution's record is in the instance hash
// with its fields explicit (exec, hn, hb, hd, out), every other execution's is a whole record in
// x:<e>:<id>, and nothing writes pin. Reads return what the older layouts returned.
func TestOneRecordLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks, c := p.Keyspace(), p.Client()
	rec := func(key string, fields ...string) string {
		t.Helper()
		return fmt.Sprint(c.HMGet(ctx, key, fields...).Val())
	}
	// Acked without a name and version, pinned, then continued as new.
	md := provider.ExecutionMetadata{Status: provider.StatusRunning, PinnedDuroxideVersion: semver.MustParse("0.1.30")}
	layoutEnqueue(t, p, layoutStart("bare"))
	if err := layoutTurn(t, p, "bare", 1, []provider.Event{layoutStarted("bare", 1)}, md); err != nil {
		t.Fatal(err)
	}
	if got := rec(ks.Instance("bare"), "exec", "status", "hn", "hd", "out", "name", "pin"); got != "[1 Running 1 1 - <nil> <nil>]" {
		t.Fatalf("bare's record: %s", got)
	}
	if n := c.Exists(ctx, ks.Execution("bare", 1), ks.Executions("bare")).Val(); n != 0 {
		t.Fatalf("bare: %d execution keys besides the instance hash", n)
	}
	if info, err := p.GetInstanceInfo(ctx, "bare"); err != nil || info.OrchestrationName != "" || info.Status != provider.StatusRunning ||
		info.CurrentExecutionID != 1 || info.CreatedAt == 0 {
		t.Fatalf("bare's info: %+v %v", info, err)
	}
	if ids, err := p.ListInstances(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("instances listed: %v %v (one acked without a name is not created)", ids, err)
	}
	can := provider.WorkItem{Kind: provider.ContinueAsNew{Instance: "bare", Orchestration: "O", Input: "{}", CarryForwardEvents: []provider.CarriedEvent{}}}
	md.Status = provider.StatusContinuedAsNew
	layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "bare", Name: "e", Data: "{}"}})
	if err := layoutTurn(t, p, "bare", 1, nil, md, can); err != nil {
		t.Fatal(err)
	}
	md = provider.ExecutionMetadata{Status: provider.StatusRunning}
	if err := layoutTurn(t, p, "bare", 2, []provider.Event{layoutStarted("bare", 2)}, md); err != nil {
		t.Fatal(err)
	}
	if got := rec(ks.Execution("bare", 1), "status", "hn", "hd", "out", "pink", "pin"); got != "[ContinuedAsNew 1 1 - 0000000000.0000000001.0000000030~ <nil>]" {
		t.Fatalf("bare's first execution: %s", got)
	}
	if got := rec(ks.Instance("bare"), "exec", "status", "hn", "hd", "out", "pink", "done"); got != "[2 Running 1 1 - <nil> <nil>]" {
		t.Fatalf("bare's record after continue-as-new: %s", got)
	}
	if x, err := p.GetExecutionInfo(ctx, "bare", 1); err != nil || x.Status != provider.StatusContinuedAsNew || x.CompletedAt == 0 || x.StartedAt == 0 || x.EventCount != 1 {
		t.Fatalf("bare's first execution info: %+v %v", x, err)
	}

	// Appended to an instance without executions: its record; to another execution: a whole x: record.
	ev := func(id uint64) []provider.Event {
		return []provider.Event{layoutEvent("app", 1, id, provider.ExternalEventEvent{Name: "e", Data: "{}"})}
	}
	if err := p.AppendWithExecution(ctx, "app", 1, ev(1)); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendWithExecution(ctx, "app", 3, ev(5)); err != nil {
		t.Fatal(err)
	}
	if got := rec(ks.Instance("app"), "exec", "hn", "hd", "out", "status"); got != "[1 1 1 - <nil>]" {
		t.Fatalf("app's record: %s", got)
	}
	if got := rec(ks.Execution("app", 3), "hn", "hd", "out"); got != "[1 0 -]" {
		t.Fatalf("app's execution 3: %s", got)
	}
	if e, err := p.LatestExecutionID(ctx, "app"); err != nil || e != 1 {
		t.Fatalf("app's current execution: %d %v", e, err)
	}
	// An ack of the appended execution makes it current: its record moves into the instance hash.
	layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "app", Name: "e", Data: "{}"}})
	md = layoutRunning()
	if err := layoutTurn(t, p, "app", 3, []provider.Event{layoutEvent("app", 3, 5, provider.ExternalEventEvent{Name: "e", Data: "{}"})}, md); !errors.Is(err, provider.ErrDuplicateEvent) {
		t.Fatalf("duplicate in the appended execution: %v", err)
	}
	if err := layoutTurn(t, p, "app", 3, []provider.Event{layoutEvent("app", 3, 6, provider.ExternalEventEvent{Name: "e", Data: "{}"})}, md); err != nil {
		t.Fatal(err)
	}
	if got := rec(ks.Instance("app"), "exec", "hn", "hd", "status", "name"); got != "[3 2 0 Running O]" {
		t.Fatalf("app's record after its ack: %s", got)
	}
	if n := c.Exists(ctx, ks.Execution("app", 3)).Val(); n != 0 {
		t.Fatal("app: the current execution's record is still in x:")
	}
	if got := rec(ks.Execution("app", 1), "hn", "hd", "out"); got != "[1 1 -]" {
		t.Fatalf("app's execution 1: %s", got)
	}
	if x, err := p.GetExecutionInfo(ctx, "app", 3); err != nil || x.StartedAt == 0 || x.EventCount != 2 || x.Status != provider.StatusRunning {
		t.Fatalf("app's execution 3 info: %+v %v", x, err)
	}
	if execs, err := p.ListExecutions(ctx, "app"); err != nil || fmt.Sprint(execs) != "[1 3]" {
		t.Fatalf("app's executions: %v %v", execs, err)
	}
}
