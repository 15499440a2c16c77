package redisprovider

// Management side (provider.Admin): listing, inspection, metrics, hierarchy, deletion and pruning.
// Every read of the keyspace goes through an admin_* script (keys are built in one place, the
// scripts' lib.lua); nothing here SCANs the keyspace: listings walk the indexes, O(result).

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/redis/go-redis/v9"
)

var _ provider.Admin = (*Provider)(nil)

const (
	// listPageSize is the page ListInstances and the bulk operations walk indexes with.
	listPageSize = 1000
	// scanPageSize bounds the index entries one bulk-delete or statistics script examines, so a
	// large namespace is handled in many short scripts instead of one that blocks the server.
	scanPageSize = 500
	// idChunk bounds the ids one bulk script call takes.
	idChunk = 500
	// DefaultPageLimit is the page size ListInstancesPage uses when limit <= 0.
	DefaultPageLimit = 100
	// MaxPageLimit caps ListInstancesPage's limit.
	MaxPageLimit = 10000
)

// terminalStatuses are the statuses bulk deletion considers, in the order their indexes are walked.
var terminalStatuses = []string{provider.StatusCompleted, provider.StatusFailed, provider.StatusContinuedAsNew}

func notFound(op, instance string) error {
	return provider.NewPermanentError(op, "instance "+strconv.Quote(instance)+" not found").WithKind(provider.ErrNotFound)
}

func (p *Provider) inspect(ctx context.Context, op, what, instance string, extra ...any) (any, error) {
	if err := checkID(op, instance); err != nil {
		return nil, err
	}
	return p.run(ctx, op, "admin_inspect", p.keys.PartitionOf(instance), append([]any{what, instance}, extra...)...)
}

// ListInstances implements provider.Admin: every instance created by an ack with a name and a
// version, oldest first (idx:instances order). It walks the index in pages of 1000; for very
// large namespaces prefer ListInstancesPage.
func (p *Provider) ListInstances(ctx context.Context) ([]string, error) {
	return p.listAll(ctx, "list_instances", "")
}

// ListInstancesByStatus implements provider.Admin: the instances whose current status is status,
// in idx:status:<status> order (lowest score, i.e. oldest, first).
func (p *Provider) ListInstancesByStatus(ctx context.Context, status string) ([]string, error) {
	if status == "" {
		return nil, invalid("list_instances_by_status", "empty status")
	}
	return p.listAll(ctx, "list_instances_by_status", status)
}

func (p *Provider) listAll(ctx context.Context, op, status string) ([]string, error) {
	out := []string{}
	cursor := ""
	for {
		ids, next, err := p.listPage(ctx, op, cursor, listPageSize, status)
		if err != nil {
			return nil, err
		}
		out = append(out, ids...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// ListInstancesPage returns one page of instance ids, at most limit (DefaultPageLimit when
// limit <= 0, at most MaxPageLimit), and the cursor of the next page ("" after the last page).
// With status "" it walks every instance by creation time, oldest first; otherwise the instances
// whose current status is status, in idx:status:<status> order (oldest score first). Pass "" as
// cursor for the first page. Each page costs O(log N + limit). Ids created or removed between
// pages never make a page skip or repeat an id that stayed put; an instance whose status index
// score grows during the walk moves to the end of the index and may be listed again (never
// missed).
func (p *Provider) ListInstancesPage(ctx context.Context, cursor string, limit int, status string) ([]string, string, error) {
	return p.listPage(ctx, "list_instances_page", cursor, limit, status)
}

func (p *Provider) listPage(ctx context.Context, op, cursor string, limit int, status string) ([]string, string, error) {
	if limit <= 0 {
		limit = DefaultPageLimit
	}
	limit = min(limit, MaxPageLimit)
	score, member := "", ""
	if cursor != "" {
		var err error
		if score, member, err = decodeCursor(cursor); err != nil {
			return nil, "", invalid(op, "bad cursor %q: %v", cursor, err)
		}
	}
	res, err := p.run(ctx, op, "admin_list", 0, status, score, member, strconv.Itoa(limit))
	if err != nil {
		return nil, "", err
	}
	r := list(res)
	if len(r) < 2 {
		return nil, "", provider.NewPermanentError(op, "unexpected reply from admin_list")
	}
	ids := make([]string, 0, len(r)-2)
	for _, v := range r[2:] {
		ids = append(ids, str(v))
	}
	next := ""
	if s := str(r[0]); s != "" {
		next = encodeCursor(s, str(r[1]))
	}
	return ids, next, nil
}

// A cursor is the (score, id) of the last id of a page, base64url-encoded so that it is one
// shell-safe word whatever the id holds.
func encodeCursor(score, member string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(score + ":" + member))
}

func decodeCursor(c string) (score, member string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", err
	}
	score, member, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("no score")
	}
	if _, err := strconv.ParseFloat(score, 64); err != nil {
		return "", "", fmt.Errorf("bad score: %w", err)
	}
	return score, member, nil
}

// ListExecutions implements provider.Admin: execution ids ascending; empty for unknown instances.
func (p *Provider) ListExecutions(ctx context.Context, instance string) ([]uint64, error) {
	res, err := p.inspect(ctx, "list_executions", "execs", instance)
	if err != nil {
		return nil, err
	}
	out := []uint64{}
	for _, v := range list(res) {
		e, _ := strconv.ParseUint(str(v), 10, 64)
		out = append(out, e)
	}
	return out, nil
}

// ReadHistoryWithExecutionID implements provider.Admin (as ReadWithExecution: empty when unknown).
func (p *Provider) ReadHistoryWithExecutionID(ctx context.Context, instance string, executionID uint64) ([]provider.Event, error) {
	return p.ReadWithExecution(ctx, instance, executionID)
}

// ReadHistory implements provider.Admin (as Read: the latest execution, empty when unknown).
func (p *Provider) ReadHistory(ctx context.Context, instance string) ([]provider.Event, error) {
	return p.Read(ctx, instance)
}

// LatestExecutionID implements provider.Admin; ErrNotFound for unknown instances.
func (p *Provider) LatestExecutionID(ctx context.Context, instance string) (uint64, error) {
	const op = "latest_execution_id"
	res, err := p.inspect(ctx, op, "latest", instance)
	if err != nil {
		return 0, err
	}
	if res == nil {
		return 0, notFound(op, instance)
	}
	return strconv.ParseUint(str(res), 10, 64)
}

// GetInstanceInfo implements provider.Admin; ErrNotFound for unknown instances. An instance that
// was acked without a name and version (no instance record) is described from its current
// execution, with empty name and version.
func (p *Provider) GetInstanceInfo(ctx context.Context, instance string) (provider.InstanceInfo, error) {
	const op = "get_instance_info"
	res, err := p.inspect(ctx, op, "info", instance)
	if err != nil {
		return provider.InstanceInfo{}, err
	}
	r := list(res)
	if len(r) < 10 || num(r[0]) != 1 {
		return provider.InstanceInfo{}, notFound(op, instance)
	}
	info := provider.InstanceInfo{
		InstanceID:           instance,
		OrchestrationName:    str(r[2]),
		OrchestrationVersion: str(r[3]),
		CurrentExecutionID:   uint64(num(r[4])),
		Status:               str(r[5]),
		CreatedAt:            uint64(num(r[7])),
		UpdatedAt:            uint64(num(r[8])),
		ParentInstanceID:     str(r[9]),
	}
	if r[6] != nil {
		out := str(r[6])
		info.Output = &out
	}
	return info, nil
}

// GetExecutionInfo implements provider.Admin; ErrNotFound when the execution does not exist.
func (p *Provider) GetExecutionInfo(ctx context.Context, instance string, executionID uint64) (provider.ExecutionInfo, error) {
	const op = "get_execution_info"
	res, err := p.inspect(ctx, op, "exec", instance, strconv.FormatUint(executionID, 10))
	if err != nil {
		return provider.ExecutionInfo{}, err
	}
	r := list(res)
	if len(r) < 6 || num(r[0]) != 1 {
		return provider.ExecutionInfo{}, provider.NewPermanentError(op, fmt.Sprintf(
			"execution %d of instance %q not found", executionID, instance)).WithKind(provider.ErrNotFound)
	}
	info := provider.ExecutionInfo{
		ExecutionID: executionID,
		Status:      str(r[1]),
		StartedAt:   uint64(num(r[3])),
		CompletedAt: uint64(num(r[4])),
		EventCount:  uint64(num(r[5])),
	}
	if r[2] != nil {
		out := str(r[2])
		info.Output = &out
	}
	return info, nil
}

// GetSystemMetrics implements provider.Admin. Instance counts come from the indexes (O(1));
// TotalExecutions and TotalEvents are summed over every instance of idx:instances, in scripts of
// scanPageSize instances each: O(instances + executions) in total, never more than one page per
// script. The sums are exact when the namespace does not change during the walk. Instances acked
// without a name and version are not in idx:instances and not counted, as in duroxide's SQL
// providers (no instances row).
func (p *Provider) GetSystemMetrics(ctx context.Context) (provider.SystemMetrics, error) {
	const op = "get_system_metrics"
	var m provider.SystemMetrics
	for off := 0; ; off += scanPageSize {
		res, err := p.run(ctx, op, "admin_metrics", 0, strconv.Itoa(off), strconv.Itoa(scanPageSize))
		if err != nil {
			return provider.SystemMetrics{}, err
		}
		r := list(res)
		if len(r) < 7 {
			return provider.SystemMetrics{}, provider.NewPermanentError(op, "unexpected reply from admin_metrics")
		}
		if off == 0 {
			m.TotalInstances, m.RunningInstances = uint64(num(r[0])), uint64(num(r[1]))
			m.CompletedInstances, m.FailedInstances = uint64(num(r[2])), uint64(num(r[3]))
		}
		m.TotalExecutions += uint64(num(r[5]))
		m.TotalEvents += uint64(num(r[6]))
		if num(r[4]) < scanPageSize {
			return m, nil
		}
	}
}

// QueueStats is what GetQueueStats reports about both queues (dxctl queues shows it).
type QueueStats struct {
	// ServerTime is the Redis server's clock when the walk started.
	ServerTime time.Time
	// Orchestrator describes the orchestrator queue.
	Orchestrator OrchestratorQueueStats
	// Worker describes the worker queue.
	Worker WorkerQueueStats
}

// OrchestratorQueueStats counts orchestrator messages. Visible + Delayed is what GetQueueDepths
// reports (every message no lock covers).
type OrchestratorQueueStats struct {
	// Visible messages can be fetched now (or as soon as their instance's lock is released).
	Visible uint64
	// Delayed messages become visible later (timers, abandon delays).
	Delayed uint64
	// Locked messages are covered by a held instance lock.
	Locked uint64
	// LockedInstances is the number of locked instances; ExpiredLocks of them have expired and
	// are reclaimed by the next fetch.
	LockedInstances uint64
	ExpiredLocks    uint64
	// OldestVisibleAge is how long the oldest message an unlocked instance could be fetched for
	// has been visible (0 when there is none).
	OldestVisibleAge time.Duration
	// Orphaned messages are parked: their instance does not exist and no start came with them.
	// A start for the instance within an hour of parking receives them; after that they expire.
	// PurgeOrphanMessages deletes them. Not counted in Visible or Delayed.
	Orphaned uint64
}

// WorkerQueueStats counts worker items.
type WorkerQueueStats struct {
	// Unlocked items are visible or delayed; Locked ones are held by a worker (expired or not).
	Unlocked uint64
	Locked   uint64
	// OldestVisibleAge is the age (since enqueue) of the oldest item a worker could fetch now,
	// among session-less items, claimable sessions and due delayed items (0 when none).
	OldestVisibleAge time.Duration
}

// GetQueueStats walks the orchestrator indexes (oq:ready:<pin>, oq:due, oq:locked) in scripts of
// scanPageSize instances each: O(instances with queued messages) in total. Counts are exact when
// the queues do not change during the walk.
func (p *Provider) GetQueueStats(ctx context.Context) (QueueStats, error) {
	return p.queueStats(ctx, "get_queue_stats")
}

func (p *Provider) queueStats(ctx context.Context, op string) (QueueStats, error) {
	res, err := p.run(ctx, op, "admin_queues", 0, "head")
	if err != nil {
		return QueueStats{}, err
	}
	h := list(res)
	if len(h) < 5 {
		return QueueStats{}, provider.NewPermanentError(op, "unexpected reply from admin_queues")
	}
	now := num(h[0])
	var qs QueueStats
	qs.ServerTime = time.UnixMilli(now)
	if w := list(h[4]); len(w) >= 3 {
		qs.Worker = WorkerQueueStats{Unlocked: uint64(num(w[0])), Locked: uint64(num(w[1]))}
		if at := num(w[2]); at >= 0 && at < now {
			qs.Worker.OldestVisibleAge = time.Duration(now-at) * time.Millisecond
		}
	}
	o := &qs.Orchestrator
	oldest := int64(-1)
	walk := func(what, pin string) error {
		for off := 0; ; off += scanPageSize {
			res, err := p.run(ctx, op, "admin_queues", 0, what, pin, strconv.Itoa(off), strconv.Itoa(scanPageSize))
			if err != nil {
				return err
			}
			r := list(res)
			if len(r) < 6 {
				return provider.NewPermanentError(op, "unexpected reply from admin_queues")
			}
			o.Visible += uint64(num(r[1]))
			o.Delayed += uint64(num(r[2]))
			o.Locked += uint64(num(r[3]))
			if at := num(r[4]); at >= 0 && (oldest < 0 || at < oldest) {
				oldest = at
			}
			if what == "locked" {
				o.LockedInstances += uint64(num(r[0]))
				o.ExpiredLocks += uint64(num(r[5]))
			}
			if len(r) >= 7 {
				o.Orphaned += uint64(num(r[6]))
			}
			if num(r[0]) < scanPageSize {
				return nil
			}
		}
	}
	for _, pin := range list(h[1]) {
		if err := walk("ready", str(pin)); err != nil {
			return QueueStats{}, err
		}
	}
	if err := walk("due", ""); err != nil {
		return QueueStats{}, err
	}
	if err := walk("locked", ""); err != nil {
		return QueueStats{}, err
	}
	if err := walk("orphans", ""); err != nil {
		return QueueStats{}, err
	}
	if oldest >= 0 && oldest < now {
		o.OldestVisibleAge = time.Duration(now-oldest) * time.Millisecond
	}
	return qs, nil
}

// GetQueueDepths implements provider.Admin: orchestrator messages no lock covers (visible,
// delayed or orphaned) and unlocked worker items; TimerQueue is always 0 (timers are delayed
// orchestrator messages). Cost as GetQueueStats.
func (p *Provider) GetQueueDepths(ctx context.Context) (provider.QueueDepths, error) {
	qs, err := p.queueStats(ctx, "get_queue_depths")
	if err != nil {
		return provider.QueueDepths{}, err
	}
	return provider.QueueDepths{
		OrchestratorQueue: qs.Orchestrator.Visible + qs.Orchestrator.Delayed + qs.Orchestrator.Orphaned,
		WorkerQueue:       qs.Worker.Unlocked,
	}, nil
}

// PurgeOrphanMessages deletes every parked orphan message (see OrchestratorQueueStats.Orphaned)
// and returns how many, in scripts of scanPageSize orphan instances each. It runs when Redis is
// out of memory.
func (p *Provider) PurgeOrphanMessages(ctx context.Context) (int, error) {
	const op = "purge_orphan_messages"
	total := 0
	for {
		res, err := p.run(ctx, op, "admin_orphans", 0, strconv.Itoa(scanPageSize))
		if err != nil {
			return total, err
		}
		r := list(res)
		if len(r) < 2 {
			return total, provider.NewPermanentError(op, "unexpected reply from admin_orphans")
		}
		total += int(num(r[1]))
		if num(r[0]) < scanPageSize {
			return total, nil
		}
	}
}

// ListChildren implements provider.Admin: direct sub-orchestrations, empty when none or unknown.
func (p *Provider) ListChildren(ctx context.Context, instance string) ([]string, error) {
	res, err := p.inspect(ctx, "list_children", "children", instance)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, v := range list(res) {
		out = append(out, str(v))
	}
	slices.Sort(out)
	return out, nil
}

// GetParentID implements provider.Admin: ok false for a root; ErrNotFound for unknown instances.
func (p *Provider) GetParentID(ctx context.Context, instance string) (string, bool, error) {
	const op = "get_parent_id"
	res, err := p.inspect(ctx, op, "parent", instance)
	if err != nil {
		return "", false, err
	}
	r := list(res)
	if len(r) < 2 || num(r[0]) != 1 {
		return "", false, notFound(op, instance)
	}
	if r[1] == nil {
		return "", false, nil
	}
	return str(r[1]), true, nil
}

// DeleteInstancesAtomic implements provider.Admin in one script: everything or nothing. It fails,
// deleting nothing, when an instance is Running and force is false (ErrInstanceRunning) or when an
// existing child of a listed instance is not listed (ErrInvalidInput: it would be orphaned).
// Unknown ids are not an error (their queued messages, if any, are deleted and counted). Deleting
// a locked instance removes its lock and token, so the in-flight ack fails with
// ErrInvalidLockToken instead of recreating it; its worker items go too, so stale worker tokens
// fail as well. Counts are exact: instances that existed, their executions, events, and the
// orchestrator messages and worker items deleted.
// Cost: O(ids + children + executions + events + messages deleted).
func (p *Provider) DeleteInstancesAtomic(ctx context.Context, ids []string, force bool) (provider.DeleteInstanceResult, error) {
	const op = "delete_instances_atomic"
	args := []any{"atomic", boolArg(force), "0", "0"}
	seen := map[string]bool{}
	for _, id := range ids {
		if err := checkID(op, id); err != nil {
			return provider.DeleteInstanceResult{}, err
		}
		if !seen[id] {
			seen[id] = true
			args = append(args, id)
		}
	}
	if len(seen) == 0 {
		return provider.DeleteInstanceResult{}, nil
	}
	r, _, _, err := p.deleteCall(ctx, op, args)
	return r, err
}

// deleteCall runs admin_delete and decodes {counts..., roots, next score, next id}.
func (p *Provider) deleteCall(ctx context.Context, op string, args []any) (provider.DeleteInstanceResult, int, string, error) {
	res, err := p.run(ctx, op, "admin_delete", 0, append([]any{ms(p.opts.Retention)}, args...)...)
	if err != nil {
		return provider.DeleteInstanceResult{}, 0, "", err
	}
	r := list(res)
	if len(r) < 7 {
		return provider.DeleteInstanceResult{}, 0, "", provider.NewPermanentError(op, "unexpected reply from admin_delete")
	}
	next := ""
	if s := str(r[5]); s != "" {
		next = encodeCursor(s, str(r[6]))
	}
	return provider.DeleteInstanceResult{
		InstancesDeleted:     uint64(num(r[0])),
		ExecutionsDeleted:    uint64(num(r[1])),
		EventsDeleted:        uint64(num(r[2])),
		QueueMessagesDeleted: uint64(num(r[3])),
	}, int(num(r[4])), next, nil
}

// GetInstanceTree implements provider.Admin (duroxide's default: breadth-first ListChildren).
func (p *Provider) GetInstanceTree(ctx context.Context, instance string) (provider.InstanceTree, error) {
	if err := checkID("get_instance_tree", instance); err != nil {
		return provider.InstanceTree{}, err
	}
	return provider.GetInstanceTreeOf(ctx, p, instance)
}

// DeleteInstance implements provider.Admin (duroxide's default): sub-orchestrations are refused
// (delete the root), unknown ids are ErrNotFound, and the whole tree goes in one
// DeleteInstancesAtomic call (which refuses Running instances unless force, and fails if a child
// appeared meanwhile).
func (p *Provider) DeleteInstance(ctx context.Context, instance string, force bool) (provider.DeleteInstanceResult, error) {
	if err := checkID("delete_instance", instance); err != nil {
		return provider.DeleteInstanceResult{}, err
	}
	return provider.DeleteInstanceTree(ctx, p, instance, force)
}

// DeleteInstanceBulk implements provider.Admin. It deletes root instances (no parent) whose
// current status is terminal (Completed, Failed, ContinuedAsNew), with their whole trees; a root
// whose tree still holds a Running instance is skipped, as are Running roots and
// sub-orchestrations (no error). Filter: InstanceIDs (nil = every instance), CompletedBeforeMs
// (the current execution's completion time), Limit roots (0 = provider.DefaultBulkLimit);
// InstancesDeleted counts the cascaded children too.
//
// Each root's tree is deleted atomically; the bulk call as a whole is not (it runs as several
// scripts, each examining at most scanPageSize candidates, so it never blocks the server long).
// Without InstanceIDs it walks idx:status:<status> for the three terminal statuses, lowest score
// first; with CompletedBeforeMs it stops at the first entry scored at or after the cutoff. The
// score is the instance's last update, never before its completion: an instance completed before
// the cutoff but acked again later (say, for an event raised after it finished) is found by a
// later purge, not this one. (Scoring idx:status by the time an instance entered the status —
// ZADD NX in orch_ack — would make the cutoff exact.)
// Cost: O(candidates examined + data deleted).
func (p *Provider) DeleteInstanceBulk(ctx context.Context, filter provider.InstanceFilter) (provider.DeleteInstanceResult, error) {
	const op = "delete_instance_bulk"
	limit := int(filter.Limit)
	if limit == 0 {
		limit = provider.DefaultBulkLimit
	}
	before := strconv.FormatUint(filter.CompletedBeforeMs, 10)
	var total provider.DeleteInstanceResult
	roots := 0
	if filter.InstanceIDs != nil {
		ids := dedupe(filter.InstanceIDs)
		for start := 0; start < len(ids) && roots < limit; start += idChunk {
			args := []any{"roots", "0", before, strconv.Itoa(limit - roots)}
			for _, id := range ids[start:min(start+idChunk, len(ids))] {
				args = append(args, id)
			}
			r, n, _, err := p.deleteCall(ctx, op, args)
			total, roots = total.Add(r), roots+n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for _, status := range terminalStatuses {
		score, member := "", ""
		for roots < limit {
			r, n, next, err := p.deleteCall(ctx, op, []any{"scan", "0", before, strconv.Itoa(limit - roots),
				status, score, member, strconv.Itoa(scanPageSize)})
			total, roots = total.Add(r), roots+n
			if err != nil {
				return total, err
			}
			if next == "" {
				break
			}
			score, member, _ = decodeCursor(next)
		}
	}
	return total, nil
}

func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// PruneExecutions implements provider.Admin in one script: it deletes the executions (and their
// histories) beyond the newest max(KeepLast, 1), only those completed before CompletedBeforeMs
// when set, never the current execution nor a Running one; KV data stays. ErrNotFound for unknown
// instances. Cost: O(executions + events deleted).
func (p *Provider) PruneExecutions(ctx context.Context, instance string, options provider.PruneOptions) (provider.PruneResult, error) {
	const op = "prune_executions"
	if err := checkID(op, instance); err != nil {
		return provider.PruneResult{}, err
	}
	return p.pruneCall(ctx, op, "one", options, 0, 1, []string{instance})
}

// PruneExecutionsBulk implements provider.Admin: PruneExecutions on every instance the filter
// selects, Running ones included: InstanceIDs (nil = every instance of idx:instances, oldest
// first), CompletedBeforeMs (the current execution completed before it), Limit instances
// (0 = provider.DefaultBulkLimit). InstancesProcessed counts the selected instances, pruned or
// not. Each instance is pruned atomically; the call runs as several scripts of at most idChunk
// (or listPageSize) instances.
func (p *Provider) PruneExecutionsBulk(ctx context.Context, filter provider.InstanceFilter, options provider.PruneOptions) (provider.PruneResult, error) {
	const op = "prune_executions_bulk"
	limit := int(filter.Limit)
	if limit == 0 {
		limit = provider.DefaultBulkLimit
	}
	var total provider.PruneResult
	run := func(ids []string) error {
		r, err := p.pruneCall(ctx, op, "bulk", options, filter.CompletedBeforeMs, limit-int(total.InstancesProcessed), ids)
		total.InstancesProcessed += r.InstancesProcessed
		total.ExecutionsDeleted += r.ExecutionsDeleted
		total.EventsDeleted += r.EventsDeleted
		return err
	}
	if filter.InstanceIDs != nil {
		ids := dedupe(filter.InstanceIDs)
		for start := 0; start < len(ids) && int(total.InstancesProcessed) < limit; start += idChunk {
			if err := run(ids[start:min(start+idChunk, len(ids))]); err != nil {
				return total, err
			}
		}
		return total, nil
	}
	cursor := ""
	for int(total.InstancesProcessed) < limit {
		ids, next, err := p.listPage(ctx, op, cursor, listPageSize, "")
		if err != nil {
			return total, err
		}
		if len(ids) > 0 {
			if err := run(ids); err != nil {
				return total, err
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return total, nil
}

func (p *Provider) pruneCall(ctx context.Context, op, mode string, o provider.PruneOptions, instBefore uint64, limit int, ids []string) (provider.PruneResult, error) {
	args := []any{mode, strconv.FormatUint(uint64(o.KeepLast), 10), strconv.FormatUint(o.CompletedBeforeMs, 10),
		strconv.FormatUint(instBefore, 10), strconv.Itoa(limit)}
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := p.run(ctx, op, "admin_prune", 0, args...)
	if err != nil {
		return provider.PruneResult{}, err
	}
	r := list(res)
	if len(r) < 3 {
		return provider.PruneResult{}, provider.NewPermanentError(op, "unexpected reply from admin_prune")
	}
	return provider.PruneResult{
		InstancesProcessed: uint64(num(r[0])),
		ExecutionsDeleted:  uint64(num(r[1])),
		EventsDeleted:      uint64(num(r[2])),
	}, nil
}

// DropNamespace deletes every key of namespace through client (SCAN on its prefix, on every
// primary of a cluster, DEL in batches of 500) and returns how many it deleted. It is for tests,
// benchmarks and decommissioning: unlike the Admin methods it walks the keyspace, and it does not
// care what runs: in-flight turns simply fail. It takes a client, not a Provider, so that it can
// run after the namespace's providers are closed.
func DropNamespace(ctx context.Context, client redis.UniversalClient, namespace string) (int, error) {
	keys, err := dxredis.NewKeyspace(namespace)
	if err != nil {
		return 0, provider.NewPermanentError("drop_namespace", err.Error()).WithKind(provider.ErrInvalidInput)
	}
	prefix := keys.Prefix(0)
	match := strings.NewReplacer(`\`, `\\`, "{", `\{`, "}", `\}`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix) + "*"
	var deleted atomic.Int64
	drop := func(ctx context.Context, c redis.Cmdable) error {
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			n, err := c.Del(ctx, batch...).Result()
			deleted.Add(n)
			batch = batch[:0]
			return err
		}
		iter := c.Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			if batch = append(batch, iter.Val()); len(batch) == 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	if cc, ok := client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return drop(ctx, c) })
	} else {
		err = drop(ctx, client)
	}
	if err != nil {
		return int(deleted.Load()), provider.NewRetryableError("drop_namespace", err.Error()).WithCause(err)
	}
	return int(deleted.Load()), nil
}
