package redisprovider_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// fcallFailures sums cmdstat_fcall* failed_calls and rejected_calls of a node (INFO commandstats).
func fcallFailures(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_fcall") && !strings.HasPrefix(line, "cmdstat_evalsha") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(line[strings.Index(line, ":")+1:]), ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "failed_calls" || k == "rejected_calls" {
				x, _ := strconv.Atoi(v)
				n += x
			}
		}
	}
	return n
}

// TestScriptWaitsForSlotMigration: a partition's slot is migrated by hand (CLUSTER SETSLOT
// IMPORTING/MIGRATING, then MIGRATE of half its keys) and left split between two primaries. A call
// on that partition runs nowhere meanwhile: every try fails at the slot probe before it writes
// (lib.lua, dx_setup), and the provider retries; once the rest of the keys moved and the slot is
// given to its new node, the call completes, exactly once, and fsck is clean. Needs a throw-away
// cluster (it moves a slot): DXREDIS_TEST_CLUSTER_DISPOSABLE=1 (make test-scale).
func TestScriptWaitsForSlotMigration(t *testing.T) {
	if os.Getenv("DXREDIS_TEST_CLUSTER") == "" || os.Getenv("DXREDIS_TEST_CLUSTER_DISPOSABLE") == "" {
		t.Skip("needs a throw-away cluster: DXREDIS_TEST_CLUSTER and DXREDIS_TEST_CLUSTER_DISPOSABLE=1 (make test-scale)")
	}
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	ks := p.Keyspace()
	var ids []string
	for i := 0; len(ids) < 20; i++ {
		if id := fmt.Sprint("mig-", i); ks.PartitionOf(id) == 0 {
			ids = append(ids, id)
			layoutEnqueue(t, p, layoutStart(id))
		}
	}
	cc := p.Client().(*redis.ClusterClient)
	slot := dxredis.Slot(ks.Meta(0))
	src, err := cc.MasterForKey(ctx, ks.Meta(0))
	if err != nil {
		t.Fatal(err)
	}
	var dst *redis.Client
	_ = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		if c.Options().Addr != src.Options().Addr && dst == nil {
			dst = c
		}
		return nil
	})
	if dst == nil {
		t.Skip("needs two primaries")
	}
	srcID, dstID := src.Do(ctx, "CLUSTER", "MYID").Val(), dst.Do(ctx, "CLUSTER", "MYID").Val()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	host, port, _ := strings.Cut(dst.Options().Addr, ":")
	migrate := func(keys []string) {
		t.Helper()
		if len(keys) == 0 {
			return
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must("MIGRATE", src.Do(ctx, args...).Err())
	}
	must("IMPORTING", dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must("MIGRATING", src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	keys, err := src.ClusterGetKeysInSlot(ctx, slot, 10000).Result()
	must("GETKEYSINSLOT", err)
	if len(keys) < 4 {
		t.Fatalf("only %d keys in the partition's slot", len(keys))
	}
	// The half that moves first holds the meta key (what each call declares): calls then reach the
	// importing node too (ASK), where the other half is missing.
	for i, k := range keys {
		if k == ks.Meta(0) {
			keys[0], keys[i] = keys[i], keys[0]
		}
	}
	migrate(keys[:len(keys)/2])

	// Calls on the split partition: a new instance's start, and a fetch.
	failed := fcallFailures(t, src) + fcallFailures(t, dst)
	fresh := ids[0] + "-fresh"
	for i := 0; ks.PartitionOf(fresh) != 0; i++ {
		fresh = fmt.Sprintf("mig-fresh-%d", i)
	}
	done := make(chan error, 1)
	go func() { done <- p.EnqueueForOrchestrator(ctx, layoutStart(fresh), 0) }()
	fetched := make(chan *provider.LockedOrchestrationItem, 1)
	go func() {
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
		if err != nil {
			t.Errorf("fetch while the slot moved: %v", err)
		}
		fetched <- it
	}()
	waitFor(t, 10*time.Second, "the call to be refused by the split slot three times", func() bool {
		return fcallFailures(t, src)+fcallFailures(t, dst) >= failed+3
	})
	select {
	case err := <-done:
		t.Fatalf("an enqueue on a partition whose slot is split between two nodes returned %v; want it to wait for the move", err)
	case it := <-fetched:
		t.Fatalf("a fetch on a partition whose slot is split between two nodes returned %+v; want it to wait for the move", it)
	default:
	}

	// The move ends: the rest of the keys, then the slot's owner on both nodes.
	keys, err = src.ClusterGetKeysInSlot(ctx, slot, 10000).Result()
	must("GETKEYSINSLOT", err)
	migrate(keys)
	must("SETSLOT NODE (importing)", dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	must("SETSLOT NODE (migrating)", src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the call after the move: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not complete after the move")
	}
	// Every instance of the partition is there once, the fresh one included.
	seen := map[string]int{}
	first := <-fetched
	for range len(ids) + 1 {
		it := first
		if first != nil {
			first = nil
		} else if it, err = p.FetchOrchestrationItem(ctx, time.Minute, 5*time.Second, nil); err != nil || it == nil {
			t.Fatalf("fetch after the move: %+v %v (seen %v)", it, err, seen)
		}
		seen[it.Item.Instance]++
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{layoutStarted(it.Item.Instance, 1)}, Metadata: layoutRunning()}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range append(ids, fresh) {
		if seen[id] != 1 {
			t.Fatalf("instance %s fetched %d times after the move, want once (all: %v)", id, seen[id], seen)
		}
	}
	stats, err := p.GetPartitionStats(ctx)
	if err != nil || stats[0].Node != dst.Options().Addr {
		t.Fatalf("partition 0 after the move: %+v, %v; want it on %s", stats[0], err, dst.Options().Addr)
	}
}
