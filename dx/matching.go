package dx

import (
	"fmt"
	"slices"

	"github.com/duroxide-go/dxredis/provider"
)

// Replay and matching: how a turn's history meets the code's actions. The fetched messages become
// history events (prepCompletions); the walk applies each event (apply) through the kind it
// belongs to (action.go's kinds): a schedule event must be what the oldest emitted action records
// (replaySchedule), a completion goes to the future bound to its schedule (deliver). The actions
// left over become new work (convert); the code's cancellations are checked against the recorded
// ones and recorded (recordCancellations).

// mismatch is a schedule the code no longer reproduces: the event, what history records there and
// what the code does instead (kept for Replay's report).
type mismatch struct {
	eventID       uint64
	history, code string
}

// mismatchAt records that the code does code where history has schedule event ev, and returns
// the nondeterminism error that fails the orchestration.
func (e *engine) mismatchAt(ev *provider.Event, code string) *provider.ErrorDetails {
	e.mismatch = &mismatch{ev.EventID, describeEvent(ev), code}
	return nondeterminism("event %d: history has %s but the code now %s", ev.EventID, e.mismatch.history, code)
}

func nondeterminism(format string, args ...any) *provider.ErrorDetails {
	msg := fmt.Sprintf(format, args...)
	return &provider.ErrorDetails{Kind: provider.ConfigurationError{Kind: "Nondeterminism", Message: &msg}}
}

// walk applies events in order, polling the code before an event whenever something was delivered
// since the last poll (and, when pollFirst, before the first one), and once more at the end. Events
// before index persisted are a replay. stop reports an outcome that ends the turn at once.
func (e *engine) walk(events []provider.Event, persisted int, pollFirst bool) (o outcome, stop bool) {
	mustPoll := pollFirst
	for i := range events {
		if i >= persisted {
			e.replaying = false
		}
		if mustPoll {
			if o, stop := e.poll(); stop {
				return o, true
			}
			mustPoll = false
			if e.out.done {
				// The function returned: the rest of the history is not applied (duroxide).
				e.replaying = false
				return outcome{}, false
			}
		}
		if d := e.apply(&events[i], &mustPoll); d != nil {
			return outcome{result: turnFailed, details: *d, mismatch: e.mismatch, nondet: true}, true
		}
	}
	e.replaying = false
	if mustPoll {
		if o, stop := e.poll(); stop {
			return o, true
		}
	}
	return outcome{}, false
}

// apply applies one history event through the kind it belongs to (the start and the instance's
// cancellation request belong to none: nothing to apply). It returns the error that fails the
// orchestration, if any.
func (e *engine) apply(ev *provider.Event, mustPoll *bool) *provider.ErrorDetails {
	for _, k := range kinds {
		handled, poll, d := k.apply(e, ev)
		if !handled {
			continue
		}
		if poll && d == nil {
			*mustPoll = true
		}
		return d
	}
	return nil
}

// replaySchedule consumes the oldest emitted action for ev, the event history holds at its
// position, and binds it. Positional actions (custom status, KV) are not bound, and a missing one
// is tolerated, as duroxide does.
func (e *engine) replaySchedule(ev *provider.Event, positional bool) *provider.ErrorDetails {
	if len(e.emitted) == 0 {
		if positional {
			return nil
		}
		return e.mismatchAt(ev, "schedules nothing there")
	}
	a := e.emitted[0]
	e.emitted = e.emitted[1:]
	if !a.replays(ev.Kind) {
		return e.mismatchAt(ev, a.describe())
	}
	if !positional {
		e.bind(a, ev.EventID)
	}
	return nil
}

// deliver hands a completion to the future bound to its schedule event, which must be an action of
// kind k. poll reports that something was delivered.
func (e *engine) deliver(ev *provider.Event, k kind, result string, details *provider.ErrorDetails) (poll bool, d *provider.ErrorDetails) {
	if ev.SourceEventID == nil {
		return false, nil
	}
	f := e.bySchedule[*ev.SourceEventID]
	if f == nil || f.done {
		return false, nondeterminism("event %d: %s completes schedule %d, which the code has not scheduled (or already completed)",
			ev.EventID, ev.EventType(), *ev.SourceEventID)
	}
	if !k.owns(f.act) {
		return false, nondeterminism("event %d: %s completes schedule %d, but the code scheduled %s there",
			ev.EventID, ev.EventType(), *ev.SourceEventID, f.act.describe())
	}
	f.done = true
	f.result = result
	if details != nil {
		f.err = &Error{Details: *details}
	}
	return true, nil
}

func (e *engine) bind(a action, id uint64) {
	b := a.base()
	b.scheduleID = id
	if b.fut != nil {
		e.bySchedule[id] = b.fut
	}
	a.bound(e)
}

// convert turns the actions nothing in history matched into new events and pending work.
func (e *engine) convert() {
	for _, a := range e.emitted {
		id := e.nextID
		if !a.newWork(e, id) {
			continue
		}
		ev := e.newEvent(nil, a.event())
		e.bind(a, id)
		e.record(ev)
		e.pending = append(e.pending, a)
	}
	e.emitted = e.emitted[:0]
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// historyIndex answers what a turn asks about the execution's events without scanning them: which
// events name each schedule (completions, cancellations), what each schedule event schedules, and
// whether a cancellation of the instance was requested. Kept current by record, it makes a turn of
// a kept engine cost O(its new events), not O(history).
type historyIndex struct {
	bySource     map[uint64][]string // source event id -> types of the events naming it
	kinds        map[uint64]string   // schedule event id -> its kind's label ("activity", "timer", ...)
	cancelled    bool                // an OrchestrationCancelRequested is in the history
	cancelReason string
}

func (x *historyIndex) add(ev *provider.Event) {
	if ev.SourceEventID != nil {
		x.bySource[*ev.SourceEventID] = append(x.bySource[*ev.SourceEventID], ev.EventType())
	}
	if c, ok := ev.Kind.(provider.OrchestrationCancelRequestedEvent); ok {
		if !x.cancelled {
			x.cancelled, x.cancelReason = true, c.Reason
		}
		return
	}
	for _, k := range kinds {
		if l := k.label(ev.Kind); l != "" {
			x.kinds[ev.EventID] = l
			return
		}
	}
}

// named reports whether an event of one of types names source.
func (x *historyIndex) named(source uint64, types ...string) bool {
	for _, t := range x.bySource[source] {
		if slices.Contains(types, t) {
			return true
		}
	}
	return false
}

// index returns the history index, building it on first use.
func (e *engine) index() *historyIndex {
	if e.idx == nil {
		e.idx = &historyIndex{bySource: map[uint64][]string{}, kinds: map[uint64]string{}}
		for _, ev := range e.allEvents() {
			e.idx.add(&ev)
		}
	}
	return e.idx
}

// prepCompletions turns the batch's messages into history events, in message order, as duroxide's
// prep_completions does: drops messages for another execution and duplicates, checks that each
// completion answers a schedule of its kind, records system failures of activities and children
// and lets them abort the turn.
func (e *engine) prepCompletions(msgs []provider.WorkItem) {
	x := e.index()
	for _, m := range msgs {
		c, ok := messageCompletion(m.Kind)
		if !ok {
			if k, cancel := m.Kind.(provider.CancelInstance); cancel && !x.cancelled {
				e.record(e.newEvent(nil, provider.OrchestrationCancelRequestedEvent{Reason: k.Reason}))
			}
			continue
		}
		var src *uint64
		if c.label != "" {
			if c.exec != e.executionID || x.named(c.id, c.answers...) || !e.answers(c) {
				continue
			}
			if c.failure != nil {
				if _, app := c.failure.Kind.(provider.ApplicationError); !app {
					e.abort(c.failure)
				}
			}
			id := c.id
			src = &id
		}
		e.record(e.newEvent(src, c.event))
	}
}

// messageCompletion finds the kind a fetched message belongs to and its history event.
func messageCompletion(m provider.WorkItemKind) (completion, bool) {
	for _, k := range kinds {
		if c, ok := k.completion(m); ok {
			return c, true
		}
	}
	return completion{}, false
}

// answers checks that a completion answers a schedule of its kind; if not, it aborts the turn.
func (e *engine) answers(c completion) bool {
	got := e.index().kinds[c.id]
	if got == c.label {
		return true
	}
	if got == "" {
		e.abort(nondeterminism("a %s completion arrived for event %d, which is not a schedule in this execution", c.label, c.id))
	} else {
		e.abort(nondeterminism("a %s completion arrived for event %d, which schedules a %s", c.label, c.id, got))
	}
	return false
}

func (e *engine) abort(d *provider.ErrorDetails) {
	if e.abortErr == nil {
		e.abortErr = d
	}
}

const reasonDropped = "dropped_future"

// recordCancellations checks the code's cancellations against those recorded in the persisted
// history (each recorded dropped future must be dropped again) and records new ones, kind by kind
// in kinds' order, each by schedule id.
func (e *engine) recordCancellations() *provider.ErrorDetails {
	x := e.index()
	for _, k := range kinds {
		rec := k.cancelRecord(reasonDropped)
		if rec == nil {
			continue
		}
		var ids []uint64
		for _, f := range e.cancels {
			if k.owns(f.act) && f.act.base().scheduleID != 0 {
				ids = append(ids, f.act.base().scheduleID)
			}
		}
		slices.Sort(ids)
		ids = slices.Compact(ids)
		// Reconcile with the persisted record: every dropped future it holds must be dropped again
		// (a kept engine replays nothing, so there is nothing to reconcile).
		recorded := map[uint64]bool{}
		for _, ev := range e.history[:e.persisted] {
			if e.kept {
				break
			}
			if reason, ok := k.recorded(ev.Kind); ok && ev.SourceEventID != nil && reason == reasonDropped {
				recorded[*ev.SourceEventID] = true
			}
		}
		for id := range recorded {
			if !slices.Contains(ids, id) && e.persistedSchedule(id) {
				return nondeterminism("history records that the code cancelled the future of event %d (%s), but the code no longer cancels it", id, k.what())
			}
		}
		for _, id := range ids {
			if x.named(id, rec.EventType()) {
				continue
			}
			src := id
			e.record(e.newEvent(&src, k.cancelRecord(reasonDropped)))
			e.dropped = append(e.dropped, e.bySchedule[id].act)
		}
	}
	return nil
}

func (e *engine) persistedSchedule(id uint64) bool {
	for _, ev := range e.history[:e.persisted] {
		if ev.EventID == id {
			return true
		}
	}
	return false
}

// dropReason is the reason a cancellation record gives ("" when k is not one).
func dropReason(k provider.EventKind) string {
	for _, kd := range kinds {
		if reason, ok := kd.recorded(k); ok {
			return reason
		}
	}
	return ""
}
