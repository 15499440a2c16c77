package redisprovider_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// namespaceDigest is every key of the provider's namespace (all partitions and the root) with a
// digest of its value and TTL: equal digests, nothing written.
func namespaceDigest(t *testing.T, p *redisprovider.Provider) string {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	var lines []string
	match := "{" + strings.NewReplacer("*", `\*`, "?", `\?`, "[", `\[`).Replace(p.Keyspace().Namespace()) + ":*"
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			dump, _ := c.Dump(ctx, k).Result()
			ttl, _ := c.PTTL(ctx, k).Result()
			mu.Lock()
			lines = append(lines, fmt.Sprintf("%s %x %v", k, dump, ttl > 0))
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := p.Client().(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, p.Client())
	}
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestPartitionsCreatedByNew: the first New with Options.Partitions creates the namespace's root
// record and every partition's record; a later New with 0 adopts the count.
func TestPartitionsCreatedByNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	ks := p.Keyspace()
	if ks.Partitions() != 12 {
		t.Fatalf("Partitions() = %d, want 12", ks.Partitions())
	}
	root, err := p.Client().HGetAll(ctx, ks.RootMeta()).Result()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := dxredis.PartitionTags(ks.Namespace(), 12)
	braced := make([]string, len(want))
	for i, tag := range want {
		braced[i] = "{" + tag + "}"
	}
	if root["format"] != "2" || root["partitions"] != "12" || root["tags"] != strings.Join(braced, " ") {
		t.Fatalf("root record %v, want format 2, 12 partitions, tags %q", root, braced)
	}
	for part := range 12 {
		m, err := p.Client().HGetAll(ctx, ks.Meta(part)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if m["format"] != "2" || m["partitions"] != "12" || m["tags"] != braced[part] {
			t.Fatalf("partition %d's record %v", part, m)
		}
		if s := dxredis.Slot(ks.Meta(part)); s < part*dxredis.Slots/12 || s >= (part+1)*dxredis.Slots/12 {
			t.Fatalf("partition %d is in slot %d, outside its twelfth", part, s)
		}
	}
	q := peerProvider(t, p, redisprovider.Options{})
	if q.Keyspace().Partitions() != 12 || !slices.Equal(q.Keyspace().Tags(), want) {
		t.Fatalf("New with Partitions 0: %d partitions %q, want the namespace's 12", q.Keyspace().Partitions(), q.Keyspace().Tags())
	}
}

// TestPartitionCountMismatchRefused: a provider configured with another partition count than its
// namespace's is refused by New with a *PartitionError, and writes nothing; a bad count is
// invalid input.
func TestPartitionCountMismatchRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, created := range []int{12, 1} {
		t.Run(fmt.Sprint(created), func(t *testing.T) {
			p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: created})
			// Data, so that a namespace of one partition has its record too.
			if err := p.EnqueueForOrchestrator(ctx, layoutStart("x"), 0); err != nil {
				t.Fatal(err)
			}
			before := namespaceDigest(t, p)
			for _, n := range []int{4, 256, 1, 12} {
				if n == created {
					continue
				}
				opts := redisprovider.Options{Namespace: p.Keyspace().Namespace(), Partitions: n, Logger: quietLogger}
				var q *redisprovider.Provider
				var err error
				if cc, ok := p.Client().(*redis.ClusterClient); ok {
					q, err = redisprovider.NewFromClient(ctx, cc, opts)
				} else {
					opts.Addr = p.Client().(*redis.Client).Options().Addr
					q, err = redisprovider.New(ctx, opts)
				}
				if err == nil {
					_ = q.Close()
					t.Fatalf("New with %d partitions on a namespace of %d: no error", n, created)
				}
				var pe *redisprovider.PartitionError
				if !errors.As(err, &pe) || pe.Want != n || pe.Found != created || !errors.Is(err, provider.ErrInvalidInput) {
					t.Fatalf("New with %d partitions on a namespace of %d: %v, want a PartitionError", n, created, err)
				}
				if !strings.Contains(err.Error(), "Options.Partitions") {
					t.Errorf("the error does not say what to change: %v", err)
				}
			}
			if after := namespaceDigest(t, p); after != before {
				t.Fatalf("refused providers wrote:\nbefore\n%s\nafter\n%s", before, after)
			}
		})
	}
	for _, n := range []int{-1, 257} {
		_, err := redisprovider.New(ctx, redisprovider.Options{Addr: miniredis.RunT(t).Addr(), Partitions: n, Logger: quietLogger})
		if !errors.Is(err, provider.ErrInvalidInput) {
			t.Errorf("Partitions %d: %v, want ErrInvalidInput", n, err)
		}
	}
}

// TestPartitionRecordMissingRefusesWrites: a partition without its record (lost keys, or tags of
// another count) refuses every write with a PartitionError instead of writing into a slot no
// process of the namespace reads.
func TestPartitionRecordMissingRefusesWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	skipFsck(t)
	part := p.Keyspace().PartitionOf("lost")
	if err := p.Client().Del(ctx, p.Keyspace().Meta(part)).Err(); err != nil {
		t.Fatal(err)
	}
	err := p.EnqueueForOrchestrator(ctx, layoutStart("lost"), 0)
	var pe *redisprovider.PartitionError
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrInvalidInput) {
		t.Fatalf("enqueue into a partition without its record: %v, want a PartitionError", err)
	}
	if n := p.Client().Exists(ctx, p.Keyspace().Messages("lost")).Val(); n != 0 {
		t.Fatal("the refused enqueue wrote its message")
	}
}

// partTree starts root with children named explicitly (so they live in other partitions), by one
// ack of root's first turn; it returns the children's ids.
func partTree(t *testing.T, p *redisprovider.Provider, root string, n int) []string {
	t.Helper()
	ctx := context.Background()
	layoutEnqueue(t, p, layoutStart(root))
	it, err := p.FetchOrchestrationItem(ctx, time.Minute, 0, nil)
	if err != nil || it == nil || it.Item.Instance != root {
		t.Fatalf("fetch %s: %+v %v", root, it, err)
	}
	var kids []string
	var items []provider.WorkItem
	for i := range n {
		kid := fmt.Sprintf("%s-kid-%d", root, i)
		kids = append(kids, kid)
		items = append(items, provider.WorkItem{Kind: provider.StartOrchestration{Instance: kid, Orchestration: "O", Input: "{}",
			ParentInstance: &root, ParentID: ptrU64(uint64(i + 2)), ExecutionID: 1}})
	}
	if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{layoutStarted(root, 1)}, OrchestratorItems: items, Metadata: layoutRunning()}); err != nil {
		t.Fatal(err)
	}
	return kids
}

func ptrU64(v uint64) *uint64 { return &v }

// finishKids fetches every child's start (each exactly once, with one start message) and
// completes it, sending its completion to root; root's turns, as they come, take the completions:
// each child's arrives exactly once.
func finishKids(t *testing.T, p *redisprovider.Provider, root string, kids []string) {
	t.Helper()
	ctx := context.Background()
	seen, got := map[string]int{}, map[uint64]int{}
	md := func(status, parent string) provider.ExecutionMetadata {
		return provider.ExecutionMetadata{Status: status, OrchestrationName: "O", OrchestrationVersion: "1.0.0", ParentInstanceID: parent}
	}
	done := func() int {
		n := 0
		for _, c := range got {
			n += c
		}
		return n
	}
	for len(seen) < len(kids) || done() < len(kids) {
		it, err := p.FetchOrchestrationItem(ctx, time.Minute, 10*time.Second, nil)
		if err != nil || it == nil {
			t.Fatalf("fetch: %+v %v (children seen %v, completions %v)", it, err, seen, got)
		}
		if it.Item.Instance == root {
			for _, m := range it.Item.Messages {
				if c, ok := m.Kind.(provider.SubOrchCompleted); ok {
					got[c.ParentID]++
				}
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, Metadata: md(provider.StatusRunning, "")}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		seen[it.Item.Instance]++
		if len(it.Item.Messages) != 1 {
			t.Fatalf("child %s: %d messages, want its one start", it.Item.Instance, len(it.Item.Messages))
		}
		parentID := it.Item.Messages[0].Kind.(provider.StartOrchestration).ParentID
		c := provider.WorkItem{Kind: provider.SubOrchCompleted{ParentInstance: root, ParentExecutionID: 1, ParentID: *parentID, Result: `"ok"`}}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{layoutStarted(it.Item.Instance, 1)}, OrchestratorItems: []provider.WorkItem{c}, Metadata: md(provider.StatusCompleted, root)}); err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range kids {
		if seen[k] != 1 || got[uint64(i+2)] != 1 {
			t.Fatalf("child %s started %d times, its completion arrived %d times; want once each (all: %v, %v)", k, seen[k], got[uint64(i+2)], seen, got)
		}
	}
	if kids, err := p.ListChildren(ctx, root); err != nil || len(kids) != len(seen) {
		t.Fatalf("ListChildren(%s) = %v, %v, want its %d children", root, kids, err, len(seen))
	}
}

// outboxEntries counts the entries of every outbox of the namespace.
func outboxEntries(t *testing.T, p *redisprovider.Provider) int {
	t.Helper()
	n := 0
	for part := range p.Keyspace().Partitions() {
		pre := p.Keyspace().Prefix(part)
		for d := range p.Keyspace().Partitions() {
			n += int(p.Client().LLen(context.Background(), pre+"ob:"+strconv.Itoa(d)).Val())
		}
	}
	return n
}

// TestForwardingStoppedAtEachStep: messages to other partitions survive a forward that stops
// before it reads the outboxes (a crash between the commit and the forward) or between the applies
// and the trim, and are delivered exactly once by the next forward, also by two forwarders at once.
// Not parallel: it sets the package's forwarding hooks.
func TestForwardingStoppedAtEachStep(t *testing.T) {
	ctx := context.Background()
	for _, stop := range []string{"before forward", "before trim"} {
		t.Run(stop, func(t *testing.T) {
			p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
			halt := func(int) bool { return false }
			if stop == "before forward" {
				redisprovider.SetForwardHooks(halt, nil)
			} else {
				redisprovider.SetForwardHooks(nil, halt)
			}
			t.Cleanup(func() { redisprovider.SetForwardHooks(nil, nil) })
			kids := partTree(t, p, "root", 16)
			if outboxEntries(t, p) == 0 {
				t.Fatal("no outbox entries after a turn that started children in other partitions")
			}
			if stop == "before forward" {
				for _, k := range kids {
					queued := p.Client().Exists(ctx, p.Keyspace().Messages(k)).Val() == 1
					if local := p.Keyspace().PartitionOf(k) == p.Keyspace().PartitionOf("root"); queued != local {
						t.Fatalf("child %s (in root's partition: %v) has its start queued: %v before the forward", k, local, queued)
					}
				}
			}
			redisprovider.SetForwardHooks(nil, nil)
			// Two forwarders at once, as after a crash every sweeping process might.
			q := peerProvider(t, p, redisprovider.Options{})
			var wg sync.WaitGroup
			for _, f := range []*redisprovider.Provider{p, q} {
				wg.Go(func() {
					if err := f.ForwardAll(ctx); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if n := outboxEntries(t, p); n != 0 {
				t.Fatalf("%d outbox entries left after forwarding", n)
			}
			finishKids(t, p, "root", kids)
		})
	}
}

// TestForwardCrashChild is the child process of TestForwardingSurvivesSigkill: it acks root's
// first turn (starting children in other partitions) and kills itself with SIGKILL at the step
// DXREDIS_FWD_KILL names.
func TestForwardCrashChild(t *testing.T) {
	step := os.Getenv("DXREDIS_FWD_KILL")
	if step == "" {
		t.Skip("the child of TestForwardingSurvivesSigkill")
	}
	kill := func(int) bool {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process
	}
	if step == "commit" {
		redisprovider.SetForwardHooks(kill, nil)
	} else {
		redisprovider.SetForwardHooks(nil, kill)
	}
	p, err := redisprovider.New(context.Background(), redisprovider.Options{Addr: os.Getenv("DXREDIS_FWD_ADDR"),
		Namespace: os.Getenv("DXREDIS_FWD_NS"), Logger: quietLogger})
	if err != nil {
		t.Fatal(err)
	}
	partTree(t, p, "root", 16)
	t.Fatal("the process was not killed")
}

// TestForwardingSurvivesSigkill: a process SIGKILLed after it committed a turn with messages for
// other partitions, before it forwarded them (or before it trimmed what it forwarded), leaves them
// to the sweeps of the processes that fetch: every child starts once, every completion arrives once.
func TestForwardingSurvivesSigkill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	if backend() == "cluster" {
		t.Skip("the child process opens one server") // covered on one server and miniredis
	}
	redisprovider.SetSweep(100*time.Millisecond, 50*time.Millisecond)
	t.Cleanup(func() { redisprovider.SetSweep(5*time.Second, 2*time.Second) })
	for _, step := range []string{"commit", "trim"} {
		t.Run(step, func(t *testing.T) {
			p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
			addr := p.Client().(*redis.Client).Options().Addr
			cmd := exec.Command(os.Args[0], "-test.run=^TestForwardCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "DXREDIS_FWD_KILL="+step, "DXREDIS_FWD_ADDR="+addr, "DXREDIS_FWD_NS="+p.Keyspace().Namespace())
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want it killed by SIGKILL; output:\n%s", err, out)
			}
			if outboxEntries(t, p) == 0 {
				t.Fatal("no outbox entries left by the killed process")
			}
			// This process fetches: its sweeps forward what the killed one left.
			finishKids(t, p, "root", kidsOf("root", 16))
			waitFor(t, 10*time.Second, "outboxes drained", func() bool { return outboxEntries(t, p) == 0 })
		})
	}
}

func kidsOf(root string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-kid-%d", root, i)
	}
	return out
}

// TestDropNamespaceEveryPartition: DropNamespace deletes the keys of every partition and the root
// record, and no key of another namespace whose name starts alike.
func TestDropNamespaceEveryPartition(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	skipFsck(t) // dropped
	partTree(t, p, "root", 8)
	other := "{" + p.Keyspace().Namespace() + ":0}-not-ours"
	if err := p.Client().Set(ctx, other, "stays", 0).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Client().Del(context.Background(), other) })
	if _, err := redisprovider.DropNamespace(ctx, p.Client(), p.Keyspace().Namespace()); err != nil {
		t.Fatal(err)
	}
	if left := namespaceDigest(t, p); left == "" || strings.Count(left, "\n") != 0 || !strings.HasPrefix(left, other+" ") {
		t.Fatalf("after DropNamespace: %q, want only %s", left, other)
	}
}

// TestCrossSlotScriptFailsLoudly: on a cluster (also a one-node cluster holding every slot, make
// test-partitions), a script that touches a key of another partition than the one it was called
// for fails instead of writing: the suites that pass on a cluster at P > 1 therefore touch one
// partition per script.
func TestCrossSlotScriptFailsLoudly(t *testing.T) {
	t.Parallel()
	if backend() != "cluster" {
		t.Skip("a cluster's checks (DXREDIS_TEST_CLUSTER)")
	}
	ctx := context.Background()
	p, _ := newTestProviderWith(t, redisprovider.Options{Partitions: 12})
	ks := p.Keyspace()
	own, other := ks.Meta(0), ks.Prefix(1)+"crossed"
	err := p.Client().Eval(ctx, "#!lua\nredis.call('SET', ARGV[1], 'x')\nreturn redis.call('HGET', KEYS[1], 'format')", []string{own}, other).Err()
	if err == nil || !strings.Contains(err.Error(), "slot") {
		t.Fatalf("a script touching another partition's key: %v, want a cross-slot error", err)
	}
	if n := p.Client().Exists(ctx, other).Val(); n != 0 {
		t.Fatal("the refused script wrote the other partition's key")
	}
}
