package redisprovider

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

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
	parts := make([]provider.SystemMetrics, p.keys.Partitions())
	err := p.inPartitions(ctx, func(ctx context.Context, part int) (err error) {
		parts[part], err = p.partMetrics(ctx, op, part)
		return err
	})
	var m provider.SystemMetrics
	for _, pm := range parts {
		m.TotalInstances += pm.TotalInstances
		m.RunningInstances += pm.RunningInstances
		m.CompletedInstances += pm.CompletedInstances
		m.FailedInstances += pm.FailedInstances
		m.TotalExecutions += pm.TotalExecutions
		m.TotalEvents += pm.TotalEvents
	}
	return m, err
}

// partMetrics is GetSystemMetrics of one partition.
func (p *Provider) partMetrics(ctx context.Context, op string, part int) (provider.SystemMetrics, error) {
	var m provider.SystemMetrics
	for off := 0; ; off += scanPageSize {
		args, err := argsOf(op, luascripts.AdminMetrics, "off", strconv.Itoa(off), "n", strconv.Itoa(scanPageSize))
		if err != nil {
			return provider.SystemMetrics{}, err
		}
		res, err := p.run(ctx, op, luascripts.AdminMetrics.Op, part, args...)
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
// Locked, counted item by item from the tag's schedule, wq:shold and the session groups, walked
// in pages of scanPageSize entries: exact when the queue does not change during the walk.
type WorkerTagStats struct {
	Tag    string
	Queued uint64
	// Ready session-less items can be fetched now (a lock that expired counts as Locked until a
	// fetch takes the item again).
	Ready uint64
	// Session items are ready items of sessions (fetched by their session's owner, or by any
	// session-aware worker once the session is free).
	Session uint64
	// Delayed items were abandoned with a delay.
	Delayed uint64
	// Locked items are held by a worker (expired or not).
	Locked uint64
}

// workerTags fills w's counts and w.Tags by paging over the schedules of the head's tag keys,
// wq:shold and the sessions with items (admin_queues 'wq', 'wshold', 'wsess').
func (p *Provider) workerTags(ctx context.Context, op string, part int, tks []any, w *WorkerQueueStats) error {
	byKey := map[string]*WorkerTagStats{}
	tag := func(tk string) *WorkerTagStats {
		t := byKey[tk]
		if t == nil {
			t = &WorkerTagStats{}
			if _, name, ok := strings.Cut(tk, ":"); ok {
				t.Tag = name
			}
			byKey[tk] = t
		}
		return t
	}
	page := func(what, arg string, off int) ([]any, error) {
		res, err := p.queuesPage(ctx, op, part, what, arg, off)
		if err != nil {
			return nil, err
		}
		r := list(res)
		if len(r) < 2 {
			return nil, provider.NewPermanentError(op, "unexpected reply from admin_queues")
		}
		return r, nil
	}
	for _, k := range tks {
		t := tag(str(k))
		for off := 0; ; off += scanPageSize {
			r, err := page("wq", str(k), off)
			if err != nil {
				return err
			}
			if len(r) < 4 {
				return provider.NewPermanentError(op, "unexpected reply from admin_queues")
			}
			t.Ready += uint64(num(r[1]))
			t.Delayed += uint64(num(r[2]))
			t.Locked += uint64(num(r[3]))
			if num(r[0]) < scanPageSize {
				break
			}
		}
	}
	add := func(counts []any, field func(*WorkerTagStats) *uint64) {
		for j := 0; j+1 < len(counts); j += 2 {
			*field(tag(str(counts[j]))) += uint64(num(counts[j+1]))
		}
	}
	for off := 0; ; off += scanPageSize {
		r, err := page("wshold", "", off)
		if err != nil {
			return err
		}
		if len(r) < 3 {
			return provider.NewPermanentError(op, "unexpected reply from admin_queues")
		}
		add(list(r[1]), func(t *WorkerTagStats) *uint64 { return &t.Locked })
		add(list(r[2]), func(t *WorkerTagStats) *uint64 { return &t.Delayed })
		if num(r[0]) < scanPageSize {
			break
		}
	}
	for cursor := "0"; ; {
		r, err := page("wsess", cursor, 0)
		if err != nil {
			return err
		}
		add(list(r[1]), func(t *WorkerTagStats) *uint64 { return &t.Session })
		if cursor = str(r[0]); cursor == "0" {
			break
		}
	}
	for _, t := range byKey {
		if t.Queued = t.Ready + t.Session + t.Delayed + t.Locked; t.Queued > 0 {
			w.Tags = append(w.Tags, *t)
		}
		w.Unlocked += t.Ready + t.Session + t.Delayed
		w.Locked += t.Locked
	}
	slices.SortFunc(w.Tags, func(a, b WorkerTagStats) int { return strings.Compare(a.Tag, b.Tag) })
	return nil
}

// GetQueueStats walks the orchestrator indexes (oq:ready:<pin>, oq:due, oq:locked) in scripts of
// scanPageSize instances each: O(instances with queued messages) in total. Counts are exact when
// the queues do not change during the walk.
func (p *Provider) GetQueueStats(ctx context.Context) (QueueStats, error) {
	return p.queueStats(ctx, "get_queue_stats")
}

// queuesPage runs one page of admin_queues's view what, from rank off, in partition part.
func (p *Provider) queuesPage(ctx context.Context, op string, part int, what, pin string, off int) (any, error) {
	args, err := argsOf(op, luascripts.AdminQueues, "what", what, "pin", pin, "off", strconv.Itoa(off), "n", strconv.Itoa(scanPageSize))
	if err != nil {
		return nil, err
	}
	return p.run(ctx, op, luascripts.AdminQueues.Op, part, args...)
}

// queueStats sums the partitions' queue statistics (one walk each, at once).
func (p *Provider) queueStats(ctx context.Context, op string) (QueueStats, error) {
	parts := make([]QueueStats, p.keys.Partitions())
	err := p.inPartitions(ctx, func(ctx context.Context, part int) (err error) {
		parts[part], err = p.partQueueStats(ctx, op, part)
		return err
	})
	if err != nil || len(parts) == 1 {
		return parts[0], err
	}
	qs := QueueStats{ServerTime: parts[0].ServerTime}
	tags := map[string]*WorkerTagStats{}
	for _, s := range parts {
		o, so := &qs.Orchestrator, s.Orchestrator
		o.Visible, o.Delayed, o.Locked = o.Visible+so.Visible, o.Delayed+so.Delayed, o.Locked+so.Locked
		o.LockedInstances, o.ExpiredLocks, o.Orphaned = o.LockedInstances+so.LockedInstances, o.ExpiredLocks+so.ExpiredLocks, o.Orphaned+so.Orphaned
		o.OldestVisibleAge = max(o.OldestVisibleAge, so.OldestVisibleAge)
		w, sw := &qs.Worker, s.Worker
		w.Unlocked, w.Locked, w.OldestVisibleAge = w.Unlocked+sw.Unlocked, w.Locked+sw.Locked, max(w.OldestVisibleAge, sw.OldestVisibleAge)
		for _, t := range sw.Tags {
			m := tags[t.Tag]
			if m == nil {
				m = &WorkerTagStats{Tag: t.Tag}
				tags[t.Tag] = m
			}
			m.Queued, m.Ready, m.Session = m.Queued+t.Queued, m.Ready+t.Ready, m.Session+t.Session
			m.Delayed, m.Locked = m.Delayed+t.Delayed, m.Locked+t.Locked
		}
	}
	for _, t := range tags {
		qs.Worker.Tags = append(qs.Worker.Tags, *t)
	}
	slices.SortFunc(qs.Worker.Tags, func(a, b WorkerTagStats) int { return strings.Compare(a.Tag, b.Tag) })
	return qs, nil
}

// partQueueStats is queueStats of one partition.
func (p *Provider) partQueueStats(ctx context.Context, op string, part int) (QueueStats, error) {
	args, err := argsOf(op, luascripts.AdminQueues, "what", "head")
	if err != nil {
		return QueueStats{}, err
	}
	res, err := p.run(ctx, op, luascripts.AdminQueues.Op, part, args...)
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
	if w := list(h[4]); len(w) >= 2 {
		if at := num(w[0]); at >= 0 && at < now {
			qs.Worker.OldestVisibleAge = time.Duration(now-at) * time.Millisecond
		}
		if err := p.workerTags(ctx, op, part, list(w[1]), &qs.Worker); err != nil {
			return QueueStats{}, err
		}
	}
	o := &qs.Orchestrator
	oldest := int64(-1)
	walk := func(what, pin string) error {
		for off := 0; ; off += scanPageSize {
			res, err := p.queuesPage(ctx, op, part, what, pin, off)
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
