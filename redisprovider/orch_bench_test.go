package redisprovider_test

// Benchmarks of the orchestration side of the provider, one per operation. Every iteration starts
// from the same state: fetch benchmarks abandon what they fetched, ack benchmarks remove the events
// they appended, so ns/op describes the operation and not a store that grows under it.
//
// Run against real Redis (numbers from miniredis mean nothing):
//
//	DXREDIS_TEST_ADDR=127.0.0.1:6379 go test ./redisprovider -run '^$' -bench 'Enqueue|FetchAck|AckHistory|FetchFiltered|Read|HelloInstance' -benchmem

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

const (
	obVersion = "0.1.30"
	obLock    = 30 * time.Second
)

var obPayload = `"` + strings.Repeat("x", 100) + `"` // a 100-byte JSON string, like dxbench's results

func obStart(instance string) provider.WorkItem {
	v := "1.0.0"
	return provider.WorkItem{Kind: provider.StartOrchestration{Instance: instance, Orchestration: "Hello",
		Input: `{"n":1}`, Version: &v, ExecutionID: 1}}
}

func obEvent(instance string, id uint64, src uint64, k provider.EventKind) provider.Event {
	e := provider.Event{EventID: id, InstanceID: instance, ExecutionID: 1,
		TimestampMs: uint64(time.Now().UnixMilli()), DuroxideVersion: obVersion, Kind: k}
	if src != 0 {
		e.SourceEventID = &src
	}
	return e
}

// obTurn1 is hello's first turn: OrchestrationStarted + ActivityScheduled and its worker item.
func obTurn1(instance string, pin string, withWorker bool) provider.OrchestrationAck {
	ack := provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{
			obEvent(instance, 1, 0, provider.OrchestrationStartedEvent{Name: "Hello", Version: "1.0.0", Input: `{"n":1}`}),
			obEvent(instance, 2, 0, provider.ActivityScheduledEvent{Name: "Hello", Input: `{"n":1}`}),
		},
		Metadata: provider.ExecutionMetadata{OrchestrationName: "Hello", OrchestrationVersion: "1.0.0",
			PinnedDuroxideVersion: semver.MustParse(pin)}}
	if withWorker {
		ack.WorkerItems = []provider.WorkItem{{Kind: provider.ActivityExecute{Instance: instance, ExecutionID: 1, ID: 2,
			Name: "Hello", Input: `{"n":1}`}}}
	}
	return ack
}

// obTurn2 is hello's last turn: ActivityCompleted + OrchestrationCompleted, status Completed.
func obTurn2(instance string) provider.OrchestrationAck {
	out := obPayload
	return provider.OrchestrationAck{ExecutionID: 1,
		HistoryDelta: []provider.Event{
			obEvent(instance, 3, 2, provider.ActivityCompletedEvent{Result: obPayload}),
			obEvent(instance, 4, 0, provider.OrchestrationCompletedEvent{Output: obPayload}),
		},
		Metadata: provider.ExecutionMetadata{OrchestrationName: "Hello", OrchestrationVersion: "1.0.0",
			Status: provider.StatusCompleted, Output: &out}}
}

func obCompletion(instance string) provider.WorkItem {
	return provider.WorkItem{Kind: provider.ActivityCompleted{Instance: instance, ExecutionID: 1, ID: 2, Result: obPayload}}
}

// obParallel runs f(0..n-1) on 8 goroutines (setup only; never timed).
func obParallel(b *testing.B, n int, f func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		b.Fatal(err)
	}
}

func obFetch(ctx context.Context, p provider.Provider, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	it, err := p.FetchOrchestrationItem(ctx, obLock, 0, filter)
	if err == nil && it == nil {
		err = fmt.Errorf("fetch returned nothing")
	}
	return it, err
}

// obCreate enqueues a start for instance and creates an instance through a real first turn
// (pinned to pin); extra, when non-nil, gives orchestrator items that turn leaves queued for the
// created instance. With setup running on several goroutines the fetch may pick another
// goroutine's start, so it returns the instance it created; filter keeps it from picking up
// instances created (and pinned) before.
func obCreate(ctx context.Context, p provider.Provider, instance, pin string, filter *provider.DispatcherCapabilityFilter, extra func(string) []provider.WorkItem) (string, error) {
	if err := p.EnqueueForOrchestrator(ctx, obStart(instance), 0); err != nil {
		return "", err
	}
	it, err := obFetch(ctx, p, filter)
	if err != nil {
		return "", err
	}
	created := it.Item.Instance
	ack := obTurn1(created, pin, false)
	if extra != nil {
		ack.OrchestratorItems = extra(created)
	}
	return created, p.AckOrchestrationItem(ctx, it.LockToken, ack)
}

func obPing(instance string) []provider.WorkItem {
	return []provider.WorkItem{{Kind: provider.ExternalRaised{Instance: instance, Name: "ping", Data: "{}"}}}
}

func BenchmarkEnqueueForOrchestrator(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		p := newTestProvider(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if err := p.EnqueueForOrchestrator(ctx, obStart("e-"+strconv.Itoa(i)), 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel8", func(b *testing.B) {
		p := newTestProvider(b)
		var n atomic.Int64
		b.SetParallelism(4) // 4 x GOMAXPROCS(2) = 8 goroutines on the reference machine
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := p.EnqueueForOrchestrator(ctx, obStart("e-"+strconv.FormatInt(n.Add(1), 10)), 0); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkFetchAckHello: one fetch + ack of each of hello's two turns, on a queue of b.N ready
// instances prepared before the timer starts (fetch cost does not depend on queue length).
func BenchmarkFetchAckHello(b *testing.B) {
	ctx := context.Background()
	b.Run("turn1", func(b *testing.B) {
		p := newTestProvider(b)
		obParallel(b, b.N, func(i int) error { return p.EnqueueForOrchestrator(ctx, obStart("h-"+strconv.Itoa(i)), 0) })
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			it, err := obFetch(ctx, p, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn1(it.Item.Instance, obVersion, true)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("turn2", func(b *testing.B) {
		p := newTestProvider(b)
		// Before the timer: b.N instances past turn 1, each with its ActivityCompleted queued.
		unpinnedOnly := obFilter(b, "0.0.0", "0.0.1")
		obParallel(b, b.N, func(i int) error {
			created, err := obCreate(ctx, p, "h-"+strconv.Itoa(i), obVersion, unpinnedOnly, nil)
			if err != nil {
				return err
			}
			return p.EnqueueForOrchestrator(ctx, obCompletion(created), 0)
		})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			it, err := obFetch(ctx, p, nil)
			if err != nil {
				b.Fatal(err)
			}
			if len(it.Item.History) != 2 {
				b.Fatalf("fetched %s with %d events, want 2", it.Item.Instance, len(it.Item.History))
			}
			if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn2(it.Item.Instance)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func obFilter(b *testing.B, lo, hi string) *provider.DispatcherCapabilityFilter {
	r, err := provider.NewSemverRange(lo, hi)
	if err != nil {
		b.Fatal(err)
	}
	return &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r}}
}

// obHistory returns events 2..size of a realistic history: alternating ActivityScheduled and
// ActivityCompleted with 100-byte results (~250 bytes of JSON each).
func obHistory(instance string, size int) []provider.Event {
	var out []provider.Event
	for id := uint64(2); id <= uint64(size); id++ {
		if id%2 == 0 {
			out = append(out, obEvent(instance, id, 0, provider.ActivityScheduledEvent{Name: "Step", Input: `{"step":` + strconv.FormatUint(id, 10) + `}`}))
		} else {
			out = append(out, obEvent(instance, id, id-1, provider.ActivityCompletedEvent{Result: obPayload}))
		}
	}
	return out
}

// obAppend appends events in chunks of 500 (the fast way to build a long history).
func obAppend(b *testing.B, p provider.Provider, instance string, events []provider.Event) {
	b.Helper()
	for len(events) > 0 {
		n := min(500, len(events))
		if err := p.AppendWithExecution(context.Background(), instance, 1, events[:n]); err != nil {
			b.Fatal(err)
		}
		events = events[n:]
	}
}

// BenchmarkAckHistory acks a two-event turn onto an execution holding 10 or 10,000 events; ack
// must not grow with history. ns/op is the AckOrchestrationItem call alone (timed around the call
// and reported with b.ReportMetric, which replaces the framework's ns/op); iter-ns/op is the whole
// iteration: enqueue an ExternalRaised, fetch (which returns the whole history, hence O(history)),
// ack, then delete the two appended events so that every iteration acks onto the same history.
// Timing the ack alone with StopTimer would make the framework run ~10,000 iterations of a
// 10,000-event fetch; this way the iteration count follows the whole iteration.
// obTruncate cuts a history back to its first ARGV[1] bytes and forgets the given event ids
// (benchmark reset only: the provider never rewrites history).
var obTruncate = redis.NewScript(`
redis.call('SET', KEYS[1], redis.call('GETRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1))
redis.call('SREM', KEYS[2], ARGV[2], ARGV[3])
return 1`)

func BenchmarkAckHistory(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{10, 10000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			p := newTestProvider(b)
			inst := "long-" + strconv.Itoa(size)
			if _, err := obCreate(ctx, p, inst, obVersion, nil, nil); err != nil {
				b.Fatal(err)
			}
			// obCreate stored events 1 and 2; make them 1..size.
			obAppend(b, p, inst, obHistory(inst, size)[1:])
			if h, err := p.Read(ctx, inst); err != nil || len(h) != size {
				b.Fatalf("history has %d events (%v), want %d", len(h), err, size)
			}
			hkey, idsKey := p.Keyspace().History(inst, 1), p.Keyspace().HistoryIDs(inst, 1)
			base, err := p.Client().StrLen(ctx, hkey).Result()
			if err != nil {
				b.Fatal(err)
			}
			next := uint64(size + 1)
			raise := provider.WorkItem{Kind: provider.ExternalRaised{Instance: inst, Name: "go", Data: obPayload}}
			var ackNs time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := p.EnqueueForOrchestrator(ctx, raise, 0); err != nil {
					b.Fatal(err)
				}
				it, err := obFetch(ctx, p, nil)
				if err != nil {
					b.Fatal(err)
				}
				if len(it.Item.History) != size {
					b.Fatalf("fetched %d events, want %d", len(it.Item.History), size)
				}
				ack := provider.OrchestrationAck{ExecutionID: 1,
					HistoryDelta: []provider.Event{
						obEvent(inst, next, 0, provider.ExternalEventEvent{Name: "go", Data: obPayload}),
						obEvent(inst, next+1, 0, provider.ActivityScheduledEvent{Name: "Step", Input: `{}`}),
					},
					Metadata: provider.ExecutionMetadata{OrchestrationName: "Hello", OrchestrationVersion: "1.0.0"}}
				// Let the GC finish with the fetched history first: on a small machine its workers
				// would otherwise compete with Redis for CPU while the ack runs (not timed either way).
				runtime.GC()
				t0 := time.Now()
				err = p.AckOrchestrationItem(ctx, it.LockToken, ack)
				ackNs += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				// Back to exactly size events (the byte counter of the execution keeps growing; ack never reads it).
				if err := obTruncate.Run(ctx, p.Client(), []string{hkey, idsKey}, base, next, next+1).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "iter-ns/op")
			b.ReportMetric(float64(ackNs.Nanoseconds())/float64(b.N), "ns/op")
		})
	}
}

// BenchmarkFetchFiltered fetches with a capability filter [0.1.0, 0.1.99] the one compatible
// instance (pinned 0.1.30), with 0 or 10,000 incompatible instances (pinned 9.0.0, each with a
// message queued ahead of the compatible one's). Fetch must not grow with what the filter
// excludes. Each iteration abandons what it fetched (ignore_attempt, no delay; not timed).
func BenchmarkFetchFiltered(b *testing.B) {
	ctx := context.Background()
	filter := obFilter(b, "0.1.0", "0.1.99")
	for _, skip := range []int{0, 10000} {
		b.Run("skip"+strconv.Itoa(skip), func(b *testing.B) {
			p := newTestProvider(b)
			// Fetch only unpinned (new) instances during setup, never the ones already pinned.
			newOnly := obFilter(b, "0.0.0", "0.0.1")
			obParallel(b, skip, func(i int) error {
				_, err := obCreate(ctx, p, "old-"+strconv.Itoa(i), "9.0.0", newOnly, obPing)
				return err
			})
			if created, err := obCreate(ctx, p, "compatible", obVersion, newOnly, obPing); err != nil || created != "compatible" {
				b.Fatalf("created %q: %v", created, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				it, err := obFetch(ctx, p, filter)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if it.Item.Instance != "compatible" {
					b.Fatalf("fetched %q", it.Item.Instance)
				}
				if err := p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRead reads a 100- and a 1,000-event history (decoding included).
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{100, 1000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			p := newTestProvider(b)
			inst := "read-" + strconv.Itoa(size)
			if _, err := obCreate(ctx, p, inst, obVersion, nil, nil); err != nil {
				b.Fatal(err)
			}
			obAppend(b, p, inst, obHistory(inst, size)[1:])
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				h, err := p.Read(ctx, inst)
				if err != nil || len(h) != size {
					b.Fatalf("read %d events, %v", len(h), err)
				}
			}
		})
	}
}

// BenchmarkHelloInstanceBytes runs complete hello orchestrations through every provider call the
// runtime makes (enqueue start, fetch + ack turn 1, fetch + ack the activity, fetch + ack turn 2),
// one after another, and reports what a completed instance keeps in Redis: used-B/instance
// (INFO used_memory after - before, divided by b.N) and keys-B/instance (MEMORY USAGE of every
// key of the namespace, divided by b.N). ns/op is one whole orchestration done serially. Real
// Redis only: miniredis has neither INFO memory nor MEMORY USAGE.
func BenchmarkHelloInstanceBytes(b *testing.B) {
	if backend() != "redis" {
		b.Skip("needs a real single Redis server (DXREDIS_TEST_ADDR)")
	}
	ctx := context.Background()
	p := newTestProvider(b)
	c := p.Client()
	before := obUsedMemory(b, c)
	b.ResetTimer()
	for i := range b.N {
		inst := "bytes-" + strconv.Itoa(i)
		if err := p.EnqueueForOrchestrator(ctx, obStart(inst), 0); err != nil {
			b.Fatal(err)
		}
		it, err := obFetch(ctx, p, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn1(inst, obVersion, true)); err != nil {
			b.Fatal(err)
		}
		w, err := p.FetchWorkItem(ctx, obLock, 0, nil, provider.TagFilterDefaultOnly())
		if err != nil || w == nil {
			b.Fatalf("fetch work item: %v, %v", w, err)
		}
		done := obCompletion(inst)
		if err := p.AckWorkItem(ctx, w.LockToken, &done); err != nil {
			b.Fatal(err)
		}
		if it, err = obFetch(ctx, p, nil); err != nil {
			b.Fatal(err)
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, obTurn2(inst)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	used := obUsedMemory(b, c) - before
	b.ReportMetric(float64(used)/float64(b.N), "used-B/instance")
	b.ReportMetric(float64(obKeysMemory(b, p))/float64(b.N), "keys-B/instance")
}

func obUsedMemory(b *testing.B, c redis.UniversalClient) int64 {
	txt, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(txt, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// obKeysMemory sums MEMORY USAGE (SAMPLES 0: exact) over the provider's namespace.
func obKeysMemory(b *testing.B, p *redisprovider.Provider) int64 {
	ctx := context.Background()
	c := p.Client()
	prefix := p.Keyspace().Prefix(0)
	match := strings.NewReplacer("{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(prefix) + "*"
	var total int64
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		n, err := c.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil && err != redis.Nil {
			b.Fatal(err)
		}
		total += n
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return total
}
