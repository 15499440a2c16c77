package redisprovider_test

// Worker benchmarks: a fetch+ack cycle, and the cost of a fetch with 10,000 items ahead of it that
// its filters exclude (another tag, or sessions another owner holds) compared with an empty queue:
// DESIGN.md S4 says these must cost the same. Run on real Redis with
// DXREDIS_TEST_ADDR=127.0.0.1:6379 go test ./redisprovider -run '^$' -bench Worker

import (
	"fmt"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

const wBenchExcluded = 10_000

// wBenchBackgrounds are the queue states the benchmarks run against.
var wBenchBackgrounds = []struct {
	name  string
	setup func(b *testing.B, p *redisprovider.Provider)
}{
	{"empty", func(*testing.B, *redisprovider.Provider) {}},
	{"10k-other-tag", func(b *testing.B, p *redisprovider.Provider) {
		obParallel(b, wBenchExcluded, func(i int) error {
			return p.EnqueueForWorker(b.Context(), wAct("bg", uint64(i), "other", ""))
		})
	}},
	{"10k-other-owner-sessions", func(b *testing.B, p *redisprovider.Provider) {
		// 10,000 ready items, each in its own session held by another owner: enqueue, let the other
		// owner claim every session (fetch), then put the items back (abandon).
		obParallel(b, wBenchExcluded, func(i int) error {
			return p.EnqueueForWorker(b.Context(), wAct("bg", uint64(i), "", fmt.Sprint("bg-session-", i)))
		})
		tokens := make([]string, wBenchExcluded)
		other := wSess("other-owner", time.Hour)
		obParallel(b, wBenchExcluded, func(i int) error {
			it, err := p.FetchWorkItem(b.Context(), time.Hour, 0, other, provider.TagFilterDefaultOnly())
			if err == nil && it == nil {
				err = fmt.Errorf("claim %d: nothing fetched", i)
			}
			if err == nil {
				tokens[i] = it.LockToken
			}
			return err
		})
		obParallel(b, wBenchExcluded, func(i int) error {
			return p.AbandonWorkItem(b.Context(), tokens[i], 0, false)
		})
	}},
}

// wBenchSetup prepares bg on p. The 10k backgrounds need a real server: miniredis scans whole
// sorted sets where Redis walks its skiplist, so its numbers say nothing about the scripts' cost
// (and the setup alone takes minutes).
func wBenchSetup(b *testing.B, p *redisprovider.Provider, name string, setup func(*testing.B, *redisprovider.Provider)) {
	b.Helper()
	if name != "empty" && backend() == "miniredis" {
		b.Skip("needs a real Redis (DXREDIS_TEST_ADDR)")
	}
	setup(b, p)
}

// BenchmarkWorkerFetchAck measures one activity's trip through the queue: enqueue, fetch (session
// aware, default tags) and ack with a completion; 3 round trips per op.
func BenchmarkWorkerFetchAck(b *testing.B) {
	for _, bg := range wBenchBackgrounds {
		b.Run(bg.name, func(b *testing.B) {
			p := newTestProvider(b)
			wBenchSetup(b, p, bg.name, bg.setup)
			ctx := b.Context()
			me := wSess("me", time.Minute)
			var id uint64
			for b.Loop() {
				id++
				if err := p.EnqueueForWorker(ctx, wAct("bench", id, "", "")); err != nil {
					b.Fatal(err)
				}
				it, err := p.FetchWorkItem(ctx, time.Minute, 0, me, provider.TagFilterDefaultOnly())
				if err != nil || it == nil {
					b.Fatalf("fetch: %v, %v", it, err)
				}
				c := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: "bench", ExecutionID: 1, ID: id, Result: "ok"}}
				if err := p.AckWorkItem(ctx, it.LockToken, &c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWorkerFetchNothing measures a fetch (session aware, default tags) that finds nothing
// eligible: one round trip, whatever the filters exclude.
func BenchmarkWorkerFetchNothing(b *testing.B) {
	for _, bg := range wBenchBackgrounds {
		b.Run(bg.name, func(b *testing.B) {
			p := newTestProvider(b)
			wBenchSetup(b, p, bg.name, bg.setup)
			ctx := b.Context()
			me := wSess("me", time.Minute)
			for b.Loop() {
				it, err := p.FetchWorkItem(ctx, time.Minute, 0, me, provider.TagFilterDefaultOnly())
				if err != nil || it != nil {
					b.Fatalf("fetch: %v, %v", it, err)
				}
			}
		})
	}
}
