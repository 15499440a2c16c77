package redisprovider_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// fsckWorld fills p with one of each state fsck distinguishes: "a" running with a queued
// activity and a delayed event, "b" started but not fetched, "c" locked by a fetch, "d"
// finished. It returns the activity's worker item number.
func fsckWorld(t *testing.T, p *redisprovider.Provider) string {
	t.Helper()
	ctx := context.Background()
	layoutEnqueue(t, p, layoutStart("a"))
	it, err := p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil)
	if err != nil || it == nil {
		t.Fatalf("fetch a: %+v, %v", it, err)
	}
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: "a", ExecutionID: 1, ID: 2, Name: "Greet", Input: "1"}}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{layoutStarted("a", 1)}, WorkerItems: []provider.WorkItem{act}, Metadata: layoutRunning()}); err != nil {
		t.Fatal(err)
	}
	ev := provider.WorkItem{Kind: provider.ExternalRaised{Instance: "a", Name: "later", Data: "1"}}
	if err := p.EnqueueForOrchestrator(ctx, ev, time.Hour); err != nil {
		t.Fatal(err)
	}
	layoutEnqueue(t, p, layoutStart("d"))
	if err := layoutTurn(t, p, "d", 1, []provider.Event{layoutStarted("d", 1)},
		provider.ExecutionMetadata{Status: provider.StatusCompleted, OrchestrationName: "O", OrchestrationVersion: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	layoutEnqueue(t, p, layoutStart("c"))
	if it, err := p.FetchOrchestrationItem(ctx, 30*time.Second, 0, nil); err != nil || it == nil || it.Item.Instance != "c" {
		t.Fatalf("fetch c: %+v, %v", it, err)
	}
	layoutEnqueue(t, p, layoutStart("b"))
	items, err := p.Client().ZRange(ctx, p.Keyspace().Prefix(0)+"wq:ready:-", 0, -1).Result()
	if err != nil || len(items) != 1 {
		t.Fatalf("worker ready set: %q, %v", items, err)
	}
	return items[0]
}

func fsckCodes(t *testing.T, p *redisprovider.Provider) []string {
	t.Helper()
	rep, err := p.Fsck(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, v := range rep.Violations {
		codes = append(codes, v.Code+" "+v.Subject)
		if !strings.Contains(v.Detail, p.Keyspace().Prefix(0)) {
			t.Errorf("%s %q: the detail names no key: %s", v.Code, v.Subject, v.Detail)
		}
	}
	slices.Sort(codes)
	return slices.Compact(codes)
}

// Fsck finds nothing in a namespace holding every state, and finds each kind of damage, naming
// the instance or item and the keys.
func TestFsckFindsEachDamage(t *testing.T) {
	t.Parallel()
	clean := newTestProvider(t)
	fsckWorld(t, clean)
	rep, err := clean.Fsck(context.Background())
	if err != nil || len(rep.Violations) != 0 {
		t.Fatalf("fsck of a healthy namespace: %+v, %v", rep.Violations, err)
	}
	if rep.Instances != 4 || rep.Items != 1 || rep.Keys < 10 {
		t.Fatalf("fsck checked %d instances, %d items, %d keys; want 4, 1 and every key", rep.Instances, rep.Items, rep.Keys)
	}

	cases := []struct {
		name   string
		damage []string // a Redis command; "$P" is the key prefix, "$S" the worker item's number
		want   []string
	}{
		{"lock unindexed", []string{"ZREM", "$Poq:locked", "c"}, []string{"lock_unindexed c"}},
		{"ready entry lost", []string{"ZREM", "$Poq:ready:-", "b"}, []string{"messages_stranded b"}},
		{"ready entry without work", []string{"ZADD", "$Poq:ready:-", "1", "ghost"}, []string{"ready_without_messages ghost"}},
		{"record unlisted", []string{"ZREM", "$Pidx:instances", "a"}, []string{"record_unlisted a"}},
		{"status unindexed", []string{"ZREM", "$Pidx:status:Running", "a"}, []string{"status_unindexed a"}},
		{"status stale", []string{"ZADD", "$Pidx:status:Failed", "1", "a"}, []string{"status_stale a"}},
		{"record deleted", []string{"DEL", "$Pi:d"}, []string{"listed_without_record d", "status_without_record d"}},
		{"open count", []string{"HSET", "$Pi:a", "open", "2"}, []string{"open_children_mismatch a"}},
		{"orphaned keys", []string{"HSET", "$Pcs:gone", "v", "1"}, []string{"orphaned_keys gone"}},
		{"worker item unindexed", []string{"ZREM", "$Pwq:ready:-", "$S"}, []string{"item_placement $S"}},
		{"worker index entry without item", []string{"ZADD", "$Pwq:due", "1", "999999"}, []string{"item_index_without_item 999999"}},
		{"gate late", []string{"SET", "$Poq:gate", "99999999999999"}, []string{"gate_late "}},
		{"format-1 key usable", []string{"DEL", "$Pseq"}, []string{"format_record "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := newTestProvider(t)
			skipFsck(t)
			s := fsckWorld(t, p)
			repl := strings.NewReplacer("$P", p.Keyspace().Prefix(0), "$S", s)
			args := make([]any, len(c.damage))
			for i, a := range c.damage {
				args[i] = repl.Replace(a)
			}
			if err := p.Client().Do(context.Background(), args...).Err(); err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(c.want))
			for i, w := range c.want {
				want[i] = repl.Replace(w)
			}
			if got := fsckCodes(t, p); !slices.Equal(got, want) {
				t.Fatalf("fsck found %q, want %q", got, want)
			}
		})
	}
}

// A damaged message hash: a body without its visibility entry is never delivered.
func TestFsckMessageWithoutVisibility(t *testing.T) {
	t.Parallel()
	p := newTestProvider(t)
	skipFsck(t)
	fsckWorld(t, p)
	ctx := context.Background()
	ks := p.Keyspace()
	seqs, err := p.Client().ZRange(ctx, ks.MessageVisibility("b"), 0, -1).Result()
	if err != nil || len(seqs) != 1 {
		t.Fatalf("messages of b: %q, %v", seqs, err)
	}
	p.Client().ZRem(ctx, ks.MessageVisibility("b"), seqs[0])
	got := fsckCodes(t, p)
	want := []string{"message_without_visibility b", "ready_without_messages b"}
	if !slices.Equal(got, want) {
		t.Fatalf("fsck found %q, want %q", got, want)
	}
}
