package dx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/duroxide-go/dxredis/provider"
)

// Schedules start an orchestration on a clock. A schedule is itself an orchestration, built into
// every Runtime (ScheduleOrchestration, instance ScheduleInstancePrefix + id): its timers are
// durable, its history says what it fired, and each fire time starts at most one run, with the
// instance id "<schedule id>@<fire time, RFC 3339 UTC>" (a start of an id that exists is ignored).
// Exactly one unless the schedule was paused or the time fell outside the catch-up window: such a
// fire time is recorded as skipped, with the reason. Fire times are computed in an activity and
// recorded, so replay does not depend on the host's time-zone data. Control (pause, resume,
// update, trigger, backfill, delete) is sent as queue messages, kept while the schedule sleeps and
// across its continue-as-new. See docs/schedules.md.

// ScheduleOrchestration is the name the built-in schedule orchestration is registered under.
const ScheduleOrchestration = "dx.schedule"

// ScheduleInstancePrefix begins the instance id of every schedule: the schedule "nightly" runs as
// the instance "dx.schedule:nightly".
const ScheduleInstancePrefix = "dx.schedule:"

// scheduleQueue is the queue the schedule reads its control messages from.
const scheduleQueue = "dx.schedule.control"

// DefaultCatchupWindow is the catch-up window of a schedule that sets none.
const DefaultCatchupWindow = 10 * time.Minute

// ScheduleSpec says when a schedule fires: a cron expression (Cron, in TimeZone) or a fixed
// interval (Every, shifted by Offset), between Start and End.
type ScheduleSpec struct {
	// Cron is a cron expression of five fields (minute hour day-of-month month day-of-week), or
	// six with seconds first, or a descriptor (@hourly, @daily, @weekly, @monthly, @yearly).
	Cron string `json:"cron,omitempty"`
	// TimeZone is the IANA zone Cron is read in (default UTC). A local time that a
	// spring-forward change skips fires once, at the change; a local time an autumn change
	// repeats fires once, at its first occurrence.
	TimeZone string `json:"time_zone,omitempty"`
	// Every fires at every multiple of Every since the Unix epoch, plus Offset (0 <= Offset <
	// Every); at least one second.
	Every  time.Duration `json:"every,omitempty"`
	Offset time.Duration `json:"offset,omitempty"`
	// Jitter delays each run by up to Jitter after its fire time (a fixed amount per fire time:
	// the run id keeps the fire time).
	Jitter time.Duration `json:"jitter,omitempty"`
	// Start and End bound the fire times (zero: unbounded).
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
}

// ScheduleAction is the orchestration a schedule starts: its name, input (encoded as JSON) and
// version ("" runs the latest registered). Orchestration.ScheduleAction makes one from a typed
// handle.
type ScheduleAction struct {
	Orchestration string `json:"orchestration"`
	Input         any    `json:"input,omitempty"`
	Version       string `json:"version,omitempty"`
}

// ScheduleAction returns the action that starts this orchestration with input.
func (o Orchestration[In, Out]) ScheduleAction(input In) ScheduleAction {
	return ScheduleAction{Orchestration: o.name, Input: input}
}

// OverlapPolicy says what a fire time does while a run the schedule started is still running.
type OverlapPolicy string

// The overlap policies.
const (
	// OverlapSkip (the default) skips the fire time (recorded as skipped).
	OverlapSkip OverlapPolicy = "skip"
	// OverlapBufferOne starts the fire time's run when the running one ends; a further fire time
	// while one is buffered is skipped.
	OverlapBufferOne OverlapPolicy = "buffer_one"
	// OverlapBufferAll starts every fire time's run, one after another (at most 1,000 buffered).
	OverlapBufferAll OverlapPolicy = "buffer_all"
	// OverlapCancelOther cancels the running run and starts the new one.
	OverlapCancelOther OverlapPolicy = "cancel_other"
	// OverlapAllowAll starts every run at its time, whatever is running.
	OverlapAllowAll OverlapPolicy = "allow_all"
)

// Schedule is what a schedule does: when (Spec), what (Action), and its policies.
type Schedule struct {
	Spec   ScheduleSpec   `json:"spec"`
	Action ScheduleAction `json:"action"`
	// Overlap is the overlap policy (default OverlapSkip).
	Overlap OverlapPolicy `json:"overlap,omitempty"`
	// CatchupWindow is how late a fire time may still start its run, after an outage of the
	// runtimes (default DefaultCatchupWindow); later ones are skipped (recorded as skipped).
	CatchupWindow time.Duration `json:"catchup_window,omitempty"`
	// Note is free text for people.
	Note string `json:"note,omitempty"`
	// Paused creates the schedule paused (CreateSchedule only).
	Paused bool `json:"paused,omitempty"`
}

// ScheduleRun is a run a schedule started.
type ScheduleRun struct {
	RunID    string    `json:"run_id"`
	FireTime time.Time `json:"fire_time"`
	// Why is "scheduled", "trigger", "backfill" or "buffered" (a buffered fire time started when
	// the run before it ended).
	Why       string    `json:"why"`
	StartedAt time.Time `json:"started_at"`
	// State is the run's state when GetSchedule read it (NotFound: not started yet, or deleted).
	State State `json:"state,omitempty"`
}

// ScheduleSkip is a range of fire times a schedule skipped, with the reason: "paused", "outside
// the catch-up window", "overlap: ...".
type ScheduleSkip struct {
	From   time.Time `json:"from"`
	To     time.Time `json:"to"`
	Count  uint64    `json:"count"`
	Reason string    `json:"reason"`
}

// ScheduleInfo is a schedule's visible state.
type ScheduleInfo struct {
	ID       string   `json:"id"`
	Schedule Schedule `json:"schedule"`
	// State is "active", "paused", "deleted" or "failed" (its instance failed, or was cancelled:
	// PausedReason then holds the error; CreateSchedule may create it again).
	State        string `json:"state"`
	PausedReason string `json:"paused_reason,omitempty"`
	// Next are the next fire times (at most three; none after End).
	Next []time.Time `json:"next,omitempty"`
	// Recent are the last runs started, oldest first (at most ScheduleRecentRuns).
	Recent []ScheduleRun `json:"recent,omitempty"`
	// Skipped are the last skipped ranges, oldest first (at most ScheduleRecentRuns).
	Skipped []ScheduleSkip `json:"skipped,omitempty"`
	// Buffered are the fire times waiting for the running run to end.
	Buffered []time.Time `json:"buffered,omitempty"`
	// Running are the runs the overlap policy waits for (GetSchedule: those still running).
	Running []string `json:"running,omitempty"`
	// Fired and SkippedTotal count runs started and fire times skipped since creation.
	Fired        uint64 `json:"fired"`
	SkippedTotal uint64 `json:"skipped_total"`
	// Execution is the schedule instance's execution (it continues as new every so often).
	Execution uint64 `json:"execution"`
}

// ScheduleRecentRuns is how many runs and skipped ranges a schedule keeps visible.
const ScheduleRecentRuns = 10

// scheduleConfig is a Schedule as the schedule orchestration stores it: the input as JSON text.
type scheduleConfig struct {
	Spec          ScheduleSpec  `json:"spec"`
	Orchestration string        `json:"orchestration"`
	Input         string        `json:"input"`
	Version       string        `json:"version,omitempty"`
	Overlap       OverlapPolicy `json:"overlap"`
	CatchupWindow time.Duration `json:"catchup_window"`
	Note          string        `json:"note,omitempty"`
}

func (c scheduleConfig) public() Schedule {
	return Schedule{Spec: c.Spec, Action: ScheduleAction{Orchestration: c.Orchestration, Input: json.RawMessage(c.Input),
		Version: c.Version}, Overlap: c.Overlap, CatchupWindow: c.CatchupWindow, Note: c.Note}
}

// checkScheduleID refuses an id that cannot name a schedule.
func checkScheduleID(id string) error {
	if id == "" || !utf8.ValidString(id) || strings.ContainsAny(id, "@\x00") || len(id) > 200 {
		return fmt.Errorf("dx: schedule id %q: give a non-empty UTF-8 id of at most 200 bytes without '@' (%w)", id, ErrInvalidInput)
	}
	return nil
}

// compile checks a Schedule and returns it as stored.
func (s Schedule) compile(id string) (scheduleConfig, error) {
	if _, err := compileSpec(s.Spec, id); err != nil {
		return scheduleConfig{}, err
	}
	a := s.Action
	if a.Orchestration == "" || !utf8.ValidString(a.Orchestration) {
		return scheduleConfig{}, fmt.Errorf("dx: schedule %q needs an orchestration name (%w)", id, ErrInvalidInput)
	}
	if a.Version != "" {
		if _, err := parseVersion(a.Version); err != nil {
			return scheduleConfig{}, fmt.Errorf("dx: schedule %q: %w", id, err)
		}
	}
	in, err := encode(a.Input)
	if err != nil {
		return scheduleConfig{}, err
	}
	if !json.Valid([]byte(in)) {
		return scheduleConfig{}, fmt.Errorf("dx: schedule %q: input %q is not JSON (%w)", id, clip(in), ErrInvalidInput)
	}
	policy := s.Overlap
	if policy == "" {
		policy = OverlapSkip
	}
	if !slices.Contains([]OverlapPolicy{OverlapSkip, OverlapBufferOne, OverlapBufferAll, OverlapCancelOther, OverlapAllowAll}, policy) {
		return scheduleConfig{}, fmt.Errorf("dx: schedule %q: overlap policy %q is none of skip, buffer_one, buffer_all, cancel_other, allow_all (%w)", id, s.Overlap, ErrInvalidInput)
	}
	window := s.CatchupWindow
	switch {
	case window < 0:
		return scheduleConfig{}, fmt.Errorf("dx: schedule %q: negative catch-up window %v (%w)", id, window, ErrInvalidInput)
	case window == 0:
		window = DefaultCatchupWindow
	}
	return scheduleConfig{Spec: s.Spec, Orchestration: a.Orchestration, Input: in, Version: a.Version, Overlap: policy,
		CatchupWindow: window, Note: s.Note}, nil
}

// scheduleControl is a control message of a schedule.
type scheduleControl struct {
	Op     string          `json:"op"`            // pause, resume, update, trigger, backfill, delete, run_ended
	Run    string          `json:"run,omitempty"` // run_ended: the run
	Reason string          `json:"reason,omitempty"`
	Config *scheduleConfig `json:"config,omitempty"`
	From   time.Time       `json:"from,omitzero"`
	To     time.Time       `json:"to,omitzero"`
}

// CreateSchedule creates the schedule id. It returns ErrInvalidInput for a bad id, spec, time
// zone, window or policy (nothing is written) and ErrInstanceExists when the schedule exists. A
// deleted schedule's id may be used again. The schedule runs on the runtimes of the namespace:
// fire times before its creation are not fired (BackfillSchedule fires past ones).
func (c *Client) CreateSchedule(ctx context.Context, id string, s Schedule) error {
	if err := c.check("CreateSchedule"); err != nil {
		return err
	}
	if err := checkScheduleID(id); err != nil {
		return err
	}
	cfg, err := s.compile(id)
	if err != nil {
		return err
	}
	inst := ScheduleInstancePrefix + id
	st := scheduleState{ID: id, Config: cfg, Paused: s.Paused}
	if s.Paused {
		st.PausedReason = "created paused"
	}
	if cur, err := c.Status(ctx, inst); err == nil && cur.Terminal() {
		if _, err := c.Delete(ctx, inst, false); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if _, err := c.Start(ctx, ScheduleOrchestration, st, WithInstanceID(inst)); err != nil {
		return err
	}
	return nil
}

// control sends a control message to a running schedule.
func (c *Client) control(ctx context.Context, call, id string, m scheduleControl) error {
	if err := c.check(call); err != nil {
		return err
	}
	if err := checkScheduleID(id); err != nil {
		return err
	}
	st, err := c.Status(ctx, ScheduleInstancePrefix+id)
	if err != nil {
		return err
	}
	if st.State != StateRunning || st.Name != "" && st.Name != ScheduleOrchestration {
		return fmt.Errorf("dx: %s: no schedule %q (%w)", call, id, ErrNotFound)
	}
	return c.EnqueueEvent(ctx, ScheduleInstancePrefix+id, scheduleQueue, m)
}

// UpdateSchedule replaces what the schedule does (Paused is ignored: see PauseSchedule). Fire
// times of the new spec are counted from now. It fails like CreateSchedule, and with ErrNotFound
// when there is no such schedule.
func (c *Client) UpdateSchedule(ctx context.Context, id string, s Schedule) error {
	cfg, err := s.compile(id)
	if err != nil {
		return err
	}
	return c.control(ctx, "UpdateSchedule", id, scheduleControl{Op: "update", Config: &cfg})
}

// PauseSchedule pauses the schedule: its fire times are skipped (recorded, with reason "paused")
// until ResumeSchedule. Runs in progress go on.
func (c *Client) PauseSchedule(ctx context.Context, id, reason string) error {
	return c.control(ctx, "PauseSchedule", id, scheduleControl{Op: "pause", Reason: reason})
}

// ResumeSchedule resumes a paused schedule from its next fire time.
func (c *Client) ResumeSchedule(ctx context.Context, id, reason string) error {
	return c.control(ctx, "ResumeSchedule", id, scheduleControl{Op: "resume", Reason: reason})
}

// TriggerSchedule starts a run now (fire time: the time the schedule handles it), under the
// overlap policy, paused or not.
func (c *Client) TriggerSchedule(ctx context.Context, id string) error {
	return c.control(ctx, "TriggerSchedule", id, scheduleControl{Op: "trigger"})
}

// maxBackfill is the most fire times one backfill starts.
const maxBackfill = 1000

// BackfillSchedule fires the schedule's fire times in [from, to] (at most 1,000), under the overlap
// policy, with their usual run ids: a fire time already run is not run again.
func (c *Client) BackfillSchedule(ctx context.Context, id string, from, to time.Time) error {
	if from.IsZero() || to.Before(from) {
		return fmt.Errorf("dx: BackfillSchedule: range [%v, %v] is empty (%w)", from, to, ErrInvalidInput)
	}
	return c.control(ctx, "BackfillSchedule", id, scheduleControl{Op: "backfill", From: from.UTC(), To: to.UTC()})
}

// DeleteSchedule deletes the schedule: it fires nothing more, and its instance completes (its id
// can be created again). Runs in progress go on.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.control(ctx, "DeleteSchedule", id, scheduleControl{Op: "delete"})
}

// GetSchedule reads a schedule's visible state, with the state of its recent runs. It returns
// ErrNotFound when there is no such schedule.
func (c *Client) GetSchedule(ctx context.Context, id string) (ScheduleInfo, error) {
	info, err := c.readSchedule(ctx, id)
	if err != nil {
		return info, err
	}
	for i, r := range info.Recent {
		st, err := c.state(ctx, r.RunID)
		if err != nil {
			return info, err
		}
		info.Recent[i].State = st
	}
	running := info.Running[:0]
	for _, id := range info.Running { // the schedule learns of a run's end at its next turn
		st, err := c.state(ctx, id)
		if err != nil {
			return info, err
		}
		if st == StateRunning || st == StateNotFound {
			running = append(running, id)
		}
	}
	info.Running = running
	return info, nil
}

func (c *Client) readSchedule(ctx context.Context, id string) (ScheduleInfo, error) {
	if err := c.check("GetSchedule"); err != nil {
		return ScheduleInfo{}, err
	}
	if err := checkScheduleID(id); err != nil {
		return ScheduleInfo{}, err
	}
	inst := ScheduleInstancePrefix + id
	st, err := c.Status(ctx, inst)
	if err != nil {
		return ScheduleInfo{}, err
	}
	if st.State == StateNotFound || st.Name != ScheduleOrchestration {
		return ScheduleInfo{}, fmt.Errorf("dx: no schedule %q (%w)", id, ErrNotFound)
	}
	var s scheduleState
	switch {
	case st.CustomStatus != nil:
		s, err = decode[scheduleState](*st.CustomStatus)
	default: // not started yet: its input
		var hist []provider.Event
		if hist, err = c.p.Read(ctx, inst); err == nil && len(hist) > 0 {
			if k, ok := hist[0].Kind.(provider.OrchestrationStartedEvent); ok {
				s, err = decode[scheduleState](k.Input)
			}
		}
	}
	if err != nil {
		return ScheduleInfo{}, err
	}
	info := s.info()
	info.ID, info.Execution = id, st.ExecutionID
	switch st.State {
	case StateCompleted:
		info.State, info.Next = "deleted", nil
	case StateFailed: // a schedule does not fail by itself: a bug, or a cancel of its instance
		info.State, info.Next = "failed", nil
		if st.Err != nil {
			info.PausedReason = st.Err.Error()
		}
	}
	return info, nil
}

// ListSchedules reads the visible state of every schedule, deleted ones included, sorted by id
// (the recent runs' State is not read: see GetSchedule).
func (c *Client) ListSchedules(ctx context.Context) ([]ScheduleInfo, error) {
	ids, err := c.ListInstances(ctx, "")
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	var out []ScheduleInfo
	for _, inst := range ids {
		id, ok := strings.CutPrefix(inst, ScheduleInstancePrefix)
		if !ok || checkScheduleID(id) != nil {
			continue
		}
		info, err := c.readSchedule(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// ScheduleRunOf reads a run id a schedule gave ("<schedule>@<fire time>"): the schedule's id and
// the fire time. A scheduled orchestration reads its fire time from its instance id:
//
//	_, fired, ok := dx.ScheduleRunOf(ctx.InstanceID())
func ScheduleRunOf(instance string) (schedule string, fireTime time.Time, ok bool) {
	i := strings.LastIndexByte(instance, '@')
	if i <= 0 {
		return "", time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, instance[i+1:])
	if err != nil {
		return "", time.Time{}, false
	}
	return instance[:i], t.UTC(), true
}
