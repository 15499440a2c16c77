package redisprovider

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis"
	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

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
		args, err := argsOf(op, luascripts.AdminMetrics, "off", strconv.Itoa(off), "n", strconv.Itoa(scanPageSize))
		if err != nil {
			return provider.SystemMetrics{}, err
		}
		res, err := p.run(ctx, op, luascripts.AdminMetrics.Op, 0, args...)
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
	// Tags breaks the queued items down by tag, sorted by tag ("" = untagged first); a tag
	// without queued items is not listed.
	Tags []WorkerTagStats
}

// WorkerTagStats counts the queued worker items of one tag. Queued = Ready + Session + Delayed +
// Locked. Ready and Queued are read from the tag's ready set and counter; Delayed and Locked from
// the items of wq:due and wq:locked, walked in pages of scanPageSize items: exact when the queue
// does not change during the walk.
type WorkerTagStats struct {
	Tag    string
	Queued uint64
	// Ready session-less items can be fetched now.
	Ready uint64
	// Session items are ready items of sessions (fetched by their session's owner, or by any
	// session-aware worker once the session is free).
	Session uint64
	// Delayed items were abandoned with a delay.
	Delayed uint64
	// Locked items are held by a worker (expired or not).
	Locked uint64
}

// workerTags fills w.Tags from the head's per-tag list (tag key, queued, ready, ...) and pages
// over wq:locked and wq:due for the locked and delayed items of each tag.
func (p *Provider) workerTags(ctx context.Context, op string, head []any, w *WorkerQueueStats) error {
	byKey := map[string]*WorkerTagStats{}
	for i := 0; i+2 < len(head); i += 3 {
		tk := str(head[i])
		tag := ""
		if _, t, ok := strings.Cut(tk, ":"); ok {
			tag = t
		}
		w.Tags = append(w.Tags, WorkerTagStats{Tag: tag, Queued: uint64(num(head[i+1])), Ready: uint64(num(head[i+2]))})
	}
	slices.SortFunc(w.Tags, func(a, b WorkerTagStats) int { return strings.Compare(a.Tag, b.Tag) })
	for i := range w.Tags {
		byKey[dxredis.WorkTagKey(w.Tags[i].Tag)] = &w.Tags[i]
	}
	for _, what := range []string{"wlocked", "wdue"} {
		for off := 0; ; off += scanPageSize {
			res, err := p.queuesPage(ctx, op, what, "", off)
			if err != nil {
				return err
			}
			r := list(res)
			if len(r) < 2 {
				return provider.NewPermanentError(op, "unexpected reply from admin_queues")
			}
			counts := list(r[1])
			for j := 0; j+1 < len(counts); j += 2 {
				if t := byKey[str(counts[j])]; t != nil {
					if what == "wlocked" {
						t.Locked += uint64(num(counts[j+1]))
					} else {
						t.Delayed += uint64(num(counts[j+1]))
					}
				}
			}
			if num(r[0]) < scanPageSize {
				break
			}
		}
	}
	for i := range w.Tags {
		t := &w.Tags[i]
		if used := t.Ready + t.Delayed + t.Locked; used < t.Queued {
			t.Session = t.Queued - used
		}
	}
	return nil
}

// GetQueueStats walks the orchestrator indexes (oq:ready:<pin>, oq:due, oq:locked) in scripts of
// scanPageSize instances each: O(instances with queued messages) in total. Counts are exact when
// the queues do not change during the walk.
func (p *Provider) GetQueueStats(ctx context.Context) (QueueStats, error) {
	return p.queueStats(ctx, "get_queue_stats")
}

// queuesPage runs one page of admin_queues's view what, from rank off.
func (p *Provider) queuesPage(ctx context.Context, op, what, pin string, off int) (any, error) {
	args, err := argsOf(op, luascripts.AdminQueues, "what", what, "pin", pin, "off", strconv.Itoa(off), "n", strconv.Itoa(scanPageSize))
	if err != nil {
		return nil, err
	}
	return p.run(ctx, op, luascripts.AdminQueues.Op, 0, args...)
}

func (p *Provider) queueStats(ctx context.Context, op string) (QueueStats, error) {
	args, err := argsOf(op, luascripts.AdminQueues, "what", "head")
	if err != nil {
		return QueueStats{}, err
	}
	res, err := p.run(ctx, op, luascripts.AdminQueues.Op, 0, args...)
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
		if len(w) >= 4 {
			if err := p.workerTags(ctx, op, list(w[3]), &qs.Worker); err != nil {
				return QueueStats{}, err
			}
		}
	}
	o := &qs.Orchestrator
	oldest := int64(-1)
	walk := func(what, pin string) error {
		for off := 0; ; off += scanPageSize {
			res, err := p.queuesPage(ctx, op, what, pin, off)
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
