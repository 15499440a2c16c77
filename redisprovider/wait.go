package redisprovider

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

// Long polling (DESIGN.md S6). A fetch runs its script; when nothing is eligible the script
// reports when delayed work or a held lock next comes due, and the fetch blocks (one BLPOP on
// its wake lists) until a wake token arrives, that time comes, the poll timeout passes, ctx ends
// or the provider closes.
//
// No lost wakeups: every script that makes work visible pushes a token to the wake lists of the
// fetchers that may take it, in the same script, so work that arrives between the empty fetch and
// the BLPOP ends the BLPOP at once; an enqueue whose delayed work becomes the earliest due time
// pushes one too, so a waiter learns the new time. Tokens live wakeTTL.
//
// An idle fetcher costs about one command per poll timeout: when a wait on the same wake lists
// ended by timeout, without a token, less than idleWindow ago, the next fetch starts with the
// BLPOP instead of the script. That is sound for work that becomes visible (it pushes a token,
// still in the list since idleWindow < wakeTTL), but a lock taken by another process since the
// script last ran wakes nobody, and only a script run reclaims it once expired. So a fetcher runs
// its script at least once per rescan period, its own lock timeout (at most maxRescan): a lock
// taken after the last run expires no sooner than one lock timeout after it was taken, so the
// next run sees it, and the fetcher waits for its expiry (see rescanPeriod).
//
// Likewise after an ack-and-fetch that found nothing and registered its caller's next wait in the
// same script (FetchOptions.NextPoll): the fetch that follows starts with the BLPOP, waiting no
// longer than that registration covers (idleState.prepared). A busy runtime's dispatchers go
// idle this way between turns, one script fewer each time.

const (
	// idleWindow is how long a timed-out wait lets the next fetch skip its script.
	idleWindow = time.Second
	// wakeTTL is how long a wake list lives after its last token (lib.lua's wake uses the same).
	wakeTTL = 5 * time.Second
	// maxRescan bounds the rescan period, so that a lock taken with a shorter timeout than this
	// fetcher's is reclaimed at most this late.
	maxRescan = 5 * time.Second
)

type waitOutcome int

const (
	waitWoken    waitOutcome = iota // a wake token arrived, or delayed work came due: fetch again
	waitTimedOut                    // the poll timeout passed without a token
	waitEnded                       // ctx ended or the provider closed
	waitFailed                      // the blocking command failed
)

// rescanPeriod is how long an idle fetcher with these lock timeouts may go without its script.
func rescanPeriod(lockTimeouts ...time.Duration) time.Duration {
	d := maxRescan
	for _, l := range lockTimeouts {
		if l > 0 {
			d = min(d, l)
		}
	}
	return d
}

// waitRegistration is how long an empty fetch registers its wake lists (or filter) for wake-ups:
// as long as the fetch may wait, one poll, plus the rescan period idle fetches may skip the script
// for (see poll), plus a margin; 0 (nothing registered) for a fetch that will not wait, such as
// the fetch part of an ack-and-fetch.
func waitRegistration(pollTimeout, rescan time.Duration) time.Duration {
	if pollTimeout <= 0 {
		return 0
	}
	return pollTimeout + rescan + wakeTTL
}

// idleState remembers, per set of wake lists, a wait that timed out.
type idleState struct {
	mu    sync.Mutex
	until map[string]idleEntry
}

type idleEntry struct {
	skipUntil time.Time // the next fetch may skip its script before this
	dueAt     time.Time // when delayed work or a lock comes due (zero: never)
	scanned   time.Time // when the script last ran
}

// poll runs fetch until it finds something or pollTimeout passes. fetch returns found, or the
// server's time and next due time (ms since the epoch; -1 when nothing is due). An idle fetch may
// skip its script (mayIdleSkip) for at most rescan since the script last ran. A failed wait ends
// the poll with a retryable error, so that a caller backs off instead of spinning on the script.
func (p *Provider) poll(ctx context.Context, op string, wakeKeys []string, pollTimeout, rescan time.Duration, mayIdleSkip bool,
	fetch func() (found bool, serverNowMs, nextDueMs int64, err error)) error {
	deadline := time.Now().Add(pollTimeout)
	sig := waitSig(wakeKeys)
	var e idleEntry
	skip := false
	if pollTimeout > 0 && mayIdleSkip {
		e, skip = p.idle.skip(sig, rescan)
	}
	for {
		if !skip {
			e.scanned = time.Now()
			found, now, next, err := fetch()
			if err != nil || found || pollTimeout <= 0 {
				return err
			}
			e.dueAt = time.Time{}
			if next >= 0 {
				e.dueAt = e.scanned.Add(time.Duration(next-now) * time.Millisecond)
			}
		}
		skip = false
		outcome, err := p.waitForWork(ctx, wakeKeys, deadline, e.dueAt)
		switch outcome {
		case waitTimedOut:
			if mayIdleSkip {
				p.idle.note(sig, e)
			}
			return nil
		case waitEnded:
			return nil
		case waitFailed:
			return provider.NewRetryableError(op, "long-poll wait failed: "+err.Error()).WithCause(err)
		}
	}
}

// skip reports whether the next fetch on sig may start with its wait, and what it knows.
func (s *idleState) skip(sig string, rescan time.Duration) (idleEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.until[sig]
	if !ok {
		return idleEntry{}, false
	}
	delete(s.until, sig)
	now := time.Now()
	if !now.Before(e.skipUntil) || !now.Before(e.scanned.Add(rescan)) || (!e.dueAt.IsZero() && !now.Before(e.dueAt)) {
		return idleEntry{}, false
	}
	return e, true
}

// waitSig names a set of wake lists in idleState.
func waitSig(wakeKeys []string) string { return strings.Join(wakeKeys, "\x00") }

// prepared records a fetch that found nothing and registered the next fetch's wait on wakeKeys
// (an ack-and-fetch with FetchOptions.NextPoll), serverNowMs and nextDueMs as its script reported
// them. The next fetch on them may start with its wait, for as long as the registration covers
// (registered: the registration less the tokens' lifetime) and before delayed work comes due.
func (s *idleState) prepared(wakeKeys []string, serverNowMs, nextDueMs int64, registered time.Duration) {
	now := time.Now()
	e := idleEntry{scanned: now, dueAt: now.Add(registered)}
	if nextDueMs >= 0 {
		if due := now.Add(time.Duration(nextDueMs-serverNowMs) * time.Millisecond); due.Before(e.dueAt) {
			e.dueAt = due
		}
	}
	s.note(waitSig(wakeKeys), e)
}

// note records a wait on sig that timed out (or, from prepared, a registered one): the next fetch
// may skip its script for idleWindow.
func (s *idleState) note(sig string, e idleEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]idleEntry{}
	}
	e.skipUntil = time.Now().Add(idleWindow)
	s.until[sig] = e
}

// testHookTokenDelivered, when set, runs after a wait's BLPOP got a token and handed it to the
// waiter (tests use it to end the waiter's ctx at that moment).
var testHookTokenDelivered func()

// waitForWork blocks until a wake token arrives on one of wakeKeys, until dueAt (zero: no due
// time) or deadline, or until ctx ends or the provider closes. A failed BLPOP is waitFailed.
//
// Redis checks blocking timeouts on its hz tick (100 ms at the default hz 10), so a wait bounded
// by a due time also runs a local timer and returns on time. A token that reaches a BLPOP whose
// waiter has left (or leaves at that moment) is given back to its list for another waiter.
func (p *Provider) waitForWork(ctx context.Context, wakeKeys []string, deadline, dueAt time.Time) (waitOutcome, error) {
	nudged := p.nudged()
	d := time.Until(deadline)
	var dueTimer <-chan time.Time
	if !dueAt.IsZero() {
		due := time.Until(dueAt)
		if due <= 0 {
			return waitWoken, nil
		}
		if due < d {
			d = due
			t := time.NewTimer(d)
			defer t.Stop()
			dueTimer = t.C
		}
	}
	if d <= 0 {
		return waitTimedOut, nil
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

	// Who owns a token the BLPOP receives: the waiter (delivered) or, once it left, nobody (the
	// goroutine gives it back). One compare-and-swap decides, so a token is never dropped.
	const (
		waiting int32 = iota
		delivered
		left
	)
	var state atomic.Int32
	type result struct {
		token []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		defer cancel()
		got, err := p.block.Do(bctx, cmd...).StringSlice()
		if errors.Is(err, redis.Nil) {
			got, err = nil, nil
		}
		if err == nil && len(got) == 2 {
			if !state.CompareAndSwap(waiting, delivered) {
				p.giveBack(got)
				return
			}
			if h := testHookTokenDelivered; h != nil {
				h()
			}
		}
		done <- result{got, err}
	}()
	// leave detaches the waiter from the BLPOP; a token delivered meanwhile is returned.
	leave := func() []string {
		if state.CompareAndSwap(waiting, left) {
			return nil
		}
		return (<-done).token
	}
	select {
	case r := <-done:
		switch {
		case r.err != nil && (ctx.Err() != nil || p.isClosed()):
			return waitEnded, nil
		case r.err != nil:
			return waitFailed, r.err
		case len(r.token) > 0 || sliced || time.Now().Before(deadline.Add(-time.Millisecond)):
			return waitWoken, nil
		}
		return waitTimedOut, nil
	case <-dueTimer:
		leave() // a token delivered meanwhile is spent on the fetch that follows
		return waitWoken, nil
	case <-nudged:
		leave()
		return waitWoken, nil
	case <-ctx.Done():
		p.giveBack(leave())
		return waitEnded, nil
	case <-p.closed:
		p.giveBack(leave())
		return waitEnded, nil
	}
}

// Nudge makes every fetch of this provider that is waiting for work look again at once, and
// forgets what idle fetchers remember about due times. Use it after moving the server's clock (a
// test's virtual clock, such as dxtest's): delayed work may be due now although no enqueue woke a
// fetcher. It costs nothing in Redis.
func (p *Provider) Nudge() {
	p.nudgeMu.Lock()
	close(p.nudge)
	p.nudge = make(chan struct{})
	p.nudgeMu.Unlock()
	p.idle.mu.Lock()
	clear(p.idle.until)
	p.idle.mu.Unlock()
}

func (p *Provider) nudged() <-chan struct{} {
	p.nudgeMu.Lock()
	defer p.nudgeMu.Unlock()
	return p.nudge
}

// giveBack returns a wake token (BLPOP's {key, token}, or nil for none) to its list, with the
// list's TTL: the list may have been deleted when the token was popped.
func (p *Provider) giveBack(token []string) {
	if len(token) != 2 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = p.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.LPush(ctx, token[0], token[1])
		pipe.PExpire(ctx, token[0], wakeTTL)
		return nil
	})
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
