package redisprovider

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// waitForWork blocks on wake lists (one BLPOP on all of them) until a wake token arrives, until, or ctx ends, whichever
// comes first (principle 6). The script that found nothing returned nextDue (ms since the epoch,
// server clock, -1 when none): the time delayed work or a held lock next comes due; the wait ends
// then too. It reports whether the caller should fetch again.
//
// No lost wakeups: every enqueue that makes work visible pushes a token to the list in the same
// script, so work that arrives between the empty fetch and the BLPOP ends the BLPOP at once.
func (p *Provider) waitForWork(ctx context.Context, wakeKeys []string, deadline time.Time, nextDueMs, serverNowMs int64) bool {
	d := time.Until(deadline)
	if nextDueMs >= 0 {
		// Convert the server's due time to a local duration using the server's clock reading.
		if due := time.Duration(nextDueMs-serverNowMs) * time.Millisecond; due < d {
			d = due
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
	done := make(chan error, 1)
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		defer cancel()
		got, err := p.block.Do(bctx, cmd...).StringSlice()
		if err == nil && len(got) == 2 && (ctx.Err() != nil || p.isClosed()) {
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
	case <-ctx.Done():
		return false
	case <-p.closed:
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
