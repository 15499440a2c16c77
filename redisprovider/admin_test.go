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
	"github.com/redis/go-redis/v9"
)

// Focused tests of the management side: paging, exact counts, deletion under a held lock,
// refusals, pruning, bulk deletion and statistics. The conformance suite covers the contract.

const admLock = 30 * time.Second

func admPtr[T any](v T) *T { return &v }

// admEvents returns n events of execution exec starting at event id first; event 1 is an
// OrchestrationStarted, the others ExternalEvents.
func admEvents(id string, exec, first uint64, n int) []provider.Event {
	out := make([]provider.Event, 0, n)
	for i := range uint64(n) {
		var k provider.EventKind = provider.ExternalEventEvent{Name: "e", Data: fmt.Sprint(first + i)}
		if first+i == 1 {
			k = provider.OrchestrationStartedEvent{Name: "AdmOrch", Version: "1.0.0", Input: "{}"}
		}
		out = append(out, provider.Event{EventID: first + i, InstanceID: id, ExecutionID: exec,
			TimestampMs: uint64(time.Now().UnixMilli()), DuroxideVersion: "0.1.29", Kind: k})
	}
	return out
}

// admTurn enqueues item, fetches it (the only ready instance must be id) and acks with ack.
func admTurn(t *testing.T, p *redisprovider.Provider, id string, item provider.WorkItem, ack provider.OrchestrationAck) {
	t.Helper()
	ctx := context.Background()
	if err := p.EnqueueForOrchestrator(ctx, item, 0); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	it, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
	if err != nil || it == nil || it.Item.Instance != id {
		t.Fatalf("fetch for %q: %+v, %v", id, it, err)
	}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, ack); err != nil {
		t.Fatalf("ack of %q: %v", id, err)
	}
}

// admCreate creates instance id with one execution per entry of events (that many events each);
// every execution but the last ends ContinuedAsNew, the last gets lastStatus ("" = Running).
func admCreate(t *testing.T, p *redisprovider.Provider, id, parent string, events []int, lastStatus string) {
	t.Helper()
	for i, n := range events {
		exec := uint64(i + 1)
		var item provider.WorkItem
		if exec == 1 {
			s := provider.StartOrchestration{Instance: id, Orchestration: "AdmOrch", Input: "{}", Version: admPtr("1.0.0"), ExecutionID: 1}
			if parent != "" {
				s.ParentInstance, s.ParentID = admPtr(parent), admPtr(uint64(1))
			}
			item = provider.WorkItem{Kind: s}
		} else {
			item = provider.WorkItem{Kind: provider.ContinueAsNew{Instance: id, Orchestration: "AdmOrch", Input: "{}",
				Version: admPtr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{}}}
		}
		meta := provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew, OrchestrationName: "AdmOrch",
			OrchestrationVersion: "1.0.0", ParentInstanceID: parent}
		if i == len(events)-1 {
			meta.Status = lastStatus
			if lastStatus != "" {
				meta.Output = admPtr("out-" + id)
			}
		}
		admTurn(t, p, id, item, provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: admEvents(id, exec, 1, n), Metadata: meta})
	}
}

func admWantKind(t *testing.T, err, kind error, what string, words ...string) {
	t.Helper()
	if err == nil || !errors.Is(err, kind) || provider.IsRetryable(err) {
		t.Fatalf("%s: got %v, want a permanent %v error", what, err, kind)
	}
	for _, w := range words {
		if !strings.Contains(strings.ToLower(err.Error()), w) {
			t.Fatalf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func admMetrics(t *testing.T, p *redisprovider.Provider) provider.SystemMetrics {
	t.Helper()
	m, err := p.GetSystemMetrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// admKeysMentioning lists the namespace's keys that contain any of ids (tests may SCAN).
func admKeysMentioning(t *testing.T, p *redisprovider.Provider, ids ...string) []string {
	t.Helper()
	ctx := context.Background()
	prefix := p.Keyspace().Prefix(0)
	var out []string
	iter := p.Client().Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		for _, id := range ids {
			if strings.HasSuffix(k, ":"+id) {
				out = append(out, k)
			}
		}
	}
	return out
}

// admIndexed reports whether id is in any orchestrator or instance index.
func admIndexed(t *testing.T, p *redisprovider.Provider, id string) []string {
	t.Helper()
	ctx := context.Background()
	P := p.Keyspace().Prefix(0)
	var where []string
	for _, k := range []string{"idx:instances", "idx:status:Running", "idx:status:Completed", "idx:status:Failed",
		"oq:due", "oq:locked", "oq:ready:-"} {
		if err := p.Client().ZScore(ctx, P+k, id).Err(); err == nil {
			where = append(where, k)
		} else if !errors.Is(err, redis.Nil) {
			t.Fatal(err)
		}
	}
	if n, err := p.Client().Exists(ctx, p.Keyspace().Lock(id)).Result(); err != nil {
		t.Fatal(err)
	} else if n > 0 {
		where = append(where, "lock")
	}
	return where
}

func TestAdminListInstancesPage(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	var ids []string
	for i := range 25 {
		id := fmt.Sprintf("page-%02d", i)
		ids = append(ids, id)
		status := ""
		if i%2 == 0 {
			status = provider.StatusCompleted
		}
		admCreate(t, p, id, "", []int{1}, status)
	}
	all, err := p.ListInstances(ctx)
	if err != nil || !slices.Equal(all, ids) {
		t.Fatalf("ListInstances = %q, %v; want %q (creation order)", all, err, ids)
	}

	// Pages of 10: 10, 10, then 6 (one created, the cursor's own id deleted after it was listed).
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		part, next, err := p.ListInstancesPage(ctx, cursor, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{10, 10, 6}[page]; len(part) != want {
			t.Fatalf("page %d: %d ids, want %d", page, len(part), want)
		}
		got = append(got, part...)
		if page == 0 {
			// The cursor's id is deleted and a new instance created between pages: the walk
			// neither skips nor repeats anything and sees the new one at the end.
			if _, err := p.DeleteInstance(ctx, part[len(part)-1], true); err != nil {
				t.Fatal(err)
			}
			admCreate(t, p, "page-new", "", []int{1}, "")
		}
		if next == "" {
			if page != 2 {
				t.Fatalf("page %d: no next cursor", page)
			}
			break
		}
		cursor = next
	}
	if want := append(slices.Clone(ids), "page-new"); !slices.Equal(got, want) {
		t.Fatalf("paged walk = %q, want %q", got, want)
	}

	// A status index: the Completed ones (even numbers; page-09, deleted, was odd).
	var completed []string
	cursor = ""
	for {
		part, next, err := p.ListInstancesPage(ctx, cursor, 4, provider.StatusCompleted)
		if err != nil {
			t.Fatal(err)
		}
		completed = append(completed, part...)
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(completed)
	var wantCompleted []string
	for i := 0; i < 25; i += 2 {
		wantCompleted = append(wantCompleted, ids[i])
	}
	if !slices.Equal(completed, wantCompleted) {
		t.Fatalf("Completed pages = %q, want %q", completed, wantCompleted)
	}

	// A page that ends the index has no next cursor, even when it is full.
	part, next, err := p.ListInstancesPage(ctx, "", 26, "")
	if err != nil || len(part) != 25 || next != "" {
		t.Fatalf("page of 26 = %d ids, next %q, %v", len(part), next, err)
	}
	part, next, err = p.ListInstancesPage(ctx, "", 25, "")
	if err != nil || len(part) != 25 || next != "" {
		t.Fatalf("page of 25 = %d ids, next %q, %v", len(part), next, err)
	}
	if part, next, err = p.ListInstancesPage(ctx, "", 24, ""); err != nil || len(part) != 24 || next == "" {
		t.Fatalf("page of 24 = %d ids, next %q, %v", len(part), next, err)
	}
	if part, next, err = p.ListInstancesPage(ctx, next, 24, ""); err != nil || len(part) != 1 || next != "" {
		t.Fatalf("page after 24 = %q, next %q, %v", part, next, err)
	}

	_, _, err = p.ListInstancesPage(ctx, "not a cursor!", 10, "")
	admWantKind(t, err, provider.ErrInvalidInput, "ListInstancesPage(bad cursor)")
	if part, next, err := p.ListInstancesPage(ctx, "", 10, "NoSuchStatus"); err != nil || len(part) != 0 || next != "" {
		t.Fatalf("unknown status: %q, %q, %v", part, next, err)
	}
}

// Ids sharing one score are ordered by their bytes; a page resumes after a cursor id that was
// removed from the index meanwhile.
func TestAdminListInstancesPageTies(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	skipFsck(t) // the index is written by hand, without instances
	ctx := context.Background()
	key := p.Keyspace().Prefix(0) + "idx:instances"
	members := []redis.Z{{Score: 1, Member: "a"}, {Score: 5, Member: "b"}, {Score: 5, Member: "b\xff"},
		{Score: 5, Member: "c"}, {Score: 5, Member: "d"}, {Score: 5, Member: "é"}, {Score: 9, Member: "z"}}
	if err := p.Client().ZAdd(ctx, key, members...).Err(); err != nil {
		t.Fatal(err)
	}
	part, next, err := p.ListInstancesPage(ctx, "", 3, "")
	if err != nil || !slices.Equal(part, []string{"a", "b", "b\xff"}) {
		t.Fatalf("page 1 = %q, %v", part, err)
	}
	p.Client().ZRem(ctx, key, "b\xff", "b")
	part, next, err = p.ListInstancesPage(ctx, next, 3, "")
	if err != nil || !slices.Equal(part, []string{"c", "d", "é"}) {
		t.Fatalf("page 2 after removing the cursor id = %q, %v", part, err)
	}
	p.Client().ZRem(ctx, key, "é")
	part, next, err = p.ListInstancesPage(ctx, next, 3, "")
	if err != nil || !slices.Equal(part, []string{"z"}) || next != "" {
		t.Fatalf("page 3 = %q, %q, %v", part, next, err)
	}
}

func TestAdminInspection(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	before := uint64(time.Now().UnixMilli())
	admCreate(t, p, "insp-root", "", []int{2, 3}, provider.StatusCompleted)
	admCreate(t, p, "insp-child", "insp-root", []int{1}, "")

	info, err := p.GetInstanceInfo(ctx, "insp-root")
	if err != nil {
		t.Fatal(err)
	}
	if info.OrchestrationName != "AdmOrch" || info.OrchestrationVersion != "1.0.0" || info.CurrentExecutionID != 2 ||
		info.Status != "Completed" || info.Output == nil || *info.Output != "out-insp-root" || info.ParentInstanceID != "" ||
		info.CreatedAt < before || info.UpdatedAt < info.CreatedAt {
		t.Fatalf("GetInstanceInfo(root) = %+v", info)
	}
	child, err := p.GetInstanceInfo(ctx, "insp-child")
	if err != nil || child.ParentInstanceID != "insp-root" || child.Status != "Running" || child.Output != nil {
		t.Fatalf("GetInstanceInfo(child) = %+v, %v", child, err)
	}
	_, err = p.GetInstanceInfo(ctx, "nope")
	admWantKind(t, err, provider.ErrNotFound, "GetInstanceInfo(unknown)", "not found")

	x1, err := p.GetExecutionInfo(ctx, "insp-root", 1)
	if err != nil || x1.Status != "ContinuedAsNew" || x1.EventCount != 2 || x1.CompletedAt == 0 || x1.StartedAt == 0 {
		t.Fatalf("GetExecutionInfo(1) = %+v, %v", x1, err)
	}
	x2, err := p.GetExecutionInfo(ctx, "insp-root", 2)
	if err != nil || x2.Status != "Completed" || x2.EventCount != 3 || x2.Output == nil || *x2.Output != "out-insp-root" {
		t.Fatalf("GetExecutionInfo(2) = %+v, %v", x2, err)
	}
	_, err = p.GetExecutionInfo(ctx, "insp-root", 3)
	admWantKind(t, err, provider.ErrNotFound, "GetExecutionInfo(unknown execution)", "not found")

	if execs, err := p.ListExecutions(ctx, "insp-root"); err != nil || !slices.Equal(execs, []uint64{1, 2}) {
		t.Fatalf("ListExecutions = %v, %v", execs, err)
	}
	if execs, err := p.ListExecutions(ctx, "nope"); err != nil || len(execs) != 0 {
		t.Fatalf("ListExecutions(unknown) = %v, %v", execs, err)
	}
	if e, err := p.LatestExecutionID(ctx, "insp-root"); err != nil || e != 2 {
		t.Fatalf("LatestExecutionID = %d, %v", e, err)
	}
	_, err = p.LatestExecutionID(ctx, "nope")
	admWantKind(t, err, provider.ErrNotFound, "LatestExecutionID(unknown)")
	if h, err := p.ReadHistory(ctx, "insp-root"); err != nil || len(h) != 3 {
		t.Fatalf("ReadHistory = %d events, %v", len(h), err)
	}
	if h, err := p.ReadHistoryWithExecutionID(ctx, "insp-root", 1); err != nil || len(h) != 2 {
		t.Fatalf("ReadHistoryWithExecutionID(1) = %d events, %v", len(h), err)
	}
	if c, err := p.ListChildren(ctx, "insp-root"); err != nil || !slices.Equal(c, []string{"insp-child"}) {
		t.Fatalf("ListChildren = %q, %v", c, err)
	}
	if parent, ok, err := p.GetParentID(ctx, "insp-child"); err != nil || !ok || parent != "insp-root" {
		t.Fatalf("GetParentID(child) = %q, %v, %v", parent, ok, err)
	}
	if _, ok, err := p.GetParentID(ctx, "insp-root"); err != nil || ok {
		t.Fatalf("GetParentID(root) = %v, %v", ok, err)
	}
	_, _, err = p.GetParentID(ctx, "nope")
	admWantKind(t, err, provider.ErrNotFound, "GetParentID(unknown)", "not found")
	_, err = p.GetInstanceInfo(ctx, "")
	admWantKind(t, err, provider.ErrInvalidInput, "GetInstanceInfo(\"\")")
}

// DeleteInstance counts exactly what it removes and leaves no key of the tree behind.
func TestAdminDeleteExactCounts(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	const root, child, other = "cnt-root", "cnt-child", "cnt-other"
	// Root: executions of 2, 3 and 4 events; the last turn also schedules 2 activities and sets
	// KV and custom status (3 more events), then completes.
	admCreate(t, p, root, "", []int{2, 3}, "")
	delta := admEvents(root, 3, 1, 4)
	delta = append(delta,
		provider.Event{EventID: 5, InstanceID: root, ExecutionID: 3, DuroxideVersion: "0.1.29", Kind: provider.KeyValueSetEvent{Key: "k", Value: "v"}},
		provider.Event{EventID: 6, InstanceID: root, ExecutionID: 3, DuroxideVersion: "0.1.29", Kind: provider.CustomStatusUpdatedEvent{Status: admPtr("busy")}},
		provider.Event{EventID: 7, InstanceID: root, ExecutionID: 3, DuroxideVersion: "0.1.29", Kind: provider.OrchestrationCompletedEvent{Output: "x"}})
	admTurn(t, p, root, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: root, Orchestration: "AdmOrch", Input: "{}",
		Version: admPtr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{}}}, provider.OrchestrationAck{
		ExecutionID: 3, HistoryDelta: delta,
		WorkerItems: []provider.WorkItem{
			{Kind: provider.ActivityExecute{Instance: root, ExecutionID: 3, ID: 2, Name: "a", Input: "1"}},
			{Kind: provider.ActivityExecute{Instance: root, ExecutionID: 3, ID: 3, Name: "a", Input: "2"}},
		},
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: admPtr("x")},
	})
	// Child: one execution of 2 events, completed; an unrelated instance; then 3 messages queued
	// for the root (one delayed) and one for the child.
	admCreate(t, p, child, root, []int{2}, provider.StatusCompleted)
	admCreate(t, p, other, "", []int{1}, provider.StatusCompleted)
	for i, d := range []time.Duration{0, 0, time.Hour} {
		ev := provider.WorkItem{Kind: provider.ExternalRaised{Instance: root, Name: "late", Data: fmt.Sprint(i)}}
		if err := p.EnqueueForOrchestrator(ctx, ev, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: child, Name: "late"}}, 0); err != nil {
		t.Fatal(err)
	}
	before := admMetrics(t, p)
	if before.TotalInstances != 3 || before.TotalExecutions != 5 || before.TotalEvents != 2+3+7+2+1 ||
		before.CompletedInstances != 3 || before.RunningInstances != 0 {
		t.Fatalf("metrics before delete = %+v", before)
	}
	qs, err := p.GetQueueStats(ctx)
	if err != nil || qs.Orchestrator.Visible != 3 || qs.Orchestrator.Delayed != 1 || qs.Worker.Unlocked != 2 {
		t.Fatalf("queue stats before delete = %+v, %v", qs, err)
	}

	res, err := p.DeleteInstance(ctx, root, false)
	if err != nil {
		t.Fatal(err)
	}
	want := provider.DeleteInstanceResult{InstancesDeleted: 2, ExecutionsDeleted: 4, EventsDeleted: 2 + 3 + 7 + 2, QueueMessagesDeleted: 4 + 2}
	if res != want {
		t.Fatalf("DeleteInstance = %+v, want %+v", res, want)
	}
	if keys := admKeysMentioning(t, p, root, child); len(keys) != 0 {
		t.Fatalf("keys left after delete: %q", keys)
	}
	for _, id := range []string{root, child} {
		if where := admIndexed(t, p, id); len(where) != 0 {
			t.Fatalf("%s still indexed in %q", id, where)
		}
	}
	after := admMetrics(t, p)
	if after != (provider.SystemMetrics{TotalInstances: 1, TotalExecutions: 1, TotalEvents: 1, CompletedInstances: 1}) {
		t.Fatalf("metrics after delete = %+v", after)
	}
	d, err := p.GetQueueDepths(ctx)
	if err != nil || d != (provider.QueueDepths{}) {
		t.Fatalf("queue depths after delete = %+v, %v", d, err)
	}
	if w, err := p.FetchWorkItem(ctx, admLock, 0, nil, provider.TagFilterDefaultOnly()); err != nil || w != nil {
		t.Fatalf("worker item left after delete: %+v, %v", w, err)
	}
	if kv, err := p.GetKVAllValues(ctx, root); err != nil || len(kv) != 0 {
		t.Fatalf("KV left: %v, %v", kv, err)
	}
	if cs, err := p.GetCustomStatus(ctx, root, 0); err != nil || cs != nil {
		t.Fatalf("custom status left: %+v, %v", cs, err)
	}
	if _, err := p.GetInstanceInfo(ctx, other); err != nil {
		t.Fatalf("unrelated instance: %v", err)
	}
}

// A force delete under a held lock makes that turn's ack (and renew, abandon) fail and does not
// let it recreate the instance; a worker's lock from before the delete cannot ack either; the id
// is reusable afterwards.
func TestAdminForceDeleteUnderLock(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	const id = "locked-del"
	admTurn(t, p, id, provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "AdmOrch", Input: "{}",
		Version: admPtr("1.0.0"), ExecutionID: 1}}, provider.OrchestrationAck{
		ExecutionID: 1, HistoryDelta: admEvents(id, 1, 1, 2),
		WorkerItems: []provider.WorkItem{{Kind: provider.ActivityExecute{Instance: id, ExecutionID: 1, ID: 2, Name: "a", Input: "{}"}}},
		Metadata:    provider.ExecutionMetadata{OrchestrationName: "AdmOrch", OrchestrationVersion: "1.0.0"},
	})
	work, err := p.FetchWorkItem(ctx, admLock, 0, nil, provider.TagFilterDefaultOnly())
	if err != nil || work == nil {
		t.Fatalf("fetch work: %+v, %v", work, err)
	}
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "x"}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch: %+v, %v", it, err)
	}
	// A message arriving during the lock is deleted too.
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: id, Name: "y"}}, 0); err != nil {
		t.Fatal(err)
	}
	qs, err := p.GetQueueStats(ctx)
	if err != nil || qs.Orchestrator.Locked != 1 || qs.Orchestrator.Visible != 1 || qs.Orchestrator.LockedInstances != 1 ||
		qs.Worker.Locked != 1 || qs.Worker.Unlocked != 0 {
		t.Fatalf("queue stats under lock = %+v, %v", qs, err)
	}

	_, err = p.DeleteInstance(ctx, id, false)
	admWantKind(t, err, provider.ErrInstanceRunning, "DeleteInstance(running, no force)", "running")
	res, err := p.DeleteInstance(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := (provider.DeleteInstanceResult{InstancesDeleted: 1, ExecutionsDeleted: 1, EventsDeleted: 2, QueueMessagesDeleted: 3}); res != want {
		t.Fatalf("force delete = %+v, want %+v", res, want)
	}
	if where := admIndexed(t, p, id); len(where) != 0 {
		t.Fatalf("still indexed in %q", where)
	}

	ack := provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: admEvents(id, 1, 3, 1),
		Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "AdmOrch", OrchestrationVersion: "1.0.0"}}
	admWantKind(t, p.AckOrchestrationItem(ctx, it.LockToken, ack), provider.ErrInvalidLockToken, "ack after force delete")
	admWantKind(t, p.RenewOrchestrationItemLock(ctx, it.LockToken, time.Second), provider.ErrInvalidLockToken, "renew after force delete")
	admWantKind(t, p.AbandonOrchestrationItem(ctx, it.LockToken, 0, false), provider.ErrInvalidLockToken, "abandon after force delete")
	_, err = p.GetInstanceInfo(ctx, id)
	admWantKind(t, err, provider.ErrNotFound, "GetInstanceInfo after force delete")
	if keys := admKeysMentioning(t, p, id); len(keys) != 0 {
		t.Fatalf("keys recreated after the failed ack: %q", keys)
	}

	// Recreate; the stale worker token cannot ack into the new instance.
	admCreate(t, p, id, "", []int{1}, "")
	done := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: id, ExecutionID: 1, ID: 2, Result: "stale"}}
	if err := p.AckWorkItem(ctx, work.LockToken, &done); err == nil {
		t.Fatal("ack_work_item with a token from before the delete succeeded")
	}
	if d, err := p.GetQueueDepths(ctx); err != nil || d.OrchestratorQueue != 0 {
		t.Fatalf("depths after recreate = %+v, %v", d, err)
	}
	if info, err := p.GetInstanceInfo(ctx, id); err != nil || info.Status != "Running" || info.CurrentExecutionID != 1 {
		t.Fatalf("recreated instance = %+v, %v", info, err)
	}
}

func TestAdminDeleteAtomicRefusals(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	admCreate(t, p, "ref-done", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "ref-run", "", []int{1}, "")
	admCreate(t, p, "ref-root", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "ref-kid", "ref-root", []int{1}, provider.StatusFailed)
	before := admMetrics(t, p)

	_, err := p.DeleteInstancesAtomic(ctx, []string{"ref-done", "ref-run"}, false)
	admWantKind(t, err, provider.ErrInstanceRunning, "atomic delete with a running instance", "running", "ref-run")
	_, err = p.DeleteInstancesAtomic(ctx, []string{"ref-done", "ref-root"}, true)
	admWantKind(t, err, provider.ErrInvalidInput, "atomic delete orphaning a child", "child", "ref-kid")
	_, err = p.DeleteInstance(ctx, "ref-kid", true)
	admWantKind(t, err, provider.ErrInvalidInput, "DeleteInstance(sub-orchestration)", "sub-orchestration")
	_, err = p.DeleteInstance(ctx, "ref-none", false)
	admWantKind(t, err, provider.ErrNotFound, "DeleteInstance(unknown)", "not found")
	if after := admMetrics(t, p); after != before {
		t.Fatalf("refused deletes changed the store: %+v -> %+v", before, after)
	}

	// Unknown ids are not an error and count nothing; a child may be deleted on its own, which
	// unlinks it from its parent.
	if r, err := p.DeleteInstancesAtomic(ctx, []string{"ref-none", "ref-none"}, false); err != nil || r != (provider.DeleteInstanceResult{}) {
		t.Fatalf("atomic delete of unknown ids = %+v, %v", r, err)
	}
	if r, err := p.DeleteInstancesAtomic(ctx, []string{"ref-kid"}, false); err != nil || r.InstancesDeleted != 1 {
		t.Fatalf("atomic delete of a child = %+v, %v", r, err)
	}
	if c, err := p.ListChildren(ctx, "ref-root"); err != nil || len(c) != 0 {
		t.Fatalf("ListChildren after deleting the child = %q, %v", c, err)
	}
	if r, err := p.DeleteInstance(ctx, "ref-root", false); err != nil || r.InstancesDeleted != 1 {
		t.Fatalf("DeleteInstance(root) = %+v, %v", r, err)
	}
}

func TestAdminPrune(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	const id = "prune-exact"
	// Executions of 1..5 events; execution 2 stays Running (not current).
	for exec := uint64(1); exec <= 5; exec++ {
		item := provider.WorkItem{Kind: provider.ContinueAsNew{Instance: id, Orchestration: "AdmOrch", Input: "{}",
			Version: admPtr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{}}}
		if exec == 1 {
			item = provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: "AdmOrch", Input: "{}",
				Version: admPtr("1.0.0"), ExecutionID: 1}}
		}
		meta := provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew, OrchestrationName: "AdmOrch", OrchestrationVersion: "1.0.0"}
		if exec == 2 || exec == 5 {
			meta.Status = ""
		}
		delta := admEvents(id, exec, 1, int(exec))
		if exec == 1 {
			delta = append(delta, provider.Event{EventID: 2, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.29",
				Kind: provider.KeyValueSetEvent{Key: "k", Value: "v1"}})
		}
		admTurn(t, p, id, item, provider.OrchestrationAck{ExecutionID: exec, HistoryDelta: delta, Metadata: meta})
	}
	// Execution 1 holds 2 events (with the KV set), 2..5 hold 2..5.
	cutoff := uint64(time.Now().Add(-time.Hour).UnixMilli())
	if r, err := p.PruneExecutions(ctx, id, provider.PruneOptions{CompletedBeforeMs: cutoff}); err != nil || r != (provider.PruneResult{InstancesProcessed: 1}) {
		t.Fatalf("prune completed before an hour ago = %+v, %v", r, err)
	}
	r, err := p.PruneExecutions(ctx, id, provider.PruneOptions{KeepLast: 2})
	if err != nil || r != (provider.PruneResult{InstancesProcessed: 1, ExecutionsDeleted: 2, EventsDeleted: 2 + 3}) {
		t.Fatalf("prune keep 2 = %+v, %v; want executions 1 and 3 (2 is Running)", r, err)
	}
	if execs, _ := p.ListExecutions(ctx, id); !slices.Equal(execs, []uint64{2, 4, 5}) {
		t.Fatalf("executions after prune = %v, want [2 4 5]", execs)
	}
	r, err = p.PruneExecutions(ctx, id, provider.PruneOptions{})
	if err != nil || r != (provider.PruneResult{InstancesProcessed: 1, ExecutionsDeleted: 1, EventsDeleted: 4}) {
		t.Fatalf("prune keep 1 = %+v, %v", r, err)
	}
	if v, ok, err := p.GetKVValue(ctx, id, "k"); err != nil || !ok || v != "v1" {
		t.Fatalf("KV after prune = %q, %v, %v", v, ok, err)
	}
	_, err = p.PruneExecutions(ctx, "prune-none", provider.PruneOptions{})
	admWantKind(t, err, provider.ErrNotFound, "PruneExecutions(unknown)", "not found")

	// Bulk: every instance (nil ids), limited; unknown ids are not counted.
	admCreate(t, p, "prune-b1", "", []int{1, 1, 1}, provider.StatusCompleted)
	admCreate(t, p, "prune-b2", "", []int{1, 1}, "")
	r, err = p.PruneExecutionsBulk(ctx, provider.InstanceFilter{InstanceIDs: []string{"prune-b1", "prune-none", "prune-b1"}}, provider.PruneOptions{})
	if err != nil || r != (provider.PruneResult{InstancesProcessed: 1, ExecutionsDeleted: 2, EventsDeleted: 2}) {
		t.Fatalf("bulk prune by ids = %+v, %v", r, err)
	}
	r, err = p.PruneExecutionsBulk(ctx, provider.InstanceFilter{Limit: 2}, provider.PruneOptions{})
	if err != nil || r.InstancesProcessed != 2 {
		t.Fatalf("bulk prune limit 2 = %+v, %v", r, err)
	}
	r, err = p.PruneExecutionsBulk(ctx, provider.InstanceFilter{}, provider.PruneOptions{})
	if err != nil || r != (provider.PruneResult{InstancesProcessed: 3, ExecutionsDeleted: 1, EventsDeleted: 1}) {
		t.Fatalf("bulk prune of everything = %+v, %v", r, err)
	}
	future := uint64(time.Now().Add(time.Hour).UnixMilli())
	r, err = p.PruneExecutionsBulk(ctx, provider.InstanceFilter{CompletedBeforeMs: future}, provider.PruneOptions{})
	if err != nil || r.InstancesProcessed != 1 {
		t.Fatalf("bulk prune of completed instances = %+v, %v; want only prune-b1", r, err)
	}
}

func TestAdminDeleteBulk(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	admCreate(t, p, "bulk-c", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "bulk-f", "", []int{1}, provider.StatusFailed)
	admCreate(t, p, "bulk-can", "", []int{1}, provider.StatusContinuedAsNew)
	admCreate(t, p, "bulk-run", "", []int{1}, "")
	admCreate(t, p, "bulk-parent", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "bulk-kid", "bulk-parent", []int{2}, provider.StatusCompleted)
	admCreate(t, p, "bulk-grandkid", "bulk-kid", []int{3}, provider.StatusCompleted)
	admCreate(t, p, "bulk-busy", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "bulk-busy-kid", "bulk-busy", []int{1}, "")
	cutoff := uint64(time.Now().UnixMilli()) + 1

	// Sub-orchestrations and running trees are skipped, roots cascade.
	r, err := p.DeleteInstanceBulk(ctx, provider.InstanceFilter{InstanceIDs: []string{"bulk-kid", "bulk-run", "bulk-busy", "bulk-parent"}})
	if err != nil || r != (provider.DeleteInstanceResult{InstancesDeleted: 3, ExecutionsDeleted: 3, EventsDeleted: 6}) {
		t.Fatalf("bulk delete by ids = %+v, %v", r, err)
	}
	time.Sleep(5 * time.Millisecond) // lets the server clock move on: bulk-late gets a later creation time
	admCreate(t, p, "bulk-late", "", []int{1}, provider.StatusCompleted)

	r, err = p.DeleteInstanceBulk(ctx, provider.InstanceFilter{Limit: 2, CompletedBeforeMs: cutoff})
	if err != nil || r.InstancesDeleted != 2 {
		t.Fatalf("bulk delete limit 2 = %+v, %v", r, err)
	}
	r, err = p.DeleteInstanceBulk(ctx, provider.InstanceFilter{CompletedBeforeMs: cutoff})
	if err != nil || r.InstancesDeleted != 1 {
		t.Fatalf("bulk delete of the rest before the cutoff = %+v, %v", r, err)
	}
	left, err := p.ListInstances(ctx)
	slices.Sort(left)
	if want := []string{"bulk-busy", "bulk-busy-kid", "bulk-late", "bulk-run"}; err != nil || !slices.Equal(left, want) {
		t.Fatalf("left after bulk deletes = %q, %v; want %q", left, err, want)
	}
	if r, err = p.DeleteInstanceBulk(ctx, provider.InstanceFilter{}); err != nil || r.InstancesDeleted != 1 {
		t.Fatalf("bulk delete of everything terminal = %+v, %v; want bulk-late only", r, err)
	}
	if r, err = p.DeleteInstanceBulk(ctx, provider.InstanceFilter{InstanceIDs: []string{}}); err != nil || r.InstancesDeleted != 0 {
		t.Fatalf("bulk delete with an empty id list = %+v, %v", r, err)
	}
}

// admCreateMany creates instances with one execution of one event each, their parents and final
// statuses given by spec (id -> {parent, status}), in batches: enqueue every start, then fetch and
// ack whatever comes.
func admCreateMany(t *testing.T, p *redisprovider.Provider, spec map[string][2]string) {
	t.Helper()
	ctx := context.Background()
	for id, ps := range spec {
		s := provider.StartOrchestration{Instance: id, Orchestration: "AdmOrch", Input: "{}", Version: admPtr("1.0.0"), ExecutionID: 1}
		if ps[0] != "" {
			s.ParentInstance = admPtr(ps[0])
		}
		if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: s}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range spec {
		it, err := p.FetchOrchestrationItem(ctx, admLock, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %+v, %v", it, err)
		}
		id := it.Item.Instance
		meta := provider.ExecutionMetadata{Status: spec[id][1], OrchestrationName: "AdmOrch", OrchestrationVersion: "1.0.0",
			ParentInstanceID: spec[id][0]}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: admEvents(id, 1, 1, 1), Metadata: meta}); err != nil {
			t.Fatal(err)
		}
	}
}

// Bulk delete walks the terminal status indexes page by page: eligible roots behind more than a
// page of ineligible entries are found, and a large tree is deleted in one call.
func TestAdminDeleteBulkAcrossPages(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	ctx := context.Background()
	// A completed root whose tree holds a running instance, with 520 completed children.
	admCreate(t, p, "holder", "", []int{1}, provider.StatusCompleted)
	spec := map[string][2]string{"holder-run": {"holder", ""}}
	for i := range 520 {
		spec[fmt.Sprintf("holder-kid-%03d", i)] = [2]string{"holder", provider.StatusCompleted}
	}
	admCreateMany(t, p, spec)
	admCreateMany(t, p, map[string][2]string{"late-1": {"", provider.StatusCompleted}, "late-2": {"", provider.StatusFailed},
		"late-3": {"", provider.StatusCompleted}})

	r, err := p.DeleteInstanceBulk(ctx, provider.InstanceFilter{})
	if err != nil || r != (provider.DeleteInstanceResult{InstancesDeleted: 3, ExecutionsDeleted: 3, EventsDeleted: 3}) {
		t.Fatalf("bulk delete = %+v, %v; want the 3 late roots", r, err)
	}
	if m := admMetrics(t, p); m.TotalInstances != 522 || m.TotalExecutions != 522 || m.TotalEvents != 522 {
		t.Fatalf("metrics = %+v, want 522 instances, executions and events", m)
	}
	r, err = p.DeleteInstance(ctx, "holder", true)
	if err != nil || r != (provider.DeleteInstanceResult{InstancesDeleted: 522, ExecutionsDeleted: 522, EventsDeleted: 522}) {
		t.Fatalf("delete of the large tree = %+v, %v", r, err)
	}
	if m := admMetrics(t, p); m != (provider.SystemMetrics{}) {
		t.Fatalf("metrics after deleting everything = %+v", m)
	}
}
