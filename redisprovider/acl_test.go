package redisprovider_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// readmeACL is the ACL rule docs/operations.md ("An ACL user for the provider") gives for a
// provider on namespace "orders" (keep both in sync).
const readmeACL = "on >s3cret resetkeys ~{orders:* resetchannels -@all +@read +@write +@scripting -@dangerous " +
	"+time +ping +hello +auth +config|get +wait +cluster|slots +cluster|shards +readonly"

// TestReadmeACLIsEnough: a provider logged in as the ACL user docs/operations.md describes runs a
// whole orchestration (enqueue, long-polling fetches, ack, activity, reads, admin, delete) without
// a permission error, and that user cannot touch other namespaces.
func TestReadmeACLIsEnough(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()
	if err := admin.Do(ctx, append([]any{"ACL", "SETUSER", "dxuser"}, toAny(strings.Fields(readmeACL))...)...).Err(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Username: "dxuser", Password: "s3cret",
		Namespace: "orders", Logger: quietLogger})
	if err != nil {
		t.Fatalf("New as the README's ACL user: %v", err)
	}
	defer p.Close()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the README's ACL user: %v", what, err)
		}
	}
	type fetched struct {
		it  *provider.LockedOrchestrationItem
		err error
	}
	got := make(chan fetched, 1)
	go func() {
		it, err := p.FetchOrchestrationItem(ctx, 5*time.Second, 5*time.Second, nil) // waits first: BLPOP
		got <- fetched{it, err}
	}()
	waitOrchWaiters(t, p, 1)
	must("enqueue", p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
		Instance: "o-1", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0))
	f := <-got
	it, err := f.it, f.err
	must("fetch", err)
	if it == nil {
		t.Fatal("fetch returned nothing")
	}
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "o-1", ExecutionID: 1, ID: 2, Name: "A", Input: "{}"}}
	must("ack", p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{{EventID: 1, InstanceID: "o-1", ExecutionID: 1, DuroxideVersion: "0.1.30",
			Kind: provider.OrchestrationStartedEvent{Name: "O", Version: "1.0.0", Input: "{}"}}},
		WorkerItems: []provider.WorkItem{act},
		Metadata:    provider.ExecutionMetadata{Status: provider.StatusRunning, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}}))
	w, err := p.FetchWorkItem(ctx, 5*time.Second, time.Second, nil, provider.TagFilterDefaultOnly())
	must("fetch work item", err)
	if w == nil {
		t.Fatal("work item fetch returned nothing")
	}
	done := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "o-1", ExecutionID: 1, ID: 2, Result: "{}"}}
	must("ack work item", p.AckWorkItem(ctx, w.LockToken, &done))
	_, err = p.Read(ctx, "o-1")
	must("read", err)
	_, err = p.GetSystemMetrics(ctx)
	must("metrics", err)
	_, err = p.ListInstances(ctx)
	must("list", err)
	_, err = p.DeleteInstance(ctx, "o-1", true)
	must("delete", err)
	// Commands the provider issues only with some options: WAIT (WaitReplicas).
	for _, cmd := range [][]any{{"WAIT", "0", "0"}} {
		if err := admin.Do(ctx, append([]any{"ACL", "DRYRUN", "dxuser"}, cmd...)...).Err(); err != nil {
			t.Errorf("ACL DRYRUN %v: %v", cmd, err)
		}
	}
	// Other namespaces stay out of reach.
	other, err := redisprovider.New(ctx, redisprovider.Options{Addr: srv.Addr(), Username: "dxuser", Password: "s3cret",
		Namespace: "payments", Logger: quietLogger})
	if err == nil {
		err = other.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.StartOrchestration{
			Instance: "p-1", Orchestration: "O", Input: "{}", ExecutionID: 1}}, 0)
		_ = other.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("enqueue on another namespace: got %v, want NOPERM", err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
