package dx

import (
	"fmt"
	"slices"

	"github.com/duroxide-go/dxredis/provider"
)

// Replay and matching: how a turn's history meets the code's actions. The fetched messages become
// history events (prepCompletions); the walk applies each event (apply): a schedule event must be
// what the oldest emitted action records (match), a completion goes to the future bound to its
// schedule (deliver). The actions left over become new work (convert); the code's cancellations are
// checked against the recorded ones and recorded (recordCancellations).

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

// historyIndex answers what a turn asks about the execution's events without scanning them: which
// events name each schedule (completions, cancellations), what each schedule event schedules, and
// whether a cancellation of the instance was requested. Kept current by record, it makes a turn of
// a kept engine cost O(its new events), not O(history).
type historyIndex struct {
	bySource     map[uint64][]string // source event id -> types of the events naming it
	kinds        map[uint64]string   // schedule event id -> "activity", "timer", "sub-orchestration"
	cancelled    bool                // an OrchestrationCancelRequested is in the history
	cancelReason string
}

func (x *historyIndex) add(ev *provider.Event) {
	if ev.SourceEventID != nil {
		x.bySource[*ev.SourceEventID] = append(x.bySource[*ev.SourceEventID], ev.EventType())
	}
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		x.kinds[ev.EventID] = "activity"
	case provider.TimerCreatedEvent:
		x.kinds[ev.EventID] = "timer"
	case provider.SubOrchestrationScheduledEvent:
		x.kinds[ev.EventID] = "sub-orchestration"
	case provider.OrchestrationCancelRequestedEvent:
		if !x.cancelled {
			x.cancelled, x.cancelReason = true, k.Reason
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

// apply applies one history event. It returns the error that fails the orchestration, if any.
func (e *engine) apply(ev *provider.Event, mustPoll *bool) *provider.ErrorDetails {
	switch k := ev.Kind.(type) {
	case provider.OrchestrationStartedEvent:
	case provider.CustomStatusUpdatedEvent, provider.KeyValueSetEvent, provider.KeyValueClearedEvent, provider.KeyValuesClearedEvent:
		// Positional: consume the action the code emitted for it. Custom status matches by kind
		// only, KV by key and value. A missing action is tolerated, as duroxide does.
		if len(e.emitted) == 0 {
			return nil
		}
		a := e.emitted[0]
		e.emitted = e.emitted[1:]
		if d := e.match(a, ev); d != nil {
			return d
		}
	case provider.ActivityScheduledEvent, provider.TimerCreatedEvent, provider.ExternalSubscribedEvent,
		provider.QueueSubscribedEvent, provider.SubOrchestrationScheduledEvent, provider.OrchestrationChainedEvent:
		if len(e.emitted) == 0 {
			return e.mismatchAt(ev, "schedules nothing there")
		}
		a := e.emitted[0]
		e.emitted = e.emitted[1:]
		if d := e.match(a, ev); d != nil {
			return d
		}
		e.bind(a, ev.EventID)
		if sub, ok := k.(provider.SubOrchestrationScheduledEvent); ok {
			a.instance = sub.Instance
		}
		if _, ok := k.(provider.QueueSubscribedEvent); ok {
			*mustPoll = true
		}
	case provider.ActivityCompletedEvent:
		return e.deliver(ev, actActivity, k.Result, nil, mustPoll)
	case provider.ActivityFailedEvent:
		return e.deliver(ev, actActivity, "", &k.Details, mustPoll)
	case provider.TimerFiredEvent:
		return e.deliver(ev, actTimer, "", nil, mustPoll)
	case provider.SubOrchestrationCompletedEvent:
		return e.deliver(ev, actSubOrch, k.Result, nil, mustPoll)
	case provider.SubOrchestrationFailedEvent:
		return e.deliver(ev, actSubOrch, "", &k.Details, mustPoll)
	case provider.ExternalSubscribedCancelledEvent:
		if ev.SourceEventID != nil {
			e.extCancelled[*ev.SourceEventID] = true
		}
	case provider.QueueSubscriptionCancelledEvent:
		if ev.SourceEventID != nil {
			e.queueCancelled[*ev.SourceEventID] = true
		}
	case provider.ExternalEventEvent:
		// Delivered only to a subscription that exists at this point of the history; an event
		// raised before the code subscribed stays in history but is never delivered (duroxide).
		// A new one is noted, so that the runtime warns about it once its turn is stored.
		if e.pendingExtSlot(k.Name) {
			e.extArrivals[k.Name] = append(e.extArrivals[k.Name], k.Data)
			*mustPoll = true
		} else if !e.replaying {
			e.lostEvents = append(e.lostEvents, k.Name)
		}
	case provider.QueueEventDeliveredEvent:
		e.queueArrivals[k.Name] = append(e.queueArrivals[k.Name], k.Data)
		*mustPoll = true
	}
	return nil
}

// deliver hands a completion to the future bound to its schedule event.
func (e *engine) deliver(ev *provider.Event, want actionKind, result string, details *provider.ErrorDetails, mustPoll *bool) *provider.ErrorDetails {
	if ev.SourceEventID == nil {
		return nil
	}
	f := e.bySchedule[*ev.SourceEventID]
	if f == nil || f.done {
		return nondeterminism("event %d: %s completes schedule %d, which the code has not scheduled (or already completed)",
			ev.EventID, ev.EventType(), *ev.SourceEventID)
	}
	if f.act.kind != want {
		return nondeterminism("event %d: %s completes schedule %d, but the code scheduled %s there",
			ev.EventID, ev.EventType(), *ev.SourceEventID, describeAction(f.act))
	}
	if !f.done {
		f.done = true
		f.result = result
		if details != nil {
			f.err = &Error{Details: *details}
		}
	}
	*mustPoll = true
	return nil
}

func (e *engine) bind(a *action, id uint64) {
	a.scheduleID = id
	if a.fut != nil {
		e.bySchedule[id] = a.fut
	}
	switch a.kind {
	case actWait:
		e.extSubs[a.name] = append(e.extSubs[a.name], a)
	case actDequeue:
		e.queueSubs = append(e.queueSubs, a)
	}
}

// pendingExtSlot reports whether a subscription for name is waiting for an arrival.
func (e *engine) pendingExtSlot(name string) bool {
	active := 0
	for _, a := range e.extSubs[name] {
		if !e.extCancelled[a.scheduleID] {
			active++
		}
	}
	return active > len(e.extArrivals[name])
}

// extEvent returns the arrival for a bound external subscription: the Nth active subscription of a
// name gets the Nth arrival of that name.
func (e *engine) extEvent(a *action) (string, bool) {
	if a.scheduleID == 0 || e.extCancelled[a.scheduleID] {
		return "", false
	}
	idx := 0
	for _, s := range e.extSubs[a.name] {
		if s == a {
			break
		}
		if !e.extCancelled[s.scheduleID] {
			idx++
		}
	}
	arr := e.extArrivals[a.name]
	if idx < len(arr) {
		return arr[idx], true
	}
	return "", false
}

// queueMessage returns the message for a bound queue subscription: strict FIFO over the active
// subscriptions of the queue, whatever order the code waits in.
func (e *engine) queueMessage(a *action) (string, bool) {
	if a.scheduleID == 0 || e.queueCancelled[a.scheduleID] || e.queueResolved[a.scheduleID] {
		return "", false
	}
	idx := 0
	for _, s := range e.queueSubs {
		if s == a {
			break
		}
		if s.name == a.name && !e.queueCancelled[s.scheduleID] {
			idx++
		}
	}
	arr := e.queueArrivals[a.name]
	if idx < len(arr) {
		e.queueResolved[a.scheduleID] = true
		return arr[idx], true
	}
	return "", false
}

// convert turns the actions nothing in history matched into new events and pending work.
func (e *engine) convert() {
	for _, a := range e.emitted {
		if a.kind == actContinueAsNew {
			if e.continueAs == nil {
				e.continueAs = a
			}
			continue
		}
		id := e.nextID
		if a.kind == actSubOrch && a.instance == "" {
			a.instance = fmt.Sprintf("%s%d", subOrchAutoPrefix, id)
		}
		ev := e.newEvent(nil, actionEvent(a))
		e.bind(a, id)
		e.record(ev)
		e.pending = append(e.pending, a)
	}
	e.emitted = e.emitted[:0]
}

func actionEvent(a *action) provider.EventKind {
	switch a.kind {
	case actActivity:
		return provider.ActivityScheduledEvent{Name: a.name, Input: a.input, SessionID: a.sessionID, Tag: a.tag}
	case actTimer:
		return provider.TimerCreatedEvent{FireAtMs: a.fireAtMs}
	case actWait:
		return provider.ExternalSubscribedEvent{Name: a.name}
	case actDequeue:
		return provider.QueueSubscribedEvent{Name: a.name}
	case actSubOrch:
		return provider.SubOrchestrationScheduledEvent{Name: a.name, Instance: a.instance, Input: a.input}
	case actDetached:
		return provider.OrchestrationChainedEvent{Name: a.name, Instance: a.instance, Input: a.input}
	case actCustomStatus:
		return provider.CustomStatusUpdatedEvent{Status: a.status}
	case actKVSet:
		return provider.KeyValueSetEvent{Key: a.key, Value: a.value, LastUpdatedAtMs: a.updatedMs}
	case actKVClear:
		return provider.KeyValueClearedEvent{Key: a.key}
	case actKVClearAll:
		return provider.KeyValuesClearedEvent{}
	}
	panic(fmt.Sprintf("dx: action kind %d has no event", a.kind))
}

// match compares an emitted action with the schedule event history recorded at its position.
func (e *engine) match(a *action, ev *provider.Event) *provider.ErrorDetails {
	ok := false
	switch k := ev.Kind.(type) {
	case provider.ActivityScheduledEvent:
		ok = a.kind == actActivity && a.name == k.Name && a.input == k.Input &&
			eqPtr(a.sessionID, k.SessionID) && eqPtr(a.tag, k.Tag)
	case provider.TimerCreatedEvent:
		ok = a.kind == actTimer // timers match by position only
		if ok {
			a.fireAtMs = k.FireAtMs
		}
	case provider.ExternalSubscribedEvent:
		ok = a.kind == actWait && a.name == k.Name
	case provider.QueueSubscribedEvent:
		ok = a.kind == actDequeue && a.name == k.Name
	case provider.SubOrchestrationScheduledEvent:
		ok = a.kind == actSubOrch && a.name == k.Name && a.input == k.Input
	case provider.OrchestrationChainedEvent:
		ok = a.kind == actDetached && a.name == k.Name && a.instance == k.Instance && a.input == k.Input
	case provider.CustomStatusUpdatedEvent:
		ok = a.kind == actCustomStatus
	case provider.KeyValueSetEvent:
		ok = a.kind == actKVSet && a.key == k.Key && a.value == k.Value
	case provider.KeyValueClearedEvent:
		ok = a.kind == actKVClear && a.key == k.Key
	case provider.KeyValuesClearedEvent:
		ok = a.kind == actKVClearAll
	}
	if ok {
		return nil
	}
	return e.mismatchAt(ev, describeAction(a))
}

func eqPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// recordCancellations checks the code's cancellations against those recorded in the persisted
// history (each recorded dropped future must be dropped again) and records new ones as breadcrumbs:
// activities, then sub-orchestrations, then event waits, then dequeues, each by schedule id.
func (e *engine) recordCancellations() *provider.ErrorDetails {
	type group struct {
		kind    actionKind
		label   string
		isEvent func(provider.EventKind) bool
		mk      func() provider.EventKind
	}
	groups := []group{
		{actActivity, "activities", func(k provider.EventKind) bool { _, ok := k.(provider.ActivityCancelRequestedEvent); return ok },
			func() provider.EventKind { return provider.ActivityCancelRequestedEvent{Reason: reasonDropped} }},
		{actSubOrch, "sub-orchestrations", func(k provider.EventKind) bool {
			_, ok := k.(provider.SubOrchestrationCancelRequestedEvent)
			return ok
		}, func() provider.EventKind { return provider.SubOrchestrationCancelRequestedEvent{Reason: reasonDropped} }},
		{actWait, "event waits", func(k provider.EventKind) bool {
			_, ok := k.(provider.ExternalSubscribedCancelledEvent)
			return ok
		}, func() provider.EventKind { return provider.ExternalSubscribedCancelledEvent{Reason: reasonDropped} }},
		{actDequeue, "dequeues", func(k provider.EventKind) bool {
			_, ok := k.(provider.QueueSubscriptionCancelledEvent)
			return ok
		}, func() provider.EventKind { return provider.QueueSubscriptionCancelledEvent{Reason: reasonDropped} }},
	}
	for _, g := range groups {
		var ids []uint64
		for _, f := range e.cancels {
			if f.act != nil && f.act.kind == g.kind && f.act.scheduleID != 0 {
				ids = append(ids, f.act.scheduleID)
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
			if g.isEvent(ev.Kind) && ev.SourceEventID != nil && dropReason(ev.Kind) == reasonDropped {
				recorded[*ev.SourceEventID] = true
			}
		}
		for id := range recorded {
			if !slices.Contains(ids, id) && e.persistedSchedule(id) {
				return nondeterminism("history records that the code cancelled the future of event %d (%s), but the code no longer cancels it", id, g.label)
			}
		}
		x := e.index()
		for _, id := range ids {
			if x.named(id, g.mk().EventType()) {
				continue
			}
			src := id
			e.record(e.newEvent(&src, g.mk()))
			if g.kind == actActivity || g.kind == actSubOrch {
				e.dropped = append(e.dropped, e.bySchedule[id].act)
			}
		}
	}
	return nil
}

const reasonDropped = "dropped_future"

func dropReason(k provider.EventKind) string {
	switch c := k.(type) {
	case provider.ActivityCancelRequestedEvent:
		return c.Reason
	case provider.SubOrchestrationCancelRequestedEvent:
		return c.Reason
	case provider.ExternalSubscribedCancelledEvent:
		return c.Reason
	case provider.QueueSubscriptionCancelledEvent:
		return c.Reason
	}
	return ""
}

func (e *engine) persistedSchedule(id uint64) bool {
	for _, ev := range e.history[:e.persisted] {
		if ev.EventID == id {
			return true
		}
	}
	return false
}

// prepCompletions turns the batch's messages into history events, in message order, as duroxide's
// prep_completions does: drops messages for another execution and duplicates, checks that each
// completion answers a schedule of its kind, records system failures of activities and children
// and lets them abort the turn.
func (e *engine) prepCompletions(msgs []provider.WorkItem) {
	x := e.index()
	seen := x.named
	scheduleKind := func(id uint64) string { return x.kinds[id] }
	check := func(id uint64, want string) bool {
		got := scheduleKind(id)
		if got == want {
			return true
		}
		if got == "" {
			e.abort(nondeterminism("a %s completion arrived for event %d, which is not a schedule in this execution", want, id))
		} else {
			e.abort(nondeterminism("a %s completion arrived for event %d, which schedules a %s", want, id, got))
		}
		return false
	}
	activityAnswers := []string{"ActivityCompleted", "ActivityFailed"}
	childAnswers := []string{"SubOrchestrationCompleted", "SubOrchestrationFailed"}
	for _, m := range msgs {
		var ev provider.EventKind
		var src *uint64
		// A completion answers schedule id of kind in execution exec; dup lists what already
		// answers it (a duplicate is dropped); a failure that is not Application aborts the turn.
		var exec, id uint64
		var kind string
		var dup []string
		var failure *provider.ErrorDetails
		switch k := m.Kind.(type) {
		case provider.ActivityCompleted:
			exec, id, kind, dup = k.ExecutionID, k.ID, "activity", activityAnswers
			ev = provider.ActivityCompletedEvent{Result: k.Result}
		case provider.ActivityFailed:
			exec, id, kind, dup, failure = k.ExecutionID, k.ID, "activity", activityAnswers, &k.Details
			ev = provider.ActivityFailedEvent{Details: k.Details}
		case provider.TimerFired:
			exec, id, kind, dup = k.ExecutionID, k.ID, "timer", []string{"TimerFired"}
			ev = provider.TimerFiredEvent{FireAtMs: k.FireAtMs}
		case provider.SubOrchCompleted:
			exec, id, kind, dup = k.ParentExecutionID, k.ParentID, "sub-orchestration", childAnswers
			ev = provider.SubOrchestrationCompletedEvent{Result: k.Result}
		case provider.SubOrchFailed:
			exec, id, kind, dup, failure = k.ParentExecutionID, k.ParentID, "sub-orchestration", childAnswers, &k.Details
			ev = provider.SubOrchestrationFailedEvent{Details: k.Details}
		case provider.ExternalRaised:
			ev = provider.ExternalEventEvent{Name: k.Name, Data: k.Data}
		case provider.QueueMessage:
			ev = provider.QueueEventDeliveredEvent{Name: k.Name, Data: k.Data}
		case provider.CancelInstance:
			if x.cancelled {
				continue
			}
			ev = provider.OrchestrationCancelRequestedEvent{Reason: k.Reason}
		default:
			continue
		}
		if kind != "" {
			if exec != e.executionID || seen(id, dup...) || !check(id, kind) {
				continue
			}
			if failure != nil {
				if _, app := failure.Kind.(provider.ApplicationError); !app {
					e.abort(failure)
				}
			}
			src = &id
		}
		e.record(e.newEvent(src, ev))
	}
}

func (e *engine) abort(d *provider.ErrorDetails) {
	if e.abortErr == nil {
		e.abortErr = d
	}
}
