package dx_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// flakyProvider fails calls at random: before the call (a retryable error, nothing changed), or,
// for acks, after it succeeded (a retryable error although the ack committed: a lost reply).
type flakyProvider struct {
	provider.Provider
	mu       sync.Mutex
	rnd      *rand.Rand
	before   float64 // chance a call fails before it runs
	lostAck  float64 // chance an ack's success is reported as a retryable failure
	injected atomic.Int64
}

func (f *flakyProvider) roll(p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd.Float64() < p {
		f.injected.Add(1)
		return true
	}
	return false
}

func injected(op string) error { return provider.NewRetryableError(op, "injected fault") }

func (f *flakyProvider) FetchOrchestrationItem(ctx context.Context, lock, poll time.Duration, filter *provider.DispatcherCapabilityFilter) (*provider.LockedOrchestrationItem, error) {
	if f.roll(f.before) {
		return nil, injected("fetch_orchestration_item")
	}
	return f.Provider.FetchOrchestrationItem(ctx, lock, poll, filter)
}

func (f *flakyProvider) AckOrchestrationItem(ctx context.Context, token string, ack provider.OrchestrationAck) error {
	if f.roll(f.before) {
		return injected("ack_orchestration_item")
	}
	if err := f.Provider.AckOrchestrationItem(ctx, token, ack); err != nil {
		return err
	}
	if f.roll(f.lostAck) {
		return injected("ack_orchestration_item")
	}
	return nil
}

func (f *flakyProvider) FetchWorkItem(ctx context.Context, lock, poll time.Duration, s *provider.SessionFetchConfig, tags provider.TagFilter) (*provider.LockedWorkItem, error) {
	if f.roll(f.before) {
		return nil, injected("fetch_work_item")
	}
	return f.Provider.FetchWorkItem(ctx, lock, poll, s, tags)
}

func (f *flakyProvider) AckWorkItem(ctx context.Context, token string, c *provider.WorkItem) error {
	if f.roll(f.before) {
		return injected("ack_work_item")
	}
	if err := f.Provider.AckWorkItem(ctx, token, c); err != nil {
		return err
	}
	if f.roll(f.lostAck) {
		return injected("ack_work_item")
	}
	return nil
}

func (f *flakyProvider) RenewOrchestrationItemLock(ctx context.Context, token string, d time.Duration) error {
	if f.roll(f.before) {
		return injected("renew_orchestration_item_lock")
	}
	return f.Provider.RenewOrchestrationItemLock(ctx, token, d)
}

func (f *flakyProvider) AbandonOrchestrationItem(ctx context.Context, token string, d time.Duration, ignore bool) error {
	if f.roll(f.before) {
		return injected("abandon_orchestration_item")
	}
	return f.Provider.AbandonOrchestrationItem(ctx, token, d, ignore)
}

// TestRuntimeUnderInjectedFaults: provider calls fail at random, before running or (acks) after
// committing; every instance still completes exactly once with an intact history.
func TestRuntimeUnderInjectedFaults(t *testing.T) {
	t.Parallel()
	base := newProvider(t)
	f := &flakyProvider{Provider: base, rnd: rand.New(rand.NewPCG(1, 2)), before: 0.05, lostAck: 0.05}
	opts := faultOptions()
	opts.OrchestrationLockTimeout = 500 * time.Millisecond // a turn whose ack was refused waits for its lock
	opts.WorkerLockTimeout = 500 * time.Millisecond
	opts.MinPollInterval = 5 * time.Millisecond
	opts.PollTimeout = 100 * time.Millisecond
	rt := dx.NewRuntime(f, opts)
	faultProgram(rt)
	startRuntime(t, rt)
	c := dx.NewClient(base)
	ids := startChains(t, c, 30)
	waitAll(t, c, ids, 90*time.Second)
	checkExactlyOnce(t, base, ids, chainOutput)
	if f.injected.Load() == 0 {
		t.Fatal("no fault injected")
	}
	t.Logf("%d faults injected", f.injected.Load())
}
