package conformance

import (
	"reflect"
	"testing"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/provider"
)

// The provider-level facts of duroxide 0.1.31's race_replay module. Its tests drive a duroxide
// Runtime over the provider; only what they require of the provider is ported: events come back
// from every read path exactly as acked (duroxide_version never restamped), and inputs queued by a
// continue-as-new terminal ack survive until the successor's start is fetched.
func init() {
	register("race_replay_provider",
		test{"test_queue_replay_version_stamp_roundtrip", QueueReplayVersionStampRoundtrip},
		test{"test_read_with_execution_returns_acked_events_exactly", ReadWithExecutionReturnsAckedEventsExactly},
		test{"test_can_terminal_ack_preserves_queued_inputs", CANTerminalAckPreservesQueuedInputs},
	)
}

// rrEvent builds an event with every envelope field given explicitly.
func rrEvent(instance string, exec, id uint64, source *uint64, ts uint64, version string, kind provider.EventKind) provider.Event {
	return provider.Event{EventID: id, SourceEventID: source, InstanceID: instance, ExecutionID: exec,
		TimestampMs: ts, DuroxideVersion: version, Kind: kind}
}

// rrJSON renders an event for failure messages.
func rrJSON(e provider.Event) string {
	b, err := provider.Marshal(e)
	if err != nil {
		return "<unmarshalable: " + err.Error() + ">"
	}
	return string(b)
}

// rrSameEvents fails the test unless got equals want exactly (every envelope and kind field).
func rrSameEvents(t *testing.T, got, want []provider.Event, what string) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d", what, len(got), len(want))
	}
	for n := range want {
		if !reflect.DeepEqual(got[n], want[n]) {
			t.Fatalf("%s: event %d differs:\n got  %s\n want %s", what, n, rrJSON(got[n]), rrJSON(want[n]))
		}
	}
}

// rrSeed enqueues a start for instance, fetches it and acks execution 1 with the given delta,
// orchestrator items and metadata.
func rrSeed(t *testing.T, p provider.Provider, instance string, delta []provider.Event, orch []provider.WorkItem, meta provider.ExecutionMetadata) {
	t.Helper()
	mustEnqueueOrch(t, p, startItem(instance))
	it := mustFetchOrch(t, p, longLock)
	if it.Item.Instance != instance {
		t.Fatalf("seed fetch: got instance %q, want %q", it.Item.Instance, instance)
	}
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: delta, OrchestratorItems: orch, Metadata: meta})
}

// rrReadExec reads one execution's history.
func rrReadExec(t *testing.T, p provider.Provider, instance string, exec uint64) []provider.Event {
	t.Helper()
	evs, err := p.ReadWithExecution(ctx(t), instance, exec)
	if err != nil {
		t.Fatalf("read_with_execution(%q, %d): %v", instance, exec, err)
	}
	return evs
}

// rrVariants lists the variants of a batch.
func rrVariants(items []provider.WorkItem) []string {
	out := make([]string, len(items))
	for n, w := range items {
		out[n] = w.Variant()
	}
	return out
}

// QueueReplayVersionStampRoundtrip proves an event stamped "0.1.30" comes back unchanged from
// read_with_execution and from the fetch path.
func QueueReplayVersionStampRoundtrip(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "queue-version-roundtrip"
	event := started(inst)
	event.DuroxideVersion = "0.1.30"
	rrSeed(t, p, inst, []provider.Event{event}, nil, testMeta())
	rrSameEvents(t, rrReadExec(t, p, inst, 1), []provider.Event{event}, "read_with_execution")

	mustEnqueueOrch(t, p, externalRaised(inst, "fetch-stamp", "wake"))
	it := mustFetchOrch(t, p, longLock)
	if len(it.Item.History) == 0 {
		t.Fatal("fetch: old-stamped execution has no history")
	}
	if got := it.Item.History[0].DuroxideVersion; got != "0.1.30" {
		t.Fatalf("fetch path restamped history: duroxide_version %q, want \"0.1.30\"", got)
	}
	wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), it.LockToken, 0, true), "abandon stamp probe")
}

// ReadWithExecutionReturnsAckedEventsExactly proves every read path (read_with_execution, read,
// fetch history, read_history_with_execution_id) returns exactly the acked events over all 26
// event kinds, every ErrorDetails variant, set and unset optional fields, mixed duroxide_version
// stamps, source_event_ids and timestamps (one beyond 2^53). Not in duroxide: it generalises the
// equality assertion of race_replay's test_queue_race_cancellation_replay.
func ReadWithExecutionReturnsAckedEventsExactly(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "rr-fidelity"
	const ts = uint64(1_700_000_000_000)
	src := func(id uint64) *uint64 { return &id }
	e1 := func(id uint64, source *uint64, version string, kind provider.EventKind) provider.Event {
		return rrEvent(inst, 1, id, source, ts+id, version, kind)
	}
	e2 := func(id uint64, source *uint64, version string, kind provider.EventKind) provider.Event {
		return rrEvent(inst, 2, id, source, ts+1000+id, version, kind)
	}
	appErr := func(kind provider.AppErrorKind, msg string, retry bool) provider.ErrorDetails {
		return provider.ErrorDetails{Kind: provider.ApplicationError{Kind: kind, Message: msg, Retryable: retry}}
	}
	poison := func(mt provider.PoisonKind) provider.ErrorDetails {
		return provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: 5, MaxAttempts: 4,
			MessageType: provider.PoisonMessageType{Kind: mt}, Message: "poisoned"}}
	}

	// Execution 1, first turn: every kind once, all optional fields of OrchestrationStarted set.
	turn1 := []provider.Event{
		e1(1, nil, "0.1.30", provider.OrchestrationStartedEvent{Name: "Fidelity", Version: "2.1.0", Input: `{"k":[1,2]}`,
			ParentInstance: ptr("rr-parent"), ParentID: ptr(uint64(7)), ParentExecutionID: ptr(uint64(3)),
			CarryForwardEvents:  []provider.CarriedEvent{{Name: "q", Data: "a"}, {Name: "q", Data: ""}},
			InitialCustomStatus: ptr("init")}),
		e1(2, nil, "0.1.30", provider.ActivityScheduledEvent{Name: "a", Input: "in", SessionID: ptr("s1"), Tag: ptr("gpu")}),
		e1(3, nil, "0.1.30", provider.ActivityScheduledEvent{Name: "b", Input: ""}),
		e1(4, src(2), "0.1.30", provider.ActivityCompletedEvent{Result: `"ok"`}),
		e1(5, src(3), "0.1.30", provider.ActivityFailedEvent{Details: appErr(provider.AppErrorKind{Name: provider.AppActivityFailed}, "boom", true)}),
		e1(6, nil, "0.1.29", provider.TimerCreatedEvent{FireAtMs: ts + 5000}),
		e1(7, src(6), "0.1.29", provider.TimerFiredEvent{FireAtMs: ts + 5000}),
		e1(8, nil, "0.1.30", provider.ExternalSubscribedEvent{Name: "sig"}),
		e1(9, nil, "0.1.30", provider.ExternalEventEvent{Name: "sig", Data: "<&>\"quoted\"\n\ttab é 🎉"}),
		e1(10, nil, "0.1.30", provider.OrchestrationChainedEvent{Name: "Other", Instance: "rr-chained", Input: "x"}),
		e1(11, nil, "0.1.30", provider.SubOrchestrationScheduledEvent{Name: "Child", Instance: "rr-child", Input: "ci"}),
		e1(12, src(11), "0.1.30", provider.SubOrchestrationCompletedEvent{Result: "cr"}),
		e1(13, nil, "0.1.30", provider.SubOrchestrationScheduledEvent{Name: "Child", Instance: "rr-child2", Input: ""}),
		e1(14, src(13), "0.1.30", provider.SubOrchestrationFailedEvent{Details: poison(provider.PoisonActivity{
			Instance: inst, ExecutionID: 1, ActivityName: "a", ActivityID: 2})}),
		e1(15, src(13), "0.1.30", provider.SubOrchestrationCancelRequestedEvent{Reason: "stop"}),
		e1(16, src(2), "0.1.30", provider.ActivityCancelRequestedEvent{Reason: "dropped"}),
		e1(17, nil, "0.1.30", provider.OrchestrationCancelRequestedEvent{Reason: "user"}),
		e1(18, src(8), "0.1.30", provider.ExternalSubscribedCancelledEvent{Reason: "dropped_future"}),
		e1(19, nil, "0.1.31", provider.QueueSubscribedEvent{Name: "q"}),
		e1(20, nil, "0.1.31", provider.QueueEventDeliveredEvent{Name: "q", Data: "a"}),
		e1(21, src(19), "0.1.31", provider.QueueSubscriptionCancelledEvent{Reason: "dropped_future"}),
		e1(22, nil, "0.1.30", provider.CustomStatusUpdatedEvent{Status: ptr("working")}),
		e1(23, nil, "0.1.30", provider.CustomStatusUpdatedEvent{Status: nil}),
		e1(24, nil, "0.1.30", provider.KeyValueSetEvent{Key: "k", Value: "v", LastUpdatedAtMs: ts + 24}),
		e1(25, nil, "0.1.30", provider.KeyValueClearedEvent{Key: "k"}),
		e1(26, nil, "0.1.30", provider.KeyValuesClearedEvent{}),
	}
	turn1[25].TimestampMs = 1<<53 + 1 // not representable as a float64
	turn1[2].TimestampMs = 0

	// Execution 1, second turn: the other ErrorDetails variants, then continue-as-new.
	turn2 := []provider.Event{
		e1(27, src(2), "0.1.30", provider.ActivityFailedEvent{Details: provider.ErrorDetails{Kind: provider.InfrastructureError{
			Operation: "fetch", Message: "conn reset", Retryable: true}}}),
		e1(28, src(3), "0.1.30", provider.ActivityFailedEvent{Details: appErr(provider.AppErrorKind{
			Name: provider.AppCancelled, Reason: "superseded"}, "cancelled", false)}),
		e1(29, nil, "0.1.30", provider.OrchestrationContinuedAsNewEvent{Input: "next"}),
	}
	// Execution 2: minimal OrchestrationStarted (carry-forward only), then a failure.
	exec2 := []provider.Event{
		e2(1, nil, "0.1.31", provider.OrchestrationStartedEvent{Name: "Fidelity", Version: "2.1.0", Input: "next",
			CarryForwardEvents: []provider.CarriedEvent{{Name: "q", Data: "carried"}}}),
		e2(2, nil, "0.1.31", provider.SubOrchestrationFailedEvent{Details: poison(provider.PoisonOrchestration{Instance: "rr-child", ExecutionID: 4})}),
		e2(3, nil, "0.1.31", provider.ActivityFailedEvent{Details: provider.ErrorDetails{Kind: provider.ConfigurationError{
			Kind: "Nondeterminism", Resource: "act", Message: ptr("changed")}}}),
		e2(4, nil, "0.1.31", provider.ActivityFailedEvent{Details: poison(provider.PoisonFailedDeserialization{
			Instance: inst, ExecutionID: 2, Error: "bad json"})}),
		e2(5, nil, "0.1.31", provider.ActivityFailedEvent{Details: appErr(provider.AppErrorKind{Name: provider.AppPanicked}, "panic", false)}),
		e2(6, nil, "0.1.31", provider.OrchestrationFailedEvent{Details: provider.ErrorDetails{Kind: provider.ConfigurationError{
			Kind: "Nondeterminism", Resource: "act"}}}),
	}
	meta := provider.ExecutionMetadata{OrchestrationName: "Fidelity", OrchestrationVersion: "2.1.0",
		PinnedDuroxideVersion: semver.MustParse("0.1.30")}
	rrSeed(t, p, inst, turn1, nil, meta)
	rrSameEvents(t, rrReadExec(t, p, inst, 1), turn1, "read_with_execution(1) after turn 1")

	mustEnqueueOrch(t, p, externalRaised(inst, "poke", ""))
	it := mustFetchOrch(t, p, longLock)
	rrSameEvents(t, it.Item.History, turn1, "fetched history after turn 1")
	canMeta := meta
	canMeta.Status, canMeta.Output = provider.StatusContinuedAsNew, ptr("next")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: turn2, Metadata: canMeta})
	all1 := append(append([]provider.Event{}, turn1...), turn2...)

	mustEnqueueOrch(t, p, provider.WorkItem{Kind: provider.ContinueAsNew{Instance: inst, Orchestration: "Fidelity",
		Input: "next", Version: ptr("2.1.0"), CarryForwardEvents: []provider.CarriedEvent{{Name: "q", Data: "carried"}}}})
	it = mustFetchOrch(t, p, longLock)
	rrSameEvents(t, it.Item.History, all1, "fetched history of the continued-as-new execution")
	failMeta := meta
	failMeta.Status, failMeta.Output, failMeta.PinnedDuroxideVersion = provider.StatusFailed, ptr("nondeterminism"), semver.MustParse("0.1.31")
	mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 2, HistoryDelta: exec2, Metadata: failMeta})

	rrSameEvents(t, rrReadExec(t, p, inst, 1), all1, "read_with_execution(1)")
	rrSameEvents(t, rrReadExec(t, p, inst, 2), exec2, "read_with_execution(2)")
	rrSameEvents(t, mustRead(t, p, inst), exec2, "read (latest execution)")
	if evs := rrReadExec(t, p, inst, 3); len(evs) != 0 {
		t.Fatalf("read_with_execution(3): got %d events, want none", len(evs))
	}
	if a, ok := p.Admin(); ok {
		for exec, want := range map[uint64][]provider.Event{1: all1, 2: exec2} {
			got, err := a.ReadHistoryWithExecutionID(ctx(t), inst, exec)
			wantNoErr(t, err, "read_history_with_execution_id")
			rrSameEvents(t, got, want, "read_history_with_execution_id")
		}
		got, err := a.ReadHistory(ctx(t), inst)
		wantNoErr(t, err, "read_history")
		rrSameEvents(t, got, exec2, "read_history")
	}
}

// CANTerminalAckPreservesQueuedInputs proves orchestrator items carried by a continue-as-new
// terminal ack stay queued, unchanged and in order, through fetches and abandons of the
// predecessor until the successor's start is fetched with them, and that neither the predecessor's
// history nor the duroxide_version stamps change. Shapes from race_replay's
// test_continue_as_new_transition_delivery (successor start delayed 2 s) and
// test_continue_as_new_duplicate_start (duplicate start queued before the successor start).
func CANTerminalAckPreservesQueuedInputs(t *testing.T, f Factory) {
	for _, shape := range []string{"delayed-successor", "duplicate-start"} {
		p := f.CreateProvider(t)
		inst := "provider-can-window-" + shape
		startEv := ev(inst, 1, provider.OrchestrationStartedEvent{Name: "Transition", Version: "1.0.0", Input: "old"})
		startEv.DuroxideVersion = "0.1.30"
		pred := []provider.Event{startEv, ev(inst, 2, provider.OrchestrationContinuedAsNewEvent{Input: "next"})}
		successor := provider.WorkItem{Kind: provider.ContinueAsNew{Instance: inst, Orchestration: "Transition", Input: "next",
			Version: ptr("1.0.0"), CarryForwardEvents: []provider.CarriedEvent{{Name: "q", Data: "carried"}}}}
		queued := []provider.WorkItem{
			{Kind: provider.QueueMessage{Instance: inst, Name: "q", Data: "late"}},
			externalRaised(inst, "signal", "answer"),
		}
		if shape == "duplicate-start" {
			dup := provider.WorkItem{Kind: provider.StartOrchestration{Instance: inst, Orchestration: "WrongHandler",
				Input: "duplicate", ExecutionID: 1}}
			queued = []provider.WorkItem{dup, successor, queued[0]}
		}
		meta := provider.ExecutionMetadata{Status: provider.StatusContinuedAsNew, Output: ptr("next"),
			OrchestrationName: "Transition", OrchestrationVersion: "1.0.0", PinnedDuroxideVersion: semver.MustParse("0.1.30")}
		rrSeed(t, p, inst, pred, queued, meta)

		want := queued
		if shape == "delayed-successor" {
			wantNoErr(t, p.EnqueueForOrchestrator(ctx(t), successor, 2*time.Second), "enqueue delayed successor start")
			visible := time.Now().Add(2 * time.Second)
			// Before the successor start is visible, the predecessor is fetched with the queued
			// inputs only and abandoned (as a runtime waiting for the start would), twice.
			for round, delay := range []time.Duration{250 * time.Millisecond, 0} {
				if time.Until(visible) < 500*time.Millisecond {
					break // a stalled machine: the successor start is about to be visible
				}
				it := mustFetchOrch(t, p, longLock)
				if !reflect.DeepEqual(it.Item.Messages, queued) {
					t.Fatalf("%s: fetch %d before the successor start: messages %v, want %v", shape, round,
						rrVariants(it.Item.Messages), rrVariants(queued))
				}
				if it.Item.ExecutionID != 1 {
					t.Fatalf("%s: fetch %d: execution_id %d, want 1", shape, round, it.Item.ExecutionID)
				}
				rrSameEvents(t, it.Item.History, pred, shape+": predecessor history on fetch")
				wantNoErr(t, p.AbandonOrchestrationItem(ctx(t), it.LockToken, delay, true), "abandon while waiting")
				time.Sleep(delay + 50*time.Millisecond)
			}
			time.Sleep(time.Until(visible) + 100*time.Millisecond)
			want = append(append([]provider.WorkItem{}, queued...), successor)
		}

		it := mustFetchOrch(t, p, longLock)
		if !reflect.DeepEqual(it.Item.Messages, want) {
			t.Fatalf("%s: successor fetch: messages %v, want %v (unchanged, arrival order)", shape,
				rrVariants(it.Item.Messages), rrVariants(want))
		}
		rrSameEvents(t, it.Item.History, pred, shape+": predecessor history on the successor fetch")
		next := []provider.Event{
			evExec(inst, 2, 1, provider.OrchestrationStartedEvent{Name: "Transition", Version: "1.0.0", Input: "next",
				CarryForwardEvents: []provider.CarriedEvent{{Name: "q", Data: "carried"}}}),
			evExec(inst, 2, 2, provider.QueueEventDeliveredEvent{Name: "q", Data: "carried"}),
			evExec(inst, 2, 3, provider.QueueEventDeliveredEvent{Name: "q", Data: "late"}),
		}
		mustAck(t, p, it.LockToken, provider.OrchestrationAck{ExecutionID: 2, HistoryDelta: next,
			Metadata: provider.ExecutionMetadata{OrchestrationName: "Transition", OrchestrationVersion: "1.0.0",
				PinnedDuroxideVersion: semver.MustParse("0.1.29")}})

		rrSameEvents(t, rrReadExec(t, p, inst, 1), pred, shape+": predecessor history must not change")
		rrSameEvents(t, rrReadExec(t, p, inst, 2), next, shape+": successor history")
		mustNoOrch(t, p, longLock)
	}
}
