package redisprovider

import (
	"context"
	"time"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// IdleState is what Idle reports.
type IdleState struct {
	// Idle is true when nothing can happen before the server's clock moves: no orchestration turn
	// or activity is locked (running), none is ready to run, and no delayed item is due.
	Idle bool
	// NextDue is when the earliest delayed item (a timer's TimerFired, a delayed retry or
	// message) comes due; zero when Idle is false or nothing is delayed.
	NextDue time.Time
}

// Idle is a testing aid for virtual clocks (dxtest moves miniredis's clock with it): it reads, in
// one atomic step, whether work is running or ready and when the earliest delayed item comes due.
// Read only; cost O(pinned versions + worker tags).
//
// In a namespace of several partitions each partition is read atomically, one after the other at
// once: it is idle when every partition was, its outboxes hold nothing to forward, and every
// entry any partition wrote to an outbox has been applied (an entry moved between two of the reads
// is seen only so).
func (p *Provider) Idle(ctx context.Context) (IdleState, error) {
	const op = "idle"
	st := IdleState{Idle: true}
	next := int64(-1)
	var written, applied int64
	err := p.eachPartition(ctx, func(ctx context.Context, part int) ([]any, error) {
		res, err := p.run(ctx, op, luascripts.AdminIdle.Op, part)
		return list(res), err
	}, func(_ int, r []any) error {
		if len(r) < 2 || num(r[0]) == 0 && len(r) != 4 {
			return provider.NewPermanentError(op, "unexpected reply from admin_idle")
		}
		if num(r[0]) != 0 {
			st.Idle = false
			return nil
		}
		if due := num(r[1]); due >= 0 && (next < 0 || due < next) {
			next = due
		}
		written += num(r[2])
		applied += num(r[3])
		return nil
	})
	if err != nil || !st.Idle || written != applied {
		return IdleState{}, err
	}
	if next >= 0 {
		st.NextDue = time.UnixMilli(next).UTC()
	}
	return st, nil
}
