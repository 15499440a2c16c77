package redisprovider_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/internal/redistest"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// TestOutOfMemory: on a server over maxmemory (noeviction), reads still work, deletes and prunes
// still work (they free memory), and writes fail with a retryable error; once memory is back,
// writes work again. Both ways of running scripts: Functions and EVALSHA.
func TestOutOfMemory(t *testing.T) {
	t.Parallel()
	for _, disableFunctions := range []bool{false, true} {
		name := map[bool]string{false: "functions", true: "evalsha"}[disableFunctions]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			srv := redistest.Start(t)
			addr := srv.Addr()
			admin := redis.NewClient(&redis.Options{Addr: addr})
			defer admin.Close()
			p, err := redisprovider.New(ctx, redisprovider.Options{Addr: addr, Namespace: "oom", Logger: quietLogger,
				DisableFunctions: disableFunctions})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()

			// A completed hello instance, and a start still queued.
			if err := p.EnqueueForOrchestrator(ctx, obStart("done"), 0); err != nil {
				t.Fatal(err)
			}
			it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
			if err != nil || it == nil {
				t.Fatalf("fetch: %v %v", it, err)
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn1("done", "0.1.30", false)); err != nil {
				t.Fatal(err)
			}
			if err := p.EnqueueForOrchestrator(ctx, obCompletion("done"), 0); err != nil {
				t.Fatal(err)
			}
			if it, err = p.FetchOrchestrationItem(ctx, time.Minute, 0, nil); err != nil || it == nil {
				t.Fatalf("fetch: %v %v", it, err)
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn2("done")); err != nil {
				t.Fatal(err)
			}
			if err := p.EnqueueForOrchestrator(ctx, obStart("waiting"), 0); err != nil {
				t.Fatal(err)
			}

			if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			// Reads.
			if h, err := p.Read(ctx, "done"); err != nil || len(h) != 4 {
				t.Fatalf("read under OOM: %d events, %v", len(h), err)
			}
			if info, err := p.GetInstanceInfo(ctx, "done"); err != nil || info.Status != provider.StatusCompleted {
				t.Fatalf("instance info under OOM: %+v %v", info, err)
			}
			if ids, err := p.ListInstances(ctx); err != nil || len(ids) != 1 {
				t.Fatalf("list under OOM: %v %v", ids, err)
			}
			if d, err := p.GetQueueDepths(ctx); err != nil || d.OrchestratorQueue != 1 {
				t.Fatalf("queue depths under OOM: %+v %v", d, err)
			}
			if _, err := p.GetSystemMetrics(ctx); err != nil {
				t.Fatalf("metrics under OOM: %v", err)
			}
			// Writes are refused, retryable, and certainly not applied.
			err = p.EnqueueForOrchestrator(ctx, obStart("refused"), 0)
			if err == nil || !provider.IsRetryable(err) || errors.Is(err, provider.ErrOutcomeUnknown) {
				t.Fatalf("enqueue under OOM: %v, want retryable (not outcome unknown)", err)
			}
			if _, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil); err == nil || !provider.IsRetryable(err) {
				t.Fatalf("fetch under OOM: %v, want a retryable error", err)
			}
			// Deletes and prunes free memory, so they run.
			if _, err := p.PruneExecutions(ctx, "done", provider.PruneOptions{}); err != nil {
				t.Fatalf("prune under OOM: %v", err)
			}
			if res, err := p.DeleteInstance(ctx, "done", false); err != nil || res.InstancesDeleted != 1 {
				t.Fatalf("delete under OOM: %+v %v", res, err)
			}

			if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			it, err = p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
			if err != nil || it == nil || it.Item.Instance != "waiting" || len(it.Item.Messages) != 1 {
				t.Fatalf("fetch after OOM: %+v %v, want the queued start alone", it, err)
			}
		})
	}
}
