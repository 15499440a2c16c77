package redisprovider

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/duroxide-go/dxredis/provider"
)

// Fetching across partitions (namespaces of several; one partition keeps poll, wait.go).
//
// A fetch must find the oldest ready work over all partitions without running a script in each
// for every fetch, and must wait without holding a blocking connection per partition per
// dispatcher slot. The provider keeps, per fetch class (the same kind of fetch with the same
// filter: the wake lists it listens to) and partition, what its last look there found:
//   - quiet: nothing was takeable and the fetch script registered the class's wake lists there,
//     so new work pushes a wake token; until the rescan period ends (a lock another process takes
//     wakes nobody: only a script run reclaims it once expired, see wait.go) or a due time comes,
//     the partition need not be looked at;
//   - the sequence number of its oldest takeable work ("head"), which the fetch scripts report
//     after each item they hand out (mode 'h') and peeks report (mode 'p'); sequence numbers of
//     a namespace of several partitions are a clock (lib.lua, next_seq), so heads compare across
//     partitions.
//
// A fetch looks at the partitions that are not quiet, oldest head first; when two or more have no
// known head it first peeks them (one script each, pipelined). With none left it waits: one
// watcher goroutine per partition blocks (BLPOP) on the wake lists of the classes that have
// waiting fetches in this process, and hands each token to one of them, which then looks at that
// partition. So a process holds at most one blocking connection per partition, whatever its
// dispatcher concurrency; a token for a class without a waiter here is given back (another process
// may wait for it) and the class notes the partition as having news.
//
// An ack-and-fetch stays in its partition (one script) only while that partition's head is the
// oldest known; otherwise it acks and then fetches as above, so a busy partition cannot starve the
// others.

// hubRearm bounds one watcher BLPOP; a watcher is re-armed sooner when the set of waiting classes
// changes (a kick: a token on its control list).
const hubRearm = 30 * time.Second

// partHub is the provider's cross-partition fetch state.
type partHub struct {
	p        *Provider
	mu       sync.Mutex
	classes  map[string]*fetchClass
	watchers []*watcher // per partition, started with the first wait
	started  bool
	waitErr  error // the last error of a watcher's blocking command
}

// fetchClass is the state of one kind of fetch (orchestration or worker, with one filter).
type fetchClass struct {
	keys    [][]string  // the wake lists, per partition
	parts   []partState // per partition
	waiters []*hubWaiter
	looked  chan struct{} // closed (and replaced) when a fetch ends a look it claimed
}

type partState struct {
	state      int       // what the last look found: unknown, quiet, head or news
	head       int64     // with head: the sequence number of the oldest takeable work
	quietUntil time.Time // with quiet: until then
	dueAt      time.Time // with quiet: when delayed work or a lock there comes due (zero: none known)
	registered time.Time // until when the class's wake lists there are registered (whatever the state)
	// stale: quiet, but no fetch of this process has waited since (no watcher took the class's
	// wake tokens): a fetch that will not wait looks again
	stale bool
}

const (
	stUnknown = iota // not looked at, or the look is stale: a peek tells
	stQuiet          // nothing takeable, registered for wake-ups (until quietUntil or dueAt)
	stHead           // takeable work, the oldest at head
	stNews           // a wake token announced work: newer than every known head
	stLooking        // a fetch of this process is looking at it (the others wait for what it finds)
)

type hubWaiter struct {
	ch chan int // a partition with news for the waiter
}

type watcher struct {
	part     int
	ctl      string          // the control list a kick pushes to while the watcher blocks
	armed    map[string]bool // the wake lists of the BLPOP in progress
	blocking bool            // a BLPOP is in progress (else the watcher waits on wake)
	wake     chan struct{}   // a kick of a watcher that does not block
}

// partTry runs one fetch script in a partition: mode 'h' fetches (and reports the next head), 'p'
// peeks. It returns found, the server's time and next due time (ms; -1 none) and the head.
type partTry func(ctx context.Context, part int, mode string) (found bool, now, next, head int64, err error)

func (h *partHub) class(sig string, keys func(part int) []string) *fetchClass {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.classes == nil {
		h.classes = map[string]*fetchClass{}
	}
	c := h.classes[sig]
	if c == nil {
		n := h.p.keys.Partitions()
		c = &fetchClass{keys: make([][]string, n), parts: make([]partState, n), looked: make(chan struct{})}
		for i := range n {
			c.keys[i] = keys(i)
		}
		h.classes[sig] = c
	}
	return c
}

// candidates are the partitions a fetch of c should look at now: known heads oldest first, then
// those not looked at, then those with news; peek lists the ones not looked at when there are
// two candidates or more (their heads decide the order). The ones not looked at become this
// fetch's to look at: the other fetches of the class skip them until it has (a rescan or a start
// costs one look per partition, not one per dispatcher).
func (h *partHub) candidates(c *fetchClass, now time.Time, waits bool) (cands, peek []int, claimed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	rank := func(s *partState) int64 {
		switch s.state {
		case stHead:
			return s.head
		case stLooking:
			return math.MaxInt64 - 1
		}
		return math.MaxInt64
	}
	for i := range c.parts {
		s := &c.parts[i]
		switch s.state {
		case stLooking:
			claimed = true
			continue
		case stQuiet:
			if now.Before(s.quietUntil) && (s.dueAt.IsZero() || now.Before(s.dueAt)) && (waits || !s.stale) {
				continue
			}
			s.state = stUnknown
		}
		cands = append(cands, i)
		if s.state == stUnknown {
			peek = append(peek, i)
			s.state = stLooking
		}
	}
	slices.SortStableFunc(cands, func(a, b int) int {
		return cmp.Compare(rank(&c.parts[a]), rank(&c.parts[b]))
	})
	if len(cands) < 2 {
		peek = nil
	}
	return cands, peek, claimed
}

// lookedLocked wakes the fetches waiting for another's look to end.
func lookedLocked(c *fetchClass) {
	close(c.looked)
	c.looked = make(chan struct{})
}

// known are the partitions of c known to hold work, oldest first (an ack-and-fetch that leaves its
// partition looks there, without peeks).
func (h *partHub) known(c *fetchClass) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int
	for i, s := range c.parts {
		if s.state == stHead || s.state == stNews {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int {
		ha, hb := c.parts[a].head, c.parts[b].head
		if c.parts[a].state == stNews {
			ha = math.MaxInt64
		}
		if c.parts[b].state == stNews {
			hb = math.MaxInt64
		}
		return cmp.Compare(ha, hb)
	})
	return out
}

// unclaim returns the partitions of parts this fetch claimed and did not look at to the others.
func (h *partHub) unclaim(c *fetchClass, parts []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, part := range parts {
		if s := &c.parts[part]; s.state == stLooking {
			*s = partState{registered: s.registered}
		}
	}
	lookedLocked(c)
}

// hintOthers tells waiting fetches of c about partitions a peek found work in.
func (h *partHub) hintOthers(c *fetchClass, parts []int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, part := range parts {
		if c.parts[part].state == stHead {
			h.handOffLocked(c, part)
		}
	}
}

// quiet reports whether part is quiet for c now.
func (h *partHub) quiet(c *fetchClass, part int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, now := c.parts[part], time.Now()
	return s.state == stQuiet && now.Before(s.quietUntil) && (s.dueAt.IsZero() || now.Before(s.dueAt))
}

// noteEmpty records a look at part that found nothing takeable and registered for wake-ups for
// registered (0: not registered: the partition stays to be looked at).
func (h *partHub) noteEmpty(c *fetchClass, part int, serverNow, next int64, rescan, registered time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer lookedLocked(c)
	s := &c.parts[part]
	now := time.Now()
	reg := s.registered
	if registered > 0 {
		// The script registered for registered; tokens live wakeTTL, so a wait that starts within
		// registered - wakeTTL still finds every token pushed since.
		reg = now.Add(registered - wakeTTL)
	}
	if !now.Before(reg) {
		*s = partState{}
		return
	}
	*s = partState{state: stQuiet, quietUntil: minTime(now.Add(rescan), reg), registered: reg, stale: len(c.waiters) == 0}
	if next >= 0 {
		s.dueAt = now.Add(time.Duration(next-serverNow) * time.Millisecond)
	}
}

// noteHead records part's head after a look there that took an item. -1, nothing else takeable:
// quiet while an earlier look's registration for wake-ups lasts (within the rescan period), else
// to be looked at.
func (h *partHub) noteHead(c *fetchClass, part int, head int64, rescan time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer lookedLocked(c)
	s := &c.parts[part]
	if head >= 0 {
		*s = partState{state: stHead, head: head, registered: s.registered}
		return
	}
	now := time.Now()
	if now.Before(s.registered) {
		*s = partState{state: stQuiet, quietUntil: minTime(now.Add(rescan), s.registered), registered: s.registered, stale: len(c.waiters) == 0}
		return
	}
	*s = partState{}
}

// noteNewsLocked records that a wake token announced work in part.
func noteNewsLocked(c *fetchClass, part int) {
	if s := &c.parts[part]; s.state != stHead {
		*s = partState{state: stNews, registered: s.registered}
	}
}

// staySlack is how much older (in the sequence numbers' microseconds, lib.lua's next_seq) another
// partition's oldest work may be than an ack-and-fetch's own partition's before the fetch leaves
// it: one script instead of two for the common case, and no partition waits much longer than
// under strict oldest-first.
const staySlack = int64(50 * time.Millisecond / time.Microsecond)

// stays reports whether an ack-and-fetch in part may fetch there too: its oldest work is known and
// no other partition is known to hold work older by more than staySlack (nor, when part's is not
// known, any work at all).
func (h *partHub) stays(c *fetchClass, part int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := c.parts[part]
	for i, s := range c.parts {
		if i == part {
			continue
		}
		switch s.state {
		case stHead:
			if mine.state != stHead || s.head+staySlack < mine.head {
				return false
			}
		case stUnknown, stNews:
			if mine.state != stHead {
				return false
			}
		}
	}
	return true
}

// fetchFrom looks for work of class c over the partitions (see above) until try finds some or
// pollTimeout passes.
// With knownOnly it does not wait and looks only in the partitions known to hold work (an
// ack-and-fetch that leaves its partition for older work elsewhere).
func (h *partHub) fetchFrom(ctx context.Context, op string, c *fetchClass, pollTimeout, rescan time.Duration, knownOnly bool, try partTry) error {
	deadline := time.Now().Add(pollTimeout)
	registered := waitRegistration(pollTimeout, rescan)
	hint := -1 // a partition a wake token named: a woken fetch looks there only
	for {
		var cands []int
		claimed := false
		if knownOnly {
			if cands = h.known(c); len(cands) == 0 {
				knownOnly = false // nothing known: look as any fetch that does not wait
			}
		}
		switch {
		case knownOnly:
		case hint >= 0:
			cands = []int{hint}
		default:
			var peek []int
			cands, peek, claimed = h.candidates(c, time.Now(), pollTimeout > 0)
			if len(peek) > 0 {
				h.peek(ctx, c, peek, rescan, registered, try)
				cands, _, claimed = h.candidates(c, time.Now(), pollTimeout > 0)
				if len(cands) > 1 {
					h.hintOthers(c, cands[1:])
				}
			}
		}
		var firstErr error
		for i, part := range cands {
			if h.quiet(c, part) { // another fetch of this process just found it empty
				continue
			}
			found, now, next, head, err := try(ctx, part, "h")
			if err != nil {
				h.unclaim(c, []int{part})
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			if found {
				h.noteHead(c, part, head, rescan)
				h.unclaim(c, cands[i+1:])
				return nil
			}
			h.noteEmpty(c, part, now, next, rescan, registered)
		}
		if firstErr != nil {
			return firstErr
		}
		if ctx.Err() != nil || h.p.isClosed() {
			return nil
		}
		if knownOnly { // the known ones were taken meanwhile: look as any fetch that does not wait
			knownOnly = false
			continue
		}
		if len(cands) == 0 && claimed {
			// Another fetch of this process is looking at the partitions left: what it finds
			// decides (a fetch that does not wait must not return empty before).
			if !h.waitLooked(ctx, c) {
				return nil
			}
			continue
		}
		if pollTimeout <= 0 {
			return nil
		}
		var again bool
		var err error
		hint, again, err = h.wait(ctx, c, deadline)
		if err != nil {
			return provider.NewRetryableError(op, "long-poll wait failed: "+err.Error()).WithCause(err)
		}
		if !again {
			return nil
		}
	}
}

// waitLooked waits until a look another fetch of c claimed ends; false when ctx ends or the
// provider closes.
func (h *partHub) waitLooked(ctx context.Context, c *fetchClass) bool {
	h.mu.Lock()
	ch := c.looked
	looking := slices.ContainsFunc(c.parts, func(s partState) bool { return s.state == stLooking })
	h.mu.Unlock()
	if !looking {
		return true
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	case <-h.p.closed:
		return false
	}
}

// peek looks at the head of each partition in parts (at once: one script each).
func (h *partHub) peek(ctx context.Context, c *fetchClass, parts []int, rescan, registered time.Duration, try partTry) {
	type res struct {
		now, next, head int64
		err             error
	}
	out := make([]res, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Go(func() {
			_, now, next, head, err := try(ctx, part, "p")
			out[i] = res{now: now, next: next, head: head, err: err}
		})
	}
	wg.Wait()
	for i, part := range parts {
		r := out[i]
		switch {
		case r.err != nil:
			h.unclaim(c, []int{part})
		case r.head >= 0:
			h.noteHead(c, part, r.head, rescan)
		default:
			h.noteEmpty(c, part, r.now, r.next, rescan, registered)
		}
	}
}

// wait blocks until a watcher reports news for c (the partition is returned), a partition's quiet
// time ends or its due time comes (-1), deadline passes (false), or ctx ends or the provider
// closes (false). A watcher whose blocking command failed ends the waits of its classes with its
// error, so that callers back off instead of spinning on their scripts.
func (h *partHub) wait(ctx context.Context, c *fetchClass, deadline time.Time) (int, bool, error) {
	w := &hubWaiter{ch: make(chan int, 1)}
	h.mu.Lock()
	c.waiters = append(c.waiters, w)
	first := len(c.waiters) == 1
	if first { // the watchers take the class's tokens again, those left in the lists included
		for i := range c.parts {
			c.parts[i].stale = false
		}
	}
	until := deadline
	for _, s := range c.parts {
		if s.state != stQuiet {
			continue
		}
		until = minTime(until, s.quietUntil)
		if !s.dueAt.IsZero() {
			until = minTime(until, s.dueAt)
		}
	}
	h.startLocked()
	h.mu.Unlock()
	if first {
		h.kick(c)
	}
	defer h.leave(c, w)
	nudged := h.p.nudged()
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case part := <-w.ch:
		h.mu.Lock()
		defer h.mu.Unlock()
		if part < 0 {
			return -1, false, h.waitErr
		}
		noteNewsLocked(c, part)
		return part, true, nil
	case <-t.C:
		return -1, time.Now().Before(deadline), nil
	case <-nudged:
		h.forget()
		return -1, true, nil
	case <-ctx.Done():
		return -1, false, nil
	case <-h.p.closed:
		return -1, false, nil
	}
}

// failLocked ends the waits of the classes listening in part with err (a failed watcher).
func (h *partHub) failLocked(part int, err error) {
	h.waitErr = err
	for _, c := range h.classes {
		if len(c.keys[part]) == 0 {
			continue
		}
		for _, w := range c.waiters {
			select {
			case w.ch <- -1:
			default:
			}
		}
	}
}

// leave removes w from c's waiters; a hint delivered meanwhile is passed to another waiter.
func (h *partHub) leave(c *fetchClass, w *hubWaiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.waiters = slices.DeleteFunc(c.waiters, func(x *hubWaiter) bool { return x == w })
	if len(c.waiters) == 0 { // from now on no watcher takes the class's tokens
		for i := range c.parts {
			c.parts[i].stale = true
		}
	}
	select {
	case part := <-w.ch:
		if part >= 0 && !h.handOffLocked(c, part) {
			noteNewsLocked(c, part)
		}
	default:
	}
}

// handOffLocked gives news of part to one of c's waiters; false when none waits.
func (h *partHub) handOffLocked(c *fetchClass, part int) bool {
	for _, w := range c.waiters {
		select {
		case w.ch <- part:
			return true
		default:
		}
	}
	return false
}

// touch forgets what the hub knows of part: work older than its known head may be takeable there
// again (this process abandoned an item or a turn).
func (h *partHub) touch(part int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.classes {
		if s := &c.parts[part]; s.state != stNews {
			*s = partState{registered: s.registered}
		}
	}
}

// forget drops what the hub knows of every partition (Nudge: the clock moved).
func (h *partHub) forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.classes {
		clear(c.parts)
	}
}

// startLocked starts the watchers and the outbox sweeps (once).
func (h *partHub) startLocked() {
	if h.started {
		return
	}
	h.started = true
	n := h.p.keys.Partitions()
	h.watchers = make([]*watcher, n)
	ctl := "wake:x:" + newAttemptID()
	for i := range n {
		w := &watcher{part: i, ctl: h.p.keys.Prefix(i) + ctl, wake: make(chan struct{}, 1)}
		h.watchers[i] = w
		go h.watch(w)
	}
	go h.p.sweepOutboxes()
}

// start starts the watchers and the outbox sweeps, with the first fetch.
func (h *partHub) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.startLocked()
}

// kick re-arms the watchers whose BLPOP does not include c's wake lists.
func (h *partHub) kick(c *fetchClass) {
	h.mu.Lock()
	var ctls []string
	for i, w := range h.watchers {
		for _, k := range c.keys[i] {
			if !w.armed[k] {
				if w.blocking {
					ctls = append(ctls, w.ctl)
				} else {
					select {
					case w.wake <- struct{}{}:
					default:
					}
				}
				break
			}
		}
	}
	h.mu.Unlock()
	if len(ctls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pipe := h.p.rdb.Pipeline()
	for _, k := range ctls {
		pipe.LPush(ctx, k, "1")
		pipe.PExpire(ctx, k, wakeTTL)
	}
	_, _ = pipe.Exec(ctx)
}

// keysLocked are the wake lists watcher w should block on: those of classes with waiters.
func (h *partHub) keysLocked(w *watcher) []string {
	var keys []string
	w.armed = map[string]bool{}
	for _, c := range h.classes {
		if len(c.waiters) == 0 {
			continue
		}
		for _, k := range c.keys[w.part] {
			if !w.armed[k] {
				w.armed[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// watch is a partition's watcher (see above).
func (h *partHub) watch(w *watcher) {
	backoff := 50 * time.Millisecond
	for !h.p.isClosed() {
		h.mu.Lock()
		keys := h.keysLocked(w)
		w.blocking = len(keys) > 0
		h.mu.Unlock()
		if len(keys) == 0 { // no fetch of this process waits: hold no connection
			select {
			case <-w.wake:
			case <-h.p.closed:
			}
			continue
		}
		d := hubRearm
		if h.p.slice > 0 {
			d = min(d, h.p.slice)
		}
		cmd := make([]any, 0, len(keys)+3)
		cmd = append(cmd, "BLPOP", w.ctl)
		for _, k := range keys {
			cmd = append(cmd, k)
		}
		cmd = append(cmd, strconv.FormatFloat(d.Seconds(), 'f', 3, 64))
		ctx, cancel := context.WithTimeout(context.Background(), d+5*time.Second)
		stop := context.AfterFunc(h.p.closeCtx, cancel)
		got, err := h.p.block.Do(ctx, cmd...).StringSlice()
		stop()
		cancel()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if h.p.isClosed() {
				return
			}
			h.mu.Lock()
			h.failLocked(w.part, err)
			h.mu.Unlock()
			h.p.sleep(context.Background(), backoff)
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if len(got) != 2 || got[0] == w.ctl {
			continue
		}
		h.deliver(w.part, got)
	}
}

// deliver hands a wake token popped from list token[0] of part to a waiter of a class listening
// to that list; without one, it is given back and the classes note the news.
func (h *partHub) deliver(part int, token []string) {
	h.mu.Lock()
	delivered, waiting := false, false
	for _, c := range h.classes {
		if !slices.Contains(c.keys[part], token[0]) {
			continue
		}
		waiting = waiting || len(c.waiters) > 0
		if !delivered && h.handOffLocked(c, part) {
			delivered = true
			continue
		}
		noteNewsLocked(c, part)
	}
	h.mu.Unlock()
	// A token nobody here waits for goes back to its list for another process; one whose
	// waiters are all about to look already (their hint is pending) is spent on them.
	if !delivered && !waiting {
		h.p.giveBack(token)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
