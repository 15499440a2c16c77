package redisprovider

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitForWork blocks on wake lists (one BLPOP on all of them) until a wake token arrives, until
// deadline, until delayed work or a held lock comes due, or until ctx ends or the provider
// closes, whichever comes first (principle 6). nextDueMs (ms since the epoch, server clock, -1
// when none) and serverNowMs come from the script that found nothing. It reports whether the
// caller should fetch again.
//
// No lost wakeups: every script that makes work visible pushes a token to the list in the same
// script, so work that arrives between the empty fetch and the BLPOP ends the BLPOP at once; an
// enqueue whose delayed work becomes the earliest due time pushes one too, so a waiter learns
// the new time.
//
// Redis checks blocking timeouts on its hz tick (100 ms at the default hz 10), so a wait bounded
// by a due time also runs a local timer and returns on time; the BLPOP it leaves behind hands any
// token it still receives back to the list.
func (p *Provider) waitForWork(ctx context.Context, wakeKeys []string, deadline time.Time, nextDueMs, serverNowMs int64) bool {
	d := time.Until(deadline)
	var dueTimer <-chan time.Time
	if nextDueMs >= 0 {
		// Convert the server's due time to a local duration using the server's clock reading.
		if due := time.Duration(nextDueMs-serverNowMs) * time.Millisecond; due < d {
			d = due
			if d > 0 {
				t := time.NewTimer(d)
				defer t.Stop()
				dueTimer = t.C
			}
		}
	}
	if d <= 0 {
		return time.Now().Before(deadline)
	}
	if p.slice > 0 && d > p.slice {
		d = p.slice
	}
	// Redis takes fractional seconds; go-redis's typed BLPop rounds to whole seconds.
	secs := strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
	if secs == "0.000" {
		secs = "0.001"
	}
	cmd := make([]any, 0, len(wakeKeys)+2)
	cmd = append(cmd, "BLPOP")
	for _, k := range wakeKeys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, secs)
	var left atomic.Bool // the waiter returned before the BLPOP did
	done := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		defer cancel()
		got, err := p.block.Do(bctx, cmd...).StringSlice()
		if err == nil && len(got) == 2 && left.Load() && !p.isClosed() {
			// Nobody will fetch for this token: hand it to another waiter.
			_ = p.rdb.LPush(bctx, got[0], got[1]).Err()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, redis.Nil) {
			// Connection trouble: do not spin on it; the caller's next fetch reports the error.
			return time.Now().Before(deadline)
		}
	case <-dueTimer:
		left.Store(true)
		return true
	case <-ctx.Done():
		left.Store(true)
		return false
	case <-p.closed:
		left.Store(true)
		return false
	}
	return time.Now().Before(deadline)
}

func (p *Provider) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}
