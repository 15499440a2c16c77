package redisprovider_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// versionsText renders VersionsInFlight's rows as "name version running held" lines.
func versionsText(t *testing.T, p *redisprovider.Provider) string {
	t.Helper()
	vs, err := p.VersionsInFlight(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s %s %d %d\n", v.Orchestration, v.Version, v.Running, v.Held)
		if v.OldestStart.After(v.NewestStart) || v.OldestStart.IsZero() {
			t.Errorf("%s %s: oldest start %v, newest %v", v.Orchestration, v.Version, v.OldestStart, v.NewestStart)
		}
	}
	return b.String()
}

// The versions in flight stay exact as instances start, complete, continue as new onto another
// version, are deleted, expire (retention) and are held.
func TestVersionsInFlightStayExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, mr := newTestProviderWith(t, redisprovider.Options{Retention: 300 * time.Millisecond})
	rt := dx.NewRuntime(p, dx.Options{PollTimeout: 100 * time.Millisecond, MinPollInterval: time.Millisecond, Logger: quietLogger})
	job := func(ctx dx.Context, in string) (string, error) {
		if _, err := dx.WaitEvent[string](ctx, "go").Await(ctx); err != nil {
			return "", err
		}
		if in == "can" {
			return "", dx.ContinueAsNew(ctx, "wait", dx.WithVersion("2.0.0"))
		}
		return in, nil
	}
	dx.RegisterVersion(rt, "Job", "1.0.0", job)
	dx.RegisterVersion(rt, "Job", "2.0.0", job)
	dx.Register(rt, "Other", job)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := rt.Shutdown(sctx); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(stop)
	c := dx.NewClient(p)
	waiting := func(id string, exec uint64) {
		t.Helper()
		waitFor(t, 20*time.Second, id+" to wait", func() bool {
			h, err := p.Read(ctx, id)
			return err == nil && len(h) > 0 && h[0].ExecutionID == exec && h[len(h)-1].EventType() == "ExternalSubscribed"
		})
	}
	start := func(name, id, in string, opts ...dx.StartOption) {
		t.Helper()
		if _, err := c.Start(ctx, name, in, append(opts, dx.WithInstanceID(id))...); err != nil {
			t.Fatal(err)
		}
		waiting(id, 1)
	}
	finish := func(id string) {
		t.Helper()
		if err := c.RaiseEvent(ctx, id, "go", "now"); err != nil {
			t.Fatal(err)
		}
	}
	want := func(s string) {
		t.Helper()
		if got := versionsText(t, p); got != s {
			t.Fatalf("versions in flight:\n%s\nwant\n%s", got, s)
		}
	}

	want("")
	began := time.Now()
	start("Job", "j1-a", "wait", dx.WithVersion("1.0.0"))
	start("Job", "j1-b", "wait", dx.WithVersion("1.0.0"))
	start("Job", "j1-c", "can", dx.WithVersion("1.0.0"))
	start("Job", "j2-a", "wait")
	start("Job", "j2-b", "wait")
	start("Other", "o-1", "wait")
	want("Job 1.0.0 3 0\nJob 2.0.0 2 0\nOther 1.0.0 1 0\n")
	vs, _ := p.VersionsInFlight(ctx)
	if d := vs[0].OldestStart.Sub(began); d < -time.Second || vs[0].NewestStart.After(time.Now().Add(time.Second)) {
		t.Fatalf("Job 1.0.0 started %v..%v, the test began at %v", vs[0].OldestStart, vs[0].NewestStart, began)
	}

	finish("j1-a") // completes
	if _, err := c.Wait(ctx, "j1-a"); err != nil {
		t.Fatal(err)
	}
	want("Job 1.0.0 2 0\nJob 2.0.0 2 0\nOther 1.0.0 1 0\n")

	canAt := time.Now()
	finish("j1-c") // continues as new onto 2.0.0
	waiting("j1-c", 2)
	want("Job 1.0.0 1 0\nJob 2.0.0 3 0\nOther 1.0.0 1 0\n")
	if vs, _ := p.VersionsInFlight(ctx); vs[1].NewestStart.Before(canAt.Add(-time.Second)) {
		t.Fatalf("Job 2.0.0's newest start %v: the continue-as-new's new execution began after %v", vs[1].NewestStart, canAt)
	}

	if _, err := p.DeleteInstance(ctx, "j2-a", true); err != nil { // deleted while running
		t.Fatal(err)
	}
	want("Job 1.0.0 1 0\nJob 2.0.0 2 0\nOther 1.0.0 1 0\n")

	finish("o-1") // completes, then its keys expire (retention)
	if _, err := c.Wait(ctx, "o-1"); err != nil {
		t.Fatal(err)
	}
	want("Job 1.0.0 1 0\nJob 2.0.0 2 0\n")
	if mr != nil {
		mr.FastForward(time.Second)
	}
	waitFor(t, 20*time.Second, "o-1 to expire", func() bool {
		n, err := p.Client().Exists(ctx, p.Keyspace().Instance("o-1")).Result()
		return err == nil && n == 0
	})
	want("Job 1.0.0 1 0\nJob 2.0.0 2 0\n")

	// Held: the runtime stopped, j1-b's next turn is fetched and held, as HoldOnNondeterminism does.
	stop()
	if err := p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: "j1-b", Name: "go", Data: `"x"`}}, 0); err != nil {
		t.Fatal(err)
	}
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 5*time.Second, nil)
	if err != nil || it == nil || it.Item.Instance != "j1-b" {
		t.Fatalf("fetch: %+v %v", it, err)
	}
	if err := p.HoldOrchestrationItem(ctx, it.LockToken, time.Hour, "nondeterminism at event 2"); err != nil {
		t.Fatal(err)
	}
	want("Job 1.0.0 1 1\nJob 2.0.0 2 0\n")
}

// The walk goes page by page (500 instances per script), counts instances between executions and
// orders versions semantically.
func TestVersionsInFlightPages(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	var starts []provider.WorkItem
	for i := range 1203 {
		v := []string{"2.0.0", "10.0.0", "1.0.0-rc.1"}[i%3]
		starts = append(starts, provider.WorkItem{Kind: provider.StartOrchestration{Instance: fmt.Sprintf("i-%04d", i), Orchestration: "O",
			Version: &v, Input: "{}", ExecutionID: 1}})
	}
	runStarts(t, p, starts)
	// Between a continue-as-new and its next turn an instance counts under the version it ran;
	// finished instances not at all.
	admCreate(t, p, "between", "", []int{1}, provider.StatusContinuedAsNew)
	admCreate(t, p, "done", "", []int{1}, provider.StatusCompleted)
	admCreate(t, p, "failed", "", []int{1}, provider.StatusFailed)
	want := "AdmOrch 1.0.0 1 0\nO 1.0.0-rc.1 401 0\nO 2.0.0 401 0\nO 10.0.0 401 0\n"
	if got := versionsText(t, p); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// runStarts enqueues every start, then runs each one's first turn, leaving it Running.
func runStarts(t *testing.T, p *redisprovider.Provider, starts []provider.WorkItem) {
	t.Helper()
	ctx := context.Background()
	version := map[string]string{}
	for _, it := range starts {
		s := it.Kind.(provider.StartOrchestration)
		version[s.Instance] = *s.Version
		if err := p.EnqueueForOrchestrator(ctx, it, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range starts {
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %+v, %v", it, err)
		}
		id, v := it.Item.Instance, version[it.Item.Instance]
		ev := provider.Event{EventID: 1, InstanceID: id, ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: v, Input: "{}"}}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{ev},
			Metadata: provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: v}}); err != nil {
			t.Fatal(err)
		}
	}
}
