package dx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/provider"
)

// Options configures a Runtime. The zero value is usable: every field has duroxide's default.
type Options struct {
	// OrchestrationConcurrency is the number of orchestration turns run at once (default 2).
	OrchestrationConcurrency int
	// WorkerConcurrency is the number of activities run at once (default 2).
	WorkerConcurrency int
	// OrchestrationLockTimeout is how long a fetched orchestration item stays locked (default 5 s).
	OrchestrationLockTimeout time.Duration
	// WorkerLockTimeout is how long a fetched activity stays locked (default 30 s).
	WorkerLockTimeout time.Duration
	// PollTimeout bounds each long-polling fetch (duroxide's dispatcher_long_poll_timeout,
	// default 30 s); it is also how long Shutdown may wait for an idle fetch to return.
	PollTimeout time.Duration
	// MinPollInterval is the least time between two fetches that found nothing (default 100 ms);
	// it matters for providers that do not long-poll.
	MinPollInterval time.Duration
	// MaxAttempts: an item fetched more often than this is poison and fails (default 10).
	MaxAttempts uint32
	// UnregisteredBackoff is the first delay before an item whose orchestration or activity is not
	// registered here is retried (doubling, at most UnregisteredBackoffMax; defaults 1 s and 60 s),
	// so that during a rolling deployment a node with the handler can take it.
	UnregisteredBackoff, UnregisteredBackoffMax time.Duration
	// WorkerTagFilter selects the activities this runtime runs by tag (default: untagged only).
	WorkerTagFilter provider.TagFilter
	// SessionLockTimeout is how long a claimed activity session stays owned (default 30 s).
	SessionLockTimeout time.Duration
	// NodeID identifies this process as a session owner (default: a random id).
	NodeID string
	// BlockingGuard fails an orchestration whose code does not hand control back to dx within it
	// (it waits on a channel, a lock, time.Sleep...) instead of hanging a dispatcher forever.
	// Default 5 s; negative disables the guard.
	BlockingGuard time.Duration
	// Logger receives the runtime's records (default slog.Default()).
	Logger *slog.Logger
	// Clock is the runtime's clock, used for timers and event timestamps (default time.Now).
	Clock func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.OrchestrationConcurrency <= 0 {
		o.OrchestrationConcurrency = 2
	}
	if o.WorkerConcurrency <= 0 {
		o.WorkerConcurrency = 2
	}
	def(&o.OrchestrationLockTimeout, 5*time.Second)
	def(&o.WorkerLockTimeout, 30*time.Second)
	def(&o.PollTimeout, 30*time.Second)
	def(&o.MinPollInterval, 100*time.Millisecond)
	def(&o.UnregisteredBackoff, time.Second)
	def(&o.UnregisteredBackoffMax, time.Minute)
	def(&o.SessionLockTimeout, 30*time.Second)
	def(&o.BlockingGuard, 5*time.Second)
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 10
	}
	if o.NodeID == "" {
		o.NodeID = "dx-" + uuid.NewString()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// Runtime runs registered orchestrations and activities on a provider: it fetches orchestration
// turns and activities, runs them and acknowledges the results. Register everything before Start.
type Runtime struct {
	p    provider.Provider
	opts Options
	reg  *registry

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	running bool
}

// NewRuntime returns a runtime over p (any provider.Provider, such as redisprovider's).
func NewRuntime(p provider.Provider, opts Options) *Runtime {
	return &Runtime{p: p, opts: opts.withDefaults(), reg: newRegistry()}
}

// ErrRunning is returned by Start when the runtime is already running.
var ErrRunning = errors.New("dx: runtime already started")

// Start starts the dispatchers in the background and returns at once. They stop when ctx ends or
// Shutdown is called.
func (rt *Runtime) Start(ctx context.Context) error {
	if err := rt.opts.WorkerTagFilter.Validate(); err != nil {
		return fmt.Errorf("dx: Options.WorkerTagFilter: %w", err)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.running {
		return ErrRunning
	}
	rt.running = true
	ctx, cancel := context.WithCancel(ctx)
	rt.cancel = cancel
	rt.wg.Add(rt.opts.OrchestrationConcurrency + rt.opts.WorkerConcurrency)
	for range rt.opts.OrchestrationConcurrency {
		go func() { defer rt.wg.Done(); rt.orchestrationLoop(ctx) }()
	}
	for range rt.opts.WorkerConcurrency {
		go func() { defer rt.wg.Done(); rt.workerLoop(ctx) }()
	}
	return nil
}

// Run starts the runtime and blocks until ctx ends, then shuts down, giving in-flight work up to
// the orchestration lock timeout to finish.
func (rt *Runtime) Run(ctx context.Context) error {
	if err := rt.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), rt.opts.OrchestrationLockTimeout)
	defer cancel()
	return rt.Shutdown(sctx)
}

// Shutdown stops fetching and waits for the dispatchers to return, at most until ctx ends. A turn or
// activity still running then is left to its lock: another process takes it after the lock expires.
func (rt *Runtime) Shutdown(ctx context.Context) error {
	rt.mu.Lock()
	cancel := rt.cancel
	rt.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	done := make(chan struct{})
	go func() { rt.wg.Wait(); close(done) }()
	select {
	case <-done:
		rt.mu.Lock()
		rt.running, rt.cancel = false, nil
		rt.mu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// capabilityFilter is sent on every orchestration fetch: executions pinned to a duroxide version
// this engine reproduces.
var capabilityFilter = func() *provider.DispatcherCapabilityFilter {
	r, err := provider.NewSemverRange("0.0.0", DuroxideVersion)
	if err != nil {
		panic(err)
	}
	return &provider.DispatcherCapabilityFilter{SupportedDuroxideVersions: []provider.SemverRange{r}}
}()

// pollLoop runs fetch until ctx ends, keeping MinPollInterval between fetches that found nothing
// and backing off after errors.
func (rt *Runtime) pollLoop(ctx context.Context, what string, fetch func() (bool, error)) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		found, err := fetch()
		switch {
		case err != nil && ctx.Err() == nil:
			rt.opts.Logger.Warn("dx: fetch failed", "queue", what, "error", err, "retry_in", backoff)
			sleep(ctx, backoff)
			backoff = min(backoff*2, 5*time.Second)
			continue
		case !found:
			sleep(ctx, rt.opts.MinPollInterval-time.Since(began))
		}
		backoff = 50 * time.Millisecond
	}
}

func sleep(ctx context.Context, d time.Duration) {
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

func (rt *Runtime) orchestrationLoop(ctx context.Context) {
	rt.pollLoop(ctx, "orchestrator", func() (bool, error) {
		item, err := rt.p.FetchOrchestrationItem(ctx, rt.opts.OrchestrationLockTimeout, rt.opts.PollTimeout, capabilityFilter)
		if err != nil || item == nil {
			return false, err
		}
		rt.processOrchestration(ctx, item)
		return true, nil
	})
}

func (rt *Runtime) turnEnv() turnEnv {
	return turnEnv{reg: rt.reg, clock: rt.opts.Clock, guard: rt.opts.BlockingGuard, logger: rt.opts.Logger}
}

// processOrchestration runs one fetched turn and acknowledges it.
func (rt *Runtime) processOrchestration(ctx context.Context, locked *provider.LockedOrchestrationItem) {
	item := &locked.Item
	log := rt.opts.Logger.With("instance", item.Instance, "execution", item.ExecutionID,
		"orchestration", item.OrchestrationName, "attempt", locked.AttemptCount)
	// Work the runtime outlives: acks and abandons must not be cut short by a shutdown.
	bg := context.WithoutCancel(ctx)
	if locked.AttemptCount > rt.opts.MaxAttempts {
		log.Error("dx: orchestration item exceeded max attempts: failing it as poison", "max_attempts", rt.opts.MaxAttempts)
		rt.ackWithRetry(bg, log, locked.LockToken, rt.poisonAck(item, locked.AttemptCount))
		return
	}
	if item.HistoryError != "" {
		log.Warn("dx: history does not decode; abandoning so a newer node may take it", "error", item.HistoryError)
		rt.abandon(bg, log, locked.LockToken, time.Second)
		return
	}
	out := runTurn(rt.turnEnv(), item)
	if out.plan == planAbandon {
		delay := rt.unregisteredDelay(locked.AttemptCount)
		log.Warn("dx: orchestration not registered on this node; abandoning with backoff",
			"version", out.version, "retry_in", delay, "attempts_left", int(rt.opts.MaxAttempts)-int(locked.AttemptCount))
		rt.abandon(bg, log, locked.LockToken, delay)
		return
	}
	if o := out.outcome; o.panic != nil {
		log.Error("dx: orchestration panicked", "error", displayMessage(o.details), "stack", string(o.panic))
	}
	if !rt.ackWithRetry(bg, log, locked.LockToken, out.ack) {
		rt.abandon(bg, log, locked.LockToken, 50*time.Millisecond)
		return
	}
	if out.terminal && out.ack.Metadata.Status != "" {
		log.Debug("dx: orchestration turn ended the execution", "status", out.ack.Metadata.Status)
	}
}

func (rt *Runtime) unregisteredDelay(attempt uint32) time.Duration {
	d := rt.opts.UnregisteredBackoff
	for i := uint32(1); i < attempt && d < rt.opts.UnregisteredBackoffMax; i++ {
		d *= 2
	}
	return min(d, rt.opts.UnregisteredBackoffMax)
}

// ackWithRetry acknowledges a turn, retrying retryable failures with the same token.
func (rt *Runtime) ackWithRetry(ctx context.Context, log *slog.Logger, token string, ack provider.OrchestrationAck) bool {
	const attempts = 5
	for i := 1; ; i++ {
		err := rt.p.AckOrchestrationItem(ctx, token, ack)
		if err == nil {
			return true
		}
		if !provider.IsRetryable(err) || i == attempts {
			log.Error("dx: orchestration ack failed", "error", err)
			return false
		}
		log.Warn("dx: orchestration ack failed, retrying", "error", err, "try", i)
		time.Sleep(time.Duration(i) * 20 * time.Millisecond)
	}
}

func (rt *Runtime) abandon(ctx context.Context, log *slog.Logger, token string, delay time.Duration) {
	if err := rt.p.AbandonOrchestrationItem(ctx, token, delay, false); err != nil {
		log.Warn("dx: abandon failed; the lock expires instead", "error", err)
	}
}

// poisonAck fails an execution whose item was fetched more than MaxAttempts times.
func (rt *Runtime) poisonAck(item *provider.OrchestrationItem, attempts uint32) provider.OrchestrationAck {
	d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: attempts, MaxAttempts: rt.opts.MaxAttempts,
		MessageType: provider.PoisonMessageType{Kind: provider.PoisonOrchestration{Instance: item.Instance, ExecutionID: item.ExecutionID}},
		Message:     fmt.Sprintf("orchestration %s was fetched %d times without completing a turn", item.Instance, attempts)}}
	return failAck(rt.turnEnv(), item.Instance, item.ExecutionID, item.History, d)
}

func (rt *Runtime) workerLoop(ctx context.Context) {
	session := &provider.SessionFetchConfig{OwnerID: rt.opts.NodeID, LockTimeout: rt.opts.SessionLockTimeout}
	rt.pollLoop(ctx, "worker", func() (bool, error) {
		item, err := rt.p.FetchWorkItem(ctx, rt.opts.WorkerLockTimeout, rt.opts.PollTimeout, session, rt.opts.WorkerTagFilter)
		if err != nil || item == nil {
			return false, err
		}
		rt.processActivity(ctx, item)
		return true, nil
	})
}

// processActivity runs one fetched activity and acknowledges its completion.
func (rt *Runtime) processActivity(ctx context.Context, locked *provider.LockedWorkItem) {
	bg := context.WithoutCancel(ctx)
	act, ok := locked.Item.Kind.(provider.ActivityExecute)
	if !ok {
		rt.opts.Logger.Error("dx: worker queue holds a non-activity item; dropping it", "variant", locked.Item.Kind.Variant())
		_ = rt.p.AckWorkItem(bg, locked.LockToken, nil)
		return
	}
	log := rt.opts.Logger.With("instance", act.Instance, "execution", act.ExecutionID, "activity", act.Name,
		"activity_id", act.ID, "attempt", locked.AttemptCount)
	if locked.AttemptCount > rt.opts.MaxAttempts {
		log.Error("dx: activity exceeded max attempts: failing it as poison", "max_attempts", rt.opts.MaxAttempts)
		d := provider.ErrorDetails{Kind: provider.PoisonError{AttemptCount: locked.AttemptCount, MaxAttempts: rt.opts.MaxAttempts,
			MessageType: provider.PoisonMessageType{Kind: provider.PoisonActivity{Instance: act.Instance, ExecutionID: act.ExecutionID,
				ActivityName: act.Name, ActivityID: act.ID}},
			Message: fmt.Sprintf("activity %s#%d was fetched %d times without completing", act.Name, act.ID, locked.AttemptCount)}}
		rt.ackActivity(bg, log, locked.LockToken, act, "", &d)
		return
	}
	fn, ok := rt.activityFunc(act.Name)
	if !ok {
		delay := rt.unregisteredDelay(locked.AttemptCount)
		log.Warn("dx: activity not registered on this node; abandoning with backoff", "retry_in", delay)
		if err := rt.p.AbandonWorkItem(bg, locked.LockToken, delay, false); err != nil {
			log.Warn("dx: abandon failed; the lock expires instead", "error", err)
		}
		return
	}
	result, err := runActivity(ctx, fn, act.Input)
	if err != nil {
		d := activityErrorDetails(err)
		rt.ackActivity(bg, log, locked.LockToken, act, "", &d)
		return
	}
	rt.ackActivity(bg, log, locked.LockToken, act, result, nil)
}

func (rt *Runtime) ackActivity(ctx context.Context, log *slog.Logger, token string, act provider.ActivityExecute, result string, d *provider.ErrorDetails) {
	var c provider.WorkItem
	if d != nil {
		c = provider.WorkItem{Kind: provider.ActivityFailed{Instance: act.Instance, ExecutionID: act.ExecutionID, ID: act.ID, Details: *d}}
	} else {
		c = provider.WorkItem{Kind: provider.ActivityCompleted{Instance: act.Instance, ExecutionID: act.ExecutionID, ID: act.ID, Result: result}}
	}
	for i := 1; ; i++ {
		err := rt.p.AckWorkItem(ctx, token, &c)
		if err == nil {
			return
		}
		if !provider.IsRetryable(err) || i == 5 {
			log.Warn("dx: activity ack failed; its result is dropped (the activity may run again)", "error", err)
			return
		}
		time.Sleep(time.Duration(i) * 20 * time.Millisecond)
	}
}

// panicError is an activity's panic.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("activity panicked: %v", p.value) }

// runActivity runs an activity, turning a panic into an error.
func runActivity(ctx context.Context, fn activityFunc, input string) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: debug.Stack()}
		}
	}()
	return fn(ctx, input)
}

// activityErrorDetails maps an activity's error to what its ActivityFailed records.
func activityErrorDetails(err error) provider.ErrorDetails {
	var p *panicError
	if errors.As(err, &p) {
		return appError(provider.AppPanicked, fmt.Sprint(p.value))
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
