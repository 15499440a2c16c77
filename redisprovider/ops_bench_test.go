package redisprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// BenchmarkOps covers the provider operations the workload benchmarks (orch_bench_test.go,
// worker_bench_test.go) do not time on their own. Each op leaves the store as it found it, so
// every iteration does the same work.
func BenchmarkOps(b *testing.B) {
	ctx := context.Background()
	const inst = "ops"
	setup := func(b *testing.B) *redisprovider.Provider {
		p := newTestProvider(b)
		if _, err := obCreate(ctx, p, inst, obVersion, nil, nil); err != nil {
			b.Fatal(err)
		}
		kv := obEvent(inst, 3, 0, provider.KeyValueSetEvent{Key: "k", Value: "v"})
		cs := obEvent(inst, 4, 0, provider.CustomStatusUpdatedEvent{Status: ptr("running")})
		if err := p.EnqueueForOrchestrator(ctx, obPing(inst)[0], 0); err != nil {
			b.Fatal(err)
		}
		it, err := obFetch(ctx, p, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.AckOrchestrationItem(ctx, it.LockToken, provider.OrchestrationAck{ExecutionID: 1,
			HistoryDelta: []provider.Event{kv, cs}}); err != nil {
			b.Fatal(err)
		}
		return p
	}
	act := provider.WorkItem{Kind: provider.ActivityExecute{Instance: inst, ExecutionID: 1, ID: 9, Name: "A", Input: "{}",
		SessionID: ptr("s1")}}
	session := &provider.SessionFetchConfig{OwnerID: "owner", LockTimeout: time.Hour}
	ops := []struct {
		name string
		prep func(b *testing.B, p *benchP) // once, before the timer
		op   func(p *benchP, i int) error
	}{
		{"AbandonOrchestrationItem", func(b *testing.B, p *benchP) { p.ping(b) }, func(p *benchP, _ int) error {
			it, err := obFetch(ctx, p, nil)
			if err != nil {
				return err
			}
			return p.AbandonOrchestrationItem(ctx, it.LockToken, 0, true)
		}},
		{"RenewOrchestrationItemLock", func(b *testing.B, p *benchP) { p.ping(b); p.lockOrch(b) }, func(p *benchP, _ int) error {
			return p.RenewOrchestrationItemLock(ctx, p.orchToken, time.Minute)
		}},
		{"EnqueueForWorker", nil, func(p *benchP, i int) error {
			return p.EnqueueForWorker(ctx, provider.WorkItem{Kind: provider.ActivityExecute{Instance: inst, ExecutionID: 1,
				ID: uint64(100 + i), Name: "A", Input: "{}"}})
		}},
		{"AbandonWorkItem", func(b *testing.B, p *benchP) { p.enqueue(b, act) }, func(p *benchP, _ int) error {
			it, err := p.FetchWorkItem(ctx, time.Minute, 0, session, provider.TagFilterDefaultOnly())
			if err != nil {
				return err
			}
			return p.AbandonWorkItem(ctx, it.LockToken, 0, true)
		}},
		{"RenewWorkItemLock", func(b *testing.B, p *benchP) { p.enqueue(b, act); p.lockWork(b, session) }, func(p *benchP, _ int) error {
			return p.RenewWorkItemLock(ctx, p.workToken, time.Minute)
		}},
		{"RenewSessionLock", func(b *testing.B, p *benchP) { p.enqueue(b, act); p.lockWork(b, session) }, func(p *benchP, _ int) error {
			_, err := p.RenewSessionLock(ctx, []string{"owner"}, time.Hour, time.Hour)
			return err
		}},
		{"CleanupOrphanedSessions", nil, func(p *benchP, _ int) error {
			_, err := p.CleanupOrphanedSessions(ctx, time.Minute)
			return err
		}},
		{"ReadWithExecution", nil, func(p *benchP, _ int) error {
			_, err := p.ReadWithExecution(ctx, inst, 1)
			return err
		}},
		{"AppendWithExecution", nil, func(p *benchP, i int) error {
			return p.AppendWithExecution(ctx, inst, 2, []provider.Event{obEvent(inst, uint64(i+1), 0,
				provider.ExternalEventEvent{Name: "e", Data: "{}"})})
		}},
		{"GetCustomStatus", nil, func(p *benchP, _ int) error {
			_, err := p.GetCustomStatus(ctx, inst, 0)
			return err
		}},
		{"GetKVValue", nil, func(p *benchP, _ int) error {
			_, _, err := p.GetKVValue(ctx, inst, "k")
			return err
		}},
		{"GetKVAllValues", nil, func(p *benchP, _ int) error {
			_, err := p.GetKVAllValues(ctx, inst)
			return err
		}},
		{"GetInstanceStats", nil, func(p *benchP, _ int) error {
			_, err := p.GetInstanceStats(ctx, inst)
			return err
		}},
		{"GetInstanceInfo", nil, func(p *benchP, _ int) error {
			_, err := p.GetInstanceInfo(ctx, inst)
			return err
		}},
		{"ListInstancesPage", nil, func(p *benchP, _ int) error {
			_, _, err := p.ListInstancesPage(ctx, "", 100, "")
			return err
		}},
		{"GetQueueDepths", nil, func(p *benchP, _ int) error {
			_, err := p.GetQueueDepths(ctx)
			return err
		}},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			p := &benchP{Provider: setup(b)}
			if o.prep != nil {
				o.prep(b, p)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := o.op(p, i); err != nil {
					b.Fatalf("%s: %v", o.name, err)
				}
			}
		})
	}
}

// benchP carries the tokens a BenchmarkOps case holds.
type benchP struct {
	*redisprovider.Provider
	orchToken, workToken string
}

func (p *benchP) ping(b *testing.B) {
	if err := p.EnqueueForOrchestrator(context.Background(), obPing("ops")[0], 0); err != nil {
		b.Fatal(err)
	}
}

func (p *benchP) lockOrch(b *testing.B) {
	it, err := obFetch(context.Background(), p, nil)
	if err != nil {
		b.Fatal(err)
	}
	p.orchToken = it.LockToken
}

func (p *benchP) enqueue(b *testing.B, item provider.WorkItem) {
	if err := p.EnqueueForWorker(context.Background(), item); err != nil {
		b.Fatal(err)
	}
}

func (p *benchP) lockWork(b *testing.B, s *provider.SessionFetchConfig) {
	it, err := p.FetchWorkItem(context.Background(), time.Hour, 0, s, provider.TagFilterDefaultOnly())
	if err != nil || it == nil {
		b.Fatalf("fetch work: %v %v", it, err)
	}
	p.workToken = it.LockToken
}

func ptr[T any](v T) *T { return &v }
