package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// statuses are the values of the status filter.
var statuses = []string{provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusContinuedAsNew}

// Overview is GET /api/overview.
type Overview struct {
	Namespace  string            `json:"namespace"`
	ServerTime time.Time         `json:"server_time"`
	Instances  uint64            `json:"instances"`
	ByStatus   map[string]uint64 `json:"by_status"`
	Queues     QueuesOut         `json:"queues"`
	Samples    []Sample          `json:"samples"`
	SampleMs   int64             `json:"sample_every_ms"`
}

// QueuesOut is the queue part of the overview.
type QueuesOut struct {
	OrchReady             uint64 `json:"orchestrator_ready"`
	OrchDelayed           uint64 `json:"orchestrator_delayed"`
	OrchLocked            uint64 `json:"orchestrator_locked"`
	LockedInstances       uint64 `json:"locked_instances"`
	ExpiredLocks          uint64 `json:"expired_locks"`
	Orphaned              uint64 `json:"orphaned"`
	OrchOldestVisibleMs   int64  `json:"orchestrator_oldest_visible_age_ms"`
	WorkerReady           uint64 `json:"worker_unlocked"`
	WorkerLocked          uint64 `json:"worker_locked"`
	WorkerOldestVisibleMs int64  `json:"worker_oldest_visible_age_ms"`
	// WorkerTags breaks the worker items down by tag (redisprovider.WorkerTagStats).
	WorkerTags []WorkerTag `json:"worker_tags"`
	// Caps are the caps per tag with their running and waiting items (redisprovider.TagLimits).
	Caps []TagCap `json:"caps"`
}

// WorkerTag is one tag's queued worker items ("" = untagged): Queued = Ready + Session + Delayed +
// Locked (dxctl's "queues --json" prints the same JSON).
type WorkerTag struct {
	Tag     string `json:"tag"`
	Queued  uint64 `json:"queued"`
	Ready   uint64 `json:"ready"`
	Session uint64 `json:"session"`
	Delayed uint64 `json:"delayed"`
	Locked  uint64 `json:"locked"`
}

// TagCap is a tag's caps (redisprovider.TagLimits) and its state: Running counts its activities
// locked now; Waiting its ready items when a cap holds them back (running at the concurrency cap),
// else 0.
type TagCap struct {
	Tag         string  `json:"tag"`
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate_per_sec"`
	Burst       int     `json:"burst"`
	Running     int     `json:"running"`
	Waiting     uint64  `json:"waiting_capped"`
}

// TagCapsOf converts the provider's caps, with the ready items of tags (never nil).
func TagCapsOf(ls []redisprovider.TagLimitsSet, tags []redisprovider.WorkerTagStats) []TagCap {
	out := make([]TagCap, len(ls))
	for i, l := range ls {
		out[i] = TagCap{l.Tag, l.Concurrency, l.Rate, l.Burst, l.Running, 0}
		if l.Concurrency > 0 && l.Running >= l.Concurrency {
			for _, t := range tags {
				if t.Tag == l.Tag {
					out[i].Waiting = t.Ready
				}
			}
		}
	}
	return out
}

// WorkerTagsOf converts the provider's per-tag worker counts (never nil).
func WorkerTagsOf(tags []redisprovider.WorkerTagStats) []WorkerTag {
	out := make([]WorkerTag, len(tags))
	for i, t := range tags {
		out[i] = WorkerTag(t)
	}
	return out
}

// statusCounts reads the instance counts: ZCARD of idx:instances and of each idx:status:<status>
// (keys.go's layout) in every partition, O(1) each, in one round trip.
func (s *Server) statusCounts(ctx context.Context) (uint64, map[string]uint64, error) {
	ks := s.p.Keyspace()
	pipe := s.p.Client().Pipeline()
	var totals []interface{ Val() int64 }
	counts := make([][]interface{ Val() int64 }, len(statuses))
	for part := range ks.Partitions() {
		pre := ks.Prefix(part)
		totals = append(totals, pipe.ZCard(ctx, pre+"idx:instances"))
		for i, st := range statuses {
			counts[i] = append(counts[i], pipe.ZCard(ctx, pre+"idx:status:"+st))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, nil, err
	}
	var total uint64
	for _, c := range totals {
		total += uint64(c.Val())
	}
	by := make(map[string]uint64, len(statuses))
	for i, st := range statuses {
		for _, c := range counts[i] {
			by[st] += uint64(c.Val())
		}
	}
	return total, by, nil
}

func (s *Server) overview(ctx context.Context) (Overview, error) {
	total, by, err := s.statusCounts(ctx)
	if err != nil {
		return Overview{}, err
	}
	qs, err := s.p.GetQueueStats(ctx)
	if err != nil {
		return Overview{}, err
	}
	o, wq := qs.Orchestrator, qs.Worker
	ls, err := s.p.GetTagLimits(ctx)
	if err != nil {
		return Overview{}, err
	}
	return Overview{
		Namespace: s.p.Keyspace().Namespace(), ServerTime: qs.ServerTime.UTC(), Instances: total, ByStatus: by,
		Queues: QueuesOut{o.Visible, o.Delayed, o.Locked, o.LockedInstances, o.ExpiredLocks, o.Orphaned,
			o.OldestVisibleAge.Milliseconds(), wq.Unlocked, wq.Locked, wq.OldestVisibleAge.Milliseconds(), WorkerTagsOf(wq.Tags),
			TagCapsOf(ls, wq.Tags)},
		Samples: s.samples.all(), SampleMs: s.cfg.SampleEvery.Milliseconds(),
	}, nil
}

// Instance is one instance of a list.
type Instance struct {
	ID            string  `json:"instance_id"`
	Status        string  `json:"status"`
	Orchestration string  `json:"orchestration_name"`
	Version       string  `json:"orchestration_version"`
	Execution     uint64  `json:"current_execution_id"`
	Output        *string `json:"output"`
	CreatedAt     uint64  `json:"created_at_ms"`
	UpdatedAt     uint64  `json:"updated_at_ms"`
	Parent        string  `json:"parent_instance_id,omitempty"`
}

// InstanceOf is the list entry of an instance (dxctl's "instances" prints the same JSON).
func InstanceOf(i provider.InstanceInfo) Instance {
	return Instance{i.InstanceID, i.Status, i.OrchestrationName, i.OrchestrationVersion, i.CurrentExecutionID,
		i.Output, i.CreatedAt, i.UpdatedAt, i.ParentInstanceID}
}

// Filter is a list request.
type Filter struct {
	Status        string
	Name          string
	Version       string
	Prefix        string
	CreatedAfter  uint64 // ms, exclusive of nothing: created_at >= CreatedAfter
	CreatedBefore uint64 // ms: created_at < CreatedBefore (0: no bound)
	Sort          string // "created" or "status"
	Limit         int
	Cursor        string
}

// Query renders f as URL query values (without the cursor).
func (f Filter) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("status", f.Status)
	set("name", f.Name)
	set("version", f.Version)
	set("prefix", f.Prefix)
	if f.CreatedAfter > 0 {
		q.Set("created_after", msRFC(f.CreatedAfter))
	}
	if f.CreatedBefore > 0 {
		q.Set("created_before", msRFC(f.CreatedBefore))
	}
	if f.Sort != "created" {
		set("sort", f.Sort)
	}
	if f.Limit != defaultLimit {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	return q
}

const (
	defaultLimit = 50
	maxLimit     = 500
)

// badRequest is a client mistake, reported with 400 and its message.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return badRequest{fmt.Sprintf(format, args...)} }

// parseFilter reads the list filters from a query.
func parseFilter(q url.Values) (Filter, error) {
	f := Filter{Name: q.Get("name"), Version: q.Get("version"), Prefix: q.Get("prefix"), Cursor: q.Get("cursor"),
		Sort: q.Get("sort"), Limit: defaultLimit}
	if st := q.Get("status"); st != "" {
		for _, s := range statuses {
			if strings.EqualFold(s, st) {
				f.Status = s
			}
		}
		if f.Status == "" {
			return f, badf("unknown status %q: want one of %s", st, strings.Join(statuses, ", "))
		}
	}
	switch f.Sort {
	case "", "created":
		f.Sort = "created"
	case "status":
		if f.Status == "" {
			return f, badf("sort=status needs a status filter (it orders by entry into that status)")
		}
	default:
		return f, badf("unknown sort %q: want created or status", f.Sort)
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxLimit {
			return f, badf("limit %q: want a number from 1 to %d", l, maxLimit)
		}
		f.Limit = n
	}
	var err error
	if f.CreatedAfter, err = parseTime(q.Get("created_after")); err != nil {
		return f, badf("created_after: %v", err)
	}
	if f.CreatedBefore, err = parseTime(q.Get("created_before")); err != nil {
		return f, badf("created_before: %v", err)
	}
	return f, nil
}

// parseTime reads an RFC 3339 time, a datetime-local value (UTC) or ms since the epoch; "" is 0.
func parseTime(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil && t.UnixMilli() > 0 {
			return uint64(t.UnixMilli()), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time: want RFC 3339 (2026-01-02T15:04:05Z) or ms since 1970", s)
}

// indexed reports whether the store's index answers f with no scanning.
func (f Filter) indexed() bool {
	return f.Name == "" && f.Version == "" && f.Prefix == "" && f.CreatedAfter == 0 && f.CreatedBefore == 0 &&
		(f.Status == "" || f.Sort == "status")
}

func (f Filter) match(i provider.InstanceInfo) bool {
	return (f.Status == "" || i.Status == f.Status) && (f.Name == "" || i.OrchestrationName == f.Name) &&
		(f.Version == "" || i.OrchestrationVersion == f.Version) && strings.HasPrefix(i.InstanceID, f.Prefix) &&
		(f.CreatedAfter == 0 || i.CreatedAt >= f.CreatedAfter) && (f.CreatedBefore == 0 || i.CreatedAt < f.CreatedBefore)
}

// List is GET /api/instances.
type List struct {
	Instances []Instance `json:"instances"`
	// NextCursor continues the listing ("" when it is done).
	NextCursor string `json:"next_cursor,omitempty"`
	// Scanned is how many index entries this page examined; Indexed says whether the filters
	// were answered by an index (then Scanned is the page); ScanLimit bounds Scanned otherwise,
	// and a page that reached it may hold fewer matches than the limit with more to come.
	Scanned   int  `json:"scanned"`
	ScanLimit int  `json:"scan_limit"`
	Indexed   bool `json:"indexed"`
	// ScannedThrough is the creation time (ms) of the last instance examined, when scanning.
	ScannedThrough uint64 `json:"scanned_through_ms,omitempty"`
}

// list returns one page. Indexed filters (all instances by creation; one status by entry into
// it) read exactly the page; the others walk the creation index in batches, examining at most
// ScanLimit entries, and return the cursor of the last one examined.
func (s *Server) list(ctx context.Context, f Filter) (List, error) {
	out := List{Instances: []Instance{}, ScanLimit: s.cfg.ScanLimit, Indexed: f.indexed()}
	idx := ""
	if f.Sort == "status" {
		idx = f.Status
	}
	cursor := f.Cursor
	for {
		batch := f.Limit - len(out.Instances)
		if !out.Indexed {
			batch = min(max(batch, 50), s.cfg.ScanLimit-out.Scanned)
		}
		ids, next, err := s.p.ListInstancesPage(ctx, cursor, batch, idx)
		if err != nil {
			if errors.Is(err, provider.ErrInvalidInput) {
				return out, badf("cursor %q is not a cursor this console gave", f.Cursor)
			}
			return out, err
		}
		infos, errs := s.infos(ctx, ids)
		for k := range ids {
			info, err := infos[k], errs[k]
			out.Scanned++
			if errors.Is(err, provider.ErrNotFound) {
				continue // deleted since it was listed
			}
			if err != nil {
				return out, err
			}
			out.ScannedThrough = info.CreatedAt
			if f.Sort == "created" && f.CreatedBefore != 0 && info.CreatedAt >= f.CreatedBefore {
				out.NextCursor = "" // creation order: nothing later matches
				return out, nil
			}
			if !f.match(info) {
				continue
			}
			out.Instances = append(out.Instances, InstanceOf(info))
			if len(out.Instances) == f.Limit && k < len(ids)-1 {
				// The page is full inside the batch: continue right after this id. The provider's
				// cursor names the batch's last id, so ask for the page up to this one again.
				_, c, err := s.p.ListInstancesPage(ctx, cursor, k+1, idx)
				if err != nil {
					return out, err
				}
				out.NextCursor = c
				return out, nil
			}
		}
		cursor = next
		out.NextCursor = next
		if next == "" || len(out.Instances) >= f.Limit || (!out.Indexed && out.Scanned >= s.cfg.ScanLimit) {
			if out.Indexed {
				out.ScannedThrough = 0
			}
			return out, nil
		}
	}
}

// infoWorkers bounds the info reads a list page runs at once.
const infoWorkers = 8

// infos reads the instances' infos, infoWorkers at a time (one round trip each), in ids' order.
func (s *Server) infos(ctx context.Context, ids []string) ([]provider.InstanceInfo, []error) {
	infos, errs := make([]provider.InstanceInfo, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(infoWorkers, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				infos[i], errs[i] = s.p.GetInstanceInfo(ctx, ids[i])
			}
		}()
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()
	return infos, errs
}

// Detail is GET /api/instances/{id}.
type Detail struct {
	Instance     Instance          `json:"instance"`
	Input        *string           `json:"input"`
	Error        *ErrorOut         `json:"error,omitempty"`
	CustomStatus *CustomStatus     `json:"custom_status"`
	KV           map[string]string `json:"kv"`
	Executions   []Execution       `json:"executions"`
	Ancestors    []string          `json:"ancestors"` // parent first, root last
	Children     []string          `json:"children"`
}

// ErrorOut is a failed instance's error.
type ErrorOut struct {
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

// CustomStatus is an instance's custom status.
type CustomStatus struct {
	Status  *string `json:"status"`
	Version uint64  `json:"version"`
}

// Execution is one execution of an instance.
type Execution struct {
	ExecutionID uint64  `json:"execution_id"`
	Status      string  `json:"status"`
	Output      *string `json:"output"`
	StartedAt   uint64  `json:"started_at_ms"`
	CompletedAt uint64  `json:"completed_at_ms,omitempty"`
	EventCount  uint64  `json:"event_count"`
}

// detail reads an instance. The input and the error come from the current execution's history:
// hist when it is execution histExec and that is the current one (the instance page has read it
// already), else it is read here. ErrNotFound when the instance does not exist.
func (s *Server) detail(ctx context.Context, id string, hist []provider.Event, histExec uint64) (Detail, error) {
	info, err := s.p.GetInstanceInfo(ctx, id)
	if err != nil {
		return Detail{}, err
	}
	d := Detail{Instance: InstanceOf(info), KV: map[string]string{}, Executions: []Execution{}, Ancestors: []string{}}
	xs, err := s.p.ListExecutions(ctx, id)
	if err != nil {
		return d, err
	}
	for _, x := range xs {
		e, err := s.p.GetExecutionInfo(ctx, id, x)
		if errors.Is(err, provider.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return d, err
		}
		d.Executions = append(d.Executions, Execution{e.ExecutionID, e.Status, e.Output, e.StartedAt, e.CompletedAt, e.EventCount})
	}
	if histExec != info.CurrentExecutionID {
		hist, err = s.p.ReadHistoryWithExecutionID(ctx, id, info.CurrentExecutionID)
		if err != nil && !errors.Is(err, provider.ErrNotFound) {
			return d, err
		}
	}
	for _, e := range hist {
		switch k := e.Kind.(type) {
		case provider.OrchestrationStartedEvent:
			in := k.Input
			d.Input = &in
		case provider.OrchestrationFailedEvent:
			b, _ := json.Marshal(k.Details)
			d.Error = &ErrorOut{(&dx.Error{Details: k.Details}).Error(), b}
		}
	}
	cs, err := s.p.GetCustomStatus(ctx, id, 0)
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		return d, err
	}
	if cs != nil {
		d.CustomStatus = &CustomStatus{cs.Status, cs.Version}
	}
	if d.KV, err = s.p.GetKVAllValues(ctx, id); err != nil {
		return d, err
	}
	if d.KV == nil {
		d.KV = map[string]string{}
	}
	if d.Children, err = s.p.ListChildren(ctx, id); err != nil {
		return d, err
	}
	if d.Children == nil {
		d.Children = []string{}
	}
	for p := info.ParentInstanceID; p != "" && len(d.Ancestors) < 64; {
		d.Ancestors = append(d.Ancestors, p)
		parent, ok, err := s.p.GetParentID(ctx, p)
		if errors.Is(err, provider.ErrNotFound) || !ok {
			break
		}
		if err != nil {
			return d, err
		}
		p = parent
	}
	return d, nil
}

// History is GET /api/instances/{id}/history: one page of an execution's events, with the
// timeline bars of the scheduling events on the page and the turns triggered on it.
type History struct {
	ExecutionID uint64            `json:"execution_id"`
	Total       int               `json:"total"`
	Offset      int               `json:"offset"`
	Limit       int               `json:"limit"`
	Events      []json.RawMessage `json:"events"`
	// StartMs and EndMs bound the whole execution's timeline (first and last event, or now for
	// steps still pending); bars are placed on that scale.
	StartMs uint64 `json:"start_ms"`
	EndMs   uint64 `json:"end_ms"`
	Bars    []Bar  `json:"bars"`
	// Turns are derived from the history (duroxide records no turn events): see turns.
	Turns []Bar `json:"turns"`
}

// Bar is one step of the timeline: from the event that scheduled it to the one that completed it.
type Bar struct {
	EventID   uint64 `json:"event_id"`
	Kind      string `json:"kind"` // activity, timer, suborchestration, turn
	Name      string `json:"name"`
	StartMs   uint64 `json:"start_ms"`
	EndMs     uint64 `json:"end_ms"`     // 0 while pending
	Outcome   string `json:"outcome"`    // completed, failed, fired, cancelled, pending
	DoneEvent uint64 `json:"done_event"` // the completing event's id (0 while pending); a turn's last event
}

// turns derives an execution's turns from its history. A turn records the messages it received
// first (the start, completions, events, a cancel request), then what the orchestration did; so a
// turn is taken to start at each such trigger event and to end at the last event recorded before
// the next trigger. Messages received by one turn show as turns of their own that end where they
// start (the history does not tell them apart from turns that recorded nothing).
func turns(hist []provider.Event) []Bar {
	var out []Bar
	for _, e := range hist {
		switch e.Kind.(type) {
		case provider.OrchestrationStartedEvent, provider.ActivityCompletedEvent, provider.ActivityFailedEvent,
			provider.TimerFiredEvent, provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent,
			provider.ExternalEventEvent, provider.QueueEventDeliveredEvent, provider.OrchestrationCancelRequestedEvent:
			out = append(out, Bar{EventID: e.EventID, Kind: "turn", Name: e.Kind.EventType(), StartMs: e.TimestampMs,
				EndMs: e.TimestampMs, Outcome: "completed", DoneEvent: e.EventID})
			continue
		}
		if n := len(out); n > 0 {
			out[n-1].EndMs, out[n-1].DoneEvent = max(out[n-1].EndMs, e.TimestampMs), e.EventID
		}
	}
	return out
}

const (
	defaultHistoryLimit = 200
	maxHistoryLimit     = 1000
)

// timeline pairs every scheduling event with its completion (source_event_id), in history order.
func timeline(hist []provider.Event) []Bar {
	var bars []Bar
	at := map[uint64]int{}
	for _, e := range hist {
		var b *Bar
		switch k := e.Kind.(type) {
		case provider.ActivityScheduledEvent:
			b = &Bar{Kind: "activity", Name: k.Name}
		case provider.TimerCreatedEvent:
			b = &Bar{Kind: "timer", Name: "timer"}
		case provider.SubOrchestrationScheduledEvent:
			b = &Bar{Kind: "suborchestration", Name: k.Name + " " + k.Instance}
		}
		if b != nil {
			b.EventID, b.StartMs, b.Outcome = e.EventID, e.TimestampMs, "pending"
			at[e.EventID] = len(bars)
			bars = append(bars, *b)
			continue
		}
		if e.SourceEventID == nil {
			continue
		}
		i, ok := at[*e.SourceEventID]
		if !ok || bars[i].EndMs != 0 {
			continue
		}
		outcome := ""
		switch e.Kind.(type) {
		case provider.ActivityCompletedEvent, provider.SubOrchestrationCompletedEvent:
			outcome = "completed"
		case provider.ActivityFailedEvent, provider.SubOrchestrationFailedEvent:
			outcome = "failed"
		case provider.TimerFiredEvent:
			outcome = "fired"
		case provider.ActivityCancelRequestedEvent, provider.SubOrchestrationCancelRequestedEvent:
			outcome = "cancelled"
		default:
			continue
		}
		bars[i].EndMs, bars[i].Outcome, bars[i].DoneEvent = e.TimestampMs, outcome, e.EventID
	}
	return bars
}

// history pages an execution's history; exec 0 is the current execution. It returns the page's
// events and the whole history (one read).
func (s *Server) history(ctx context.Context, id string, exec uint64, offset, limit int) (History, []provider.Event, []provider.Event, error) {
	if exec == 0 {
		info, err := s.p.GetInstanceInfo(ctx, id)
		if err != nil {
			return History{}, nil, nil, err
		}
		exec = info.CurrentExecutionID
	} else if _, err := s.p.GetExecutionInfo(ctx, id, exec); err != nil {
		return History{}, nil, nil, err
	}
	hist, err := s.p.ReadHistoryWithExecutionID(ctx, id, exec)
	if err != nil {
		return History{}, nil, nil, err
	}
	h := History{ExecutionID: exec, Total: len(hist), Offset: offset, Limit: limit, Events: []json.RawMessage{}, Bars: []Bar{}, Turns: []Bar{}}
	if len(hist) > 0 {
		h.StartMs, h.EndMs = hist[0].TimestampMs, hist[len(hist)-1].TimestampMs
	}
	lo, hi := min(offset, len(hist)), min(offset+limit, len(hist))
	page := hist[lo:hi]
	onPage := map[uint64]bool{}
	for _, e := range page {
		b, err := provider.Marshal(e)
		if err != nil {
			return h, nil, nil, err
		}
		h.Events = append(h.Events, b)
		onPage[e.EventID] = true
	}
	now := uint64(time.Now().UnixMilli())
	for _, b := range timeline(hist) {
		if b.EndMs == 0 && now > h.EndMs {
			h.EndMs = now // a pending step runs until now
		}
		if onPage[b.EventID] {
			h.Bars = append(h.Bars, b)
		}
	}
	for _, b := range turns(hist) {
		if onPage[b.EventID] {
			h.Turns = append(h.Turns, b)
		}
	}
	return h, page, hist, nil
}

func parseHistoryQuery(q url.Values) (exec uint64, offset, limit int, err error) {
	limit = defaultHistoryLimit
	if v := q.Get("exec"); v != "" {
		if exec, err = strconv.ParseUint(v, 10, 64); err != nil || exec == 0 {
			return 0, 0, 0, badf("exec %q: want an execution number (1, 2, ...)", v)
		}
	}
	if v := q.Get("offset"); v != "" {
		if offset, err = strconv.Atoi(v); err != nil || offset < 0 {
			return 0, 0, 0, badf("offset %q: want a number >= 0", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > maxHistoryLimit {
			return 0, 0, 0, badf("limit %q: want a number from 1 to %d", v, maxHistoryLimit)
		}
	}
	return exec, offset, limit, nil
}

func msRFC(ms uint64) string {
	return time.UnixMilli(int64(ms)).UTC().Format(time.RFC3339Nano)
}

// Partitions is GET /api/partitions (dxctl's "partitions --json" prints the same JSON).
type Partitions struct {
	Namespace  string      `json:"namespace"`
	Partitions []Partition `json:"partitions"`
}

// Partition is one partition of the namespace (redisprovider.PartitionStats says what each
// field means).
type Partition struct {
	Partition      int    `json:"partition"`
	Tag            string `json:"tag"`
	Slot           int    `json:"slot"`
	Node           string `json:"node"`
	Instances      uint64 `json:"instances"`
	Orchestrator   uint64 `json:"orchestrator_queue"`
	Worker         uint64 `json:"worker_queue"`
	OutboxEntries  uint64 `json:"outbox_entries"`
	OutboxOldestMs int64  `json:"outbox_oldest_age_ms"`
	NodeOpsPerSec  int64  `json:"node_ops_per_sec"`
	NodePartitions int    `json:"node_partitions"`
}

// PartitionsOf converts the provider's partition statistics (never nil).
func PartitionsOf(ns string, stats []redisprovider.PartitionStats) Partitions {
	out := Partitions{Namespace: ns, Partitions: make([]Partition, len(stats))}
	for i, s := range stats {
		out.Partitions[i] = Partition{s.Partition, s.Tag, s.Slot, s.Node, s.Instances, s.Orchestrator, s.Worker,
			s.OutboxEntries, s.OutboxOldestAge.Milliseconds(), s.NodeOpsPerSec, s.NodePartitions}
	}
	return out
}

func (s *Server) partitions(ctx context.Context) (Partitions, error) {
	stats, err := s.p.GetPartitionStats(ctx)
	if err != nil {
		return Partitions{}, err
	}
	return PartitionsOf(s.p.Keyspace().Namespace(), stats), nil
}
