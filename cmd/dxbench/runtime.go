package main

// The fake runtime: the parts of duroxide's runtime that touch the provider. Orchestration
// dispatchers fetch a turn, replay the history, run the workload's orchestration function on it
// and ack the result; worker dispatchers fetch activities and ack their completions. Calls,
// arguments, retries and the empty-poll pacing follow duroxide 0.1.30's dispatchers.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/duroxide-go/dxredis/provider"
)

const (
	duroxideVersion   = "0.1.30"
	orchLockTimeout   = 5 * time.Second  // RuntimeOptions.orchestrator_lock_timeout
	workerLockTimeout = 30 * time.Second // RuntimeOptions.worker_lock_timeout
	dispatcherPoll    = time.Second      // long-poll timeout the benchmark's dispatchers pass
	minPollInterval   = 100 * time.Millisecond
	ackRetries        = 5  // retryable ack failures are retried with the same token
	maxConsecutiveErr = 10 // permanent errors in a row that abort a workload
)

var pinnedVersion = semver.MustParse(duroxideVersion)

// orchestration is a workload's orchestration function. decide runs on the replayed state of a
// turn (history plus this turn's new events) and adds the new actions through t's methods; like
// user code under replay, it must be deterministic given that state.
type orchestration interface {
	decide(t *turn)
}

type activityState struct {
	id     uint64
	done   bool
	failed bool
	result string
}

type timerState struct {
	id     uint64
	fireAt uint64
	fired  bool
}

// turn is one orchestration turn: the replayed state and the actions the turn adds.
type turn struct {
	instance string
	exec     uint64
	nowMs    uint64
	input    string
	nextID   uint64

	started    bool
	startedNow bool // OrchestrationStarted stamped by this turn (first turn of the execution)
	terminal   bool // history already ended (messages are consumed and dropped)
	activities []*activityState
	byID       map[uint64]*activityState
	timers     []*timerState
	subscribed map[string]bool
	received   map[string]string
	firedNow   []uint64 // fire_at_ms of the timers that fired in this turn

	delta       []provider.Event
	workerItems []provider.WorkItem
	orchItems   []provider.WorkItem
	completed   bool
	output      string
}

func (t *turn) event(src *uint64, k provider.EventKind) uint64 {
	id := t.nextID
	t.nextID++
	t.delta = append(t.delta, provider.Event{EventID: id, SourceEventID: src, InstanceID: t.instance,
		ExecutionID: t.exec, TimestampMs: t.nowMs, DuroxideVersion: duroxideVersion, Kind: k})
	return id
}

// scheduleActivity records ActivityScheduled and emits its ActivityExecute worker item.
func (t *turn) scheduleActivity(name, input string) {
	id := t.event(nil, provider.ActivityScheduledEvent{Name: name, Input: input})
	t.workerItems = append(t.workerItems, provider.WorkItem{Kind: provider.ActivityExecute{
		Instance: t.instance, ExecutionID: t.exec, ID: id, Name: name, Input: input}})
	a := &activityState{id: id}
	t.activities = append(t.activities, a)
	t.byID[id] = a
}

// createTimer records TimerCreated and emits the TimerFired orchestrator item (visible at fire_at_ms).
func (t *turn) createTimer(d time.Duration) {
	fire := t.nowMs + uint64(d.Milliseconds())
	id := t.event(nil, provider.TimerCreatedEvent{FireAtMs: fire})
	t.orchItems = append(t.orchItems, provider.WorkItem{Kind: provider.TimerFired{
		Instance: t.instance, ExecutionID: t.exec, ID: id, FireAtMs: fire}})
	t.timers = append(t.timers, &timerState{id: id, fireAt: fire})
}

// subscribe records ExternalSubscribed for an external event name.
func (t *turn) subscribe(name string) {
	t.event(nil, provider.ExternalSubscribedEvent{Name: name})
	t.subscribed[name] = true
}

// complete records OrchestrationCompleted; the ack carries status Completed with the output.
func (t *turn) complete(output string) {
	t.event(nil, provider.OrchestrationCompletedEvent{Output: output})
	t.completed = true
	t.output = output
}

func (t *turn) doneActivities() int {
	n := 0
	for _, a := range t.activities {
		if a.done {
			n++
		}
	}
	return n
}

// replay rebuilds the orchestration's state from its stored history.
func (t *turn) replay(history []provider.Event) {
	for _, e := range history {
		if e.EventID >= t.nextID {
			t.nextID = e.EventID + 1
		}
		switch k := e.Kind.(type) {
		case provider.OrchestrationStartedEvent:
			t.started, t.input = true, k.Input
		case provider.ActivityScheduledEvent:
			a := &activityState{id: e.EventID}
			t.activities = append(t.activities, a)
			t.byID[e.EventID] = a
		case provider.ActivityCompletedEvent:
			if a := t.source(e); a != nil {
				a.done, a.result = true, k.Result
			}
		case provider.ActivityFailedEvent:
			if a := t.source(e); a != nil {
				a.done, a.failed = true, true
			}
		case provider.TimerCreatedEvent:
			t.timers = append(t.timers, &timerState{id: e.EventID, fireAt: k.FireAtMs})
		case provider.TimerFiredEvent:
			for _, tm := range t.timers {
				if e.SourceEventID != nil && tm.id == *e.SourceEventID {
					tm.fired = true
				}
			}
		case provider.ExternalSubscribedEvent:
			t.subscribed[k.Name] = true
		case provider.ExternalEventEvent:
			t.received[k.Name] = k.Data
		case provider.OrchestrationCompletedEvent, provider.OrchestrationFailedEvent, provider.OrchestrationContinuedAsNewEvent:
			t.terminal = true
		}
	}
}

func (t *turn) source(e provider.Event) *activityState {
	if e.SourceEventID == nil {
		return nil
	}
	return t.byID[*e.SourceEventID]
}

// apply turns the batch's messages into history events; stale or duplicate completions are
// dropped as the runtime drops them.
func (t *turn) apply(msgs []provider.WorkItem) {
	for _, m := range msgs {
		switch k := m.Kind.(type) {
		case provider.StartOrchestration:
			if t.started {
				continue // duplicate start of a running instance: ignored
			}
			t.event(nil, provider.OrchestrationStartedEvent{Name: k.Orchestration, Version: deref(k.Version),
				Input: k.Input, ParentInstance: k.ParentInstance, ParentID: k.ParentID, ParentExecutionID: k.ParentExecutionID})
			t.started, t.startedNow, t.input = true, true, k.Input
		case provider.ActivityCompleted:
			if a := t.byID[k.ID]; a != nil && !a.done && k.ExecutionID == t.exec {
				src := a.id
				t.event(&src, provider.ActivityCompletedEvent{Result: k.Result})
				a.done, a.result = true, k.Result
			}
		case provider.ActivityFailed:
			if a := t.byID[k.ID]; a != nil && !a.done && k.ExecutionID == t.exec {
				src := a.id
				t.event(&src, provider.ActivityFailedEvent{Details: k.Details})
				a.done, a.failed = true, true
			}
		case provider.TimerFired:
			for _, tm := range t.timers {
				if tm.id == k.ID && !tm.fired && k.ExecutionID == t.exec {
					src := tm.id
					t.event(&src, provider.TimerFiredEvent{FireAtMs: k.FireAtMs})
					tm.fired = true
					t.firedNow = append(t.firedNow, k.FireAtMs)
				}
			}
		case provider.ExternalRaised:
			if t.started {
				t.event(nil, provider.ExternalEventEvent{Name: k.Name, Data: k.Data})
				t.received[k.Name] = k.Data
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// decideTurn replays the item and runs the orchestration function; it returns the turn with
// the ack to send.
func decideTurn(item *provider.LockedOrchestrationItem, code orchestration, now time.Time) (*turn, provider.OrchestrationAck) {
	it := item.Item
	t := &turn{instance: it.Instance, exec: it.ExecutionID, nowMs: uint64(now.UnixMilli()), nextID: 1,
		byID: map[uint64]*activityState{}, subscribed: map[string]bool{}, received: map[string]string{}}
	t.replay(it.History)
	if !t.terminal {
		t.apply(it.Messages)
		if t.started {
			code.decide(t)
		}
	}
	ack := provider.OrchestrationAck{ExecutionID: t.exec, HistoryDelta: t.delta, WorkerItems: t.workerItems,
		OrchestratorItems: t.orchItems, Metadata: provider.ExecutionMetadata{
			OrchestrationName: it.OrchestrationName, OrchestrationVersion: it.Version}}
	if t.startedNow {
		ack.Metadata.PinnedDuroxideVersion = pinnedVersion
	}
	if t.completed {
		out := t.output
		ack.Metadata.Status, ack.Metadata.Output = provider.StatusCompleted, &out
	}
	return t, ack
}

// turnObs is what a workload sees of one orchestration turn, in either mode: the fake
// runtime's dispatchers fill it from their own turn, the dx runtime's through countingProvider.
type turnObs struct {
	instance      string
	historyEvents int      // events in the fetched history
	firedAt       []uint64 // fire_at_ms of the TimerFired messages the turn fetched
	timersArmed   int      // TimerFired items the turn's ack scheduled (set once acked)
	completed     bool     // the ack carried status Completed (set once acked)
	// fetchStart is when the fetch call began, fetched when it returned, ackStart when the ack
	// call began and done when it returned (the last two set once acked).
	fetchStart, fetched, ackStart, done time.Time
}

// observe fills what a fetched item says.
func observe(item *provider.LockedOrchestrationItem, fetchStart, fetched time.Time) *turnObs {
	o := &turnObs{instance: item.Item.Instance, historyEvents: len(item.Item.History), fetchStart: fetchStart, fetched: fetched}
	for _, m := range item.Item.Messages {
		if tf, ok := m.Kind.(provider.TimerFired); ok {
			o.firedAt = append(o.firedAt, tf.FireAtMs)
		}
	}
	return o
}

// observeAck fills what an acknowledged turn says.
func (o *turnObs) observeAck(ack *provider.OrchestrationAck, ackStart, done time.Time) {
	o.completed = ack.Metadata.Status == provider.StatusCompleted
	for _, m := range ack.OrchestratorItems {
		if _, ok := m.Kind.(provider.TimerFired); ok {
			o.timersArmed++
		}
	}
	o.ackStart, o.done = ackStart, done
}

// turnHooks let a workload observe turns. Every hook is optional and runs on the dispatcher's
// goroutine.
type turnHooks struct {
	// fetched runs right after a fetch returned an item.
	fetched func(o *turnObs)
	// acked runs after a successful ack.
	acked func(o *turnObs)
}

// dispatchers runs the orchestration and worker dispatchers of one workload.
type dispatchers struct {
	p        provider.Provider
	code     orchestration
	hooks    turnHooks
	result   string // activity result: a JSON string of payload bytes
	actDelay time.Duration

	turns      atomic.Int64
	activities atomic.Int64 // acked activity completions
	fetchesNil atomic.Int64

	errMu    sync.Mutex
	errCount map[string]int
	lastErr  map[string]string
	fatal    func(error)
	wg       sync.WaitGroup
}

func newDispatchers(p provider.Provider, code orchestration, payloadBytes int, fatal func(error)) *dispatchers {
	res, _ := json.Marshal(strings.Repeat("x", payloadBytes))
	return &dispatchers{p: p, code: code, result: string(res), errCount: map[string]int{}, lastErr: map[string]string{}, fatal: fatal}
}

func (d *dispatchers) noteErr(op string, err error) {
	d.errMu.Lock()
	d.errCount[op]++
	d.lastErr[op] = err.Error()
	d.errMu.Unlock()
}

func (d *dispatchers) errorSummary() (int, string) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	total := 0
	var parts []string
	for op, n := range d.errCount {
		total += n
		parts = append(parts, fmt.Sprintf("%s x%d (last: %s)", op, n, d.lastErr[op]))
	}
	return total, strings.Join(parts, "; ")
}

// backoff is the dispatcher's delay after a failed fetch: 100 ms * 2^n, capped at 3 s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond << min(n, 5)
	return min(d, 3*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// startOrch starts n orchestration dispatchers long-polling with poll.
func (d *dispatchers) startOrch(ctx context.Context, n int, poll time.Duration) {
	for range n {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.orchLoop(ctx, poll)
		}()
	}
}

// startWorkers starts n worker dispatchers long-polling with poll.
func (d *dispatchers) startWorkers(ctx context.Context, n int, poll time.Duration) {
	for range n {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.workerLoop(ctx, poll)
		}()
	}
}

func (d *dispatchers) wait() { d.wg.Wait() }

// permanentFailure counts consecutive permanent errors and aborts the workload after too many.
func (d *dispatchers) permanentFailure(op string, err error, consecutive *int) {
	if provider.IsRetryable(err) {
		*consecutive = 0
		return
	}
	*consecutive++
	if *consecutive >= maxConsecutiveErr {
		d.fatal(fmt.Errorf("%s failed %d times in a row: %w", op, *consecutive, err))
	}
}

func (d *dispatchers) orchLoop(ctx context.Context, poll time.Duration) {
	failures, consecutive := 0, 0
	af, _ := d.p.(provider.OrchestrationAckFetcher)
	var next *provider.LockedOrchestrationItem // fetched by the last ack (ack-and-fetch-next)
	for ctx.Err() == nil {
		start := time.Now()
		item, err := next, error(nil)
		if item == nil {
			item, err = d.p.FetchOrchestrationItem(ctx, orchLockTimeout, poll, nil)
		}
		next = nil
		fetched := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.noteErr("fetch_orchestration_item", err)
			d.permanentFailure("fetch_orchestration_item", err, &consecutive)
			sleepCtx(ctx, backoff(failures))
			failures++
			continue
		}
		failures = 0
		if item == nil {
			// duroxide sleeps until dispatcher_min_poll_interval has passed since the fetch began.
			d.fetchesNil.Add(1)
			sleepCtx(ctx, minPollInterval-time.Since(start))
			continue
		}
		_, ack := decideTurn(item, d.code, fetched)
		obs := observe(item, start, fetched)
		if d.hooks.fetched != nil {
			d.hooks.fetched(obs)
		}
		ackStart := time.Now()
		if af != nil {
			next, err = d.ackFetch(ctx, af, item.LockToken, ack, poll)
		} else {
			err = d.ack(ctx, item.LockToken, ack)
		}
		done := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.noteErr("ack_orchestration_item", err)
			d.permanentFailure("ack_orchestration_item", err, &consecutive)
			// The runtime abandons a turn it could not commit (50 ms after exhausted retries).
			if aerr := d.p.AbandonOrchestrationItem(ctx, item.LockToken, 50*time.Millisecond, false); aerr != nil && ctx.Err() == nil {
				d.noteErr("abandon_orchestration_item", aerr)
			}
			continue
		}
		consecutive = 0
		d.turns.Add(1)
		if d.hooks.acked != nil {
			obs.observeAck(&ack, ackStart, done)
			d.hooks.acked(obs)
		}
	}
}

// ack commits a turn, retrying retryable failures with the same token (10 ms * 2^n).
func (d *dispatchers) ack(ctx context.Context, token string, ack provider.OrchestrationAck) error {
	var err error
	for attempt := 0; attempt <= ackRetries; attempt++ {
		if err = d.p.AckOrchestrationItem(ctx, token, ack); err == nil || !provider.IsRetryable(err) {
			return err
		}
		sleepCtx(ctx, 10*time.Millisecond<<attempt)
	}
	return err
}

// ackFetch is ack with provider.OrchestrationAckFetcher: the ack also returns the next turn (and
// when there is none, prepares the next fetch's wait of poll, as the dx runtime does).
func (d *dispatchers) ackFetch(ctx context.Context, af provider.OrchestrationAckFetcher, token string, ack provider.OrchestrationAck, poll time.Duration) (*provider.LockedOrchestrationItem, error) {
	var err error
	var next *provider.LockedOrchestrationItem
	for attempt := 0; attempt <= ackRetries; attempt++ {
		if next, err = af.AckOrchestrationItemAndFetch(ctx, token, ack, orchLockTimeout, nil, provider.FetchOptions{NextPoll: poll}); err == nil || !provider.IsRetryable(err) {
			return next, err
		}
		sleepCtx(ctx, 10*time.Millisecond<<attempt)
	}
	return nil, err
}

func (d *dispatchers) workerLoop(ctx context.Context, poll time.Duration) {
	failures, consecutive := 0, 0
	tags := provider.TagFilterDefaultOnly()
	wf, _ := d.p.(provider.WorkAckFetcher)
	var next *provider.LockedWorkItem // fetched by the last ack (ack-and-fetch-next)
	for ctx.Err() == nil {
		start := time.Now()
		item, err := next, error(nil)
		if item == nil {
			item, err = d.p.FetchWorkItem(ctx, workerLockTimeout, poll, nil, tags)
		}
		next = nil
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.noteErr("fetch_work_item", err)
			d.permanentFailure("fetch_work_item", err, &consecutive)
			sleepCtx(ctx, backoff(failures))
			failures++
			continue
		}
		failures = 0
		if item == nil {
			sleepCtx(ctx, minPollInterval-time.Since(start))
			continue
		}
		ae, ok := item.Item.Kind.(provider.ActivityExecute)
		if !ok {
			d.noteErr("fetch_work_item", fmt.Errorf("unexpected %s on the worker queue", item.Item.Variant()))
			continue
		}
		sleepCtx(ctx, d.actDelay)
		completion := provider.WorkItem{Kind: provider.ActivityCompleted{Instance: ae.Instance,
			ExecutionID: ae.ExecutionID, ID: ae.ID, Result: d.result}}
		for attempt := 0; ; attempt++ {
			if wf != nil {
				next, err = wf.AckWorkItemAndFetch(ctx, item.LockToken, &completion, workerLockTimeout, nil, tags, provider.FetchOptions{NextPoll: poll})
			} else {
				err = d.p.AckWorkItem(ctx, item.LockToken, &completion)
			}
			if err == nil || !provider.IsRetryable(err) || attempt == ackRetries {
				break
			}
			sleepCtx(ctx, 10*time.Millisecond<<attempt)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.noteErr("ack_work_item", err)
			d.permanentFailure("ack_work_item", err, &consecutive)
			continue
		}
		consecutive = 0
		d.activities.Add(1)
	}
}
