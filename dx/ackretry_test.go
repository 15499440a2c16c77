package dx_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

// ackFaults wraps a provider (hiding its extensions, so the runtime uses the plain acks): the
// first failWork worker acks and failOrch turn acks fail with a retryable error before running;
// with loseFirst, the first worker ack runs and then reports its reply lost (ErrOutcomeUnknown).
// It records each worker ack's attempt id and result, and counts abandons.
type ackFaults struct {
	provider.Provider
	failWork, failOrch atomic.Int32
	loseFirst          bool
	abandons           atomic.Int32
	mu                 sync.Mutex
	workAcks           []workAck
}

type workAck struct {
	attempt string
	first   bool // marked as the attempt id's first send (provider.WithFirstAttemptID)
	err     error
}

func (f *ackFaults) AckWorkItem(ctx context.Context, token string, c *provider.WorkItem) error {
	var err error
	f.mu.Lock()
	first := len(f.workAcks) == 0
	f.mu.Unlock()
	switch {
	case f.failWork.Add(-1) >= 0:
		err = provider.NewRetryableError("ack_work_item", "connection refused")
	case f.loseFirst && first:
		if err = f.Provider.AckWorkItem(ctx, token, c); err == nil {
			err = provider.NewRetryableError("ack_work_item", "reply lost").WithKind(provider.ErrOutcomeUnknown)
		}
	default:
		err = f.Provider.AckWorkItem(ctx, token, c)
	}
	f.mu.Lock()
	id, first := provider.AttemptID(ctx)
	f.workAcks = append(f.workAcks, workAck{id, first, err})
	f.mu.Unlock()
	return err
}

func (f *ackFaults) AckOrchestrationItem(ctx context.Context, token string, ack provider.OrchestrationAck) error {
	if f.failOrch.Add(-1) >= 0 {
		return provider.NewRetryableError("ack_orchestration_item", "LOADING Redis is loading the dataset in memory")
	}
	return f.Provider.AckOrchestrationItem(ctx, token, ack)
}

func (f *ackFaults) AbandonOrchestrationItem(ctx context.Context, token string, d time.Duration, ignore bool) error {
	f.abandons.Add(1)
	return f.Provider.AbandonOrchestrationItem(ctx, token, d, ignore)
}

func (f *ackFaults) AbandonWorkItem(ctx context.Context, token string, d time.Duration, ignore bool) error {
	f.abandons.Add(1)
	return f.Provider.AbandonWorkItem(ctx, token, d, ignore)
}

// runOnceUnder runs an orchestration calling one activity on f and returns how often the
// activity ran.
func runOnceUnder(t *testing.T, f *ackFaults) int32 {
	t.Helper()
	opts := testOptions()
	opts.WorkerLockTimeout = 2 * time.Second // without the fix, a dropped result runs again after 2 s
	rt := dx.NewRuntime(f, opts)
	var runs atomic.Int32
	dx.RegisterActivity(rt, "Once", func(ctx context.Context, s string) (string, error) {
		runs.Add(1)
		return s + "!", nil
	})
	dx.Register(rt, "O", func(ctx dx.Context, s string) (string, error) {
		return dx.Call[string](ctx, "Once", s).Await(ctx)
	})
	startRuntime(t, rt)
	c := dx.NewClient(f)
	id, err := c.Start(waitCtx(t), "O", "x")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := c.Wait(waitCtx(t), id); err != nil || st.Output != `"x!"` {
		t.Fatalf("state %s output %s err %v (%v)", st.State, st.Output, st.Err, err)
	}
	return runs.Load()
}

// Acks failing with retryable errors more often than the runtime used to retry (5 tries in
// ~0.2 s) are retried while their locks are held: the activity runs once, no turn is abandoned.
func TestAckRetriedWhileLockHeld(t *testing.T) {
	t.Parallel()
	f := &ackFaults{Provider: newProvider(t)}
	f.failWork.Store(7)
	f.failOrch.Store(7)
	if n := runOnceUnder(t, f); n != 1 {
		t.Fatalf("the activity ran %d times, want 1", n)
	}
	if n := f.abandons.Load(); n != 0 {
		t.Fatalf("%d abandons, want none", n)
	}
}

// An ack whose reply was lost after it committed is sent again with the same attempt id, which
// the provider answers with the first reply: success, not a lost lock.
func TestAckLostReplyRecognisedAsDone(t *testing.T) {
	t.Parallel()
	f := &ackFaults{Provider: newProvider(t), loseFirst: true}
	if n := runOnceUnder(t, f); n != 1 {
		t.Fatalf("the activity ran %d times, want 1", n)
	}
	// The instance completes on the first try's commit; the runtime's retry follows.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		n := len(f.workAcks)
		f.mu.Unlock()
		if n >= 2 || time.Now().After(deadline) {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.workAcks) != 2 || f.workAcks[0].attempt == "" || f.workAcks[1].attempt != f.workAcks[0].attempt ||
		!errors.Is(f.workAcks[0].err, provider.ErrOutcomeUnknown) || f.workAcks[1].err != nil ||
		!f.workAcks[0].first || f.workAcks[1].first {
		t.Fatalf("worker acks %+v: want a lost reply (the id's first send), then success with the same attempt id (not first)", f.workAcks)
	}
}
