package dx

import (
	"github.com/duroxide-go/dxredis/provider"
)

// Actions: the durable operations orchestration code emits. Each kind is one type in its own file
// (action_<kind>.go) that says all there is to know about it: the event that records it (event,
// newWork), how a replay recognises that event (replays), what completes it (kind.apply for history
// events, kind.completion for fetched messages, arrival for waits and dequeues), how the code's
// cancellation is recorded (kind.cancelRecord) and what the ack sends or records for it (send,
// dropped, kind.end). The engine (engine.go, matching.go, ack.go) calls these and never asks which
// kind an action is.

// action is one durable operation emitted by orchestration code.
type action interface {
	base() *actionBase
	// event is the history event that records the action (nil: none, for continue-as-new).
	event() provider.EventKind
	// newWork prepares the action to be recorded as new work with event id id (a child's automatic
	// instance id is made from it); false: it records no event and is not new work.
	newWork(e *engine, id uint64) bool
	// replays reports whether k, the event history holds at the action's position, records this
	// action; when it does the action takes what history decided (a timer's fire time, a child's
	// instance id).
	replays(k provider.EventKind) bool
	// bound is called once the action's schedule event is known (replayed or new).
	bound(e *engine)
	// arrival returns what completes the action when it is completed by a message looked up as the
	// code polls (event waits, dequeues); the others answer false.
	arrival(e *engine) (string, bool)
	// withdrawn is called, before the turn's new actions are bound, for each action the code
	// cancelled this turn.
	withdrawn(e *engine)
	// send adds what the action, new this turn, sends when the turn ends with r.
	send(e *engine, r turnResult, out *ackItems)
	// dropped adds the side effects of the code's cancellation of the action, recorded this turn.
	dropped(e *engine, out *ackItems)
	// describe says what the code does, for nondeterminism messages.
	describe() string
}

// actionBase is what every action has: the future that receives its completion and the event id
// of its schedule event once bound.
type actionBase struct {
	fut        *future // nil for positional-only actions
	scheduleID uint64
}

func (b *actionBase) base() *actionBase { return b }

// Defaults for the kinds that have nothing to do at a step.
func (b *actionBase) newWork(*engine, uint64) bool        { return true }
func (b *actionBase) bound(*engine)                       {}
func (b *actionBase) arrival(*engine) (string, bool)      { return "", false }
func (b *actionBase) withdrawn(*engine)                   {}
func (b *actionBase) send(*engine, turnResult, *ackItems) {}
func (b *actionBase) dropped(*engine, *ackItems)          {}

// kind is what a kind of action says about history and messages, whether or not an action of it is
// bound this turn: each action type's zero value is its kind (see kinds).
type kind interface {
	// what names the kind's actions in messages ("activities").
	what() string
	// owns reports whether a is an action of this kind.
	owns(a action) bool
	// apply applies ev if it is an event of this kind (its schedule event, a completion, an arrival, a
	// cancellation record): handled reports that it was, poll that the code must be polled before the
	// next event, d the error that fails the orchestration.
	apply(e *engine, ev *provider.Event) (handled, poll bool, d *provider.ErrorDetails)
	// label names the kind of the schedule that k records, for messages that answer it ("" when k
	// is not such a schedule).
	label(k provider.EventKind) string
	// completion turns a fetched message that belongs to this kind into its history event.
	completion(m provider.WorkItemKind) (completion, bool)
	// cancelRecord is the event that records the code's cancellation of an action of this kind with
	// reason (nil: nothing is recorded, as for timers); recorded reports whether k is one and why.
	cancelRecord(reason string) provider.EventKind
	recorded(k provider.EventKind) (reason string, ok bool)
	// end records, when the execution ends with r, what the kind's schedules still open (nothing
	// answered or cancelled them) need: before the terminal event (before=true) and after it.
	end(e *engine, r turnResult, before bool, out *ackItems)
}

// kinds are the kinds of action. Their order is the order in which the code's cancellations are
// recorded (activities, sub-orchestrations, event waits, dequeues) and, when the execution ends,
// the order of their records (event waits before dequeues, as in duroxide).
var kinds = []kind{activity{}, subOrch{}, eventWait{}, dequeue{}, timer{}, detached{}, continueAsNew{}, customStatus{}, kvWrite{}}

// completion is a fetched message that becomes a history event. When it answers a schedule, it
// names the schedule (execution, event id, the kind's label), the event types that already answer
// it (a duplicate is dropped) and, for a failure, its details (a failure other than an
// Application one aborts the turn).
type completion struct {
	event   provider.EventKind
	exec    uint64
	id      uint64
	label   string // "": the message answers no schedule (an arrival)
	answers []string
	failure *provider.ErrorDetails
}

// noKindRecords is embedded by kinds that record nothing on cancellation or at the end.
type noKindRecords struct{}

func (noKindRecords) label(provider.EventKind) string                     { return "" }
func (noKindRecords) completion(provider.WorkItemKind) (completion, bool) { return completion{}, false }
func (noKindRecords) cancelRecord(string) provider.EventKind              { return nil }
func (noKindRecords) recorded(provider.EventKind) (string, bool)          { return "", false }
func (noKindRecords) end(*engine, turnResult, bool, *ackItems)            {}

// ackItems is what a turn's ack sends besides its history events.
type ackItems struct {
	worker, orch []provider.WorkItem
	cancelled    []provider.ScheduledActivityIdentifier
	dropCancels  []provider.WorkItem // cancellations of children the code dropped: sent last
	unstarted    []*detached         // detached starts recorded but not sent (duroxide's trap)
}
