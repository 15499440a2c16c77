package redisprovider

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Long polling (principle 6). A fetch runs its script; when nothing is eligible the script
// reports when delayed work or a held lock next comes due, and the fetch blocks (one BLPOP on
// its wake lists) until a wake token arrives, that time comes, the poll timeout passes, ctx ends
// or the provider closes.
//
// No lost wakeups: every script that makes work visible pushes a token to the wake lists of the
// fetchers that may take it, in the same script, so work that arrives between the empty fetch and
// the BLPOP ends the BLPOP at once; an enqueue whose delayed work becomes the earliest due time
// pushes one too, so a waiter learns the new time. Tokens live 5 s.
//
// An idle fetcher costs one command per poll timeout: when a wait on the same wake lists ended
// by timeout, without a token, less than idleWindow ago, the next fetch starts with the BLPOP
// instead of the script. That is sound because nothing became eligible since that wait began
// (it would have pushed a token) and anything that becomes eligible afterwards pushes a token
// that is still in the list (idleWindow < the 5 s token lifetime). Filtered orchestration
// fetches never skip: waiters with other capability filters share their wake list and may take
// their tokens.

// idleWindow is how long a timed-out wait lets the next fetch skip its script.
const idleWindow = time.Second

type waitOutcome int

const (
	waitWoken    waitOutcome = iota // a wake token arrived, or delayed work came due: fetch again
	waitTimedOut                    // the poll timeout passed without a token
	waitEnded                       // ctx ended or the provider closed
)

// idleState remembers, per set of wake lists, a wait that timed out.
type idleState struct {
	mu    sync.Mutex
	until map[string]idleEntry
}

type idleEntry struct {
	skipUntil time.Time // the next fetch may skip its script before this
	dueAt     time.Time // when delayed work or a lock comes due (zero: never)
}

// poll runs fetch until it finds something or pollTimeout passes. fetch returns found, or the
// server's time and next due time (ms since the epoch; -1 when nothing is due).
func (p *Provider) poll(ctx context.Context, wakeKeys []string, pollTimeout time.Duration, mayIdleSkip bool,
	fetch func() (found bool, serverNowMs, nextDueMs int64, err error)) error {
	deadline := time.Now().Add(pollTimeout)
	sig := strings.Join(wakeKeys, "\x00")
	skip, due := false, time.Duration(-1)
	if pollTimeout > 0 && mayIdleSkip {
		skip, due = p.idle.skip(sig)
	}
	for {
		if !skip {
			found, now, next, err := fetch()
			if err != nil || found || pollTimeout <= 0 {
				return err
			}
			due = -1
			if next >= 0 {
				due = time.Duration(next-now) * time.Millisecond
			}
		}
		skip = false
		switch p.waitForWork(ctx, wakeKeys, deadline, due) {
		case waitTimedOut:
			if mayIdleSkip {
				p.idle.note(sig, due)
			}
			return nil
		case waitEnded:
			return nil
		}
	}
}

func (s *idleState) skip(sig string) (bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.until[sig]
	now := time.Now()
	if !ok || !now.Before(e.skipUntil) || (!e.dueAt.IsZero() && !now.Before(e.dueAt)) {
		return false, -1
	}
	delete(s.until, sig)
	if e.dueAt.IsZero() {
		return true, -1
	}
	return true, e.dueAt.Sub(now)
}

func (s *idleState) note(sig string, due time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]idleEntry{}
	}
	now := time.Now()
	e := idleEntry{skipUntil: now.Add(idleWindow)}
	if due >= 0 {
		e.dueAt = now.Add(due)
	}
	s.until[sig] = e
}

// waitForWork blocks until a wake token arrives on one of wakeKeys, until due (-1: no due time)
// or deadline, or until ctx ends or the provider closes.
//
// Redis checks blocking timeouts on its hz tick (100 ms at the default hz 10), so a wait bounded
// by a due time also runs a local timer and returns on time; the BLPOP it leaves behind hands any
// token it still receives back to the list.
func (p *Provider) waitForWork(ctx context.Context, wakeKeys []string, deadline time.Time, due time.Duration) waitOutcome {
	d := time.Until(deadline)
	var dueTimer <-chan time.Time
	if due >= 0 && due < d {
		if due == 0 {
			return waitWoken
		}
		d = due
		t := time.NewTimer(d)
		defer t.Stop()
		dueTimer = t.C
	}
	if d <= 0 {
		return waitTimedOut
	}
	sliced := p.slice > 0 && d > p.slice
	if sliced {
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
	done := make(chan []string, 1)
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		defer cancel()
		got, err := p.block.Do(bctx, cmd...).StringSlice()
		if err == nil && len(got) == 2 && left.Load() && !p.isClosed() {
			// Nobody will fetch for this token: hand it to another waiter.
			_ = p.rdb.LPush(bctx, got[0], got[1]).Err()
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			got = []string{"error"} // connection trouble: fetch again, the fetch reports it
		}
		done <- got
	}()
	select {
	case got := <-done:
		if len(got) > 0 || sliced || time.Now().Before(deadline.Add(-time.Millisecond)) {
			return waitWoken
		}
		return waitTimedOut
	case <-dueTimer:
		left.Store(true)
		return waitWoken
	case <-ctx.Done():
		left.Store(true)
		return waitEnded
	case <-p.closed:
		left.Store(true)
		return waitEnded
	}
}

// sleep waits d, or until ctx ends or the provider closes.
func (p *Provider) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-p.closed:
	}
}

func (p *Provider) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}
