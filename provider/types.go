package provider

import (
	"github.com/Masterminds/semver/v3"
)

// Execution status values stored from ExecutionMetadata.Status.
const (
	StatusRunning        = "Running"
	StatusCompleted      = "Completed"
	StatusFailed         = "Failed"
	StatusContinuedAsNew = "ContinuedAsNew"
)

// IsTerminalStatus reports whether status ends an execution (Completed, Failed, ContinuedAsNew).
func IsTerminalStatus(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusContinuedAsNew
}

// OrchestrationItem is one orchestration turn's input: the instance's current execution history
// and the batch of messages locked for it.
type OrchestrationItem struct {
	Instance          string
	OrchestrationName string
	// ExecutionID is the instance's current execution (the highest one acked so far), or the
	// batch's start item's execution for an instance not yet created.
	ExecutionID uint64
	// Version is the stored orchestration version, or the start item's; "unknown" when neither has one.
	Version string
	// History is the current execution's events ordered by event_id (empty when HistoryError is set).
	History []Event
	// Messages is the locked batch in arrival order.
	Messages []WorkItem
	// HistoryError is set, with History empty and the lock held, when stored history does not decode.
	HistoryError string
	// KVSnapshot holds the instance's KV store as of the end of the previous execution(s);
	// values written by the current execution are not in it.
	KVSnapshot map[string]KVEntry
	// HistoryLen and ExecutionTag are set by LiteFetcher's fetches, which leave History empty:
	// the number of stored events of the execution, and a tag that identifies the execution (it
	// differs for an instance deleted and re-created under the same id). Other fetches may set
	// them too.
	HistoryLen   int
	ExecutionTag string
}

// LockedOrchestrationItem is what FetchOrchestrationItem returns: the item, the lock token that
// ack, abandon and renew take, and the highest attempt count among the locked messages.
type LockedOrchestrationItem struct {
	Item         OrchestrationItem
	LockToken    string
	AttemptCount uint32
}

// LockedWorkItem is what FetchWorkItem returns: the ActivityExecute item, its lock token and its
// attempt count (1 on first delivery).
type LockedWorkItem struct {
	Item         WorkItem
	LockToken    string
	AttemptCount uint32
}

// KVEntry is one value of an instance's key-value store.
type KVEntry struct {
	Value           string
	LastUpdatedAtMs uint64
}

// ExecutionMetadata is what the runtime computed about the instance during a turn; the provider
// stores it and never derives it from events. Empty strings mean "not given".
type ExecutionMetadata struct {
	// Status, when set, becomes the execution's status (Running, Completed, Failed, ContinuedAsNew)
	// together with Output.
	Status string
	// Output is the execution's output or error text, stored when Status is set.
	Output *string
	// OrchestrationName and OrchestrationVersion create the instance record on its first ack
	// (both are needed) and keep it current afterwards.
	OrchestrationName    string
	OrchestrationVersion string
	// ParentInstanceID links a sub-orchestration to its parent; stored once, never changed.
	ParentInstanceID string
	// PinnedDuroxideVersion, when set, is stored (overwriting) as the execution's pinned version
	// that DispatcherCapabilityFilter checks.
	PinnedDuroxideVersion *semver.Version
}

// ScheduledActivityIdentifier names a worker item to cancel: (instance, execution, activity id).
type ScheduledActivityIdentifier struct {
	Instance    string
	ExecutionID uint64
	ActivityID  uint64
}

// OrchestrationAck is one turn's result, committed atomically by AckOrchestrationItem.
type OrchestrationAck struct {
	// ExecutionID is the execution the delta belongs to (a new one after continue-as-new).
	ExecutionID uint64
	// HistoryDelta is appended to that execution's history; event ids must be new and non-zero.
	HistoryDelta []Event
	// WorkerItems are ActivityExecute items for the worker queue.
	WorkerItems []WorkItem
	// OrchestratorItems go to their target instances' queues (TimerFired visible at FireAtMs).
	OrchestratorItems []WorkItem
	// Metadata is stored as described on ExecutionMetadata.
	Metadata ExecutionMetadata
	// CancelledActivities are removed from the worker queue (even while locked), after WorkerItems
	// are inserted.
	CancelledActivities []ScheduledActivityIdentifier
}

// CustomStatus is an instance's custom status and its version (incremented on every change).
type CustomStatus struct {
	// Status is nil when the status was cleared.
	Status  *string
	Version uint64
}

// SystemStats describes one instance's current execution; JSON field names are serde's.
type SystemStats struct {
	HistoryEventCount uint64 `json:"history_event_count"`
	HistorySizeBytes  uint64 `json:"history_size_bytes"`
	// QueuePendingCount is the number of carry_forward_events on the current execution's
	// OrchestrationStarted event.
	QueuePendingCount uint64 `json:"queue_pending_count"`
	KVUserKeyCount    uint64 `json:"kv_user_key_count"`
	KVTotalValueBytes uint64 `json:"kv_total_value_bytes"`
}

// InstanceInfo describes an instance and its current execution. Times are ms since the epoch.
type InstanceInfo struct {
	InstanceID           string
	OrchestrationName    string
	OrchestrationVersion string
	CurrentExecutionID   uint64
	Status               string
	Output               *string
	CreatedAt            uint64
	UpdatedAt            uint64
	ParentInstanceID     string
}

// ExecutionInfo describes one execution. Times are ms since the epoch; CompletedAt is 0 while running.
type ExecutionInfo struct {
	ExecutionID uint64
	Status      string
	Output      *string
	StartedAt   uint64
	CompletedAt uint64
	EventCount  uint64
}

// SystemMetrics summarises the whole store.
type SystemMetrics struct {
	TotalInstances     uint64
	TotalExecutions    uint64
	RunningInstances   uint64
	CompletedInstances uint64
	FailedInstances    uint64
	TotalEvents        uint64
}

// QueueDepths counts unlocked messages per queue; TimerQueue is always 0 (timers are delayed
// orchestrator messages).
type QueueDepths struct {
	OrchestratorQueue uint64
	WorkerQueue       uint64
	TimerQueue        uint64
}

// DefaultBulkLimit is the number of instances a bulk operation handles when InstanceFilter.Limit is 0.
const DefaultBulkLimit = 1000

// InstanceFilter selects instances for bulk delete and bulk prune.
type InstanceFilter struct {
	// InstanceIDs restricts the operation to these ids; nil means every instance (an empty,
	// non-nil slice selects nothing).
	InstanceIDs []string
	// CompletedBeforeMs, when non-zero, keeps only instances whose current execution completed
	// before this time (ms since the epoch).
	CompletedBeforeMs uint64
	// Limit caps the number of instances handled; 0 means DefaultBulkLimit.
	Limit uint32
}

// PruneOptions says which old executions to delete. The current execution and Running
// executions are never deleted; KV data (instance-scoped) is never deleted by pruning.
type PruneOptions struct {
	// KeepLast keeps the newest KeepLast executions; 0 and 1 both keep only the current one.
	KeepLast uint32
	// CompletedBeforeMs, when non-zero, prunes only executions completed before this time.
	CompletedBeforeMs uint64
}

// PruneResult counts what a prune removed.
type PruneResult struct {
	InstancesProcessed uint64
	ExecutionsDeleted  uint64
	EventsDeleted      uint64
}

// DeleteInstanceResult counts what a delete removed.
type DeleteInstanceResult struct {
	InstancesDeleted     uint64
	ExecutionsDeleted    uint64
	EventsDeleted        uint64
	QueueMessagesDeleted uint64
}

// Add returns the field-wise sum of r and o.
func (r DeleteInstanceResult) Add(o DeleteInstanceResult) DeleteInstanceResult {
	return DeleteInstanceResult{r.InstancesDeleted + o.InstancesDeleted, r.ExecutionsDeleted + o.ExecutionsDeleted,
		r.EventsDeleted + o.EventsDeleted, r.QueueMessagesDeleted + o.QueueMessagesDeleted}
}

// InstanceTree is a root instance and all its descendants (RootID included in AllIDs).
type InstanceTree struct {
	RootID string
	AllIDs []string
}
