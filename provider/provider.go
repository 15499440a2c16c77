package provider

import (
	"context"
	"time"
)

// Provider is the storage contract behind a duroxide runtime (duroxide 0.1.29's Provider trait,
// with 0.1.31's narrowing of abandon to the locked rows). Every method may be called concurrently
// from many goroutines and processes. Errors are *ProviderError.
//
// Durations: 0 means "no delay" / "return at once".
type Provider interface {
	// Name identifies the implementation, e.g. "redis".
	Name() string
	// Version is the implementation's version.
	Version() string

	// FetchOrchestrationItem locks the instance owning the oldest visible orchestrator message
	// (skipping locked instances and, when filter is non-nil, instances whose current execution is
	// pinned to a version outside it) for lockTimeout, and returns every visible message of that
	// instance with its current-execution history. Each locked message's attempt count is
	// incremented; AttemptCount is the maximum. With nothing eligible it waits up to pollTimeout
	// for work (long polling) and then returns (nil, nil). History that does not decode yields an
	// item with HistoryError set and empty History, the lock held.
	FetchOrchestrationItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, filter *DispatcherCapabilityFilter) (*LockedOrchestrationItem, error)

	// AckOrchestrationItem commits a turn atomically: history append, instance/execution metadata,
	// custom status and KV changes, worker and orchestrator items, cancellations, deletion of the
	// locked messages and release of the lock. It fails, changing nothing and keeping the lock, when
	// the token is invalid or expired (ErrInvalidLockToken) or an event id already exists
	// (ErrDuplicateEvent).
	AckOrchestrationItem(ctx context.Context, lockToken string, ack OrchestrationAck) error

	// AbandonOrchestrationItem releases the lock without committing. The messages that token
	// locked become visible again after delay; with ignoreAttempt their attempt counts are
	// decremented (never below 0). Messages that arrived during the lock are not touched. An unknown
	// token is ErrInvalidLockToken.
	AbandonOrchestrationItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error

	// RenewOrchestrationItemLock extends a held, unexpired instance lock to now+extendFor.
	RenewOrchestrationItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error

	// Read returns the latest execution's history (empty for an unknown instance). Events that
	// do not decode make it fail rather than be dropped.
	Read(ctx context.Context, instance string) ([]Event, error)
	// ReadWithExecution returns one execution's history (empty when unknown).
	ReadWithExecution(ctx context.Context, instance string, executionID uint64) ([]Event, error)
	// AppendWithExecution appends events to an execution's history outside a turn (tests, tools).
	AppendWithExecution(ctx context.Context, instance string, executionID uint64, events []Event) error

	// EnqueueForWorker adds an ActivityExecute item to the worker queue, visible at once.
	EnqueueForWorker(ctx context.Context, item WorkItem) error
	// FetchWorkItem locks the oldest visible worker item the tag filter and session rules allow,
	// for lockTimeout, incrementing its attempt count. With session nil, session-bound items are
	// never returned; with a config, items of sessions the owner holds or that are unowned/expired
	// are returned too (claiming the session). Waits up to pollTimeout; (nil, nil) when nothing.
	FetchWorkItem(ctx context.Context, lockTimeout, pollTimeout time.Duration, session *SessionFetchConfig, tags TagFilter) (*LockedWorkItem, error)
	// AckWorkItem deletes the locked item and, when completion is non-nil (ActivityCompleted or
	// ActivityFailed), enqueues it to the orchestrator queue, atomically. A token that is unknown,
	// expired, or whose item was cancelled is a permanent error and the item stays queued.
	AckWorkItem(ctx context.Context, lockToken string, completion *WorkItem) error
	// RenewWorkItemLock extends a held, unexpired item lock. An error means the lock is lost or the
	// activity was cancelled.
	RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error
	// AbandonWorkItem releases an item lock; the item becomes visible after delay; ignoreAttempt
	// decrements its attempt count (never below 0).
	AbandonWorkItem(ctx context.Context, lockToken string, delay time.Duration, ignoreAttempt bool) error
	// RenewSessionLock extends the unexpired sessions owned by ownerIDs whose last activity is newer
	// than idleTimeout ago; it returns how many it extended.
	RenewSessionLock(ctx context.Context, ownerIDs []string, extendFor, idleTimeout time.Duration) (int, error)
	// CleanupOrphanedSessions deletes expired sessions with no queued items; it returns how many.
	CleanupOrphanedSessions(ctx context.Context, idleTimeout time.Duration) (int, error)

	// EnqueueForOrchestrator adds an item to its target instance's orchestrator queue, visible
	// after delay. It never creates the instance.
	EnqueueForOrchestrator(ctx context.Context, item WorkItem, delay time.Duration) error

	// GetCustomStatus returns the custom status when its version is greater than lastSeenVersion,
	// else nil (also for unknown instances).
	GetCustomStatus(ctx context.Context, instance string, lastSeenVersion uint64) (*CustomStatus, error)
	// GetKVValue returns a KV value as clients see it (current execution's changes over the store).
	GetKVValue(ctx context.Context, instance, key string) (value string, ok bool, err error)
	// GetKVAllValues returns every KV value as clients see it (empty for unknown instances).
	GetKVAllValues(ctx context.Context, instance string) (map[string]string, error)
	// GetInstanceStats describes the current execution; nil for unknown instances.
	GetInstanceStats(ctx context.Context, instance string) (*SystemStats, error)

	// Admin returns the management capability, or (nil, false) when the provider has none.
	Admin() (Admin, bool)
}

// Admin is the management capability (duroxide's ProviderAdmin): listing, metrics, hierarchy,
// deletion and pruning. GetInstanceTreeOf and DeleteInstanceTree implement the trait's default
// methods on top of the others, for implementations to reuse.
type Admin interface {
	// ListInstances returns every instance id.
	ListInstances(ctx context.Context) ([]string, error)
	// ListInstancesByStatus returns the ids of instances whose current execution has status.
	ListInstancesByStatus(ctx context.Context, status string) ([]string, error)
	// ListExecutions returns an instance's execution ids, ascending.
	ListExecutions(ctx context.Context, instance string) ([]uint64, error)
	// ReadHistoryWithExecutionID returns one execution's history.
	ReadHistoryWithExecutionID(ctx context.Context, instance string, executionID uint64) ([]Event, error)
	// ReadHistory returns the latest execution's history.
	ReadHistory(ctx context.Context, instance string) ([]Event, error)
	// LatestExecutionID returns the current execution id; ErrNotFound for unknown instances.
	LatestExecutionID(ctx context.Context, instance string) (uint64, error)
	// GetInstanceInfo describes an instance; ErrNotFound for unknown instances.
	GetInstanceInfo(ctx context.Context, instance string) (InstanceInfo, error)
	// GetExecutionInfo describes one execution; ErrNotFound when unknown.
	GetExecutionInfo(ctx context.Context, instance string, executionID uint64) (ExecutionInfo, error)
	// GetSystemMetrics summarises the store.
	GetSystemMetrics(ctx context.Context) (SystemMetrics, error)
	// GetQueueDepths counts unlocked queued messages.
	GetQueueDepths(ctx context.Context) (QueueDepths, error)
	// ListChildren returns the direct sub-orchestrations of an instance (empty when none or unknown).
	ListChildren(ctx context.Context, instance string) ([]string, error)
	// GetParentID returns the parent of a sub-orchestration (ok false for a root); ErrNotFound for unknown instances.
	GetParentID(ctx context.Context, instance string) (parent string, ok bool, err error)
	// DeleteInstancesAtomic deletes the given instances all-or-nothing: it fails, deleting nothing,
	// when one is running and force is false (ErrInstanceRunning) or when a child of a deleted
	// instance is not in the set (orphan).
	DeleteInstancesAtomic(ctx context.Context, ids []string, force bool) (DeleteInstanceResult, error)
	// GetInstanceTree returns an instance and all its descendants.
	GetInstanceTree(ctx context.Context, instance string) (InstanceTree, error)
	// DeleteInstance deletes a root instance with its whole tree; sub-orchestrations cannot be
	// deleted directly, unknown ids are ErrNotFound, running ones ErrInstanceRunning unless force.
	DeleteInstance(ctx context.Context, instance string, force bool) (DeleteInstanceResult, error)
	// DeleteInstanceBulk deletes terminal root instances (and their trees) selected by filter.
	DeleteInstanceBulk(ctx context.Context, filter InstanceFilter) (DeleteInstanceResult, error)
	// PruneExecutions deletes old executions of one instance; ErrNotFound for unknown instances.
	PruneExecutions(ctx context.Context, instance string, options PruneOptions) (PruneResult, error)
	// PruneExecutionsBulk prunes every instance selected by filter (running ones included).
	PruneExecutionsBulk(ctx context.Context, filter InstanceFilter, options PruneOptions) (PruneResult, error)
}
