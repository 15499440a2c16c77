package dx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/provider"
)

// The worker dispatcher: fetch an activity, run it with its lock renewed, acknowledge its result.

// workerLoop starts the worker's pollers (dispatch); each activity fetched runs, and its ack
// hands over the next one (ack-and-fetch): no fetch in between. A poller with several free slots
// fetches an activity for each in one call where the provider can (provider.WorkBatchFetcher),
// taking only what waits: it never waits for more than one.
func (rt *Runtime) workerLoop(ctx, workCtx context.Context) {
	bf, _ := rt.p.(provider.WorkBatchFetcher)
	batch := 1
	if bf != nil {
		batch = min(rt.opts.WorkerConcurrency, maxFetchBatch)
	}
	dispatch(rt, ctx, "worker", rt.opts.WorkerPollers, rt.opts.WorkerConcurrency, batch, func(n int) ([]*provider.LockedWorkItem, error) {
		began := time.Now()
		var items []*provider.LockedWorkItem
		var err error
		session, n := rt.sessionFetch(n)
		if n > 1 {
			items, err = bf.FetchWorkItems(ctx, provider.WorkFetch{N: n, LockTimeout: rt.opts.WorkerLockTimeout,
				Session: session, Tags: rt.opts.WorkerTagFilter}, rt.opts.PollTimeout)
		} else {
			var item *provider.LockedWorkItem
			if item, err = rt.p.FetchWorkItem(ctx, rt.opts.WorkerLockTimeout, rt.opts.PollTimeout, session, rt.opts.WorkerTagFilter); item != nil {
				items = []*provider.LockedWorkItem{item}
			}
		}
		rt.opts.Metrics.Observe(MetricFetchWait, time.Since(began), Labels{Queue: "worker"})
		if slices.ContainsFunc(items, func(it *provider.LockedWorkItem) bool {
			a, ok := it.Item.Kind.(provider.ActivityExecute)
			return ok && a.SessionID != nil
		}) {
			rt.mu.Lock()
			rt.sessionsSeen = true // before this poller's next fetch (sessionFetch)
			rt.mu.Unlock()
		}
		return items, err
	}, func(item *provider.LockedWorkItem) {
		for at := time.Now(); item != nil; {
			item, at = rt.processActivity(ctx, workCtx, item, at)
		}
	})
}

// maxFetchBatch is the most activities one fetch locks.
const maxFetchBatch = 32

// processActivity runs one fetched activity (fetched at at) and acknowledges its completion; it
// returns the next activity, and when it was fetched, when the acknowledgement fetched one
// (provider.WorkAckFetcher). fetchCtx ends when the runtime stops fetching; workCtx only when a
// shutdown gives up waiting.
func (rt *Runtime) processActivity(fetchCtx, workCtx context.Context, locked *provider.LockedWorkItem, at time.Time) (*provider.LockedWorkItem, time.Time) {
	bg := context.WithoutCancel(workCtx)
	token := locked.LockToken
	if fetchCtx.Err() != nil {
		// Shutting down: an activity handed over by the last ack goes back at once.
		_ = rt.p.AbandonWorkItem(bg, token, 0, true)
		return nil, time.Time{}
	}
	act, ok := locked.Item.Kind.(provider.ActivityExecute)
	if !ok {
		rt.opts.Logger.Error("dx: worker queue holds a non-activity item; dropping it", "variant", locked.Item.Kind.Variant())
		_ = rt.p.AckWorkItem(bg, token, nil)
		return nil, time.Time{}
	}
	var logger *slog.Logger // built only when a record is logged
	log := func() *slog.Logger {
		if logger == nil {
			logger = rt.opts.Logger.With("instance", act.Instance, "execution", act.ExecutionID, "activity", act.Name,
				"activity_id", act.ID, "delivery", locked.AttemptCount)
		}
		return logger
	}
	labels := Labels{Activity: act.Name}
	held := newLease(at, rt.opts.WorkerLockTimeout)
	if locked.AttemptCount > rt.opts.MaxAttempts {
		pl := Labels{Queue: "worker", Activity: act.Name}
		if _, ok := rt.activityFunc(act.Name); ok {
			log().Error("dx: activity exceeded max attempts: failing it as poison", "max_deliveries", rt.opts.MaxAttempts)
		} else {
			pl.Result = "not_registered"
			log().Error("dx: activity not registered: failing it as poison after max attempts (no runtime took it); register it, or check the name",
				"max_deliveries", rt.opts.MaxAttempts)
		}
		d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: locked.AttemptCount, MaxAttempts: rt.opts.MaxAttempts,
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: act.Instance, ExecutionID: act.ExecutionID,
				ActivityName: act.Name, ActivityID: act.ID}},
			Message: poisonMessage(provider.WorkItem{Kind: act})}}
		if pk, ok := rt.p.(deadLetters); ok && rt.opts.OnPoison == HoldPoison {
			if err := pk.ParkWorkItem(bg, token, d); err != nil {
				log().Warn("dx: parking the poison activity failed; its lock expires and it comes back", "error", err)
				return nil, time.Time{}
			}
			log().Warn("dx: activity parked as a dead letter instead of failing (OnPoison: HoldPoison); redrive or discard it (dxctl dead)")
			rt.opts.Metrics.Count(MetricPoison, 1, Labels{Queue: "worker", Activity: act.Name, Result: "held"})
			return nil, time.Time{}
		}
		rt.opts.Metrics.Count(MetricPoison, 1, pl)
		return rt.ackActivity(fetchCtx, log, held, nil, token, act, "", &d, labels)
	}
	fn, ok := rt.activityFunc(act.Name)
	if !ok {
		delay := rt.unregisteredDelay(locked.AttemptCount)
		rt.reportUnregistered(log(), "activity", act.Name, "")
		log().Debug("dx: activity not registered on this node; abandoning with backoff", "retry_in", delay,
			"deliveries_left", int(rt.opts.MaxAttempts)-int(locked.AttemptCount))
		rt.opts.Metrics.Count(MetricUnregistered, 1, Labels{Queue: "worker", Activity: act.Name})
		if err := rt.p.AbandonWorkItem(bg, token, delay, false); err != nil {
			log().Warn("dx: abandon failed; the lock expires instead", "error", err)
		}
		return nil, time.Time{}
	}

	if sid := act.SessionID; sid != nil {
		if !rt.enterSession(*sid) {
			log().Debug("dx: session capacity reached after the fetch; abandoning the activity for a moment", "session", *sid)
			_ = rt.p.AbandonWorkItem(bg, token, 100*time.Millisecond, true)
			return nil, time.Time{}
		}
		defer rt.leaveSession(*sid)
	}

	actCtx, cancel := context.WithCancelCause(workCtx)
	defer cancel(nil)
	fl, finish := rt.track(func(c context.Context) {
		cancel(errShutdown)
		if err := rt.p.AbandonWorkItem(c, token, 0, true); err != nil {
			log().Warn("dx: abandon failed; the lock expires instead", "error", err)
		}
	})
	defer finish()
	// A renewal refused for good means the lock was stolen (the orchestration cancelled the
	// activity, or finished) or expired; so does a lease that ended while renewals failed with
	// retryable errors (Redis unreachable): the activity's context is cancelled and its result will
	// be dropped. A transient failure while the lease is valid is only retried.
	lost := make(chan error, 1)
	stopRenew := renewing(held, renewEvery(rt.opts.WorkerLockTimeout, rt.opts.WorkerLockRenewalBuffer),
		func() error { return rt.p.RenewWorkItemLock(bg, token, rt.opts.WorkerLockTimeout) },
		func(err error) { lost <- err; cancel(fmt.Errorf("%w: %v", errLockLost, err)) })
	defer stopRenew()

	done := make(chan activityResult, 1)
	began := time.Now()
	if rt.opts.Logger.Enabled(bg, slog.LevelDebug) {
		log().Debug("dx: activity started")
	}
	go func() {
		out, err := runActivity(actCtx, fn, act.Input)
		done <- activityResult{out, err}
	}()
	var r activityResult
	select {
	case r = <-done:
	case err := <-lost:
		log().Warn("dx: activity lock lost (cancelled, or taken over); cancelling it and dropping its result", "error", err)
		rt.awaitCancelled(log(), done)
		rt.opts.Metrics.Count(MetricActivities, 1, Labels{Activity: act.Name, Result: "dropped"})
		return nil, time.Time{}
	}
	elapsed := time.Since(began)
	if !rt.owned(fl) {
		log().Warn("dx: activity finished after shutdown abandoned it; its result is dropped (it runs again elsewhere)")
		return nil, time.Time{}
	}
	if r.err != nil {
		d := activityErrorDetails(r.err, act.ID)
		labels.Result = "failed"
		var p *panicError
		if errors.As(r.err, &p) {
			labels.Result = "panicked"
			log().Error("dx: activity panicked", "error", p.value, "stack", string(p.stack))
		} else {
			log().Info("dx: activity failed", "error", r.err, "duration", elapsed)
		}
		rt.opts.Metrics.Observe(MetricActivityDuration, elapsed, labels)
		return rt.ackActivity(fetchCtx, log, held, fl, token, act, "", &d, labels)
	}
	labels.Result = "ok"
	if rt.opts.Logger.Enabled(bg, slog.LevelDebug) {
		log().Debug("dx: activity completed", "duration", elapsed)
	}
	rt.opts.Metrics.Observe(MetricActivityDuration, elapsed, labels)
	return rt.ackActivity(fetchCtx, log, held, fl, token, act, r.out, nil, labels)
}

var (
	errLockLost  = errors.New("dx: activity lock lost")
	errShutdown  = errors.New("dx: runtime shutting down")
	errGraceOver = errors.New("dx: activity ignored its cancelled context past the grace period")
)

// awaitCancelled gives a cancelled activity the grace period to return.
func (rt *Runtime) awaitCancelled(log *slog.Logger, done <-chan activityResult) {
	t := time.NewTimer(rt.opts.ActivityCancellationGracePeriod)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		log.Error(errGraceOver.Error(), "grace_period", rt.opts.ActivityCancellationGracePeriod)
	}
}

// ackActivity acknowledges an activity's completion. A retryable failure is retried for as long
// as the activity's lock is held (see lease) and shutdown has not abandoned the activity (fl; a
// poison item has none: while the runtime still fetches), with one attempt id for all tries
// (provider.WithAttemptID), so that a try whose reply was lost is recognised as done by the next.
// With a provider that fetches in the same call (provider.WorkAckFetcher) it returns the next
// activity and when it was fetched, unless the runtime is shutting down or the ack went in a batch
// with others (provider.WorkBatchAcker; see ackbatch.go).
func (rt *Runtime) ackActivity(fetchCtx context.Context, log func() *slog.Logger, held *lease, fl *flight, token string,
	act provider.ActivityExecute, result string, d *provider.ErrorDetails, labels Labels) (*provider.LockedWorkItem, time.Time) {
	bg, attemptID := context.WithoutCancel(fetchCtx), uuid.NewString()
	var c provider.WorkItem
	if d != nil {
		c = provider.WorkItem{Kind: provider.ActivityFailed{Instance: act.Instance, ExecutionID: act.ExecutionID, ID: act.ID, Details: *d}}
	} else {
		c = provider.WorkItem{Kind: provider.ActivityCompleted{Instance: act.Instance, ExecutionID: act.ExecutionID, ID: act.ID, Result: result}}
	}
	af, fetchNext := rt.p.(provider.WorkAckFetcher)
	var unknown bool // a try may have committed although it failed (its reply was lost)
	for try := 1; ; try++ {
		next, err := rt.ackWork(fetchCtx, bg, token, &c, attemptID, try, func(ctx context.Context) (*provider.LockedWorkItem, error) {
			if fetchNext && fetchCtx.Err() == nil {
				return af.AckWorkItemAndFetch(ctx, token, &c, rt.opts.WorkerLockTimeout, rt.sessionConfig(), rt.opts.WorkerTagFilter,
					provider.FetchOptions{NextPoll: rt.opts.PollTimeout})
			}
			return nil, rt.p.AckWorkItem(ctx, token, &c)
		})
		if err == nil {
			rt.opts.Metrics.Count(MetricActivities, 1, labels)
			if try > 1 {
				log().Info("dx: activity ack succeeded after retries", "tries", try)
			}
			return next, time.Now()
		}
		rt.opts.Metrics.Count(MetricAckFailures, 1, Labels{Queue: "worker", Activity: act.Name})
		if _, ok := c.Kind.(provider.ActivityCompleted); ok && errors.Is(err, provider.ErrInvalidInput) {
			// The store refuses the result (e.g. over its size limit): the activity fails instead
			// of running again and again.
			log().Warn("dx: the store refused the activity's result; failing the activity", "error", err)
			c = provider.WorkItem{Kind: provider.ActivityFailed{Instance: act.Instance, ExecutionID: act.ExecutionID, ID: act.ID,
				Details: appError(provider.AppActivityFailed, "the activity's result was refused by the store: "+err.Error())}}
			continue
		}
		unknown = unknown || errors.Is(err, provider.ErrOutcomeUnknown)
		if (fl == nil && fetchCtx.Err() == nil) || (fl != nil && rt.owned(fl)) {
			if try == 1 && provider.IsRetryable(err) {
				log().Warn("dx: activity ack failed; retrying while its lock is held", "error", err, "lock_left", held.left())
			}
			if held.retryAfter(err, try) {
				continue
			}
		}
		switch {
		case unknown && errors.Is(err, provider.ErrInvalidLockToken):
			log().Warn("dx: activity ack: an earlier try whose reply was lost probably committed it (its lock is gone)", "error", err, "tries", try)
		case provider.IsRetryable(err):
			log().Warn("dx: activity ack failed until its lock expired; its result is dropped (the activity runs again)", "error", err, "tries", try)
		default:
			log().Warn("dx: activity ack refused; its result is dropped (the activity may run again)", "error", err, "tries", try)
		}
		return nil, time.Time{}
	}
}

// sessionConfig is the session part of a worker fetch: none while this runtime runs activities of
// MaxSessionsPerRuntime distinct sessions, so that it takes only activities without a session.
func (rt *Runtime) sessionConfig() *provider.SessionFetchConfig {
	s, _ := rt.sessionFetch(1)
	return s
}

// sessionFetch is the session part of a fetch of up to n activities, and how many to fetch. Once
// this runtime has fetched an activity of a session, at most as many as it has room for more sessions,
// since each may claim a session of its own (enterSession would refuse those beyond the room, and
// they would go back to the queue); a runtime that never saw one (most) batches freely.
func (rt *Runtime) sessionFetch(n int) (*provider.SessionFetchConfig, int) {
	rt.mu.Lock()
	room, seen := rt.opts.MaxSessionsPerRuntime-len(rt.sessions), rt.sessionsSeen
	rt.mu.Unlock()
	if room <= 0 {
		return nil, n
	}
	if seen {
		n = min(n, room)
	}
	return &provider.SessionFetchConfig{OwnerID: rt.opts.NodeID, LockTimeout: rt.opts.SessionLockTimeout}, n
}

// enterSession counts an activity of session id in progress; it reports false (and counts
// nothing) when that would exceed MaxSessionsPerRuntime, as when two slots raced past the check.
func (rt *Runtime) enterSession(id string) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.sessionsSeen = true
	if _, ok := rt.sessions[id]; !ok && len(rt.sessions) >= rt.opts.MaxSessionsPerRuntime {
		return false
	}
	rt.sessions[id]++
	return true
}

func (rt *Runtime) leaveSession(id string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.sessions[id]--; rt.sessions[id] <= 0 {
		delete(rt.sessions, id)
	}
}

type activityResult struct {
	out string
	err error
}

// panicError is an activity's panic.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("activity panicked: %v", p.value) }

// deadLetters is a provider that parks poison activities (redisprovider: Options.OnPoison HoldPoison).
type deadLetters interface {
	ParkWorkItem(ctx context.Context, lockToken string, failure provider.ErrorDetails) error
}

// poisonMessage is a Poison error's message: the poisoned work item as JSON, as duroxide writes it.
func poisonMessage(item any) string {
	b, _ := provider.Marshal(item)
	return string(b)
}

// runActivity runs an activity, turning a panic into an error.
func runActivity(ctx context.Context, fn activityFunc, input string) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return fn(ctx, input)
}

// activityErrorDetails maps an activity's error to what its ActivityFailed records. A panic is an
// ordinary activity failure, worded as duroxide's (its activities run as tasks, whose join error
// it records: "task <id> panicked with message ..."; the task id here is the activity's id). A
// Permanent error's message gets permanentMark in front (see Permanent).
func activityErrorDetails(err error, id uint64) provider.ErrorDetails {
	var p *panicError
	if errors.As(err, &p) {
		return appError(provider.AppActivityFailed, fmt.Sprintf("task %d panicked with message %q", id, fmt.Sprint(p.value)))
	}
	var perm *permanentError
	if errors.As(err, &perm) {
		return appError(provider.AppActivityFailed, permanentMark+err.Error())
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Details
	}
	return appError(provider.AppActivityFailed, err.Error())
}

// activityFunc finds an activity, including the builtins duroxide's runtime provides.
func (rt *Runtime) activityFunc(name string) (activityFunc, bool) {
	if fn, ok := rt.reg.activity(name); ok {
		return fn, true
	}
	switch name {
	case syscallNewGUID:
		return func(context.Context, string) (string, error) { return uuid.NewString(), nil }, true
	case syscallUtcNowMs:
		return func(context.Context, string) (string, error) {
			return strconv.FormatInt(rt.opts.Clock().UnixMilli(), 10), nil
		}, true
	case syscallGetKVValue:
		return rt.getKVValue, true
	case schedulePlanActivity:
		return rt.schedulePlan, true
	case scheduleCancelActivity:
		return rt.scheduleCancel, true
	}
	return nil, false
}

func (rt *Runtime) getKVValue(ctx context.Context, input string) (string, error) {
	in, err := decode[struct {
		InstanceID string `json:"instance_id"`
		Key        string `json:"key"`
	}](input)
	if err != nil {
		return "", err
	}
	v, ok, err := rt.p.GetKVValue(ctx, in.InstanceID, in.Key)
	if err != nil {
		if errors.Is(err, provider.ErrNotFound) {
			return "null", nil
		}
		return "", err
	}
	if !ok {
		return "null", nil
	}
	return encode(v)
}

// attemptContext marks ctx with an ack's attempt id (one per ack, the same for all its tries): the
// first try says so, so the provider does not look for an earlier run (provider.WithFirstAttemptID).
func attemptContext(ctx context.Context, id string, try int) context.Context {
	if try == 1 {
		return provider.WithFirstAttemptID(ctx, id)
	}
	return provider.WithAttemptID(ctx, id)
}
