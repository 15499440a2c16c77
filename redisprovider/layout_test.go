package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// layoutTurn fetches the next turn (it must be instance's) and acks it with events and md.
func layoutTurn(t *testing.T, p *redisprovider.Provider, instance string, exec uint64, events []provider.Event, md provider.ExecutionMetadata, orch ...provider.WorkItem) error {
	t.Helper()
	ctx := context.Background()
	it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
	if err != nil || it == nil || it.Item.Instance != instance {
		t.Fatalf("fetch: want %q, got %+v, %v", instance, it, err)
	}
	err = p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: events,
		OrchestratorItems: orch, Metadata: md})
	if err != nil {
		// Give the turn back so that the next one can run.
		if aerr := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true); aerr != nil {
			t.Fatalf("abandon after failed ack: %v", aerr)
		}
	}
	return err
}

func layoutEvent(instance string, exec, id uint64, kind provider.EventKind) provider.Event {
	return provider.Event{EventID: id, InstanceID: instance, ExecutionID: exec, TimestampMs: 1, DuroxideVersion: "0.1.30", Kind: kind}
}

// layoutStart starts instance id of orchestration "O" (execution 1).
func layoutStart(id string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "O", Input: "{}", ExecutionID: 1}}
}

// layoutStarted is the OrchestrationStarted event (id 1) of execution exec of instance id.
func layoutStarted(id string, exec uint64) provider.Event {
	return layoutEvent(id, exec, 1, provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"})
}

// layoutRunning is the metadata of a turn that leaves "O" 1.0.0 running.
func layoutRunning() provider.ExecutionMetadata {
	return provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
}

func layoutEnqueue(t *testing.T, p *redisprovider.Provider, items ...provider.WorkItem) {
	t.Helper()
	for _, w := range items {
		if err := p.EnqueueForOrchestrator(context.Background(), w, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// instanceKeys lists the keys of p's namespace that belong to instance id (every per-instance key
// name ends with ":<id>"). It looks at p's namespace only: tests of other packages may use the same
// instance ids on the same server at the same time.
func instanceKeys(t *testing.T, p *redisprovider.Provider, id string) []string {
	t.Helper()
	var out []string
	for _, k := range wKeys(t, p) {
		if strings.HasSuffix(k, ":"+id) {
			out = append(out, k)
		}
	}
	return out
}

func layoutKeys(t *testing.T, p *redisprovider.Provider, keys ...string) []string {
	t.Helper()
	var present []string
	for _, k := range keys {
		if p.Client().Exists(context.Background(), k).Val() == 1 {
			present = append(present, k)
		}
	}
	return present
}

// A finished one-execution instance keeps two keys, its instance hash and its history: the
// execution's record is in the instance hash, its output is read from the terminal event, and its
// event ids (1..n) need no id set. Everything the management API reports stays the same.
func TestFinishedInstanceKeepsTwoKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks := p.Keyspace()
	outputs := map[string]string{
		"short": `"ok"`,
		"long":  `{"text":"` + strings.Repeat("x", 200) + `","quote":"\"<&>\"","unicode":"日本 \u2028"}`,
	}
	for id, out := range outputs {
		layoutEnqueue(t, p, layoutStart(id))
		md := layoutRunning()
		if err := layoutTurn(t, p, id, 1, []provider.Event{
			layoutStarted(id, 1),
		}, md, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "go", Data: "{}"}}); err != nil {
			t.Fatal(err)
		}
		md.Status, md.Output = provider.StatusCompleted, &out
		if err := layoutTurn(t, p, id, 1, []provider.Event{
			layoutEvent(id, 1, 2, provider.ExternalEventEvent{Name: "go", Data: "{}"}),
			layoutEvent(id, 1, 3, provider.OrchestrationCompletedEvent{Output: out}),
		}, md); err != nil {
			t.Fatal(err)
		}
		all := []string{ks.Instance(id), ks.History(id, 1), ks.Executions(id), ks.Execution(id, 1), ks.ExecutionOutput(id, 1), ks.HistoryIDs(id, 1)}
		if got := layoutKeys(t, p, all...); !slices.Equal(got, all[:2]) {
			t.Errorf("%s: keys %v, want only %v", id, got, all[:2])
		}
		info, err := p.GetInstanceInfo(ctx, id)
		if err != nil || info.Status != provider.StatusCompleted || info.Output == nil || *info.Output != out || info.CurrentExecutionID != 1 {
			t.Errorf("%s: instance info %+v, %v", id, info, err)
		}
		x, err := p.GetExecutionInfo(ctx, id, 1)
		if err != nil || x.Status != provider.StatusCompleted || x.Output == nil || *x.Output != out || x.EventCount != 3 ||
			x.StartedAt == 0 || x.CompletedAt < x.StartedAt {
			t.Errorf("%s: execution info %+v, %v", id, x, err)
		}
		if execs, err := p.ListExecutions(ctx, id); err != nil || !slices.Equal(execs, []uint64{1}) {
			t.Errorf("%s: executions %v, %v", id, execs, err)
		}
		h, err := p.Read(ctx, id)
		if err != nil || len(h) != 3 || h[2].DuroxideVersion != "0.1.30" || h[2].InstanceID != id {
			t.Errorf("%s: history %+v, %v", id, h, err)
		}
	}
}

// An output the history does not hold (metadata differing from the terminal event, or not valid
// UTF-8) is stored in its own key and read back exactly; a later turn clearing it removes it.
func TestOutputNotInHistoryKeepsItsKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks := p.Keyspace()
	for id, out := range map[string]string{"differs": `"metadata output"`, "binary": "\xff\xfe not utf-8"} {
		layoutEnqueue(t, p, layoutStart(id))
		md := provider.ExecutionMetadata{Status: provider.StatusFailed, Output: &out, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
		if err := layoutTurn(t, p, id, 1, []provider.Event{
			layoutStarted(id, 1),
			layoutEvent(id, 1, 2, provider.OrchestrationCompletedEvent{Output: `"event output"`}),
		}, md); err != nil {
			t.Fatal(err)
		}
		if got := layoutKeys(t, p, ks.ExecutionOutput(id, 1)); len(got) != 1 {
			t.Errorf("%s: no output key", id)
		}
		info, err := p.GetInstanceInfo(ctx, id)
		if err != nil || info.Output == nil || *info.Output != out {
			t.Errorf("%s: instance info %+v, %v", id, info, err)
		}
		// A later turn sets a status without output: the output goes.
		layoutEnqueue(t, p, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}})
		md.Output, md.Status = nil, provider.StatusRunning
		if err := layoutTurn(t, p, id, 1, nil, md); err != nil {
			t.Fatal(err)
		}
		if got := layoutKeys(t, p, ks.ExecutionOutput(id, 1)); len(got) != 0 {
			t.Errorf("%s: output key left after the output was cleared", id)
		}
		if info, err := p.GetInstanceInfo(ctx, id); err != nil || info.Output != nil {
			t.Errorf("%s: instance info after clearing %+v, %v", id, info, err)
		}
	}
}

// Event ids 1, 2, 3, ... need no id set; duplicates are still refused with nothing written, and
// the first id out of sequence starts the set, after which every earlier id stays a duplicate.
func TestEventIDsDenseThenSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks := p.Keyspace()
	const id = "ids"
	layoutEnqueue(t, p, layoutStart(id))
	md := layoutRunning()
	raise := provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}
	ev := func(n uint64) provider.Event {
		return layoutEvent(id, 1, n, provider.ExternalEventEvent{Name: "e", Data: "{}"})
	}
	if err := layoutTurn(t, p, id, 1, []provider.Event{
		layoutStarted(id, 1), ev(2),
	}, md, raise); err != nil {
		t.Fatal(err)
	}
	count := func() uint64 {
		x, err := p.GetExecutionInfo(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		return x.EventCount
	}
	step := func(events []provider.Event, wantDup bool, wantCount uint64) {
		t.Helper()
		err := layoutTurn(t, p, id, 1, events, md, raise)
		if wantDup != errors.Is(err, provider.ErrDuplicateEvent) || (!wantDup && err != nil) {
			t.Fatalf("ack %v: %v (want duplicate: %v)", events, err, wantDup)
		}
		if got := count(); got != wantCount {
			t.Fatalf("after ack %v: %d events, want %d", events, got, wantCount)
		}
	}
	step([]provider.Event{ev(3)}, false, 3)
	step([]provider.Event{ev(2)}, true, 3)
	step([]provider.Event{ev(4), ev(4)}, true, 3)
	if got := layoutKeys(t, p, ks.HistoryIDs(id, 1)); len(got) != 0 {
		t.Fatalf("id set written while ids are 1..n")
	}
	step([]provider.Event{ev(6)}, false, 4) // a gap: the set begins
	if got := layoutKeys(t, p, ks.HistoryIDs(id, 1)); len(got) != 1 {
		t.Fatalf("no id set after an id out of sequence")
	}
	step([]provider.Event{ev(5)}, false, 5)
	for _, n := range []uint64{1, 3, 5, 6} {
		step([]provider.Event{ev(n)}, true, 5)
	}
	step([]provider.Event{ev(7)}, false, 6)
	// AppendWithExecution follows the same rules.
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{ev(2)}); !errors.Is(err, provider.ErrDuplicateEvent) {
		t.Fatalf("append of a duplicate: %v", err)
	}
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{ev(8)}); err != nil || count() != 7 {
		t.Fatalf("append: %v, %d events", err, count())
	}
	if h, err := p.Read(ctx, id); err != nil || len(h) != 7 {
		t.Fatalf("history: %d events, %v", len(h), err)
	}
}

// An append out of sequence on dense ids starts the id set as an ack does, and appends to the
// hash's execution add no execution keys.
func TestAppendOutOfSequenceOnDenseIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks := p.Keyspace()
	md := layoutRunning()
	const other = "ids-append"
	layoutEnqueue(t, p, layoutStart(other))
	if err := layoutTurn(t, p, other, 1, []provider.Event{
		layoutStarted(other, 1),
	}, md); err != nil {
		t.Fatal(err)
	}
	gap := []provider.Event{layoutEvent(other, 1, 5, provider.ExternalEventEvent{Name: "e", Data: "{}"})}
	if err := p.AppendWithExecution(ctx, other, 1, gap); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendWithExecution(ctx, other, 1, gap); !errors.Is(err, provider.ErrDuplicateEvent) {
		t.Fatalf("append of an event appended out of sequence before: %v", err)
	}
	if got := layoutKeys(t, p, ks.Execution(other, 1), ks.Executions(other)); len(got) != 0 {
		t.Fatalf("appends to the hash's execution wrote %v", got)
	}
}

// Continue-as-new moves the finished execution's record out of the instance hash: both
// executions stay described, an older execution keeps refusing its duplicates, prune and delete
// find every key.
func TestContinueAsNewKeepsEveryExecution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	ks := p.Keyspace()
	const id = "can"
	first, second := `"first"`, `"second"`
	layoutEnqueue(t, p, layoutStart(id))
	md := provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew, Output: &first, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
	if err := layoutTurn(t, p, id, 1, []provider.Event{
		layoutStarted(id, 1),
		layoutEvent(id, 1, 2, provider.OrchestrationContinuedAsNewEvent{Input: first}),
	}, md, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: id, Orchestration: "O", Input: first}}); err != nil {
		t.Fatal(err)
	}
	md = provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: &second, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
	if err := layoutTurn(t, p, id, 2, []provider.Event{
		layoutEvent(id, 2, 1, provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: first}),
		layoutEvent(id, 2, 2, provider.OrchestrationCompletedEvent{Output: second}),
	}, md); err != nil {
		t.Fatal(err)
	}
	if execs, err := p.ListExecutions(ctx, id); err != nil || !slices.Equal(execs, []uint64{1, 2}) {
		t.Fatalf("executions %v, %v", execs, err)
	}
	for e, want := range map[uint64][2]string{1: {provider.StatusContinuedAsNew, first}, 2: {provider.StatusCompleted, second}} {
		x, err := p.GetExecutionInfo(ctx, id, e)
		if err != nil || x.Status != want[0] || x.Output == nil || *x.Output != want[1] || x.EventCount != 2 || x.CompletedAt == 0 {
			t.Errorf("execution %d: %+v, %v", e, x, err)
		}
	}
	info, err := p.GetInstanceInfo(ctx, id)
	if err != nil || info.CurrentExecutionID != 2 || info.Status != provider.StatusCompleted || info.Output == nil || *info.Output != second {
		t.Errorf("instance info %+v, %v", info, err)
	}
	// The older execution keeps its own count and refuses its duplicates.
	old := func(n uint64) provider.Event {
		return layoutEvent(id, 1, n, provider.ExternalEventEvent{Name: "e", Data: "{}"})
	}
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{old(2)}); !errors.Is(err, provider.ErrDuplicateEvent) {
		t.Fatalf("duplicate in execution 1: %v", err)
	}
	if err := p.AppendWithExecution(ctx, id, 1, []provider.Event{old(3)}); err != nil {
		t.Fatal(err)
	}
	if x, err := p.GetExecutionInfo(ctx, id, 1); err != nil || x.EventCount != 3 {
		t.Fatalf("execution 1 after an append: %+v, %v", x, err)
	}
	if x, err := p.GetExecutionInfo(ctx, id, 2); err != nil || x.EventCount != 2 {
		t.Fatalf("execution 2 after execution 1's append: %+v, %v", x, err)
	}
	pr, err := p.PruneExecutions(ctx, id, provider.PruneOptions{KeepLast: 1})
	if err != nil || pr.ExecutionsDeleted != 1 || pr.EventsDeleted != 3 {
		t.Fatalf("prune: %+v, %v", pr, err)
	}
	if execs, err := p.ListExecutions(ctx, id); err != nil || !slices.Equal(execs, []uint64{2}) {
		t.Fatalf("executions after prune %v, %v", execs, err)
	}
	if got := layoutKeys(t, p, ks.Execution(id, 1), ks.History(id, 1), ks.ExecutionOutput(id, 1), ks.HistoryIDs(id, 1)); len(got) != 0 {
		t.Fatalf("keys of the pruned execution left: %v", got)
	}
	d, err := p.DeleteInstance(ctx, id, false)
	if err != nil || d.InstancesDeleted != 1 || d.ExecutionsDeleted != 1 || d.EventsDeleted != 2 {
		t.Fatalf("delete: %+v, %v", d, err)
	}
	if keys := instanceKeys(t, p, id); len(keys) != 0 {
		t.Fatalf("keys left after delete: %v", keys)
	}
}

// A finished execution's completed time stays when later turns touch the instance (the instance
// hash leaves it implied by updated until then), and moves when the execution finishes again.
func TestCompletedTimeSurvivesLaterTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	const id = "done"
	out := `"ok"`
	layoutEnqueue(t, p, layoutStart(id))
	md := provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: &out, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}
	if err := layoutTurn(t, p, id, 1, []provider.Event{
		layoutStarted(id, 1),
		layoutEvent(id, 1, 2, provider.OrchestrationCompletedEvent{Output: out}),
	}, md); err != nil {
		t.Fatal(err)
	}
	times := func() (completed, updated uint64) {
		t.Helper()
		x, err := p.GetExecutionInfo(ctx, id, 1)
		if err != nil {
			t.Fatal(err)
		}
		info, err := p.GetInstanceInfo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return x.CompletedAt, info.UpdatedAt
	}
	finished, _ := times()
	if finished == 0 {
		t.Fatal("no completed time")
	}
	raise := provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "e", Data: "{}"}}
	step := func(status string) {
		t.Helper()
		time.Sleep(5 * time.Millisecond) // lets the server clock move on: each step gets a later time
		layoutEnqueue(t, p, raise)
		if err := layoutTurn(t, p, id, 1, nil, provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}); err != nil {
			t.Fatal(err)
		}
	}
	step("") // a turn that changes nothing but the instance's updated time
	if c, u := times(); c != finished || u <= finished {
		t.Fatalf("after a later turn: completed %d (want %d), updated %d", c, finished, u)
	}
	step(provider.StatusRunning)
	if c, _ := times(); c != finished {
		t.Fatalf("after running again: completed %d, want %d", c, finished)
	}
	step(provider.StatusFailed)
	if c, u := times(); c <= finished || c != u {
		t.Fatalf("after failing: completed %d, want the new time %d", c, u)
	}
}

// An ack-and-fetch of a turn of thousands of events commits the same on either side of the
// size where the script stops copying its arguments at once (about 4,000 arguments).
func TestLargeAckAndFetch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	for _, n := range []uint64{1990, 2100} {
		id, other := fmt.Sprint("large-", n), fmt.Sprint("next-", n)
		layoutEnqueue(t, p, layoutStart(id))
		it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil)
		if err != nil || it == nil || it.Item.Instance != id {
			t.Fatalf("fetch: %+v %v", it, err)
		}
		layoutEnqueue(t, p, layoutStart(other))
		events := []provider.Event{layoutStarted(id, 1)}
		for i := uint64(2); i <= n; i++ {
			events = append(events, layoutEvent(id, 1, i, provider.ExternalEventEvent{Name: "e", Data: "{}"}))
		}
		next, err := p.AckOrchestrationItemAndFetch(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: events,
			Metadata: layoutRunning()},
			5*time.Second, nil, provider.FetchOptions{})
		if err != nil || next == nil || next.Item.Instance != other {
			t.Fatalf("%d events: ack and fetch: %+v %v", n, next, err)
		}
		if err := p.AbandonOrchestrationItem(ctx, next.LockToken, 0, true); err != nil {
			t.Fatal(err)
		}
		if h, err := p.Read(ctx, id); err != nil || uint64(len(h)) != n {
			t.Fatalf("history: %d events, %v", len(h), err)
		}
		// The other instance's start stays queued; drain it so the next round fetches its own.
		if it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 0, nil); err != nil || it == nil || it.Item.Instance != other {
			t.Fatalf("refetch: %+v %v", it, err)
		} else if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			Metadata: layoutRunning()}); err != nil {
			t.Fatal(err)
		}
	}
}

// A lite fetch sends a small history whole (one GET instead of the caller's ReadForReplay) unless
// the instance has KV; a larger history, or one with KV, is left out as before.
func TestLiteFetchSendsSmallHistoriesWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newTestProvider(t)
	md := layoutRunning()
	for _, c := range []struct {
		id        string
		dataBytes int
		kv        bool
		whole     bool
	}{{"small", 10, false, true}, {"large", 3000, false, false}, {"small-kv", 10, true, false}} {
		layoutEnqueue(t, p, provider.WorkItem{Kind: provider.StartOrchestration{Instance: c.id, Orchestration: "O", Input: "{}", ExecutionID: 1}})
		events := []provider.Event{
			layoutStarted(c.id, 1),
			layoutEvent(c.id, 1, 2, provider.ExternalEventEvent{Name: "e", Data: `"` + strings.Repeat("x", c.dataBytes) + `"`}),
		}
		if c.kv {
			events = append(events, layoutEvent(c.id, 1, 3, provider.KeyValueSetEvent{Key: "k", Value: "v", LastUpdatedAtMs: 1}))
		}
		if err := layoutTurn(t, p, c.id, 1, events, md, provider.WorkItem{Kind: provider.ExternalRaised{Instance: c.id, Name: "e", Data: "{}"}}); err != nil {
			t.Fatal(err)
		}
		it, err := p.FetchOrchestrationItemLite(ctx, 5*time.Second, 0, nil)
		if err != nil || it == nil || it.Item.Instance != c.id {
			t.Fatalf("%s: lite fetch %+v %v", c.id, it, err)
		}
		if got := it.Item.History != nil; got != c.whole || it.Item.HistoryLen != len(events) || (got && len(it.Item.History) != len(events)) {
			t.Fatalf("%s: whole %v (want %v), %d events, HistoryLen %d", c.id, got, c.whole, len(it.Item.History), it.Item.HistoryLen)
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
}
