package dx

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The built-in schedule orchestration and its activities.

// scheduleVersion is the version of the built-in schedule orchestration.
const scheduleVersion = "1.0.0"

const (
	schedulePlanActivity   = "dx.schedule.plan"
	scheduleCancelActivity = "dx.schedule.cancel"
)

// scheduleWakeups bounds an execution: after this many wake-ups (each a fire time, a control
// message or a poll) the schedule continues as new, on the newest registered version.
const scheduleWakeups = 100

const (
	maxDuePerPlan     = 50   // fire times one plan hands out; more are handed out by the next
	maxBuffered       = 1000 // buffered fire times (buffer_all)
	maxSkipCount      = 100000
	startedGrace      = 5 * time.Minute // a run not found this soon after its start is taken as still starting
	firstPoll         = time.Minute     // polls for the end of a running run while one is buffered, in case
	maxPoll           = time.Hour       // its run_ended message was lost (a run failed as poison)
	planRetryInterval = 10 * time.Second
)

// scheduleState is the schedule orchestration's input (carried across continue-as-new) and its
// custom status (what GetSchedule shows).
type scheduleState struct {
	ID           string         `json:"id"`
	Config       scheduleConfig `json:"config"`
	Paused       bool           `json:"paused,omitempty"`
	PausedReason string         `json:"paused_reason,omitempty"`
	// Resumed: the next plan still skips (as paused) the fire times up to now.
	Resumed bool `json:"resumed,omitempty"`
	// Updated: the next plan counts fire times from now (the spec changed).
	Updated bool `json:"updated,omitempty"`
	Deleted bool `json:"deleted,omitempty"`
	// Cursor: every fire time up to it was handled (fired or skipped); zero before the first plan.
	Cursor   time.Time         `json:"cursor,omitzero"`
	Running  []scheduleRunning `json:"running,omitempty"`
	Buffered []scheduleFire    `json:"buffered,omitempty"`
	Recent   []ScheduleRun     `json:"recent,omitempty"`
	Skipped  []ScheduleSkip    `json:"skipped,omitempty"`
	Fired    uint64            `json:"fired,omitempty"`
	NSkipped uint64            `json:"skipped_total,omitempty"`
	Next     []time.Time       `json:"next,omitempty"`
	// Pending control work for the next plan.
	Triggers  int             `json:"triggers,omitempty"`
	Backfills []scheduleRange `json:"backfills,omitempty"`
	Poll      time.Duration   `json:"poll,omitempty"`
}

type scheduleRunning struct {
	ID        string    `json:"id"`
	StartedAt time.Time `json:"started_at"`
}

type scheduleFire struct {
	T   time.Time `json:"t"`
	Why string    `json:"why"` // why it fired: scheduled, trigger, backfill
}

type scheduleRange struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

func (s scheduleState) info() ScheduleInfo {
	info := ScheduleInfo{ID: s.ID, Schedule: s.Config.public(), State: "active", Next: s.Next, Recent: s.Recent,
		Skipped: s.Skipped, Fired: s.Fired, SkippedTotal: s.NSkipped}
	if s.Paused {
		info.State, info.PausedReason = "paused", s.PausedReason
		info.Schedule.Paused = true
	}
	if s.Deleted {
		info.State = "deleted"
	}
	for _, b := range s.Buffered {
		info.Buffered = append(info.Buffered, b.T)
	}
	for _, r := range s.Running {
		info.Running = append(info.Running, r.ID)
	}
	return info
}

// schedulePlanIn asks what is due now.
type schedulePlanIn struct {
	ID        string            `json:"id"`
	Spec      ScheduleSpec      `json:"spec"`
	Window    time.Duration     `json:"window"`
	Cursor    time.Time         `json:"cursor,omitzero"`
	Paused    bool              `json:"paused,omitempty"`
	Running   []scheduleRunning `json:"running,omitempty"`
	Backfills []scheduleRange   `json:"backfills,omitempty"`
	FromNow   bool              `json:"from_now,omitempty"` // move Cursor to now first
	Prune     bool              `json:"prune,omitempty"`
}

// schedulePlan is what is due: the fire times to start, those to skip, the next ones.
type schedulePlan struct {
	Now time.Time `json:"now"`
	// Cursor is where the handled fire times end once Due is fired and Skipped recorded.
	Cursor   time.Time      `json:"cursor"`
	Due      []time.Time    `json:"due,omitempty"`
	More     bool           `json:"more,omitempty"` // more fire times are due than Due holds
	Skipped  []ScheduleSkip `json:"skipped,omitempty"`
	Backfill []time.Time    `json:"backfill,omitempty"`
	Next     []time.Time    `json:"next,omitempty"`
	NextAt   time.Time      `json:"next_at,omitzero"` // when Next[0]'s run starts (its jitter)
	Running  []scheduleRunning
}

// schedulePlanHook, when set (tests), runs at the start of each plan activity.
var schedulePlanHook func()

// schedulePlanActivity computes fire times (the host's time-zone data and clock are read here,
// and the result recorded) and which of the runs the overlap policy waits for still run.
func (rt *Runtime) schedulePlan(ctx context.Context, input string) (string, error) {
	if schedulePlanHook != nil {
		schedulePlanHook()
	}
	in, err := decode[schedulePlanIn](input)
	if err != nil {
		return "", err
	}
	spec, err := compileSpec(in.Spec, in.ID)
	if err != nil {
		return "", Permanent(err)
	}
	now := rt.opts.Clock().UTC().Truncate(time.Millisecond)
	out := schedulePlan{Now: now, Cursor: in.Cursor}
	if out.Cursor.IsZero() || in.FromNow && out.Cursor.Before(now) {
		out.Cursor = now
	}
	skip := func(t time.Time, reason string) {
		if n := len(out.Skipped); n > 0 && out.Skipped[n-1].Reason == reason {
			out.Skipped[n-1].To = t
			out.Skipped[n-1].Count++
			return
		}
		out.Skipped = append(out.Skipped, ScheduleSkip{From: t, To: t, Count: 1, Reason: reason})
	}
	lateEdge := now.Add(-in.Window)
	for t, ok := spec.next(out.Cursor); ok && !spec.at(t).After(now); t, ok = spec.next(out.Cursor) {
		switch {
		case in.Paused:
			skip(t, "paused")
		case t.Before(lateEdge):
			skip(t, "outside the catch-up window")
		default:
			if len(out.Due) == maxDuePerPlan {
				out.More = true
				break
			}
			out.Due = append(out.Due, t)
		}
		if out.More {
			break
		}
		out.Cursor = t
		if n := len(out.Skipped); n > 0 && out.Skipped[n-1].Count >= maxSkipCount {
			break // the rest next time (the schedule plans again at once)
		}
	}
	if n := len(out.Skipped); n > 0 && out.Skipped[n-1].Count >= maxSkipCount {
		out.More = true
	}
	for _, r := range in.Backfills {
		for t, ok := spec.next(r.From.Add(-time.Nanosecond)); ok && !t.After(r.To) && len(out.Backfill) < maxBackfill; t, ok = spec.next(t) {
			out.Backfill = append(out.Backfill, t)
		}
	}
	for t, ok := spec.next(out.Cursor); ok && len(out.Next) < 3; t, ok = spec.next(t) {
		if len(out.Next) == 0 {
			out.NextAt = spec.at(t)
		}
		out.Next = append(out.Next, t)
	}
	if len(in.Running) > 0 {
		admin, ok := rt.p.Admin()
		if !ok {
			return "", errors.New("dx: schedules need a provider with management support (Provider.Admin)")
		}
		for _, r := range in.Running {
			info, err := admin.GetInstanceInfo(ctx, r.ID)
			switch {
			case errors.Is(err, provider.ErrNotFound):
				if now.Sub(r.StartedAt) < startedGrace {
					out.Running = append(out.Running, r)
				}
			case err != nil:
				return "", err
			case stateOf(info.Status) == StateRunning:
				out.Running = append(out.Running, r)
			}
		}
	}
	if in.Prune {
		if admin, ok := rt.p.Admin(); ok {
			if _, err := admin.PruneExecutions(ctx, ScheduleInstancePrefix+in.ID, provider.PruneOptions{KeepLast: 2}); err != nil {
				rt.opts.Logger.Warn("dx: schedule: pruning old executions failed", "schedule", in.ID, "error", err)
			}
		}
	}
	return encode(out)
}

// scheduleCancel cancels the runs an OverlapCancelOther schedule replaces.
func (rt *Runtime) scheduleCancel(ctx context.Context, input string) (string, error) {
	ids, err := decode[[]string](input)
	if err != nil {
		return "", err
	}
	c := NewClient(rt.p)
	for _, id := range ids {
		if err := c.Cancel(ctx, id, "replaced by a newer run of its schedule (overlap policy cancel_other)"); err != nil {
			return "", err
		}
	}
	return "null", nil
}

// scheduleRunEnded is what the turn that ends a schedule's run sends its schedule (in the same
// ack): a control message "run_ended", so that a buffered fire time starts at once. An instance
// whose id only looks like a run id sends it to a schedule instance that does not exist, where
// it expires like any message for an unknown instance.
func scheduleRunEnded(instance string) []provider.WorkItem {
	sched, _, ok := ScheduleRunOf(instance)
	if !ok || checkScheduleID(sched) != nil {
		return nil
	}
	data, err := encode(scheduleControl{Op: "run_ended", Run: instance})
	if err != nil {
		return nil
	}
	return []provider.WorkItem{{Kind: provider.QueueMessage{Instance: ScheduleInstancePrefix + sched, Name: scheduleQueue, Data: data}}}
}

// runSchedule is the schedule orchestration.
func runSchedule(ctx Context, st scheduleState) (scheduleState, error) {
	e, err := engineFor(ctx)
	if err != nil {
		return st, err
	}
	s := &scheduler{ctx: ctx, st: &st}
	var ctl Future[scheduleControl]
	for wake := 0; ; wake++ {
		plan, err := Call[schedulePlan](ctx, schedulePlanActivity, schedulePlanIn{ID: st.ID, Spec: st.Config.Spec,
			Window: st.Config.CatchupWindow, Cursor: st.Cursor, Paused: st.Paused || st.Resumed, Running: st.Running,
			Backfills: st.Backfills, FromNow: st.Updated, Prune: wake == 0 && ctx.ExecutionID() > 2}).Await(ctx)
		if err != nil {
			ctx.Logger().Warn("dx: schedule: planning failed; trying again", "error", err)
			if err := ctx.Sleep(planRetryInterval); err != nil {
				return st, err
			}
			continue
		}
		if wake >= scheduleWakeups && (ctl.f == nil || !ctl.f.ready()) {
			// This turn began with the plan's result and started nothing yet, and the open dequeue
			// holds no message (one it took would end with this execution; a message it has not
			// taken is carried to the next): nothing to lose.
			ctl.Cancel()
			return st, ContinueAsNew(ctx, st)
		}
		st.Backfills, st.Resumed, st.Updated = nil, false, false
		st.Running = plan.Running
		for _, k := range plan.Skipped {
			s.skipped(k)
		}
		if len(st.Running) == 0 && len(st.Buffered) > 0 {
			b := st.Buffered[0]
			st.Buffered = st.Buffered[1:]
			s.start(b.T, "buffered", plan.Now)
		}
		for _, t := range plan.Due {
			if err := s.fire(t, "scheduled", plan.Now); err != nil {
				return st, err
			}
		}
		st.Cursor = plan.Cursor
		for _, t := range plan.Backfill {
			if err := s.fire(t, "backfill", plan.Now); err != nil {
				return st, err
			}
		}
		for t := plan.Now; st.Triggers > 0; st.Triggers-- {
			// A trigger's fire time is now, moved on by a millisecond while it is the fire time of
			// a run just started (a trigger at a scheduled instant, several triggers at once).
			for s.recent(t) {
				t = t.Add(time.Millisecond)
			}
			if err := s.fire(t, "trigger", plan.Now); err != nil {
				return st, err
			}
		}
		st.Next = plan.Next
		if len(st.Running) == 0 || len(st.Buffered) == 0 {
			st.Poll = 0
		}
		s.publish()
		if plan.More {
			continue
		}

		var wakeAt time.Time
		if !st.Paused && !plan.NextAt.IsZero() {
			wakeAt = plan.NextAt
		}
		if len(st.Buffered) > 0 && len(st.Running) > 0 {
			st.Poll = min(max(2*st.Poll, firstPoll), maxPoll)
			if p := plan.Now.Add(st.Poll); wakeAt.IsZero() || p.Before(wakeAt) {
				wakeAt = p
			}
		}
		// One dequeue stays open across wake-ups (a timer that wins does not cancel it).
		var timer Future[struct{}]
		if !wakeAt.IsZero() {
			// Timers fire at whole milliseconds: round up, so that the plan at the wake-up finds
			// the fire time due.
			wakeAt = wakeAt.Add(time.Millisecond - 1).Truncate(time.Millisecond)
			timer = ctx.Timer(wakeAt.Sub(e.clock()))
		}
		m, replan, err := s.await(e, &ctl, timer)
		if err != nil || replan {
			if err != nil {
				return st, err
			}
			continue
		}
		switch m.Op {
		case "pause":
			st.Paused, st.PausedReason = true, m.Reason
		case "resume":
			st.Resumed = st.Resumed || st.Paused
			st.Paused, st.PausedReason = false, ""
		case "update":
			if m.Config != nil {
				st.Config, st.Updated = *m.Config, true // the new spec's fire times count from now
			}
		case "trigger":
			st.Triggers++
		case "backfill":
			if len(st.Backfills) < 10 {
				st.Backfills = append(st.Backfills, scheduleRange{From: m.From, To: m.To})
			}
		case "run_ended": // a run ended while fire times are buffered: plan at once
		case "delete":
			st.Deleted, st.Next = true, nil
			s.publish()
			return st, nil
		default:
			ctx.Logger().Warn("dx: schedule: unknown control message ignored", "op", m.Op)
		}
	}
}

// maxQuietMessages is how many run_ended messages the schedule takes without planning (each
// without a turn of its own when several are queued: a turn may take fewer than 99 dequeues).
const maxQuietMessages = 20

// await waits for the timer (none: zero future) or a control message. It returns replan when
// the timer fired (or run_ended messages were taken maxQuietMessages times); a run_ended
// message with nothing buffered only removes the run from Running and waits on.
func (s *scheduler) await(e *engine, ctl *Future[scheduleControl], timer Future[struct{}]) (scheduleControl, bool, error) {
	co, err := current(s.ctx, e)
	if err != nil {
		return scheduleControl{}, false, err
	}
	for quiet := 0; ; quiet++ {
		if ctl.f == nil {
			*ctl = Dequeue[scheduleControl](s.ctx, scheduleQueue)
		}
		if quiet == maxQuietMessages {
			timer.Cancel()
			return scheduleControl{}, true, nil
		}
		c := *ctl
		co.park(func() bool { return c.f.ready() || timer.f != nil && timer.f.ready() })
		if !c.f.ready() {
			timer.f.consumed = true
			return scheduleControl{}, true, nil
		}
		m, err := c.Await(s.ctx)
		*ctl = Future[scheduleControl]{}
		if err != nil {
			return m, false, err
		}
		if m.Op == "run_ended" && len(s.st.Buffered) == 0 {
			s.st.Running = slices.DeleteFunc(s.st.Running, func(r scheduleRunning) bool { return r.ID == m.Run })
			continue
		}
		timer.Cancel()
		return m, false, nil
	}
}

// scheduler fires and records for runSchedule.
type scheduler struct {
	ctx Context
	st  *scheduleState
}

func (s *scheduler) skipped(k ScheduleSkip) {
	st := s.st
	st.NSkipped += k.Count
	if n := len(st.Skipped); n > 0 && st.Skipped[n-1].Reason == k.Reason && !st.Skipped[n-1].To.After(k.From) {
		st.Skipped[n-1].To = k.To
		st.Skipped[n-1].Count += k.Count
		return
	}
	st.Skipped = append(st.Skipped, k)
	if len(st.Skipped) > ScheduleRecentRuns {
		st.Skipped = slices.Clone(st.Skipped[len(st.Skipped)-ScheduleRecentRuns:])
	}
}

// fire handles one fire time under the overlap policy.
func (s *scheduler) fire(t time.Time, why string, now time.Time) error {
	st := s.st
	if len(st.Running) > 0 {
		switch st.Config.Overlap {
		case OverlapSkip:
			s.skipped(ScheduleSkip{From: t, To: t, Count: 1, Reason: "overlap: " + st.Running[0].ID + " is still running"})
			return nil
		case OverlapBufferOne:
			if len(st.Buffered) > 0 {
				s.skipped(ScheduleSkip{From: t, To: t, Count: 1, Reason: "overlap: a run is already buffered"})
				return nil
			}
			st.Buffered = append(st.Buffered, scheduleFire{T: t, Why: why})
			return nil
		case OverlapBufferAll:
			if len(st.Buffered) >= maxBuffered {
				s.skipped(ScheduleSkip{From: t, To: t, Count: 1, Reason: "overlap: the buffer is full"})
				return nil
			}
			st.Buffered = append(st.Buffered, scheduleFire{T: t, Why: why})
			return nil
		case OverlapCancelOther:
			ids := make([]string, len(st.Running))
			for i, r := range st.Running {
				ids[i] = r.ID
			}
			if _, err := Call[Raw](s.ctx, scheduleCancelActivity, ids).Await(s.ctx); err != nil {
				return err
			}
			st.Running = nil
		}
	}
	s.start(t, why, now)
	return nil
}

// recent reports whether a recent run (or a buffered fire time) has fire time t.
func (s *scheduler) recent(t time.Time) bool {
	for _, r := range s.st.Recent {
		if r.FireTime.Equal(t) {
			return true
		}
	}
	for _, b := range s.st.Buffered {
		if b.T.Equal(t) {
			return true
		}
	}
	return false
}

// start starts the run of fire time t.
func (s *scheduler) start(t time.Time, why string, now time.Time) {
	st := s.st
	id := st.ID + "@" + t.UTC().Format(time.RFC3339Nano)
	var opts []DetachedOption
	if st.Config.Version != "" {
		opts = append(opts, WithVersion(st.Config.Version))
	}
	if err := s.ctx.StartOrchestration(st.Config.Orchestration, id, Raw(st.Config.Input), opts...); err != nil {
		s.skipped(ScheduleSkip{From: t, To: t, Count: 1, Reason: "start refused: " + err.Error()})
		return
	}
	st.Fired++
	st.Recent = append(st.Recent, ScheduleRun{RunID: id, FireTime: t, Why: why, StartedAt: now})
	if len(st.Recent) > ScheduleRecentRuns {
		st.Recent = slices.Clone(st.Recent[len(st.Recent)-ScheduleRecentRuns:])
	}
	if st.Config.Overlap != OverlapAllowAll {
		st.Running = append(st.Running, scheduleRunning{ID: id, StartedAt: now})
	}
}

// publish sets the custom status to the state when it changed.
func (s *scheduler) publish() {
	text, err := encode(s.st)
	if err != nil {
		return
	}
	if cur, ok := s.ctx.CustomStatus(); !ok || cur != text {
		s.ctx.SetCustomStatus(text)
	}
}
