package provider

import (
	"context"
	"time"
)

// StatusWatcher is an optional extension of Provider (duroxide's contract has no blocking status
// wait): it tells waiting clients when an instance's status may have changed, so that they need not
// poll. A provider implements it when it can push such changes cheaply, for example from the ack
// that finishes an instance. Clients must keep a slow polling fallback: a watch may miss a change
// (a dropped connection), it only makes waiting faster and cheaper.
type StatusWatcher interface {
	// WatchStatus returns a channel that receives a value after the instance finishes (Completed
	// or Failed) or its custom status changes, and a function that ends the watch. Wake-ups may
	// be spurious or merged; the channel is never closed. Many watches share the provider's
	// resources (one connection per process, not one per watch).
	WatchStatus(instance string) (changes <-chan struct{}, stop func())
}

// The extensions below let a runtime that keeps live orchestration state between turns (dx's
// executor cache) and that acknowledges at full speed do less work per turn. A runtime uses them
// only when the provider implements them, and works without.

// OrchestrationAckFetcher is an optional extension: one round trip acknowledges a turn and fetches
// the next one. AckOrchestrationItemAndFetch commits ack exactly as AckOrchestrationItem does and,
// only when that succeeded, fetches the next available item as FetchOrchestrationItem would with
// lockTimeout, filter and a poll timeout of 0 (it never waits). next is nil when nothing was
// available. When the ack fails it returns its error, changes nothing and fetches nothing. The next
// item follows opts: with opts.Lite it comes as FetchOrchestrationItemLite returns it.
type OrchestrationAckFetcher interface {
	AckOrchestrationItemAndFetch(ctx context.Context, lockToken string, ack OrchestrationAck, lockTimeout time.Duration,
		filter *DispatcherCapabilityFilter, opts FetchOptions) (next *LockedOrchestrationItem, err error)
}

// WorkAckFetcher is the same for the worker queue: AckWorkItemAndFetch acknowledges as AckWorkItem
// and, only when that succeeded, fetches the next item as FetchWorkItem would with lockTimeout,
// session and tags and a poll timeout of 0 (opts.Lite does not apply).
type WorkAckFetcher interface {
	AckWorkItemAndFetch(ctx context.Context, lockToken string, completion *WorkItem, lockTimeout time.Duration,
		session *SessionFetchConfig, tags TagFilter, opts FetchOptions) (next *LockedWorkItem, err error)
}

// WorkAck is one acknowledgement of a WorkBatchAcker call: AckWorkItem's arguments, and the
// attempt id of its logical write (as WithAttemptID gives it to one call; "" lets the provider
// pick one), FirstAttempt as WithFirstAttemptID marks it.
type WorkAck struct {
	LockToken    string
	Completion   *WorkItem
	AttemptID    string
	FirstAttempt bool
}

// WorkBatchAcker is an optional extension: AckWorkItems acknowledges several worker items in as
// few calls as the provider can (redisprovider: one script call per partition, at most 256 acks
// each), each exactly as AckWorkItem would and each on its own: errs[i] (len(errs) == len(acks))
// is acks[i]'s outcome, nil when it committed. An ack that fails (an invalid or expired token, a
// refused completion) changes nothing and fails no other; an error of a whole call (Redis
// unreachable, outcome unknown) is reported for each of its acks. Each ack runs at most once per
// attempt id, so a caller retries one whose reply was lost with the same id (in a batch or not).
//
// With fetch non-nil it then fetches, in the same call where it can, up to fetch.N items as
// FetchWorkItem would with a poll timeout of 0 (it never waits), whatever the acks' outcomes;
// next holds them (fewer when the queue has fewer, or where the provider cannot fetch in the same
// call: redisprovider fetches only in a namespace of one partition). A fetch whose arguments are
// invalid fails every ack with ErrInvalidInput, before anything is written. A call retried after a
// lost reply fetches again: an item the lost reply had locked comes back when its lock expires.
type WorkBatchAcker interface {
	AckWorkItems(ctx context.Context, acks []WorkAck, fetch *WorkFetch) (errs []error, next []*LockedWorkItem)
}

// WorkBatchFetcher is an optional extension: FetchWorkItems fetches as FetchWorkItem does, with
// fetch's arguments, but returns up to fetch.N items from one call: when none is waiting it waits
// up to pollTimeout for one, as FetchWorkItem does; once it has one it returns it with those
// waiting at that moment, up to fetch.N in all, and never waits for more. Each item has its own
// lock token, as FetchWorkItem's. An empty result with a nil error is a poll that timed out.
// redisprovider fetches several in one call in a namespace of one partition; with several
// partitions it returns at most one item.
type WorkBatchFetcher interface {
	FetchWorkItems(ctx context.Context, fetch WorkFetch, pollTimeout time.Duration) ([]*LockedWorkItem, error)
}

// WorkFetch is the fetch of an AckWorkItems or FetchWorkItems call: at most N items, with
// FetchWorkItem's arguments.
type WorkFetch struct {
	N           int
	LockTimeout time.Duration
	Session     *SessionFetchConfig
	Tags        TagFilter
}

// FetchOptions refine a fetch of an extension.
type FetchOptions struct {
	// Lite asks for the item without its history and KV snapshot (see LiteFetcher).
	Lite bool
	// NextPoll, when positive, says that a caller the fetch leaves without an item fetches next
	// with this poll timeout and the same filter. The provider may prepare that wait now:
	// redisprovider registers it in the same script, so that the next fetch starts with its
	// wait instead of searching again for what was just found missing.
	NextPoll time.Duration
}

// LiteFetcher is an optional extension for runtimes that keep each instance's history (and the
// state replayed from it) between turns: fetching without the history moves O(new messages) bytes
// per turn instead of O(history).
//
// FetchOrchestrationItemLite locks and returns an item exactly as FetchOrchestrationItem does,
// except that Item.History (nil, not an empty slice: dx tells a lite item by it) and Item.KVSnapshot are left empty and Item.HistoryLen and
// Item.ExecutionTag describe the stored history instead. A caller that holds exactly HistoryLen
// events of that execution, read under the same ExecutionTag, may run the turn on them; any other
// caller must read the history (and KV snapshot) with ReadForReplay before running the turn. An
// item whose HistoryError is set has HistoryLen 0.
//
// The tag is chosen by the provider when an execution begins and never changes: an item whose
// batch begins an execution (a StartOrchestration for an instance with no history, or a
// ContinueAsNew) already carries the tag that execution gets when the turn is acknowledged, so a
// runtime that ran the execution's first turn knows it. Every fetch of an existing execution
// returns its tag; a deleted and re-created instance gets a new one. Non-lite fetches (and
// AckOrchestrationItemAndFetch without Lite) set HistoryLen and ExecutionTag too.
//
// A provider may return a lite fetch's item whole, as FetchOrchestrationItem would (History
// non-nil, KVSnapshot set), where that costs less than the caller's ReadForReplay would: callers
// tell by History. redisprovider does so for histories of at most 2 KiB of instances without KV.
//
// ReadForReplay returns what FetchOrchestrationItem would have put in the item: the execution's
// history and the instance's KV snapshot, with the execution's tag. Call it while holding the
// instance's lock.
type LiteFetcher interface {
	FetchOrchestrationItemLite(ctx context.Context, lockTimeout, pollTimeout time.Duration,
		filter *DispatcherCapabilityFilter) (*LockedOrchestrationItem, error)
	ReadForReplay(ctx context.Context, instance string, executionID uint64) (history []Event, kv map[string]KVEntry, tag string, err error)
}

// StartIfAbsentEnqueuer is an optional extension for clients that start instances by id: one
// atomic call enqueues a start only when no instance of that id exists, so that of two clients
// starting one id at once exactly one starts it (Provider has no such call: a check followed by
// EnqueueForOrchestrator lets both through).
//
// EnqueueStartIfAbsent enqueues item, a StartOrchestration (any other kind is ErrInvalidInput),
// visible at once, as EnqueueForOrchestrator would, unless its instance exists: it has a record
// (an acknowledged turn, whatever its status) or a StartOrchestration queued for it (not yet
// fetched, or fetched and not yet acknowledged). A deleted instance, or one whose retention
// expired, does not exist; messages other than a start queued for the id (events raised before the
// start) do not count and are delivered to the start as usual. started reports whether item was
// enqueued; when it is false nothing was written. A call whose reply was lost and that is retried
// returns the first run's answer.
//
// Starts that the runtime sends itself (sub-orchestrations, detached starts, continue-as-new) go
// through the acks as in duroxide, never through this call.
type StartIfAbsentEnqueuer interface {
	EnqueueStartIfAbsent(ctx context.Context, item WorkItem) (started bool, err error)
}

// Holder is an optional extension for runtimes that hold an instance instead of failing it (dx's
// HoldOnNondeterminism: the code no longer replays the history, and a rollback of the deploy
// should resume it): the hold is written nowhere in the history, but operators can see it.
//
// HoldOrchestrationItem abandons the locked turn as AbandonOrchestrationItem(ctx, lockToken, delay,
// true) does (no attempt counted) and notes on the instance why it is held: reason, 1 to 1,024
// bytes of UTF-8. The note stays until a turn of the instance is acknowledged. HeldReason returns
// it and when it was written, or "" when the instance is not held (or does not exist).
type Holder interface {
	HoldOrchestrationItem(ctx context.Context, lockToken string, delay time.Duration, reason string) error
	HeldReason(ctx context.Context, instance string) (reason string, since time.Time, err error)
}

// WithAttemptID returns ctx marked with id, a caller's name for one logical write (an ack) that it
// may send more than once: a provider that runs writes at most once per attempt (redisprovider
// does) uses id as the call's attempt id, so that a call sent again with the same id, within the
// provider's reply window (redisprovider: 20 s, and for an ack as long as its lock could have lasted
// on top), returns the first call's reply instead of applying
// twice: an ack whose reply was lost then reports success, not ErrInvalidLockToken. dx gives each
// acknowledgement one id for all its tries. Providers without attempt ids ignore it. id must be
// non-empty; use a random one (a UUID) per logical write, never the same for two writes.
func WithAttemptID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, attemptIDKey{}, attempt{id: id})
}

// WithFirstAttemptID is WithAttemptID for the first send of id: the caller has sent no write with
// this id before, so the provider need not look for an earlier run's reply (redisprovider saves a
// read per call). Later sends of the same write use WithAttemptID. dx uses it for each ack's first
// try.
func WithFirstAttemptID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, attemptIDKey{}, attempt{id: id, first: true})
}

// AttemptID returns the attempt id WithAttemptID or WithFirstAttemptID put in ctx ("" when none)
// and whether it was marked as the id's first send.
func AttemptID(ctx context.Context) (id string, first bool) {
	a, _ := ctx.Value(attemptIDKey{}).(attempt)
	return a.id, a.first
}

type attemptIDKey struct{}

type attempt struct {
	id    string
	first bool
}
