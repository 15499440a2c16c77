package dx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/provider"
)

// Options configures a Runtime. The zero value is usable: every field has duroxide's default.
type Options struct {
	// OrchestrationConcurrency is the number of orchestration turns run at once (default 2).
	OrchestrationConcurrency int
	// WorkerConcurrency is the number of activities run at once (default 32: activities mostly
	// wait on I/O, and a runtime waits for activities from WorkerPollers goroutines, not one per
	// slot; lower it for activities that keep a CPU busy).
	WorkerConcurrency int
	// OrchestrationPollers and WorkerPollers are how many goroutines wait for turns and for
	// activities, each holding a free slot of its queue's concurrency while it waits (default: the
	// concurrency, at most 4; at most the concurrency). A fetched item runs with that slot on a
	// goroutine of its own, and each acknowledgement fetches the next item in the same call, so a
	// busy slot needs no poller: a process that runs 64 activities at once long-polls Redis from 4
	// goroutines, not 64, and idle costs what 4 cost (as go-workflows' pollers and Temporal's
	// pollers and slots).
	OrchestrationPollers, WorkerPollers int
	// ActivityAckBatch is the most activity acknowledgements sent in one call: results that
	// become ready while another's acknowledgement is in flight go together when it returns, in
	// one call that also fetches an activity for each of their slots (provider.WorkBatchAcker;
	// redisprovider fetches only in a namespace of one partition). Nothing waits to fill a batch:
	// a lone result is acknowledged at once. 1 sends each on its own; 0 (default) picks: 32 when
	// WorkerConcurrency is at least 32 (its default), else 1. Batches cut the worker's calls but
	// split an orchestration's completions into more deliveries, so orchestrations run more
	// turns: with many slots they pay (dxbench W2 at 32 activities at once: round trips per
	// fan-out of ten 12.0 → 3.2-3.3, Redis commands 271-274 → 151-152, instructions 5.6 → 4.3 M,
	// 2.3 turns instead of 2.0), with few they cost (4 at once: 5.8-5.9 turns instead of 4.0); see
	// docs/storage-v2.md, "Issue 30, second round".
	ActivityAckBatch int
	// BatchActivityAcks true is ActivityAckBatch 32 (when ActivityAckBatch is 0).
	//
	// Deprecated: set ActivityAckBatch; batching is the default from 32 activity slots.
	BatchActivityAcks bool
	// OrchestrationLockTimeout is how long a fetched orchestration item stays locked (default 5 s);
	// a turn that runs longer renews its lock.
	OrchestrationLockTimeout time.Duration
	// OrchestrationLockRenewalBuffer: a lock of at least 15 s is renewed this long before it
	// expires (default 2 s); shorter locks are renewed at half their timeout.
	OrchestrationLockRenewalBuffer time.Duration
	// WorkerLockTimeout is how long a fetched activity stays locked (default 30 s); a running
	// activity renews its lock. Acks and renewals failing with a retryable error (Redis
	// restarting) are retried while the lock is valid (this timeout less a tenth, at most 1 s,
	// from the fetch or the last renewal); the same holds for turns and OrchestrationLockTimeout.
	WorkerLockTimeout time.Duration
	// WorkerLockRenewalBuffer is WorkerLockTimeout's renewal buffer (default 5 s).
	WorkerLockRenewalBuffer time.Duration
	// PollTimeout bounds each long-polling fetch (duroxide's dispatcher_long_poll_timeout,
	// default 30 s).
	PollTimeout time.Duration
	// MinPollInterval is the least time between two fetches that found nothing (default 100 ms);
	// it matters for providers that do not long-poll.
	MinPollInterval time.Duration
	// MaxAttempts: an item fetched more often than this is poison and fails (default 10). Logs
	// call the provider's count of an item's fetches "delivery" (and this limit "max_deliveries");
	// a RetryPolicy's attempts are "retry_attempt".
	MaxAttempts uint32
	// UnregisteredBackoff is the first delay before an item whose orchestration (or version) or
	// activity is not registered here is retried, doubling up to UnregisteredBackoffMax (defaults
	// 1 s and 60 s), so that during a rolling deployment a node with the handler takes it; after
	// MaxAttempts the item is poison.
	UnregisteredBackoff, UnregisteredBackoffMax time.Duration
	// ActivityCancellationGracePeriod is how long a cancelled activity (its lock lost or stolen,
	// or the runtime shutting down) may take to return once its context is cancelled (default 10 s).
	ActivityCancellationGracePeriod time.Duration
	// WorkerTagFilter selects the activities this runtime runs by tag (default: untagged only).
	WorkerTagFilter provider.TagFilter
	// SessionLockTimeout is how long a claimed activity session stays owned without renewal
	// (default 30 s); SessionLockRenewalBuffer is its renewal buffer (default 5 s).
	SessionLockTimeout, SessionLockRenewalBuffer time.Duration
	// SessionIdleTimeout releases a session nobody used for this long (default 5 min).
	SessionIdleTimeout time.Duration
	// MaxSessionsPerRuntime caps the distinct sessions this runtime runs activities of at once
	// (default 10); at the cap it fetches only activities without a session.
	MaxSessionsPerRuntime int
	// NodeID identifies this process as a session owner (default: a random id).
	NodeID string
	// BlockingGuard fails an orchestration whose code does not hand control back to dx within it
	// (it waits on a channel, a lock, time.Sleep...) instead of hanging a dispatcher forever.
	// Default 5 s; negative disables the guard.
	BlockingGuard time.Duration
	// ExecutorCacheSize is how many instances keep their live orchestration state between turns
	// (default 1000; negative disables the cache). A turn of a kept instance runs only its new
	// events instead of replaying the whole history; each kept instance holds its orchestration's
	// parked goroutines.
	ExecutorCacheSize int
	// ReplayCheckRate is the fraction of orchestration turns (0 to 1) that are run a second time
	// from a fresh replay of the stored history and compared with the turn before it is
	// acknowledged: a difference is nondeterminism (the code reads time.Now, a map's order, a
	// random number, a global...), handled as OnNondeterminism says. The executor cache otherwise
	// hides such code until a restart: a kept instance runs only its new events. Default 0 (no
	// checks, negative too): a checked turn costs a full replay, and with the default policy an
	// instance that a check catches fails where it would have completed (until its next replay).
	// dxtest checks every turn. 0.01 is a cheap way to learn of nondeterminism in production.
	ReplayCheckRate float64
	// ReplayCheckRuns is how many replays a checked turn is compared with (default 1). Code that
	// diverges only sometimes (a map of 8 keys is ranged in the same order once in 8) is caught
	// more surely by more runs; dxtest uses 4.
	ReplayCheckRuns int
	// OnNondeterminism is what a turn does when the code no longer reproduces the instance's
	// history (or a replay check catches it): FailOnNondeterminism (the default, duroxide's
	// behaviour) or HoldOnNondeterminism.
	OnNondeterminism NondeterminismPolicy
	// OnPoison is what happens to an activity fetched more often than MaxAttempts:
	// FailPoison (the default, duroxide's rule: it fails with a poison error) or HoldPoison: it is
	// parked as a dead letter (with the failure it would have recorded) and nothing is written to
	// its instance's history until an operator redrives or discards it (dxctl dead; the provider
	// must support it: redisprovider does, others fail it). An orchestration item past
	// MaxAttempts is held instead (provider.Holder, as HoldOnNondeterminism holds: nothing
	// written, looked at again every HoldRetryDelay without running its code) until redriven.
	OnPoison PoisonPolicy
	// HoldRetryDelay is how long a turn held for nondeterminism waits before it is tried again
	// (default 30 s).
	HoldRetryDelay time.Duration
	// Logger receives the runtime's records (default slog.Default()).
	Logger *slog.Logger
	// Metrics, when set, receives the runtime's measurements (see Metrics).
	Metrics Metrics
	// Clock is the runtime's clock, used for timers, event timestamps and UtcNow (default
	// time.Now). A test clock must move together with the provider's server clock.
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
		o.WorkerConcurrency = 32
	}
	if o.OrchestrationPollers <= 0 {
		o.OrchestrationPollers = min(o.OrchestrationConcurrency, 4)
	}
	if o.WorkerPollers <= 0 {
		o.WorkerPollers = min(o.WorkerConcurrency, 4)
	}
	if o.ActivityAckBatch == 0 {
		o.ActivityAckBatch = 1
		if o.WorkerConcurrency >= autoAckBatchSlots || o.BatchActivityAcks {
			o.ActivityAckBatch = 32
		}
	}
	def(&o.OrchestrationLockTimeout, 5*time.Second)
	def(&o.OrchestrationLockRenewalBuffer, 2*time.Second)
	def(&o.WorkerLockTimeout, 30*time.Second)
	def(&o.WorkerLockRenewalBuffer, 5*time.Second)
	def(&o.PollTimeout, 30*time.Second)
	def(&o.MinPollInterval, 100*time.Millisecond)
	def(&o.UnregisteredBackoff, time.Second)
	def(&o.UnregisteredBackoffMax, time.Minute)
	def(&o.ActivityCancellationGracePeriod, 10*time.Second)
	def(&o.SessionLockTimeout, 30*time.Second)
	def(&o.SessionLockRenewalBuffer, 5*time.Second)
	def(&o.SessionIdleTimeout, 5*time.Minute)
	def(&o.BlockingGuard, 5*time.Second)
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 10
	}
	if o.MaxSessionsPerRuntime <= 0 {
		o.MaxSessionsPerRuntime = 10
	}
	def(&o.HoldRetryDelay, 30*time.Second)
	if o.ReplayCheckRuns <= 0 {
		o.ReplayCheckRuns = 1
	}
	if o.ExecutorCacheSize == 0 {
		o.ExecutorCacheSize = 1000
	}
	if o.NodeID == "" {
		o.NodeID = "dx-" + uuid.NewString()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}

// validate refuses options that would leave the runtime unable to work (it would start and then
// fail every fetch, or spin).
func (o Options) validate() error {
	if o.OrchestrationPollers > o.OrchestrationConcurrency || o.WorkerPollers > o.WorkerConcurrency {
		return fmt.Errorf("dx: Options: %d orchestration pollers for %d turns at once, %d worker pollers for %d activities at once: a poller waits with a free slot, so pollers are at most the concurrency; raise OrchestrationConcurrency or WorkerConcurrency (%w)",
			o.OrchestrationPollers, o.OrchestrationConcurrency, o.WorkerPollers, o.WorkerConcurrency, ErrInvalidInput)
	}
	if o.ActivityAckBatch < 0 {
		return fmt.Errorf("dx: Options.ActivityAckBatch is %d: it is the most activity acknowledgements in one call, at least 1 (0: the default) (%w)", o.ActivityAckBatch, ErrInvalidInput)
	}
	if o.ReplayCheckRate > 1 || math.IsNaN(o.ReplayCheckRate) {
		return fmt.Errorf("dx: Options.ReplayCheckRate is %v: it is a fraction of turns, from 0 (none) to 1 (every turn) (%w)", o.ReplayCheckRate, ErrInvalidInput)
	}
	if o.OnPoison != FailPoison && o.OnPoison != HoldPoison {
		return fmt.Errorf("dx: Options.OnPoison is %d: use FailPoison or HoldPoison (%w)", o.OnPoison, ErrInvalidInput)
	}
	if o.OnNondeterminism != FailOnNondeterminism && o.OnNondeterminism != HoldOnNondeterminism {
		return fmt.Errorf("dx: Options.OnNondeterminism is %d: use FailOnNondeterminism or HoldOnNondeterminism (%w)", o.OnNondeterminism, ErrInvalidInput)
	}
	if err := o.WorkerTagFilter.Validate(); err != nil {
		return fmt.Errorf("dx: Options.WorkerTagFilter: %w", err)
	}
	for name, d := range map[string]time.Duration{
		"OrchestrationLockTimeout": o.OrchestrationLockTimeout, "OrchestrationLockRenewalBuffer": o.OrchestrationLockRenewalBuffer,
		"WorkerLockTimeout": o.WorkerLockTimeout, "WorkerLockRenewalBuffer": o.WorkerLockRenewalBuffer,
		"PollTimeout": o.PollTimeout, "MinPollInterval": o.MinPollInterval,
		"UnregisteredBackoff": o.UnregisteredBackoff, "UnregisteredBackoffMax": o.UnregisteredBackoffMax,
		"ActivityCancellationGracePeriod": o.ActivityCancellationGracePeriod, "SessionLockTimeout": o.SessionLockTimeout,
		"SessionLockRenewalBuffer": o.SessionLockRenewalBuffer, "SessionIdleTimeout": o.SessionIdleTimeout,
		"HoldRetryDelay": o.HoldRetryDelay,
	} {
		if d < 0 {
			return fmt.Errorf("dx: Options.%s is negative (%v): use 0 for the default (%w)", name, d, ErrInvalidInput)
		}
	}
	return nil
}

// renewEvery is duroxide's renewal interval: timeout − buffer for locks of 15 s or more, else half
// the timeout.
func renewEvery(timeout, buffer time.Duration) time.Duration {
	if timeout >= 15*time.Second && buffer < timeout {
		return timeout - buffer
	}
	return max(timeout/2, time.Millisecond)
}

// Runtime runs registered orchestrations and activities on a provider: it fetches orchestration
// turns and activities, runs them and acknowledges the results. Register everything before Start.
type Runtime struct {
	p     provider.Provider
	opts  Options
	reg   *registry
	cache *engineCache

	mu           sync.Mutex
	stop         context.CancelFunc // stops fetching
	abort        context.CancelFunc // cancels running activities (Shutdown's deadline)
	loops        sync.WaitGroup     // dispatcher loops
	running      bool
	quit         chan struct{} // closed by Shutdown: the goroutine watching Start's ctx returns
	exited       chan struct{} // closed when that goroutine returned
	inflight     map[*flight]struct{}
	sessions     map[string]int // activities in progress per session
	sessionsSeen bool           // an activity of a session was fetched here (sessionFetch)
	acks         ackBatcher     // activity acks waiting for the one in flight (ackbatch.go)
	regErr       error          // the first registration refused before Start: Start returns it

	unregMu sync.Mutex
	unreg   map[string]bool // unregistered names already reported at warning level
}

// flight is an item being processed: Shutdown abandons it when its deadline passes.
type flight struct {
	abandon func(context.Context)
	done    bool
}

// NewRuntime returns a runtime over p (any provider.Provider, such as redisprovider's). A nil p
// (also a typed nil, such as the *redisprovider.Provider of a failed redisprovider.New) is refused
// by Start with ErrInvalidInput; without a provider the runtime can only Replay.
func NewRuntime(p provider.Provider, opts Options) *Runtime {
	o := opts.withDefaults()
	return &Runtime{p: p, opts: o, reg: newRegistry(), cache: newEngineCache(o.ExecutorCacheSize),
		inflight: map[*flight]struct{}{}, sessions: map[string]int{}, unreg: map[string]bool{}, acks: ackBatcher{most: o.ActivityAckBatch}}
}

// nilProvider reports whether p is nil, or an interface holding a nil pointer (or map, func...):
// a typed nil such as (*redisprovider.Provider)(nil), left by an ignored constructor error.
func nilProvider(p provider.Provider) bool {
	if p == nil {
		return true
	}
	switch v := reflect.ValueOf(p); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// ErrRunning is returned by Start when the runtime is already running.
var ErrRunning = errors.New("dx: runtime already started")

// Start starts the dispatchers in the background and returns at once. They run until Shutdown (or
// until ctx ends, which stops them as abruptly as a deadline-expired Shutdown).
//
// It returns an error matching ErrInvalidInput for a nil runtime, a nil provider, a nil ctx,
// invalid Options, or a registration refused before it (see Register).
func (rt *Runtime) Start(ctx context.Context) error {
	if rt == nil {
		return fmt.Errorf("dx: Start on a nil *Runtime: use dx.NewRuntime (%w)", ErrInvalidInput)
	}
	if nilProvider(rt.p) {
		return fmt.Errorf("dx: NewRuntime was given a nil provider (%T): check the error of the provider's constructor (%w)", rt.p, ErrInvalidInput)
	}
	if ctx == nil {
		return fmt.Errorf("dx: Start needs a context (context.Background() runs until Shutdown) (%w)", ErrInvalidInput)
	}
	if err := rt.opts.validate(); err != nil {
		return err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.regErr != nil {
		return fmt.Errorf("dx: Start: a registration failed: %w", rt.regErr)
	}
	if rt.running {
		return ErrRunning
	}
	rt.running = true
	workCtx, abort := context.WithCancel(ctx)
	fetchCtx, stop := context.WithCancel(workCtx)
	rt.stop, rt.abort = stop, abort
	rt.orchestrationLoop(fetchCtx)
	rt.workerLoop(fetchCtx, workCtx)
	rt.loops.Add(1)
	go func() { defer rt.loops.Done(); rt.sessionLoop(fetchCtx) }()
	// Start's ctx ending stops the runtime too: once the loops are done, the kept orchestrations'
	// goroutines end and Start may be called again. (Shutdown, which does the same, ends this
	// goroutine and waits for it.)
	quit, exited := make(chan struct{}), make(chan struct{})
	rt.quit, rt.exited = quit, exited
	go func() {
		defer close(exited)
		select {
		case <-quit:
			return
		case <-ctx.Done():
		}
		rt.loops.Wait()
		rt.cache.clear()
		rt.mu.Lock()
		rt.running = false
		rt.mu.Unlock()
	}()
	rt.opts.Logger.Info("dx: runtime started", "node", rt.opts.NodeID,
		"orchestration_concurrency", rt.opts.OrchestrationConcurrency, "worker_concurrency", rt.opts.WorkerConcurrency,
		"orchestration_pollers", rt.opts.OrchestrationPollers, "worker_pollers", rt.opts.WorkerPollers)
	return nil
}

// Run starts the runtime and blocks until ctx ends, then shuts down gracefully, giving in-flight
// work up to the orchestration lock timeout to finish.
func (rt *Runtime) Run(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("dx: Run needs a context (%w)", ErrInvalidInput)
	}
	if err := rt.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), rt.opts.OrchestrationLockTimeout)
	defer cancel()
	return rt.Shutdown(sctx)
}

// Shutdown stops fetching and lets the turns and activities in progress finish until ctx ends. Then
// it abandons what is left, so another process takes it at once instead of after its lock expires,
// cancels the contexts of running activities, and waits up to ActivityCancellationGracePeriod for
// them to return (their results are dropped: an abandoned activity may run again elsewhere, as
// duroxide's activities are at-least-once). Nothing acknowledged is lost and nothing is recorded
// twice. It returns ctx's error when it had to abandon work, or an error naming activities that
// ignored their cancelled context (their goroutines are still running).
func (rt *Runtime) Shutdown(ctx context.Context) error {
	if rt == nil {
		return fmt.Errorf("dx: Shutdown on a nil *Runtime (%w)", ErrInvalidInput)
	}
	if ctx == nil {
		ctx = context.Background() // no deadline: wait for the work in progress
	}
	rt.mu.Lock()
	if !rt.running {
		rt.mu.Unlock()
		return nil
	}
	stop, abort, quit, exited := rt.stop, rt.abort, rt.quit, rt.exited
	rt.quit = nil
	rt.mu.Unlock()
	if quit != nil {
		close(quit)
		defer func() { <-exited }()
	}
	stop()
	done := make(chan struct{})
	go func() { rt.loops.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		n := rt.abandonInflight()
		rt.opts.Logger.Warn("dx: shutdown deadline reached; abandoned work in progress", "abandoned", n)
		abort()
		t := time.NewTimer(rt.opts.ActivityCancellationGracePeriod)
		select {
		case <-done:
			t.Stop()
		case <-t.C:
			err = errors.New("dx: shutdown: activities did not return within the cancellation grace period after their context was cancelled; their goroutines are still running")
		}
	}
	abort()
	rt.cache.clear()
	rt.mu.Lock()
	rt.running = false
	rt.mu.Unlock()
	rt.opts.Logger.Info("dx: runtime stopped", "node", rt.opts.NodeID)
	return err
}

// track registers an item in progress; the returned func marks it finished and reports whether
// it was still ours (not abandoned by Shutdown).
func (rt *Runtime) track(abandon func(context.Context)) (*flight, func() bool) {
	f := &flight{abandon: abandon}
	rt.mu.Lock()
	rt.inflight[f] = struct{}{}
	rt.mu.Unlock()
	return f, func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		delete(rt.inflight, f)
		ours := !f.done
		f.done = true
		return ours
	}
}

// owned reports whether an in-flight item was not abandoned yet; it stays owned after the call.
func (rt *Runtime) owned(f *flight) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return !f.done
}

func (rt *Runtime) abandonInflight() int {
	rt.mu.Lock()
	var fs []*flight
	for f := range rt.inflight {
		if !f.done {
			f.done = true
			fs = append(fs, f)
		}
	}
	rt.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, f := range fs {
		f.abandon(ctx)
	}
	return len(fs)
}

// dispatch starts a queue's pollers: each takes a free one of slots and, when batch > 1, as many
// more as are free then (batch in all), fetches up to that many items, and runs each on a
// goroutine of its own that keeps a slot (run returns once its chain of ack-and-fetches ends); the
// slots it got nothing for go back. Every goroutine is counted in rt.loops.
func dispatch[T any](rt *Runtime, ctx context.Context, queue string, pollers, slots, batch int, fetch func(n int) ([]*T, error), run func(*T)) {
	inUse := make(chan struct{}, slots)
	rt.loops.Add(pollers)
	for range pollers {
		go func() {
			defer rt.loops.Done()
			rt.pollLoop(ctx, queue, func() (bool, error) {
				select {
				case inUse <- struct{}{}:
				case <-ctx.Done():
					return false, nil
				}
				n := 1
			more:
				for n < batch {
					select {
					case inUse <- struct{}{}:
						n++
					default:
						break more
					}
				}
				items, err := fetch(n)
				items = items[:min(len(items), n)] // (at most n, as the fetch promises)
				for range n - len(items) {
					<-inUse
				}
				for _, item := range items {
					rt.loops.Add(1) // while this poller counts: never from zero
					go func() {
						defer rt.loops.Done()
						defer func() { <-inUse }()
						run(item)
					}()
				}
				return len(items) > 0, err
			})
		}()
	}
}

// pollLoop runs fetch until ctx ends, keeping MinPollInterval between fetches that found nothing
// and backing off after errors.
func (rt *Runtime) pollLoop(ctx context.Context, queue string, fetch func() (bool, error)) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		began := time.Now()
		found, err := fetch()
		switch {
		case err != nil && ctx.Err() == nil:
			rt.opts.Logger.Warn("dx: fetch failed", "queue", queue, "error", err, "retry_in", backoff)
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

// unregisteredDelay is the backoff before retrying an item without a handler here.
func (rt *Runtime) unregisteredDelay(attempt uint32) time.Duration {
	d := rt.opts.UnregisteredBackoff
	// Doubling per attempt, at most 6 times (64x the base), as duroxide's UnregisteredBackoffConfig.
	for i := uint32(1); i < attempt && i <= 6 && d < rt.opts.UnregisteredBackoffMax; i++ {
		d *= 2
	}
	return min(d, rt.opts.UnregisteredBackoffMax)
}

// sessionLoop keeps this node's activity sessions owned while in use and releases idle ones.
func (rt *Runtime) sessionLoop(ctx context.Context) {
	every := renewEvery(rt.opts.SessionLockTimeout, rt.opts.SessionLockRenewalBuffer)
	for ctx.Err() == nil {
		sleep(ctx, every)
		if ctx.Err() != nil {
			return
		}
		if _, err := rt.p.RenewSessionLock(ctx, []string{rt.opts.NodeID}, rt.opts.SessionLockTimeout, rt.opts.SessionIdleTimeout); err != nil && ctx.Err() == nil {
			rt.opts.Logger.Warn("dx: session renewal failed", "error", err)
		}
		if _, err := rt.p.CleanupOrphanedSessions(ctx, rt.opts.SessionIdleTimeout); err != nil && ctx.Err() == nil {
			rt.opts.Logger.Warn("dx: session cleanup failed", "error", err)
		}
	}
}
