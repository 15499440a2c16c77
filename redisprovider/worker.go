package redisprovider

// Worker side: the worker queue (activities), session affinity and tag routing. Each method is one
// script call (scripts/work_*.lua, helpers in scripts/lib_worker.lua); FetchWorkItem repeats its
// call only around long-poll waits.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/google/uuid"
)

// Worker items live in their instance's partition, so that the orchestration ack schedules and
// cancels them atomically; a session's items live in its session's partition (keys.go,
// Partitions). A worker lock token names its partition: in a namespace of several, the first two
// hex digits of its nonce are the partition's number (workNonce).

// workPartition is the partition an activity's item lives in.
func (p *Provider) workPartition(r route) int {
	if r.session != "" {
		return p.keys.SessionPartition(r.session)
	}
	if p.keys.Partitions() > 1 && p.cappedTags()[dxredis.WorkTagKey(r.tag)] {
		return 0 // a capped tag's items live with its caps, so that a fetch checks them atomically (caps.go)
	}
	return p.keys.PartitionOf(r.instance)
}

// workNonce is a new worker lock nonce for partition part (36 characters, as the scripts want).
func (p *Provider) workNonce(part int) string {
	n := uuid.NewString()
	if p.keys.Partitions() == 1 {
		return n
	}
	return fmt.Sprintf("%02x", part) + n[2:]
}

// workTokenPartition is the partition a worker lock token names, or -1 when it names none.
func (p *Provider) workTokenPartition(token string) int {
	if p.keys.Partitions() == 1 {
		return 0
	}
	if len(token) < 2 {
		return -1
	}
	n, err := strconv.ParseUint(token[:2], 16, 8)
	if err != nil || int(n) >= p.keys.Partitions() {
		return -1
	}
	return int(n)
}

// workToken checks a worker lock token and returns its partition.
func (p *Provider) workToken(op, token string) (int, error) {
	if err := checkToken(op, token); err != nil {
		return 0, err
	}
	part := p.workTokenPartition(token)
	if part < 0 {
		return 0, provider.NewPermanentError(op, "Invalid lock token: not a worker lock token of this namespace").WithKind(provider.ErrInvalidLockToken)
	}
	return part, nil
}

// sessionCleanupBatch is the most sessions one CleanupOrphanedSessions call deletes, so that one
// script never blocks Redis for long; the runtime calls it periodically.
const sessionCleanupBatch = 1000

// activityRoute validates an ActivityExecute for the worker queue and returns its JSON and the
// routing fields the scripts take as ARGV: instance, execution, activity id, session and tag (the
// empty string for none). Empty session ids and tags are therefore refused.
func (p *Provider) activityRoute(op string, item provider.WorkItem) (route, error) {
	js, err := p.encodeItem(op, item, true)
	if err != nil {
		return route{}, err
	}
	a := item.Kind.(provider.ActivityExecute)
	if a.SessionID != nil && *a.SessionID == "" {
		return route{}, invalid(op, "ActivityExecute %s/%d has an empty session_id (omit it instead)", a.Instance, a.ID)
	}
	if a.Tag != nil && *a.Tag == "" {
		return route{}, invalid(op, "ActivityExecute %s/%d has an empty tag (omit it instead)", a.Instance, a.ID)
	}
	return route{js, a.Instance, strconv.FormatUint(a.ExecutionID, 10), strconv.FormatUint(a.ID, 10),
		deref(a.SessionID), deref(a.Tag)}, nil
}

// route is an ActivityExecute as work_enqueue and orch_ack's worker items take it.
type route struct{ json, instance, execution, activity, session, tag string }

// EnqueueForWorker implements provider.Provider: the ActivityExecute is visible at once and wakes a
// waiting fetcher. Any other variant, an empty instance, an empty session id or tag, or an item
// larger than MaxPayloadBytes is ErrInvalidInput, with nothing written.
func (p *Provider) EnqueueForWorker(ctx context.Context, item provider.WorkItem) error {
	const op = "enqueue_for_worker"
	r, err := p.activityRoute(op, item)
	if err != nil {
		return err
	}
	args, err := argsOf(op, luascripts.WorkEnqueue, "item", r.json, "instance", r.instance, "execution", r.execution,
		"activity", r.activity, "session", r.session, "tag", r.tag)
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.WorkEnqueue.Op, p.workPartition(r), args...)
	return err
}

// FetchWorkItem implements provider.Provider. It locks the visible item with the lowest enqueue
// sequence among those the tag filter and the session rules allow; expired item locks are
// reclaimed (attempt + 1), delayed items that came due and expired sessions are released by the
// same script. With nothing eligible it long-polls: it waits for a wake-up, for delayed work or an
// expiring lock to come due, or for pollTimeout, then returns (nil, nil) (also when ctx ends or the
// provider closes while waiting).
//
// With session != nil it also returns items of sessions session.OwnerID holds and of unowned or
// expired sessions, claiming those for session.LockTimeout; taking an item of a session the owner
// already holds refreshes its last activity and extends (never shortens) its lock. TagFilterNone
// returns nil without touching Redis (after waiting pollTimeout, so that a polling loop does not
// spin). An invalid tag filter, an empty OwnerID or a negative duration is ErrInvalidInput.
func (p *Provider) FetchWorkItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter) (*provider.LockedWorkItem, error) {
	const op = "fetch_work_item"
	if p.keys.Partitions() > 1 {
		return p.fetchWorkParts(ctx, op, lockTimeout, pollTimeout, session, tags, false)
	}
	args, wakeKeys, _, rescan, skip, err := p.workFetchArgs(op, 0, lockTimeout, pollTimeout, session, tags, "")
	if err != nil {
		return nil, err
	}
	if skip {
		p.sleep(ctx, pollTimeout)
		return nil, nil
	}
	// Worker wake lists are per tag filter and owner, so every waiter on them can take what they
	// announce: idle fetches may skip their script (see poll).
	var locked *provider.LockedWorkItem
	err = p.poll(ctx, op, wakeKeys, pollTimeout, rescan, true, func() (bool, int64, int64, error) {
		args[workFetchToken] = uuid.NewString() // each try locks under a nonce of its own
		res, err := p.run(ctx, op, luascripts.WorkFetch.Op, 0, args...)
		if err != nil {
			return false, 0, 0, err
		}
		found, now, next, _, err := workFetchReply(op, res, &locked)
		return found, now, next, err
	})
	return locked, err
}

// FetchWorkItems implements provider.WorkBatchFetcher: in a namespace of one partition one
// work_fetch_many call locks up to fetch.N items (at most maxAckBatch), waiting as FetchWorkItem
// does while there are none; in a namespace of several it is FetchWorkItem (one item).
func (p *Provider) FetchWorkItems(ctx context.Context, fetch provider.WorkFetch, pollTimeout time.Duration) ([]*provider.LockedWorkItem, error) {
	const op = "fetch_work_items"
	if fetch.N < 1 {
		return nil, invalid(op, "fetch at least 1 item, got %d", fetch.N)
	}
	if fetch.N == 1 || p.keys.Partitions() > 1 {
		it, err := p.FetchWorkItem(ctx, fetch.LockTimeout, pollTimeout, fetch.Session, fetch.Tags)
		if it == nil {
			return nil, err
		}
		return []*provider.LockedWorkItem{it}, err
	}
	args, wakeKeys, _, rescan, skip, err := p.workFetchArgs(op, 0, fetch.LockTimeout, pollTimeout, fetch.Session, fetch.Tags, "")
	if err != nil {
		return nil, err
	}
	if skip {
		p.sleep(ctx, pollTimeout)
		return nil, nil
	}
	var items []*provider.LockedWorkItem
	err = p.poll(ctx, op, wakeKeys, pollTimeout, rescan, true, func() (bool, int64, int64, error) {
		args[workFetchToken] = uuid.NewString()
		e := luascripts.WorkFetchMany.Encoder(2 + len(args))
		e.Set("want", strconv.Itoa(min(fetch.N, maxAckBatch)))
		e.Section("fetch")
		for _, a := range args {
			e.Entry(str(a))
		}
		argv, err := encoded(op, e)
		if err != nil {
			return false, 0, 0, err
		}
		res, err := p.run(ctx, op, luascripts.WorkFetchMany.Op, 0, argv...)
		if err != nil {
			return false, 0, 0, err
		}
		r := list(res)
		if len(r) == 0 {
			return false, 0, 0, provider.NewPermanentError(op, "unexpected reply from work_fetch_many")
		}
		var bad error // an item that does not decode stays locked (as in FetchWorkItem); the others run
		for _, f := range r {
			var it *provider.LockedWorkItem
			found, now, next, _, err := workFetchReply(op, f, &it)
			switch {
			case err != nil:
				bad = err
			case !found:
				return false, now, next, nil
			default:
				items = append(items, it)
			}
		}
		if len(items) > 0 {
			return true, 0, 0, nil
		}
		return false, 0, 0, bad
	})
	return items, err
}

// workClass is the hub's class of worker fetches with this owner and tag filter (namespaces of
// several partitions, hub.go).
func (p *Provider) workClass(op string, lockTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter) (*fetchClass, bool, error) {
	_, _, sig, _, skip, err := p.workFetchArgs(op, 0, lockTimeout, 0, session, tags, "")
	if err != nil || skip {
		return nil, skip, err
	}
	return p.parts.class(sig, func(part int) []string {
		_, keys, _, _, _, _ := p.workFetchArgs(op, part, lockTimeout, 0, session, tags, "")
		return keys
	}), false, nil
}

// fetchWorkParts is FetchWorkItem over the partitions of a namespace of several (hub.go).
// With known, it looks only where work is known to wait, without waiting (an ack-and-fetch that
// leaves its partition).
func (p *Provider) fetchWorkParts(ctx context.Context, op string, lockTimeout, pollTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter, known bool) (*provider.LockedWorkItem, error) {
	c, skip, err := p.workClass(op, lockTimeout, session, tags)
	if err != nil {
		return nil, err
	}
	if skip {
		p.sleep(ctx, pollTimeout)
		return nil, nil
	}
	p.parts.start()
	_, _, _, rescan, _, _ := p.workFetchArgs(op, 0, lockTimeout, pollTimeout, session, tags, "")
	var locked *provider.LockedWorkItem
	err = p.parts.fetchFrom(ctx, op, c, pollTimeout, rescan, known, func(ctx context.Context, part int, mode string) (bool, int64, int64, int64, error) {
		args, _, _, _, _, err := p.workFetchArgs(op, part, lockTimeout, pollTimeout, session, tags, mode)
		if err != nil {
			return false, 0, 0, 0, err
		}
		res, err := p.run(ctx, op, luascripts.WorkFetch.Op, part, args...)
		if err != nil {
			return false, 0, 0, 0, err
		}
		var it *provider.LockedWorkItem
		found, now, next, head, err := workFetchReply(op, res, &it)
		if found {
			locked = it
		}
		return found, now, next, head, err
	})
	return locked, err
}

// workFetchArgs checks a worker fetch's arguments and returns work_fetch's ARGV after the prefix
// (with a new lock nonce) for partition part, the wake lists the fetch blocks on there, the
// signature of its owner and filter, and its rescan period; mode is work_fetch's; skip is true
// for TagFilterNone.
func (p *Provider) workFetchArgs(op string, part int, lockTimeout, pollTimeout time.Duration, session *provider.SessionFetchConfig, tags provider.TagFilter, mode string) (args []any, wakeKeys []string, sig string, rescan time.Duration, skip bool, err error) {
	if err := tags.Validate(); err != nil {
		return nil, nil, "", 0, false, invalid(op, "%v", err)
	}
	if lockTimeout <= 0 {
		return nil, nil, "", 0, false, invalid(op, "lock timeout must be positive, got %v", lockTimeout)
	}
	if err := checkDuration(op, "poll timeout", pollTimeout); err != nil {
		return nil, nil, "", 0, false, err
	}
	owner, sessionLock := "", time.Duration(0)
	if session != nil {
		if session.OwnerID == "" {
			return nil, nil, "", 0, false, invalid(op, "session fetch config has an empty owner_id")
		}
		if session.LockTimeout <= 0 {
			return nil, nil, "", 0, false, invalid(op, "session lock timeout must be positive, got %v", session.LockTimeout)
		}
		owner, sessionLock = session.OwnerID, session.LockTimeout
	}
	if tags.Mode() == provider.TagModeNone {
		return nil, nil, "", 0, true, nil
	}

	// The tag keys the filter selects, and the wake lists of what this fetch may take.
	var tks []string
	switch tags.Mode() {
	case provider.TagModeAny:
		tks = []string{dxredis.WorkTagKeyAny}
	case provider.TagModeDefaultOnly:
		tks = []string{dxredis.WorkTagKey("")}
	default:
		if tags.Mode() == provider.TagModeDefaultAnd {
			tks = append(tks, dxredis.WorkTagKey(""))
		}
		for _, t := range tags.Tags() {
			tks = append(tks, dxredis.WorkTagKey(t))
		}
	}
	for _, tk := range tks {
		wakeKeys = append(wakeKeys, p.keys.WorkWake(part, dxredis.WorkWakePlain, tk, ""))
		if owner != "" {
			wakeKeys = append(wakeKeys, p.keys.WorkWake(part, dxredis.WorkWakeSession, tk, ""),
				p.keys.WorkWake(part, dxredis.WorkWakeOwned, tk, owner))
		}
	}
	sig = "w" + strconv.Itoa(len(owner)) + ":" + owner + strings.Join(tks, "\x00")
	rescan = rescanPeriod(lockTimeout, sessionLock)
	e := luascripts.WorkFetch.Encoder(8 + len(tks))
	e.Set("token", p.workNonce(part))
	e.Set("lock_ms", ms(lockTimeout))
	e.Set("owner", owner)
	e.Set("slock_ms", ms(sessionLock))
	e.Set("wait_ms", ms(waitRegistration(pollTimeout, rescan)))
	e.Set("mode", mode)
	e.Flag("caps", part == 0 && len(p.cappedTags()) > 0)
	if tags.Mode() == provider.TagModeAny {
		e.Set("any", "*")
	} else {
		e.Set("any", "")
		e.Section("tks")
		for _, tk := range tks {
			e.Entry(tk)
		}
	}
	args, err = encoded(op, e)
	return args, wakeKeys, sig, rescan, false, err
}

// workFetchReply reads work_fetch's reply: a locked item (into *locked), or when work is next due;
// and the partition's head where the fetch's mode reports it (-1 none or not reported).
func workFetchReply(op string, res any, locked **provider.LockedWorkItem) (found bool, now, next, head int64, err error) {
	r := list(res)
	if len(r) < 3 || (num(r[0]) == 1 && len(r) < 4) {
		return false, 0, 0, 0, provider.NewPermanentError(op, "unexpected reply from work_fetch")
	}
	head = -1
	if num(r[0]) != 1 {
		if len(r) >= 4 {
			head = num(r[3])
		}
		return false, num(r[1]), num(r[2]), head, nil
	}
	if len(r) >= 5 {
		head = num(r[4])
	}
	var item provider.WorkItem
	if err := json.Unmarshal([]byte(str(r[2])), &item); err != nil {
		// Stored items were validated on enqueue; this is corruption. The lock expires and
		// the item is redelivered with a higher attempt count.
		return false, 0, 0, 0, provider.NewPermanentError(op, "stored worker item does not decode: "+err.Error())
	}
	*locked = &provider.LockedWorkItem{Item: item, LockToken: str(r[3]), AttemptCount: uint32(num(r[1]))}
	return true, 0, 0, head, nil
}

// AckWorkItemAndFetch implements provider.WorkAckFetcher in one script call (work_ack_fetch):
// the ack runs at most once per call, as AckWorkItem's; a retry of a call whose reply was lost
// fetches again (an item the lost reply had locked is redelivered when its lock expires). With
// opts.NextPoll, a fetch that finds nothing registers the caller's next wait (see wait.go).
func (p *Provider) AckWorkItemAndFetch(ctx context.Context, lockToken string, completion *provider.WorkItem, lockTimeout time.Duration,
	session *provider.SessionFetchConfig, tags provider.TagFilter, opts provider.FetchOptions) (*provider.LockedWorkItem, error) {
	const op = "ack_work_item_and_fetch"
	part, args, err := p.workAckArgs(op, lockToken, completion)
	if err != nil {
		return nil, err
	}
	if err := checkDuration(op, "next poll", opts.NextPoll); err != nil {
		return nil, err
	}
	mode := ""
	var c *fetchClass
	if p.keys.Partitions() > 1 {
		// The fetch stays in the ack's partition only while no other holds older work (hub.go).
		var skip bool
		if c, skip, err = p.workClass(op, lockTimeout, session, tags); err != nil {
			return nil, err
		}
		if !skip && !p.parts.stays(c, part) {
			if err := p.AckWorkItem(ctx, lockToken, completion); err != nil {
				return nil, err
			}
			return p.fetchWorkParts(ctx, op, lockTimeout, 0, session, tags, true)
		}
		mode = "h"
	}
	fargs, wakeKeys, _, rescan, skip, err := p.workFetchArgs(op, part, lockTimeout, opts.NextPoll, session, tags, mode)
	if err != nil {
		return nil, err
	}
	if skip {
		return nil, p.AckWorkItem(ctx, lockToken, completion)
	}
	all, err := composed(op, luascripts.WorkAckFetch, args, fargs)
	if err != nil {
		return nil, err
	}
	res, err := p.runOnce(ctx, op, luascripts.WorkAckFetch.Op, part, all...)
	if err != nil {
		return nil, err
	}
	if forwarded(&res) {
		p.forward(ctx, part)
	}
	var locked *provider.LockedWorkItem
	found, now, next, head, err := workFetchReply(op, res, &locked)
	if err != nil {
		return nil, err
	}
	switch {
	case c != nil && found:
		p.parts.noteHead(c, part, head, rescan)
	case c != nil:
		p.parts.noteEmpty(c, part, now, next, rescan, waitRegistration(opts.NextPoll, rescan))
	case opts.NextPoll > 0:
		// The script registered the caller's next wait: that fetch may start with it.
		p.idle.prepared(wakeKeys, now, next, opts.NextPoll+rescan)
	}
	return locked, nil
}

// AckWorkItem implements provider.Provider. The token must be held and unexpired; otherwise
// (unknown, expired, acked, abandoned, reclaimed, or its activity cancelled) the error is permanent
// with Kind ErrInvalidLockToken and nothing changes: the item stays queued. completion, when
// non-nil, must be ActivityCompleted or ActivityFailed (else ErrInvalidInput); it lands on its
// target instance's orchestrator queue in the same script. The item's session, while its lock is
// valid, has its last activity refreshed; session ownership does not gate the ack.
func (p *Provider) AckWorkItem(ctx context.Context, lockToken string, completion *provider.WorkItem) error {
	const op = "ack_work_item"
	part, args, err := p.workAckArgs(op, lockToken, completion)
	if err != nil {
		return err
	}
	res, err := p.runOnce(ctx, op, luascripts.WorkAck.Op, part, args...)
	if err == nil && num(res) == 2 {
		p.forward(ctx, part)
	}
	return err
}

// workAckArgs checks a worker ack and returns its partition and work_ack's ARGV after the prefix.
func (p *Provider) workAckArgs(op, lockToken string, completion *provider.WorkItem) (int, []any, error) {
	part, err := p.workToken(op, lockToken)
	if err != nil {
		return 0, nil, err
	}
	if completion == nil {
		args, err := argsOf(op, luascripts.WorkAck, "token", lockToken, "completed", "0", "target", "", "completion", "", "tpart", "", "failed", "0")
		return part, args, err
	}
	failed := "0"
	switch completion.Kind.(type) {
	case provider.ActivityCompleted:
	case provider.ActivityFailed:
		failed = "1"
	default:
		return 0, nil, invalid(op, "completion must be ActivityCompleted or ActivityFailed, got %q", completion.Variant())
	}
	js, err := p.encodeItem(op, *completion, false)
	if err != nil {
		return 0, nil, err
	}
	// A session item lives in its session's partition: its completion may be for an instance of
	// another, and goes there through the outbox.
	tpart := ""
	if t := p.keys.PartitionOf(completion.TargetInstance()); t != part {
		tpart = strconv.Itoa(t)
	}
	args, err := argsOf(op, luascripts.WorkAck, "token", lockToken, "completed", "1", "target", completion.TargetInstance(), "completion", js, "tpart", tpart, "failed", failed)
	return part, args, err
}

// RenewWorkItemLock implements provider.Provider: locked_until = now + extendFor, for a held and
// unexpired lock (else permanent ErrInvalidLockToken: the lock is lost or the activity was
// cancelled). It also refreshes the item's session last activity while the session lock is valid.
func (p *Provider) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	const op = "renew_work_item_lock"
	if err := checkDuration(op, "extend_for", extendFor); err != nil {
		return err
	}
	part, err := p.workToken(op, lockToken)
	if err != nil {
		return err
	}
	args, err := argsOf(op, luascripts.WorkRenew, "token", lockToken, "ext", ms(extendFor))
	if err != nil {
		return err
	}
	_, err = p.run(ctx, op, luascripts.WorkRenew.Op, part, args...)
	return err
}

// AbandonWorkItem implements provider.Provider. The item becomes visible after delay (0: at once);
// ignoreAttempt decrements its attempt count, never below 0. An unknown token is permanent
// ErrInvalidLockToken. As in duroxide, a lock that expired but was not yet reclaimed by a fetch can
// still be abandoned.
func (p *Provider) AbandonWorkItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error {
	const op = "abandon_work_item"
	if err := checkDuration(op, "delay", delay); err != nil {
		return err
	}
	part, err := p.workToken(op, lockToken)
	if err != nil {
		return err
	}
	args, err := argsOf(op, luascripts.WorkAbandon, "token", lockToken, "delay", ms(delay), "ignore", boolArg(ignoreAttempt))
	if err != nil {
		return err
	}
	_, err = p.runOnce(ctx, op, luascripts.WorkAbandon.Op, part, args...)
	if p.keys.Partitions() > 1 {
		p.parts.touch(part)
	}
	return err
}

// RenewSessionLock implements provider.Provider: every session held by one of ownerIDs whose lock
// is still valid and whose last activity is newer than now - idleTimeout (strictly) gets
// locked_until = now + extendFor. Repeated owner ids count once; an empty owner id is
// ErrInvalidInput (no session can be held by it); no owner ids is 0 without a Redis call.
func (p *Provider) RenewSessionLock(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error) {
	const op = "renew_session_lock"
	if extendFor < 0 || idleTimeout < 0 {
		return 0, invalid(op, "durations must not be negative (extend_for %v, idle_timeout %v)", extendFor, idleTimeout)
	}
	if slices.Contains(ownerIDs, "") {
		return 0, invalid(op, "empty owner id")
	}
	owners := slices.Clone(ownerIDs)
	slices.Sort(owners)
	owners = slices.Compact(owners)
	if len(owners) == 0 {
		return 0, nil
	}
	e := luascripts.SessionRenew.Encoder(2 + len(owners))
	e.Set("ext", ms(extendFor))
	e.Set("idle", ms(idleTimeout))
	e.Section("owners")
	for _, o := range owners {
		e.Entry(o)
	}
	args, err := encoded(op, e)
	if err != nil {
		return 0, err
	}
	// A namespace of several partitions keeps each session in its own: every one is renewed.
	return p.sumPartitions(ctx, op, luascripts.SessionRenew.Op, args)
}

// CleanupOrphanedSessions implements provider.Provider: it deletes sessions whose lock expired
// (locked_until <= now) and that have no queued items, at most 1000 per call, and returns how many.
// idleTimeout is not used (as in duroxide's providers): an expired session is already claimable.
func (p *Provider) CleanupOrphanedSessions(ctx context.Context, idleTimeout time.Duration) (int, error) {
	const op = "cleanup_orphaned_sessions"
	args, err := argsOf(op, luascripts.SessionCleanup, "limit", strconv.Itoa(sessionCleanupBatch))
	if err != nil {
		return 0, err
	}
	return p.sumPartitions(ctx, op, luascripts.SessionCleanup.Op, args)
}

// sumPartitions runs a script with the same arguments in every partition (at once) and sums its
// integer replies.
func (p *Provider) sumPartitions(ctx context.Context, op, script string, args []any) (int, error) {
	sums := make([]int64, p.keys.Partitions())
	err := p.inPartitions(ctx, func(ctx context.Context, part int) error {
		res, err := p.run(ctx, op, script, part, args...)
		sums[part] = num(res)
		return err
	})
	total := 0
	for _, s := range sums {
		total += int(s)
	}
	return total, err
}

// maxAckBatch is the most acks one work_ack_many call carries (and the most items it fetches);
// AckWorkItems splits larger batches.
const maxAckBatch = 256

// ackEntry is one ack of an AckWorkItems call: its index in the call, work_ack's arguments and
// its attempt id.
type ackEntry struct {
	i     int
	args  []any
	id    string
	first bool
}

// AckWorkItems implements provider.WorkBatchAcker: the acks of one partition go in one
// work_ack_many call (at most maxAckBatch each), partitions one after the other. Each ack is
// checked as AckWorkItem checks it (a bad token or completion fails that ack alone, before any
// call) and runs at most once per attempt id under its own attempt key: a call whose reply was lost
// is retried as runOnce retries one, and returns the first run's replies for the acks it committed.
// A fetch (namespaces of one partition only) goes with the last call, or alone when no ack is left.
func (p *Provider) AckWorkItems(ctx context.Context, acks []provider.WorkAck, fetch *provider.WorkFetch) ([]error, []*provider.LockedWorkItem) {
	const op = "ack_work_items"
	errs := make([]error, len(acks))
	var fargs []string
	if fetch != nil && fetch.N > 0 && p.keys.Partitions() == 1 {
		args, _, _, _, skip, err := p.workFetchArgs(op, 0, fetch.LockTimeout, 0, fetch.Session, fetch.Tags, "")
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs, nil
		}
		if !skip {
			for _, a := range args {
				fargs = append(fargs, str(a))
			}
		}
	}
	want := 0
	if fargs != nil {
		want = min(fetch.N, maxAckBatch)
	}
	groups := map[int][]ackEntry{}
	var parts []int
	for i, a := range acks {
		if len(a.AttemptID) > maxAttemptID {
			errs[i] = invalid(op, "attempt id is %d bytes, at most %d", len(a.AttemptID), maxAttemptID)
			continue
		}
		part, args, err := p.workAckArgs(op, a.LockToken, a.Completion)
		if err != nil {
			errs[i] = err
			continue
		}
		e := ackEntry{i, args, a.AttemptID, a.FirstAttempt}
		if e.id == "" {
			e.id, e.first = newAttemptID(), true
		}
		if _, ok := groups[part]; !ok {
			parts = append(parts, part)
		}
		groups[part] = append(groups[part], e)
	}
	if len(parts) == 0 && want > 0 {
		parts = append(parts, 0) // the fetch alone
	}
	var next []*provider.LockedWorkItem
	for k, part := range parts {
		g := groups[part]
		for {
			n := min(len(g), maxAckBatch)
			w := 0
			if k == len(parts)-1 && n == len(g) {
				w = want
			}
			next = append(next, p.ackMany(ctx, op, part, g[:n], w, fargs, errs)...)
			if g = g[n:]; len(g) == 0 {
				break
			}
		}
	}
	return errs, next
}

// ackMany runs one work_ack_many call in partition part (acks g, then up to want fetches with
// work_fetch's arguments fargs), writes each ack's outcome to errs and returns the items fetched.
func (p *Provider) ackMany(ctx context.Context, op string, part int, g []ackEntry, want int, fargs []string, errs []error) []*provider.LockedWorkItem {
	keys := make([]string, 1+len(g))
	keys[0] = p.keys.Meta(part)
	e := luascripts.WorkAckMany.Encoder(3 + 6*len(g) + len(fargs))
	e.Set("want", strconv.Itoa(want))
	e.Section("acks")
	for _, a := range g {
		vals := make([]string, len(a.args))
		for j, v := range a.args {
			vals[j] = str(v)
		}
		e.Entry(vals...)
	}
	e.Section("fetch")
	if want > 0 {
		for _, a := range fargs {
			e.Entry(a)
		}
	}
	args, err := encoded(op, e)
	var res any
	if err == nil {
		argv := append([]any{p.keys.Prefix(part)}, args...)
		res, err = p.retryOnce(ctx, op, func(try int) (any, error) {
			for j, a := range g {
				keys[1+j] = p.keys.Attempt(part, a.id)
				if try == 1 && a.first {
					keys[1+j] += "!" // no earlier run to look up (dx_once in lib.lua)
				}
			}
			return p.callKeys(ctx, op, luascripts.WorkAckMany.Op, keys, argv)
		})
	}
	if err == nil && forwarded(&res) {
		p.forward(ctx, part)
	}
	r := list(res)
	if err == nil && len(r) < len(g) {
		err = provider.NewPermanentError(op, "unexpected reply from work_ack_many")
	}
	for j, a := range g {
		switch {
		case err != nil:
			errs[a.i] = err
		case num(r[j]) > 0:
			errs[a.i] = nil
		default:
			errs[a.i] = p.mapErr(op, errors.New(str(r[j])))
		}
	}
	if err != nil {
		return nil
	}
	var next []*provider.LockedWorkItem
	for _, f := range r[len(g):] {
		var it *provider.LockedWorkItem
		if found, _, _, _, ferr := workFetchReply(op, f, &it); ferr == nil && found {
			next = append(next, it)
		}
	}
	return next
}
