package conformance

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// BadInputRejected proves malformed input (event_id 0, nil kinds, wrong work item variants for a
// queue or a completion, empty or foreign lock tokens, an empty session owner) is rejected with a
// permanent *provider.ProviderError of the right kind, without a panic and without changing
// anything: the held locks stay held and the history and queues stay as they were.
func BadInputRejected(t *testing.T, f Factory) {
	p := f.CreateProvider(t)
	const inst = "bad-input"
	createInstance(t, p, inst)
	mustEnqueueOrch(t, p, externalRaised(inst, "poke", "{}"))
	oit := mustFetchOrch(t, p, longLock)
	mustEnqueueWorker(t, p, activityItem(inst, 2))
	wit := mustFetchWork(t, p, longLock)
	otok, wtok := oit.LockToken, wit.LockToken
	before := mustRead(t, p, inst)

	unchanged := func(what string) {
		t.Helper()
		rrSameEvents(t, mustRead(t, p, inst), before, what+": history")
		mustNoOrch(t, p, longLock)
		exNoWork(t, p, what)
		exDepths(t, p, 0, 0, what)
	}
	invalid := []error{provider.ErrInvalidInput}
	scheduled := ev(inst, 2, provider.ActivityScheduledEvent{Name: "TestActivity", Input: "{}"})
	zero := ev(inst, 0, provider.ActivityScheduledEvent{Name: "TestActivity", Input: "{}"})
	noKind := ev(inst, 3, nil)
	goodAck := provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled}}

	badAcks := []struct {
		what string
		ack  provider.OrchestrationAck
	}{
		{"event_id 0", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{zero}}},
		{"valid event then event_id 0", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled, zero}}},
		{"event with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled, noKind}}},
		{"orchestrator item with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			OrchestratorItems: []provider.WorkItem{{}}}},
		{"worker item with nil kind", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			WorkerItems: []provider.WorkItem{{}}}},
		{"worker item that is not ActivityExecute", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			WorkerItems: []provider.WorkItem{activityCompleted(inst, 2, "x")}}},
		{"orchestrator item that is ActivityExecute", provider.OrchestrationAck{ExecutionID: 1, HistoryDelta: []provider.Event{scheduled},
			OrchestratorItems: []provider.WorkItem{activityItem(inst, 2)}}},
	}
	for _, b := range badAcks {
		exRejected(t, "ack_orchestration_item with "+b.what, func() error {
			return p.AckOrchestrationItem(ctx(t), otok, b.ack)
		}, invalid...)
		unchanged("after rejected ack with " + b.what)
	}

	calls := []struct {
		what string
		call func() error
	}{
		{"enqueue_for_worker(ExternalRaised)", func() error { return p.EnqueueForWorker(ctx(t), externalRaised(inst, "e", "d")) }},
		{"enqueue_for_worker(ActivityCompleted)", func() error { return p.EnqueueForWorker(ctx(t), activityCompleted(inst, 2, "x")) }},
		{"enqueue_for_worker(nil kind)", func() error { return p.EnqueueForWorker(ctx(t), provider.WorkItem{}) }},
		{"enqueue_for_orchestrator(ActivityExecute)", func() error { return p.EnqueueForOrchestrator(ctx(t), activityItem(inst, 2), 0) }},
		{"enqueue_for_orchestrator(nil kind)", func() error { return p.EnqueueForOrchestrator(ctx(t), provider.WorkItem{}, 0) }},
		{"ack_work_item(ExternalRaised completion)", func() error {
			return p.AckWorkItem(ctx(t), wtok, ptr(externalRaised(inst, "e", "d")))
		}},
		{"ack_work_item(ActivityExecute completion)", func() error { return p.AckWorkItem(ctx(t), wtok, ptr(activityItem(inst, 2))) }},
		{"ack_work_item(nil-kind completion)", func() error { return p.AckWorkItem(ctx(t), wtok, &provider.WorkItem{}) }},
		{"renew_session_lock([\"\"])", func() error {
			_, err := p.RenewSessionLock(ctx(t), []string{""}, time.Second, time.Second)
			return err
		}},
	}
	for _, e := range calls {
		exRejected(t, e.what, e.call, invalid...)
		unchanged("after rejected " + e.what)
	}

	// Unknown, empty and foreign (the other queue's) tokens for every token-taking method.
	tokenCalls := []struct {
		what    string
		foreign string
		call    func(tok string) error
	}{
		{"ack_orchestration_item", wtok, func(tok string) error { return p.AckOrchestrationItem(ctx(t), tok, goodAck) }},
		{"abandon_orchestration_item", wtok, func(tok string) error { return p.AbandonOrchestrationItem(ctx(t), tok, 0, false) }},
		{"renew_orchestration_item_lock", wtok, func(tok string) error { return p.RenewOrchestrationItemLock(ctx(t), tok, time.Second) }},
		{"ack_work_item", otok, func(tok string) error {
			return p.AckWorkItem(ctx(t), tok, ptr(activityCompleted(inst, 2, "x")))
		}},
		{"renew_work_item_lock", otok, func(tok string) error { return p.RenewWorkItemLock(ctx(t), tok, time.Second) }},
		{"abandon_work_item", otok, func(tok string) error { return p.AbandonWorkItem(ctx(t), tok, 0, false) }},
	}
	for _, c := range tokenCalls {
		for _, tok := range []struct {
			name, token string
			kinds       []error
		}{
			{"unknown token", "no-such-lock-token", []error{provider.ErrInvalidLockToken}},
			{"foreign token", c.foreign, []error{provider.ErrInvalidLockToken}},
			{"empty token", "", []error{provider.ErrInvalidLockToken, provider.ErrInvalidInput}},
		} {
			what := fmt.Sprintf("%s with %s", c.what, tok.name)
			exRejected(t, what, func() error { return c.call(tok.token) }, tok.kinds...)
			unchanged("after " + what)
		}
	}

	// The locks survived everything: the real tokens still work.
	mustAck(t, p, otok, goodAck)
	wantNoErr(t, p.AckWorkItem(ctx(t), wtok, ptr(activityCompleted(inst, 2, "ok"))), "ack_work_item with the held token")
	it := mustFetchOrch(t, p, longLock)
	if want := []provider.WorkItem{activityCompleted(inst, 2, "ok")}; !reflect.DeepEqual(it.Item.Messages, want) {
		t.Fatalf("final fetch: messages %+v, want only the completion", it.Item.Messages)
	}
	rrSameEvents(t, it.Item.History, append(before, scheduled), "final history")
}
