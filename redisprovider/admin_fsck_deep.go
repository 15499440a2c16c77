package redisprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// DeepOptions bound the deep check's reads (Provider.FsckDeep).
type DeepOptions struct {
	// HistoriesPerSecond is the most instance snapshots (record, history, messages, worker-item
	// index: one history each) the deep check reads per second, over all partitions; 0 means
	// DefaultDeepRate. A negative value removes the bound.
	HistoriesPerSecond int
	// Batch is how many instances one admin_fsck call reads (one atomic step, one round trip);
	// 0 means 50. A batch's histories all count against the rate.
	Batch int
}

// DefaultDeepRate is the deep check's default read budget, in instance histories per second.
const DefaultDeepRate = 2000

// The deep check's codes (docs/operations.md, "fsck --deep"). Each names an instance (Subject).
const (
	DeepHistoryMissing  = "history_missing"   // the record counts events, the history key is gone
	DeepHistoryShort    = "history_short"     // the history holds fewer events than the record counts
	DeepHistoryNotEnded = "history_not_ended" // a terminal record whose history does not end with a terminal event
	DeepRecordMissing   = "record_missing"    // a history without its instance record
	DeepActivityLost    = "activity_lost"     // an activity open in the history, with no worker item or completion
	DeepTimerLost       = "timer_lost"        // a timer open in the history, with no TimerFired message
	DeepChildLost       = "child_lost"        // a sub-orchestration open in the history, with no child or result
	DeepChildUnlisted   = "child_unlisted"    // a child whose parent does not list it
	DeepChildResultLost = "child_result_lost" // a child finished, its parent still waits for its result
)

// FsckDeep checks what Fsck checks, then reads every instance's history and checks it against
// the rest (keys.go, "Invariants"; docs/operations.md, "fsck --deep"): a record without its
// history or with a shorter one, a terminal record whose history does not end, a history
// without its record; in a Running execution an activity, timer or sub-orchestration that the
// history has open (scheduled, not completed, failed or cancelled) with nothing left to finish it
// (no worker item, timer message, child instance, queued completion, or outbox entry in flight);
// a child its parent does not list. It only reads. Each instance is read in one atomic step (its
// record, history, messages and worker-item index at one instant), so a turn in flight never
// shows as damage; what lives in another partition (a child, a session's item, a parent) is
// asked there afterwards, after the outbox that would carry it, and the instance read again:
// only what stays missing is reported. Reads are bounded by opts (histories per second, in
// batches). Report.Histories counts the histories read.
func (p *Provider) FsckDeep(ctx context.Context, opts DeepOptions) (FsckReport, error) {
	const op = "fsck"
	if ctx == nil {
		return FsckReport{}, errNilContext(op)
	}
	run, err := p.runFsck(ctx, op)
	if err != nil {
		return run.report, err
	}
	d, err := p.deepCheck(ctx, run, opts)
	run.report.Histories = d.read
	run.report.Violations = append(run.report.Violations, d.violations()...)
	return run.report, p.mapErr(op, err)
}

// deepRun is one deep check: what it found, by instance (for its repair).
type deepRun struct {
	read  int
	found []deepFinding
}

// deepFinding is a violation and what repairing it needs.
type deepFinding struct {
	FsckViolation
	snap *deepSnap
	ev   provider.Event // the open event (activity, timer, child)
	// parent: for DeepChildUnlisted, the parent's partition
	parentPart int
}

func (d *deepRun) violations() []FsckViolation {
	out := make([]FsckViolation, 0, len(d.found))
	for _, f := range d.found {
		out = append(out, f.FsckViolation)
	}
	return out
}

// deepSnap is admin_fsck's 'deep' reply for one instance.
type deepSnap struct {
	part             int
	id, exec, status string
	hn               int
	parent, pp       string
	hist             string
	msgs             []provider.WorkItem
	acts             map[string]string // "<e>:<a>" -> '1', '0' or '@<p>'
	flags            string
	events           []provider.Event
	decodeErr        error
	execN            uint64
	hx               uint64 // the highest execution of a history key the key scan saw
}

// limiter spaces reads to a rate.
type limiter struct {
	rate  int
	start time.Time
	n     int
}

func (l *limiter) wait(ctx context.Context, n int) error {
	if l.rate <= 0 {
		return ctx.Err()
	}
	if l.start.IsZero() {
		l.start = time.Now()
	}
	due := l.start.Add(time.Duration(float64(l.n) / float64(l.rate) * float64(time.Second)))
	l.n += n
	if d := time.Until(due); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return ctx.Err()
}

func (p *Provider) deepCheck(ctx context.Context, run *fsckRun, opts DeepOptions) (*deepRun, error) {
	rate, batch := opts.HistoriesPerSecond, opts.Batch
	if rate == 0 {
		rate = DefaultDeepRate
	}
	if batch <= 0 {
		batch = 50
	}
	lim := &limiter{rate: rate}
	d := &deepRun{}
	var suspects []deepFinding
	for _, f := range run.parts {
		ids := make([]string, 0, len(f.inst))
		for id, in := range f.inst {
			if in.anchored && !f.misplaced[id] {
				ids = append(ids, id)
			}
		}
		for i := 0; i < len(ids); i += batch {
			chunk := ids[i:min(i+batch, len(ids))]
			if err := lim.wait(ctx, len(chunk)); err != nil {
				return d, err
			}
			snaps, err := p.deepSnaps(ctx, f, chunk)
			if err != nil {
				return d, err
			}
			d.read += len(snaps)
			for _, s := range snaps {
				found, sus := p.deepAnalyze(s)
				d.found = append(d.found, found...)
				suspects = append(suspects, sus...)
			}
		}
	}
	confirmed, err := p.deepConfirm(ctx, run, suspects, lim, d)
	d.found = append(d.found, confirmed...)
	return d, err
}

// deepSnaps reads the snapshots of ids, in partition f.part.
func (p *Provider) deepSnaps(ctx context.Context, f *fsck, ids []string) ([]*deepSnap, error) {
	vals := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		hx := ""
		if in := f.inst[id]; in != nil && in.hexec > 0 {
			hx = strconv.FormatUint(in.hexec, 10)
		}
		vals = append(vals, id, hx)
	}
	res, err := p.fsckCall(ctx, f.part, "deep", "", vals)
	if err != nil {
		return nil, err
	}
	var out []*deepSnap
	for _, e := range list(res) {
		r := list(e)
		if len(r) != 10 {
			return nil, provider.NewPermanentError("fsck", "unexpected deep reply from admin_fsck")
		}
		s := &deepSnap{part: f.part, hx: f.inst[str(r[0])].hexecOr0(), id: str(r[0]), exec: str(r[1]), status: str(r[2]), parent: str(r[4]), pp: str(r[5]),
			hist: str(r[6]), acts: map[string]string{}, flags: str(r[9])}
		s.hn, _ = strconv.Atoi(str(r[3]))
		for _, m := range list(r[7]) {
			var wi provider.WorkItem
			if err := json.Unmarshal([]byte(str(m)), &wi); err == nil {
				s.msgs = append(s.msgs, wi)
			}
		}
		a := list(r[8])
		for i := 0; i+1 < len(a); i += 2 {
			s.acts[str(a[i])] = str(a[i+1])
		}
		if s.exec != "" {
			s.execN, _ = strconv.ParseUint(s.exec, 10, 64)
			s.events, s.decodeErr = decodeHistory(s.hist, s.id, s.execN)
		}
		out = append(out, s)
	}
	return out, nil
}

// fsckCall runs admin_fsck in a partition and returns its raw reply.
func (p *Provider) fsckCall(ctx context.Context, part int, mode, subject string, vals []string) (any, error) {
	e := luascripts.AdminFsck.Encoder(2 + len(vals))
	e.Set("mode", mode)
	e.Set("subject", subject)
	e.Section("list")
	for _, v := range vals {
		e.Entry(v)
	}
	args, err := encoded("fsck", e)
	if err != nil {
		return nil, err
	}
	return p.run(ctx, "fsck", luascripts.AdminFsck.Op, part, args...)
}

func isTerminalEvent(k provider.EventKind) bool {
	switch k.(type) {
	case provider.OrchestrationCompletedEvent, provider.OrchestrationFailedEvent, provider.OrchestrationContinuedAsNewEvent:
		return true
	}
	return false
}

// endedLost says whether the history ends with the failure dx writes for a lost history
// (dx: historyLost): the instance ended loudly, nothing more can be done.
func endedLost(events []provider.Event) bool {
	if len(events) == 0 {
		return false
	}
	f, ok := events[len(events)-1].Kind.(provider.OrchestrationFailedEvent)
	if !ok {
		return false
	}
	i, ok := f.Details.Kind.(provider.InfrastructureError)
	return ok && strings.HasPrefix(i.Message, "history lost")
}

// deepAnalyze checks one snapshot: violations it shows by itself, and suspects that need a look
// into another partition.
func (p *Provider) deepAnalyze(s *deepSnap) (found, suspects []deepFinding) {
	v := func(code, detail string) deepFinding {
		return deepFinding{FsckViolation: FsckViolation{Code: code, Subject: s.id, Partition: s.part, Detail: detail}, snap: s}
	}
	if s.exec == "" {
		if strings.Contains(s.flags, "h") && !strings.Contains(s.flags, "x") {
			found = append(found, v(DeepRecordMissing, "a history of the instance exists but its record "+p.keys.Instance(s.id)+
				" does not: no fetch replays it, its messages are parked as orphans (not repaired: the record cannot be rebuilt from keys alone)"))
		}
		return
	}
	if strings.Contains(s.flags, "x") || s.decodeErr != nil {
		return // retained and expiring, or a history that does not decode (the runtime fails it as poison)
	}
	// A child its parent does not list.
	if s.parent != "" {
		if s.pp == "" {
			if !strings.Contains(s.flags, "k") && p.keys.PartitionOf(s.parent) == s.part {
				suspects = append(suspects, deepFinding{FsckViolation: FsckViolation{Code: DeepChildUnlisted, Subject: s.id, Partition: s.part},
					snap: s, parentPart: s.part})
			}
		} else if pp, err := strconv.Atoi(s.pp); err == nil && pp >= 0 && pp < p.keys.Partitions() {
			suspects = append(suspects, deepFinding{FsckViolation: FsckViolation{Code: DeepChildUnlisted, Subject: s.id, Partition: s.part},
				snap: s, parentPart: pp})
		}
	}
	hk := p.keys.History(s.id, s.execN)
	terminal := provider.IsTerminalStatus(s.status)
	if len(s.events) < s.hn && !(terminal && endedLost(s.events)) {
		code, what := DeepHistoryShort, fmt.Sprintf("holds %d", len(s.events))
		if s.hist == "" {
			code, what = DeepHistoryMissing, "does not exist"
		}
		found = append(found, v(code, fmt.Sprintf("%s counts %d events of execution %d but %s %s: the instance cannot be replayed (%s)",
			p.keys.Instance(s.id), s.hn, s.execN, hk, what, map[bool]string{true: "its outcome stands, its history is gone",
				false: "repair has a runtime fail it, naming the loss"}[terminal])))
		return
	}
	if terminal {
		if n := len(s.events); n == 0 || !isTerminalEvent(s.events[n-1].Kind) {
			found = append(found, v(DeepHistoryNotEnded, fmt.Sprintf("%s says %s but %s does not end with a terminal event (not repaired: what ended it is gone)",
				p.keys.Instance(s.id), s.status, hk)))
		}
	}
	if s.status != provider.StatusRunning {
		return
	}
	// Open work of the current execution: scheduled, neither completed, failed nor cancelled.
	open := map[uint64]provider.Event{}
	for _, e := range s.events {
		switch e.Kind.(type) {
		case provider.ActivityScheduledEvent, provider.TimerCreatedEvent, provider.SubOrchestrationScheduledEvent:
			open[e.EventID] = e
		case provider.ActivityCompletedEvent, provider.ActivityFailedEvent, provider.ActivityCancelRequestedEvent,
			provider.TimerFiredEvent, provider.SubOrchestrationCompletedEvent, provider.SubOrchestrationFailedEvent,
			provider.SubOrchestrationCancelRequestedEvent:
			if e.SourceEventID != nil {
				delete(open, *e.SourceEventID)
			}
		}
	}
	queued := map[uint64]bool{} // ids of the execution's open work a queued message completes
	for _, m := range s.msgs {
		switch k := m.Kind.(type) {
		case provider.ActivityCompleted:
			queued[k.ID] = k.ExecutionID == s.execN
		case provider.ActivityFailed:
			queued[k.ID] = k.ExecutionID == s.execN
		case provider.TimerFired:
			queued[k.ID] = k.ExecutionID == s.execN
		case provider.SubOrchCompleted:
			queued[k.ParentID] = k.ParentExecutionID == s.execN
		case provider.SubOrchFailed:
			queued[k.ParentID] = k.ParentExecutionID == s.execN
		}
	}
	for id, e := range open {
		if queued[id] {
			continue
		}
		f := v("", "")
		f.ev = e
		switch k := e.Kind.(type) {
		case provider.ActivityScheduledEvent:
			st := s.acts[s.exec+":"+strconv.FormatUint(id, 10)]
			switch {
			case st == "1":
			case strings.HasPrefix(st, "@"):
				f.Code = DeepActivityLost
				suspects = append(suspects, f)
			default:
				f.Code, f.Detail = DeepActivityLost, fmt.Sprintf("activity %s (event %d of execution %d) is open in the history but has no worker item and no queued result: it never runs",
					k.Name, id, s.execN)
				found = append(found, f)
			}
		case provider.TimerCreatedEvent:
			f.Code, f.Detail = DeepTimerLost, fmt.Sprintf("timer %d of execution %d (fires at %d ms) is open in the history but %s holds no TimerFired for it: it never fires",
				id, s.execN, k.FireAtMs, p.keys.Messages(s.id))
			found = append(found, f)
		case provider.SubOrchestrationScheduledEvent:
			f.Code = DeepChildLost
			suspects = append(suspects, f)
		}
	}
	return found, suspects
}

// childOf is the child instance id of a SubOrchestrationScheduled event (dx: childInstanceID).
func childOf(parent string, k provider.SubOrchestrationScheduledEvent) string {
	if strings.HasPrefix(k.Instance, "sub::") {
		return parent + "::" + k.Instance
	}
	return k.Instance
}

// deepConfirm asks other partitions (or this one, later) about the suspects: first whether the
// outbox that would carry the missing thing still holds it, then whether it is where it goes; a
// suspect whose thing is in neither place is reported once the instance, read again, still
// shows it (what was in flight between the questions has landed by then).
func (p *Provider) deepConfirm(ctx context.Context, run *fsckRun, suspects []deepFinding, lim *limiter, d *deepRun) ([]deepFinding, error) {
	ask := func(part int, qs ...string) ([]bool, error) { return p.deepAsk(ctx, part, qs...) }
	var found []deepFinding
	for _, f := range suspects {
		s := f.snap
		var srcPart, dstPart int
		var inOutbox, atDest []string // questions
		switch f.Code {
		case DeepChildUnlisted:
			// The child names its parent: the parent's partition lists it once ob_apply 'c' ran.
			srcPart, dstPart = s.part, f.parentPart
			inOutbox = []string{"ob", strconv.Itoa(dstPart), s.id}
			atDest = []string{"knowsx", s.parent, s.id}
			if srcPart == dstPart {
				inOutbox, atDest[0] = nil, "knows"
			}
		case DeepChildLost:
			k := f.ev.Kind.(provider.SubOrchestrationScheduledEvent)
			child := childOf(s.id, k)
			srcPart, dstPart = s.part, p.keys.PartitionOf(child)
			inOutbox = []string{"ob", strconv.Itoa(dstPart), child}
			atDest = []string{"alive", child, ""}
			if srcPart == dstPart {
				inOutbox = nil
			} else {
				// its result may be on its way back
				atDest = append(atDest, "ob", strconv.Itoa(srcPart), s.id)
			}
		case DeepActivityLost:
			dst, _ := strconv.Atoi(strings.TrimPrefix(s.acts[s.exec+":"+strconv.FormatUint(f.ev.EventID, 10)], "@"))
			srcPart, dstPart = s.part, dst
			if dstPart < 0 || dstPart >= p.keys.Partitions() {
				dstPart = srcPart
			}
			inOutbox = []string{"ob", strconv.Itoa(dstPart), s.id}
			atDest = []string{"act", s.id, s.exec + ":" + strconv.FormatUint(f.ev.EventID, 10), "ob", strconv.Itoa(srcPart), s.id}
		}
		if inOutbox != nil {
			a, err := ask(srcPart, inOutbox...)
			if err != nil {
				return found, err
			}
			if a[0] {
				continue // in flight
			}
		}
		a, err := ask(dstPart, atDest...)
		if err != nil {
			return found, err
		}
		if anyTrue(a) {
			continue
		}
		if inOutbox != nil {
			// Landed between the two questions? It left the outbox only once applied there.
			if a, err = ask(dstPart, atDest...); err != nil {
				return found, err
			}
			if anyTrue(a) {
				continue
			}
		}
		// Read the instance again: still the same execution and events, still open.
		if err := lim.wait(ctx, 1); err != nil {
			return found, err
		}
		again, err := p.deepSnaps(ctx, run.parts[s.part], []string{s.id})
		if err != nil {
			return found, err
		}
		d.read++
		if len(again) != 1 || again[0].exec != s.exec || again[0].hn != s.hn || again[0].status != s.status || len(again[0].msgs) != len(s.msgs) {
			continue
		}
		switch f.Code {
		case DeepChildUnlisted:
			f.Detail = fmt.Sprintf("the instance names %s as its parent but the parent does not list it (%s): cancellation and retention miss it",
				s.parent, p.keys.Children(s.parent))
		case DeepChildLost:
			k := f.ev.Kind.(provider.SubOrchestrationScheduledEvent)
			f.Detail = fmt.Sprintf("sub-orchestration %s (event %d of execution %d) is open in the history but child %s does not exist and no result is queued: the parent waits forever",
				k.Name, f.ev.EventID, s.execN, childOf(s.id, k))
			done, err := ask(dstPart, "done", childOf(s.id, k), "")
			if err != nil {
				return found, err
			}
			if done[0] {
				f.Code = DeepChildResultLost
				f.Detail = fmt.Sprintf("sub-orchestration %s (event %d of execution %d) is open in the history but child %s finished and its result is neither queued nor on its way: the parent waits forever",
					k.Name, f.ev.EventID, s.execN, childOf(s.id, k))
			}
		case DeepActivityLost:
			k := f.ev.Kind.(provider.ActivityScheduledEvent)
			f.Detail = fmt.Sprintf("activity %s (event %d of execution %d) is open in the history but its session's partition %d has no worker item for it and no result is queued: it never runs",
				k.Name, f.ev.EventID, s.execN, dstPart)
		}
		f.snap = again[0]
		found = append(found, f)
	}
	return found, nil
}

func anyTrue(bs []bool) bool {
	for _, b := range bs {
		if b {
			return true
		}
	}
	return false
}

// RepairDeep checks as FsckDeep does and repairs what the histories determine, then repairs as
// Repair does; each deep repair runs in one script (admin_repair) that first re-checks that the instance is still
// Running in the same execution with the same events (its history, append-only, is then the one
// read) and that the thing is still missing, and writes it as the ack that wrote the history
// would have: a lost activity is queued again from its ActivityScheduled event (name, input,
// session, tag), a lost timer armed again at its fire time, a lost child start sent again (with
// no version: the child runs the latest registered), a child its parent does not list listed.
// An instance whose history is missing or cut cannot be replayed: a Running one gets a
// CancelInstance (when it has no message) so that the next runtime turn fails it with an error
// that says its history was lost (dx); those stay reported until a runtime has done so, and a
// finished one keeps its outcome. Histories are never written. Then it checks again: After.
func (p *Provider) RepairDeep(ctx context.Context, opts DeepOptions) (RepairReport, error) {
	const op = "repair"
	if ctx == nil {
		return RepairReport{}, errNilContext(op)
	}
	// The deep repairs first: what they restore (a record, a children entry) is what the plain
	// repairs then count from (a parent's open children).
	var rep RepairReport
	run, err := p.runFsck(ctx, op)
	if err != nil {
		return rep, err
	}
	d, err := p.deepCheck(ctx, run, opts)
	if err != nil {
		return rep, p.mapErr(op, err)
	}
	rep.Found = d.violations()
	for _, f := range d.found {
		a, err := p.repairDeepOne(ctx, f)
		if err != nil {
			return rep, p.mapErr(op, err)
		}
		rep.Actions = append(rep.Actions, a)
	}
	plain, err := p.Repair(ctx)
	if err != nil {
		return rep, err
	}
	rep.Found = append(plain.Found, rep.Found...)
	rep.Actions = append(rep.Actions, plain.Actions...)
	after, err := p.FsckDeep(ctx, opts)
	rep.After = after
	return rep, err
}

// repairDeepOne builds what a deep finding's repair writes and runs it.
func (p *Provider) repairDeepOne(ctx context.Context, f deepFinding) (RepairAction, error) {
	const op = "repair"
	s := f.snap
	left := func(why string) (RepairAction, error) {
		return RepairAction{FsckViolation: f.FsckViolation, Outcome: RepairLeft, Why: why}, nil
	}
	exec, hn := s.exec, strconv.Itoa(s.hn)
	part, subject := f.Partition, s.id
	var code string
	var vals []string
	dest := func(d int) string {
		if d == part {
			return ""
		}
		return strconv.Itoa(d)
	}
	switch f.Code {
	case DeepActivityLost:
		k := f.ev.Kind.(provider.ActivityScheduledEvent)
		r, err := p.activityRoute(op, provider.WorkItem{Kind: provider.ActivityExecute{Instance: s.id, ExecutionID: s.execN,
			ID: f.ev.EventID, Name: k.Name, Input: k.Input, SessionID: k.SessionID, Tag: k.Tag}})
		if err != nil {
			return left("the activity's item cannot be built from its event: " + err.Error())
		}
		code, vals = "deep_activity", []string{exec, r.activity, hn, r.json, r.session, r.tag, dest(p.workPartition(r))}
	case DeepTimerLost:
		k := f.ev.Kind.(provider.TimerCreatedEvent)
		js, err := p.encodeItem(op, provider.WorkItem{Kind: provider.TimerFired{Instance: s.id, ExecutionID: s.execN, ID: f.ev.EventID, FireAtMs: k.FireAtMs}}, false)
		if err != nil {
			return left(err.Error())
		}
		code, vals = "deep_timer", []string{exec, strconv.FormatUint(f.ev.EventID, 10), hn, js, strconv.FormatUint(k.FireAtMs, 10)}
	case DeepChildLost:
		k := f.ev.Kind.(provider.SubOrchestrationScheduledEvent)
		child, parent, pid, pexec := childOf(s.id, k), s.id, f.ev.EventID, s.execN
		js, err := p.encodeItem(op, provider.WorkItem{Kind: provider.StartOrchestration{Instance: child, Orchestration: k.Name, Input: k.Input,
			ParentInstance: &parent, ParentID: &pid, ParentExecutionID: &pexec, ExecutionID: 1}}, false)
		if err != nil {
			return left(err.Error())
		}
		code, vals = "deep_child", []string{exec, hn, child, js, dest(p.keys.PartitionOf(child))}
	case DeepChildResultLost:
		k := f.ev.Kind.(provider.SubOrchestrationScheduledEvent)
		js, err := p.childResult(ctx, childOf(s.id, k), s.id, s.execN, f.ev.EventID)
		if err != nil {
			return left("the child's result cannot be read: " + err.Error())
		}
		code, vals = "deep_result", []string{exec, hn, js, strconv.FormatUint(f.ev.EventID, 10)}
	case DeepHistoryMissing, DeepHistoryShort:
		if s.status != provider.StatusRunning {
			return left("not repaired: the history is lost; the instance's status and output stand, what it did cannot be read again")
		}
		js, err := p.encodeItem(op, provider.WorkItem{Kind: provider.CancelInstance{Instance: s.id,
			Reason: "fsck --repair: the instance's history was lost"}}, false)
		if err != nil {
			return left(err.Error())
		}
		code, vals = "deep_lost", []string{exec, hn, js}
	case DeepRecordMissing:
		var err error
		if vals, err = p.recordFromHistory(ctx, s); err != nil {
			return RepairAction{}, err
		}
		if vals == nil {
			return left("not repaired: the instance finished; its record (status, output) cannot be rebuilt exactly, the history keeps what it did")
		}
		code = "deep_record"
	case DeepChildUnlisted:
		part, subject = f.parentPart, s.parent
		code, vals = "deep_unlisted", []string{s.id, ""}
		if f.parentPart != s.part {
			vals[1] = strconv.Itoa(s.part)
		}
	default:
		return left("not repaired: what was lost cannot be told from the keys (docs/operations.md, fsck --deep)")
	}
	e := luascripts.AdminRepair.Encoder(3 + len(vals))
	e.Set("retention", ms(p.opts.Retention))
	e.Set("code", code)
	e.Set("subject", subject)
	e.Section("list")
	for _, v := range vals {
		e.Entry(v)
	}
	args, err := encoded(op, e)
	if err != nil {
		return RepairAction{}, err
	}
	res, err := p.run(ctx, op, luascripts.AdminRepair.Op, part, args...)
	if err != nil {
		return RepairAction{}, err
	}
	if forwarded(&res) {
		p.forward(ctx, part)
	}
	r := list(res)
	if len(r) != 2 {
		return RepairAction{}, provider.NewPermanentError(op, "unexpected reply from admin_repair")
	}
	return RepairAction{FsckViolation: f.FsckViolation, Outcome: str(r[0]), Why: str(r[1])}, nil
}

func (in *fsckInst) hexecOr0() uint64 {
	if in == nil {
		return 0
	}
	return in.hexec
}

// recordFromHistory reads the history of an instance without a record and returns deep_record's
// arguments, or nil when it cannot be rebuilt: the history ended (or does not decode, or does
// not begin with its OrchestrationStarted).
func (p *Provider) recordFromHistory(ctx context.Context, s *deepSnap) ([]string, error) {
	hist, err := p.rdb.Get(ctx, p.keys.History(s.id, s.hx)).Result()
	if err != nil {
		return nil, nil
	}
	events, err := decodeHistory(hist, s.id, s.hx)
	if err != nil || len(events) == 0 || isTerminalEvent(events[len(events)-1].Kind) {
		return nil, nil
	}
	st, ok := events[0].Kind.(provider.OrchestrationStartedEvent)
	if !ok {
		return nil, nil
	}
	dense := "1"
	for i, e := range events {
		if e.EventID != uint64(i+1) {
			dense = "0"
		}
	}
	parent, pp := "", ""
	if st.ParentInstance != nil {
		parent = *st.ParentInstance
		if d := p.keys.PartitionOf(parent); d != s.part {
			pp = strconv.Itoa(d)
		}
	}
	pink := ""
	if v, err := semver.NewVersion(events[0].DuroxideVersion); err == nil {
		pink = pinKey(v)
	}
	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	// Its children that have not settled (retention's open count), asked where each lives.
	kids, err := p.rdb.SMembers(ctx, p.keys.Children(s.id)).Result()
	if err != nil {
		return nil, err
	}
	open := 0
	for _, kid := range kids {
		a, err := p.deepAsk(ctx, p.keys.PartitionOf(kid), "settled", kid, "")
		if err != nil {
			return nil, err
		}
		if !a[0] {
			open++
		}
	}
	return []string{strconv.FormatUint(s.hx, 10), strconv.Itoa(len(hist)), st.Name, st.Version,
		strconv.FormatUint(events[0].TimestampMs, 10), strconv.Itoa(len(events)), dense, parent, pp, pink, tag,
		strconv.Itoa(open)}, nil
}

// childResult is the SubOrchCompleted or SubOrchFailed a finished child sends its parent (dx,
// ack.go): its output, or the details of its last event's failure (an InfrastructureError with
// its error text when its history no longer has it).
func (p *Provider) childResult(ctx context.Context, child, parent string, pexec, pid uint64) (string, error) {
	info, err := p.GetInstanceInfo(ctx, child)
	if err != nil {
		return "", err
	}
	out := ""
	if info.Output != nil {
		out = *info.Output
	}
	var item provider.WorkItemKind
	switch info.Status {
	case provider.StatusCompleted:
		item = provider.SubOrchCompleted{ParentInstance: parent, ParentExecutionID: pexec, ParentID: pid, Result: out}
	case provider.StatusFailed:
		d := provider.ErrorDetails{Kind: provider.InfrastructureError{Operation: "replay", Message: out}}
		if h, err := p.ReadWithExecution(ctx, child, info.CurrentExecutionID); err == nil && len(h) > 0 {
			if f, ok := h[len(h)-1].Kind.(provider.OrchestrationFailedEvent); ok {
				d = f.Details
			}
		}
		item = provider.SubOrchFailed{ParentInstance: parent, ParentExecutionID: pexec, ParentID: pid, Details: d}
	default:
		return "", fmt.Errorf("child %s is %s, not finished", child, info.Status)
	}
	return p.encodeItem("repair", provider.WorkItem{Kind: item}, false)
}

// deepAsk asks admin_fsck's 'ask' questions (triples) in a partition.
func (p *Provider) deepAsk(ctx context.Context, part int, qs ...string) ([]bool, error) {
	res, err := p.fsckCall(ctx, part, "ask", "", qs)
	if err != nil {
		return nil, err
	}
	var out []bool
	for _, a := range list(res) {
		out = append(out, str(a) == "1")
	}
	if len(out) != len(qs)/3 {
		return nil, provider.NewPermanentError("fsck", "unexpected ask reply from admin_fsck")
	}
	return out, nil
}
