package dx

import (
	"context"
	"sync"

	"github.com/duroxide-go/dxredis/provider"
)

// Batched activity acks (Options.ActivityAckBatch, provider.WorkBatchAcker). An activity whose
// result is ready while no other ack is in flight is acknowledged at once, as without batching
// (with ack-and-fetch when the provider has it): a lone activity waits for nothing. Results that
// become ready while an ack is in flight queue up; when it returns, the first of them sends the
// queue (at most ActivityAckBatch) in one batched call that also fetches an activity for each slot, and
// so on: the runtime batches only what is already waiting, never lingers. Each ack keeps its own
// lock token, attempt id and outcome: one whose token was lost fails alone, and is retried (or
// dropped) by its own ackActivity as before. Measured (docs/storage-v2.md, "Batched worker acks"):
// fewer worker calls, but an orchestration's completions arrive in more deliveries (the first of a
// round alone, the rest a round trip later), so it runs more turns; hence batched by default only
// with at least autoAckBatchSlots activity slots, where the turns are few anyway (measured).

// autoAckBatchSlots is the WorkerConcurrency from which activity acks are batched by default.
const autoAckBatchSlots = 32

// ackBatcher is the runtime's queue of activity acks waiting for the ack in flight.
type ackBatcher struct {
	mu    sync.Mutex
	busy  bool // an ack (single or batched) is in flight
	queue []*ackReq
	most  int // the most acks in one batch (Options.ActivityAckBatch)
}

// ackReq is an ack waiting in the queue: it receives either its outcome (done), sent by the
// leader of the batch it joined, or the batch it leads (lead, itself first).
type ackReq struct {
	ack  provider.WorkAck
	lead chan []*ackReq
	done chan ackResult
}

// ackResult is an ack's outcome and the activity fetched for its slot (nil for none).
type ackResult struct {
	next *provider.LockedWorkItem
	err  error
}

// ackWork acknowledges one try of an activity's ack: through single (the unbatched call, which
// may fetch the next activity) when no other ack is in flight or the provider cannot batch, else
// in the batch that the queue's leader sends, which fetches an activity for each slot whose ack
// committed unless fetching stopped (fetchCtx ended). ctx carries no deadline (the acks outlive
// shutdown's fetch stop); attemptID and try name the try as attemptContext does.
func (rt *Runtime) ackWork(fetchCtx, ctx context.Context, token string, c *provider.WorkItem, attemptID string, try int,
	single func(context.Context) (*provider.LockedWorkItem, error)) (*provider.LockedWorkItem, error) {
	ba, ok := rt.p.(provider.WorkBatchAcker)
	if !ok || rt.opts.ActivityAckBatch <= 1 {
		return single(attemptContext(ctx, attemptID, try))
	}
	b := &rt.acks
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		defer b.handOff()
		return single(attemptContext(ctx, attemptID, try))
	}
	req := &ackReq{ack: provider.WorkAck{LockToken: token, Completion: c, AttemptID: attemptID, FirstAttempt: try == 1},
		lead: make(chan []*ackReq, 1), done: make(chan ackResult, 1)}
	b.queue = append(b.queue, req)
	b.mu.Unlock()
	select {
	case r := <-req.done:
		return r.next, r.err
	case batch := <-req.lead:
		defer b.handOff()
		if len(batch) == 1 {
			return single(attemptContext(ctx, attemptID, try))
		}
		acks := make([]provider.WorkAck, len(batch))
		for i, r := range batch {
			acks[i] = r.ack
		}
		var fetch *provider.WorkFetch
		if fetchCtx.Err() == nil {
			session, n := rt.sessionFetch(len(batch))
			fetch = &provider.WorkFetch{N: n, LockTimeout: rt.opts.WorkerLockTimeout, Session: session,
				Tags: rt.opts.WorkerTagFilter}
		}
		errs, next := ba.AckWorkItems(ctx, acks, fetch)
		results := make([]ackResult, len(batch))
		for i, err := range errs {
			results[i].err = err
			if err == nil && len(next) > 0 {
				results[i].next, next = next[0], next[1:]
			}
		}
		for _, it := range next { // more than the acks that committed: back to the queue
			_ = rt.p.AbandonWorkItem(ctx, it.LockToken, 0, true)
		}
		for i, r := range batch[1:] {
			r.done <- results[i+1]
		}
		return results[0].next, results[0].err
	}
}

// handOff ends the ack in flight: the first waiting ack, if any, leads the next batch.
func (b *ackBatcher) handOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.busy = false
		return
	}
	n := min(len(b.queue), b.most)
	batch := b.queue[:n:n]
	b.queue = append([]*ackReq(nil), b.queue[n:]...)
	batch[0].lead <- batch
}
