package redisprovider

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis/internal/luascripts"
)

// Forwarding (keys.go, "Outboxes"). In a namespace of several partitions, a write that must change
// something in another partition appends an entry to its own partition's outbox in the same
// script (lib.lua, ob_put) and replies 2 (an ack-and-fetch: its fetch reply ends with "ob"). The
// caller then forwards at once, before it returns, so that a child's start is visible when the
// parent's ack returns: ob_take reads the outboxes, ob_apply applies each destination's entries
// there exactly once (a high-water mark per source), ob_trim drops what was applied. A process
// that stops between the commit and the trim leaves entries behind: every process that fetches
// sweeps the outboxes (sweepOutboxes) and forwards entries older than forwardGrace. Forwarders may
// race: the destination's high-water mark applies every entry once whatever the interleaving.
//
// With Options.WaitReplicas, the read of the outboxes is followed by WAIT covering every write the
// source's node made before it, and each apply by WAIT covering every write the destination's node
// made (replicaWait in provider.go): an entry is forwarded only once replicas have the commit that
// wrote it, and trimmed only once they have its apply, so that a failover of either node neither
// loses nor repeats a message. When too few replicas acknowledge, the forward stops with
// ErrNotReplicated and the sweeps retry it.

// forwardBatch is the most entries read per destination per round.
const forwardBatch = 200

// forwardGrace is how old an entry must be before a sweep forwards it (the committing process
// normally does within milliseconds), sweepPeriod how often a fetching process sweeps every
// partition's outboxes: 2 s and 5 s. Atomic so that tests may change them (SetSweep) while
// other providers' sweeps run.
var forwardGrace, sweepPeriod = atomicDuration(2 * time.Second), atomicDuration(5 * time.Second)

func atomicDuration(d time.Duration) *atomic.Int64 {
	var v atomic.Int64
	v.Store(int64(d))
	return &v
}

// Test hooks (export_test.go), atomic for the same reason. testHookBeforeForward runs before a
// forward; returning false skips it (tests stop here to leave entries in an outbox, as a crash
// between commit and forward would). testHookBeforeApply runs before each apply (after the read of
// the outboxes). testHookBeforeTrim runs between the applies and the trim; returning false skips
// the trim (a crash between forward and trim).
var (
	testHookBeforeForward, testHookBeforeTrim atomic.Pointer[func(source int) bool]
	testHookBeforeApply                       atomic.Pointer[func(source, dest int)]
)

// forwarded reports whether an ack-and-fetch reply carries the "the ack wrote to an outbox" mark
// (lib.lua, ack_then_fetch), and removes it.
func forwarded(res *any) bool {
	r := list(*res)
	if len(r) > 0 && str(r[len(r)-1]) == "ob" {
		*res = r[:len(r)-1]
		return true
	}
	return false
}

// forward forwards the outboxes of partition source after a write that filled them. A failure is
// logged and left to the sweeps: the write itself committed.
func (p *Provider) forward(ctx context.Context, source int) {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx) // the caller's write committed: deliver its messages
	}
	if err := p.forwardOlder(ctx, source, 0); err != nil {
		p.opts.Logger.Warn("dxredis: forwarding an outbox failed; a sweep will retry it", "partition", source, "err", err)
	}
}

// forwardOlder forwards the entries of partition source's outboxes whose oldest entry is at least
// older old, in rounds of forwardBatch per destination until they are empty.
func (p *Provider) forwardOlder(ctx context.Context, source int, older time.Duration) error {
	const op = "forward"
	if h := testHookBeforeForward.Load(); h != nil && !(*h)(source) {
		return nil
	}
	if p.opts.WaitReplicas > 0 && older > 0 {
		// A sweep: ob_take waits for replicas (replicaWait), so look first whether there is
		// anything to forward (rarely: only what a stopped process left).
		n, err := p.rdb.ZCard(ctx, p.keys.Prefix(source)+"ob:dirty").Result()
		if err != nil || n == 0 {
			return p.mapErr(op, err)
		}
	}
	for range 100 {
		args, err := argsOf(op, luascripts.ObTake, "limit", strconv.Itoa(forwardBatch), "older", ms(older))
		if err != nil {
			return err
		}
		res, err := p.run(ctx, op, luascripts.ObTake.Op, source, args...)
		if err != nil {
			return err
		}
		r := list(res)
		if len(r) <= 1 {
			return nil
		}
		full := false
		var marks []string
		for i := 0; i+1 < len(r)-1; i += 2 {
			dest, entries := str(r[i]), list(r[i+1])
			d, err := strconv.Atoi(dest)
			if err != nil || d < 0 || d >= p.keys.Partitions() {
				p.opts.Logger.Error("dxredis: an outbox names a partition this namespace does not have", "partition", source, "destination", dest)
				continue
			}
			full = full || len(entries) >= forwardBatch
			hwm, err := p.apply(ctx, source, d, entries)
			if err != nil {
				return err
			}
			marks = append(marks, dest, strconv.FormatInt(hwm, 10))
		}
		if h := testHookBeforeTrim.Load(); h != nil && !(*h)(source) {
			return nil
		}
		if len(marks) > 0 {
			e := luascripts.ObTrim.Encoder(len(marks))
			e.Section("marks")
			for i := 0; i < len(marks); i += 2 {
				e.Entry(marks[i], marks[i+1])
			}
			targs, err := encoded(op, e)
			if err != nil {
				return err
			}
			if _, err := p.run(ctx, op, luascripts.ObTrim.Op, source, targs...); err != nil {
				return err
			}
		}
		if !full {
			return nil
		}
		older = 0
	}
	return nil
}

// apply applies entries of source's outbox at dest and returns dest's high-water mark for source.
func (p *Provider) apply(ctx context.Context, source, dest int, entries []any) (int64, error) {
	const op = "forward"
	if h := testHookBeforeApply.Load(); h != nil {
		(*h)(source, dest)
	}
	e := luascripts.ObApply.Encoder(2 + len(entries))
	e.Set("source", strconv.Itoa(source))
	e.Set("retention", ms(p.opts.Retention))
	e.Section("entries")
	for _, x := range entries {
		e.Entry(str(x))
	}
	args, err := encoded(op, e)
	if err != nil {
		return 0, err
	}
	res, err := p.run(ctx, op, luascripts.ObApply.Op, dest, args...)
	if err != nil {
		return 0, err
	}
	return num(res), nil
}

// sweepOutboxes runs while the provider is open, from the first fetch of a namespace of several
// partitions on: every sweepPeriod it forwards, in every partition, the outboxes whose entries
// were left there for forwardGrace (their writer stopped before forwarding them). Cost: one
// read-only script per partition per period.
func (p *Provider) sweepOutboxes() {
	period := time.Duration(sweepPeriod.Load())
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-p.closed:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), period)
		for part := range p.keys.Partitions() {
			if err := p.forwardOlder(ctx, part, time.Duration(forwardGrace.Load())); err != nil && !p.isClosed() {
				p.opts.Logger.Warn("dxredis: sweeping an outbox failed; the next sweep retries it", "partition", part, "err", err)
			}
		}
		cancel()
	}
}
