package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// exConcPlan computes the turn a minimal runtime would take for a fetched item: start ->
// schedule 3 activities; apply each completion; complete when all 3 are applied. Protocol
// violations visible in the item are returned as problems.
func exConcPlan(it *provider.LockedOrchestrationItem) (ack provider.OrchestrationAck, completes bool, problems []string) {
	inst := it.Item.Instance
	hist := it.Item.History
	ack = provider.OrchestrationAck{ExecutionID: 1, Metadata: testMeta()}
	for n, e := range hist {
		if e.EventID != uint64(n+1) {
			problems = append(problems, fmt.Sprintf("%s: history position %d has event id %d", inst, n, e.EventID))
		}
		if e.IsTerminal() {
			problems = append(problems, fmt.Sprintf("%s: fetched after completion with %v", inst, rrVariants(it.Item.Messages)))
		}
	}
	if len(hist) == 0 {
		if len(it.Item.Messages) != 1 || it.Item.Messages[0].Variant() != "StartOrchestration" {
			problems = append(problems, fmt.Sprintf("%s: first batch %v, want [StartOrchestration]", inst, rrVariants(it.Item.Messages)))
		}
		ack.HistoryDelta = append(ack.HistoryDelta, started(inst))
		for _, id := range exConcActivities {
			ack.HistoryDelta = append(ack.HistoryDelta, ev(inst, id, provider.ActivityScheduledEvent{Name: "act", Input: fmt.Sprint(id)}))
			ack.WorkerItems = append(ack.WorkerItems, provider.WorkItem{Kind: provider.ActivityExecute{
				Instance: inst, ExecutionID: 1, ID: id, Name: "act", Input: fmt.Sprint(id)}})
		}
		return ack, false, problems
	}
	applied := map[uint64]bool{}
	for _, e := range hist {
		if _, ok := e.Kind.(provider.ActivityCompletedEvent); ok && e.SourceEventID != nil {
			applied[*e.SourceEventID] = true
		}
	}
	next := uint64(len(hist)) + 1
	for _, m := range it.Item.Messages {
		c, ok := m.Kind.(provider.ActivityCompleted)
		if !ok || c.Instance != inst {
			problems = append(problems, fmt.Sprintf("%s: unexpected message %s for %q", inst, m.Variant(), m.TargetInstance()))
			continue
		}
		if applied[c.ID] {
			problems = append(problems, fmt.Sprintf("%s: completion of activity %d delivered again after it was applied", inst, c.ID))
			continue
		}
		applied[c.ID] = true
		ack.HistoryDelta = append(ack.HistoryDelta, provider.Event{EventID: next, SourceEventID: ptr(c.ID), InstanceID: inst,
			ExecutionID: 1, TimestampMs: uint64(time.Now().UnixMilli()), DuroxideVersion: "0.1.29",
			Kind: provider.ActivityCompletedEvent{Result: c.Result}})
		next++
	}
	if len(applied) == len(exConcActivities) {
		ack.HistoryDelta = append(ack.HistoryDelta, ev(inst, next, provider.OrchestrationCompletedEvent{Output: "done"}))
		ack.Metadata.Status, ack.Metadata.Output = provider.StatusCompleted, ptr("done")
		completes = true
	}
	return ack, completes, problems
}

// exConcMode picks what a dispatcher does with its next fetch: "ack" (72%), "abandon" (20%) or
// "expire" (8%, while budget lasts, else "ack").
func exConcMode(rng *rand.Rand, budget *atomic.Int32) string {
	switch r := rng.IntN(100); {
	case r < 8:
		if budget.Add(-1) >= 0 {
			return "expire"
		}
		return "ack"
	case r < 28:
		return "abandon"
	default:
		return "ack"
	}
}

// ConcurrencyInvariant proves that 4 orchestration and 4 worker dispatchers running 30 short
// orchestrations (start -> 3 activities -> complete) with random abandons (with and without
// ignore_attempt) and deliberately expired locks lose and duplicate nothing: every instance
// completes, every activity is acked exactly once and its completion applied exactly once,
// histories are exactly the events acked, with contiguous ids, and both queues end empty.
func ConcurrencyInvariant(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const (
		instances  = 30
		dispatch   = 4
		normalLock = 10 * time.Second
		shortLock  = 300 * time.Millisecond
		pastExpiry = shortLock + 150*time.Millisecond
	)
	c, cancel := context.WithTimeout(ctx(t), 18*time.Second)
	defer cancel()

	s := &exConc{written: map[string]map[uint64]provider.Event{}, workerFetches: map[string]int{}, workerAcks: map[string]int{}}
	s.orchExpire.Store(4)
	s.workExpire.Store(4)
	var ids []string
	for n := range instances {
		id := fmt.Sprintf("ci-%02d", n)
		ids = append(ids, id)
		s.written[id] = map[uint64]provider.Event{}
		mustEnqueueOrch(t, p, startItem(id))
	}
	var failures atomic.Int32 // the dispatchers stop at the first failure
	done := func() bool { return s.completed.Load() == instances || failures.Load() > 0 || c.Err() != nil }
	failed := func(format string, args ...any) {
		if c.Err() == nil {
			failures.Add(1)
			t.Errorf(format, args...)
		}
	}
	// The first fetch of dispatchers 0, 1 and 2 deterministically expires, abandons with
	// ignore_attempt, and abandons with a delay.
	firstMode := []string{"expire", "abandon-ignore", "abandon-delay", ""}

	orchestrator := func(k int) {
		rng := rand.New(rand.NewPCG(42, uint64(k)))
		first := firstMode[k]
		for !done() {
			mode := exConcMode(rng, &s.orchExpire)
			if first != "" {
				mode, first = first, ""
			}
			lock := normalLock
			if mode == "expire" {
				lock = shortLock
			}
			it, err := p.FetchOrchestrationItem(c, lock, 0, nil)
			if err != nil {
				failed("orchestrator %d: fetch: %v", k, err)
				return
			}
			if it == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			if it.AttemptCount < 1 {
				failed("orchestrator %d: %s fetched with attempt count %d", k, it.Item.Instance, it.AttemptCount)
			}
			ack, completes, problems := exConcPlan(it)
			for _, pr := range problems {
				failed("orchestrator %d: %s", k, pr)
			}
			switch mode {
			case "abandon", "abandon-ignore", "abandon-delay":
				delay := time.Duration(rng.IntN(2)) * 20 * time.Millisecond
				ignore := rng.IntN(2) == 0
				if mode == "abandon-ignore" {
					ignore = true
				} else if mode == "abandon-delay" {
					delay, ignore = 50*time.Millisecond, false
				}
				s.abandons.Add(1)
				if err := p.AbandonOrchestrationItem(c, it.LockToken, delay, ignore); err != nil {
					failed("orchestrator %d: abandon %s: %v", k, it.Item.Instance, err)
				}
			case "expire":
				s.expiries.Add(1)
				time.Sleep(pastExpiry)
				err := p.AckOrchestrationItem(c, it.LockToken, ack)
				if err == nil {
					failed("orchestrator %d: ack of %s after its %v lock expired succeeded", k, it.Item.Instance, shortLock)
				} else if !errors.Is(err, provider.ErrInvalidLockToken) {
					failed("orchestrator %d: ack of %s with an expired lock: %v, want ErrInvalidLockToken", k, it.Item.Instance, err)
				}
			default:
				if err := p.AckOrchestrationItem(c, it.LockToken, ack); err != nil {
					failed("orchestrator %d: ack %s: %v", k, it.Item.Instance, err)
					continue
				}
				s.mu.Lock()
				for _, e := range ack.HistoryDelta {
					if _, dup := s.written[it.Item.Instance][e.EventID]; dup {
						failed("orchestrator %d: %s: event id %d acked twice", k, it.Item.Instance, e.EventID)
					}
					s.written[it.Item.Instance][e.EventID] = e
				}
				s.mu.Unlock()
				if completes {
					s.completed.Add(1)
				}
			}
		}
	}

	worker := func(k int) {
		rng := rand.New(rand.NewPCG(7, uint64(k)))
		first := firstMode[k]
		for !done() {
			mode := exConcMode(rng, &s.workExpire)
			if first != "" {
				mode, first = first, ""
			}
			lock := normalLock
			if mode == "expire" {
				lock = shortLock
			}
			it, err := p.FetchWorkItem(c, lock, 0, nil, provider.TagFilterDefaultOnly())
			if err != nil {
				failed("worker %d: fetch: %v", k, err)
				return
			}
			if it == nil {
				time.Sleep(2 * time.Millisecond)
				continue
			}
			ae, ok := it.Item.Kind.(provider.ActivityExecute)
			if !ok {
				failed("worker %d: fetched %s, want ActivityExecute", k, it.Item.Variant())
				continue
			}
			key := fmt.Sprintf("%s/%d", ae.Instance, ae.ID)
			s.mu.Lock()
			s.workerFetches[key]++
			s.mu.Unlock()
			completion := activityCompleted(ae.Instance, ae.ID, "r:"+key)
			switch mode {
			case "abandon", "abandon-ignore", "abandon-delay":
				delay := time.Duration(rng.IntN(2)) * 20 * time.Millisecond
				ignore := rng.IntN(2) == 0
				if mode == "abandon-ignore" {
					ignore = true
				} else if mode == "abandon-delay" {
					delay, ignore = 50*time.Millisecond, false
				}
				s.abandons.Add(1)
				if err := p.AbandonWorkItem(c, it.LockToken, delay, ignore); err != nil {
					failed("worker %d: abandon %s: %v", k, key, err)
				}
			case "expire":
				s.expiries.Add(1)
				time.Sleep(pastExpiry)
				err := p.AckWorkItem(c, it.LockToken, &completion)
				if err == nil {
					failed("worker %d: ack of %s after its %v lock expired succeeded", k, key, shortLock)
					s.mu.Lock()
					s.workerAcks[key]++
					s.mu.Unlock()
				} else if pe, ok := provider.AsProviderError(err); !ok || pe.Retryable {
					failed("worker %d: ack of %s with an expired lock: %v, want a permanent error", k, key, err)
				}
			default:
				if err := p.AckWorkItem(c, it.LockToken, &completion); err != nil {
					failed("worker %d: ack %s: %v", k, key, err)
					continue
				}
				s.mu.Lock()
				s.workerAcks[key]++
				s.mu.Unlock()
			}
		}
	}

	var wg sync.WaitGroup
	for k := range dispatch {
		wg.Go(func() { orchestrator(k) })
		wg.Go(func() { worker(k) })
	}
	wg.Wait()
	t.Logf("abandons %d, expired locks %d", s.abandons.Load(), s.expiries.Load())
	if t.Failed() {
		t.FailNow()
	}
	if n := s.completed.Load(); n != instances {
		t.Fatalf("%d of %d instances completed before the time bound", n, instances)
	}

	a := mustAdmin(t, p)
	for _, id := range ids {
		hist := mustRead(t, p, id)
		want := make([]provider.Event, 0, len(s.written[id]))
		for n := uint64(1); n <= uint64(len(s.written[id])); n++ {
			e, ok := s.written[id][n]
			if !ok {
				t.Fatalf("%s: the acked event ids are not contiguous: %d missing", id, n)
			}
			want = append(want, e)
		}
		rrSameEvents(t, hist, want, id+": history versus acked events")
		if len(hist) != 8 || !hist[len(hist)-1].IsTerminal() {
			t.Fatalf("%s: history has %d events, want 8 ending with OrchestrationCompleted", id, len(hist))
		}
		for _, act := range exConcActivities {
			key := fmt.Sprintf("%s/%d", id, act)
			if s.workerFetches[key] < 1 || s.workerAcks[key] != 1 {
				t.Fatalf("%s: delivered %d times, acked %d times; want >= 1 and exactly 1", key, s.workerFetches[key], s.workerAcks[key])
			}
			var applied []string
			for _, e := range hist {
				if c, ok := e.Kind.(provider.ActivityCompletedEvent); ok && e.SourceEventID != nil && *e.SourceEventID == act {
					applied = append(applied, c.Result)
				}
			}
			if len(applied) != 1 || applied[0] != "r:"+key {
				t.Fatalf("%s: completion applied %q, want exactly once", key, applied)
			}
		}
		info, err := a.GetInstanceInfo(ctx(t), id)
		wantNoErr(t, err, "get_instance_info")
		if info.Status != provider.StatusCompleted {
			t.Fatalf("%s: status %q, want Completed", id, info.Status)
		}
	}
	mustNoOrch(t, p, longLock)
	exNoWork(t, p, "after every instance completed")
	exDepths(t, p, 0, 0, "after every instance completed")
}
