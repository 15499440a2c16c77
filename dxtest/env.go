package dxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// Env is a test environment: a runtime and a client on an embedded miniredis, with a virtual clock.
// Register orchestrations and activities on Runtime (or mock activities with OnActivity), then start
// instances with Start and read their results with Result, Err, Status and friends. Every method
// fails the test (t.Fatal) when something goes wrong, so tests need no error checks.
type Env struct {
	// Runtime is the runtime under test: register orchestrations and activities on it before the
	// first Start. It is started by the first call that needs it.
	Runtime *dx.Runtime
	// Client is a client of the same store.
	Client *dx.Client
	// Provider is the store: a redisprovider on the embedded miniredis.
	Provider *redisprovider.Provider

	t       testing.TB
	ctx     context.Context
	mr      *miniredis.Miniredis
	timeout time.Duration

	mu        sync.Mutex
	now       time.Time
	started   bool
	mocks     map[string]*ActivityMock
	callbacks []callback
	problems  []string
	dropped   []string // external events dropped for want of a waiter, as the runtime logged them
	nDropped  int      // and as it counted them (MetricDroppedEvents)
}

type callback struct {
	at time.Time
	fn func()
}

// Option configures New.
type Option func(*config)

type config struct {
	runtime       dx.Options
	start         time.Time
	timeout       time.Duration
	noReplayCheck bool
	allowDropped  bool
}

// WithRuntimeOptions sets the runtime's options (for instance WorkerTagFilter). Fields left zero get
// the test defaults: fast polling, a quiet logger (set DXTEST_LOG=1 to see the runtime's log).
// Clock is always the environment's virtual clock.
func WithRuntimeOptions(o dx.Options) Option { return func(c *config) { c.runtime = o } }

// WithoutReplayCheck turns off the replay check: by default every orchestration turn is compared
// with fresh replays of the stored history (dx.Options.ReplayCheckRate 1, ReplayCheckRuns 4), so
// that code a replay does not reproduce (time.Now, a map's order, randomness) fails its test every
// time instead of passing until a restart drops the executor cache. Use it only for a test that
// needs the production default (no checks), or when the checks' cost (five runs of each turn)
// matters.
func WithoutReplayCheck() Option { return func(c *config) { c.noReplayCheck = true } }

// AllowDroppedEvents lets the test pass when an external event is dropped for want of a waiter.
// By default a test fails at its end, naming the instance and the event, when a RaiseEvent came
// before the orchestration waited for the name (or after its wait ended): the runtime drops such
// an event, as duroxide does, and a test that raises one usually has a race. Raise it after
// env.WaitForEventWait, or use dx.Dequeue with env.Enqueue for messages that may come early.
func AllowDroppedEvents() Option { return func(c *config) { c.allowDropped = true } }

// WithStartTime sets the virtual clock's start (default: the real time when New is called).
func WithStartTime(t time.Time) Option { return func(c *config) { c.start = t } }

// WithTimeout bounds, in real time, how long each wait may take before the test fails (default 10 s).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// New returns a test environment on a fresh embedded miniredis. Everything it started is stopped
// when the test ends.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	cfg := config{start: time.Now(), timeout: 10 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	e := &Env{t: t, timeout: cfg.timeout, now: cfg.start.UTC().Truncate(time.Millisecond), mocks: map[string]*ActivityMock{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	e.ctx = ctx

	e.mr = miniredis.NewMiniRedis()
	if err := e.mr.Start(); err != nil {
		t.Fatalf("dxtest: start miniredis: %v", err)
	}
	t.Cleanup(e.mr.Close)
	e.mr.SetTime(e.now)

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("DXTEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ns := "dxtest-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	// DXREDIS_TEST_PARTITIONS runs a suite on namespaces of that many partitions (this
	// repository's make test-partitions); the default is one.
	parts, _ := strconv.Atoi(os.Getenv("DXREDIS_TEST_PARTITIONS"))
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: e.mr.Addr(), Namespace: ns, Logger: log, Partitions: parts})
	if err != nil {
		t.Fatalf("dxtest: provider: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	e.Provider = p

	ro := cfg.runtime
	if ro.PollTimeout == 0 {
		ro.PollTimeout = 100 * time.Millisecond
	}
	if ro.MinPollInterval == 0 {
		ro.MinPollInterval = time.Millisecond
	}
	if ro.UnregisteredBackoff == 0 {
		ro.UnregisteredBackoff = 10 * time.Millisecond
	}
	if ro.Logger == nil {
		ro.Logger = log
	}
	ro.Logger = slog.New(&dropWatch{env: e, next: ro.Logger.Handler()})
	if ro.ReplayCheckRate == 0 && !cfg.noReplayCheck {
		ro.ReplayCheckRate = 1
	}
	if ro.ReplayCheckRuns == 0 {
		// A map of 8 keys is ranged in the same order once in 8: four replays of each turn make
		// such code pass a test by chance less often than once in 8^8 turns.
		ro.ReplayCheckRuns = 4
	}
	if ro.HoldRetryDelay == 0 {
		ro.HoldRetryDelay = 10 * time.Millisecond
	}
	ro.Metrics = &watch{env: e, next: ro.Metrics}
	ro.Clock = e.Now
	e.Runtime = dx.NewRuntime(p, ro)
	e.Client = dx.NewClient(p)
	if !cfg.allowDropped {
		t.Cleanup(e.checkDropped) // runs after e.stop: every turn is over
	}
	t.Cleanup(e.stop) // runs before the provider and miniredis close (cleanups run last-in first-out)
	return e
}

// Now returns the virtual clock's time. It moves only when the environment skips ahead (while a
// test waits for an instance to finish, see Wait) or when Advance moves it.
func (e *Env) Now() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.now
}

func (e *Env) ensureStarted() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return
	}
	if err := e.Runtime.Start(e.ctx); err != nil {
		e.t.Fatalf("dxtest: start runtime: %v", err)
	}
	e.started = true
}

func (e *Env) stop() {
	e.mu.Lock()
	started := e.started
	e.mu.Unlock()
	if !started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Runtime.Shutdown(ctx); err != nil {
		e.t.Errorf("dxtest: runtime shutdown: %v (an activity ignored its cancelled context?)", err)
	}
}

// Start starts an instance of the orchestration name with input and returns its id (options:
// dx.WithInstanceID, dx.WithVersion).
func (e *Env) Start(name string, input any, opts ...dx.StartOption) string {
	e.t.Helper()
	e.ensureStarted()
	id, err := e.Client.Start(e.ctx, name, input, opts...)
	if err != nil {
		e.t.Fatalf("dxtest: start %s: %v", name, err)
	}
	return id
}

// RaiseEvent raises the external event name on an instance. Only a wait already pending receives
// it: wait for the subscription first (WaitForEventWait, or a custom status the code sets).
func (e *Env) RaiseEvent(instance, name string, data any) {
	e.t.Helper()
	e.ensureStarted()
	if err := e.Client.RaiseEvent(e.ctx, instance, name, data); err != nil {
		e.t.Fatalf("dxtest: raise %s on %s: %v", name, instance, err)
	}
}

// Enqueue appends a message to an instance's queue (read by dx.Dequeue).
func (e *Env) Enqueue(instance, queue string, data any) {
	e.t.Helper()
	e.ensureStarted()
	if err := e.Client.EnqueueEvent(e.ctx, instance, queue, data); err != nil {
		e.t.Fatalf("dxtest: enqueue on %s/%s: %v", instance, queue, err)
	}
}

// Cancel cancels an instance.
func (e *Env) Cancel(instance, reason string) {
	e.t.Helper()
	e.ensureStarted()
	if err := e.Client.Cancel(e.ctx, instance, reason); err != nil {
		e.t.Fatalf("dxtest: cancel %s: %v", instance, err)
	}
}

// Status reads an instance's status now, without waiting.
func (e *Env) Status(instance string) dx.Status {
	e.t.Helper()
	st, err := e.Client.Status(e.ctx, instance)
	if err != nil {
		e.t.Fatalf("dxtest: status of %s: %v", instance, err)
	}
	return st
}

// Wait waits until the instance finishes and returns its final status. While it waits, the virtual
// clock skips ahead whenever nothing else can happen (no turn or activity running or ready), to the
// next timer or After callback, so an orchestration that sleeps for a day finishes in milliseconds.
// It fails the test when the instance cannot finish (it waits for something nobody will send), when
// an activity or orchestration it needs is not registered, or after the timeout.
func (e *Env) Wait(instance string) dx.Status {
	e.t.Helper()
	e.ensureStarted()
	var st dx.Status
	e.waitFor(fmt.Sprintf("instance %s to finish", instance), instance, func() bool {
		e.t.Helper()
		st = e.Status(instance)
		return st.Terminal()
	})
	return st
}

// Result waits for the instance to finish (see Env.Wait) and returns its output decoded into T. It
// fails the test when the instance failed.
func Result[T any](e *Env, instance string) T {
	e.t.Helper()
	st := e.Wait(instance)
	var out T
	if st.State != dx.StateCompleted {
		e.t.Fatalf("dxtest: instance %s failed, want it completed: %v", instance, st.Err)
		return out
	}
	v, err := dx.Result[T](e.ctx, e.Client, instance)
	if err != nil {
		e.t.Fatalf("dxtest: output of %s: %v", instance, err)
	}
	return v
}

// Err waits for the instance to finish (see Env.Wait) and returns its failure, nil when it
// completed. The error is a *dx.Error (errors.Is(err, dx.ErrCanceled) for a cancelled instance).
func (e *Env) Err(instance string) error {
	e.t.Helper()
	if st := e.Wait(instance); st.State == dx.StateFailed {
		return st.Err
	}
	return nil
}

// CustomStatus reads the instance's custom status now ("" when unset).
func (e *Env) CustomStatus(instance string) string {
	e.t.Helper()
	if s := e.Status(instance).CustomStatus; s != nil {
		return *s
	}
	return ""
}

// WaitForCustomStatus waits until the instance's custom status is want. Like Wait, it moves the
// virtual clock when nothing else can happen (a retry's backoff, a timer before the status is set).
func (e *Env) WaitForCustomStatus(instance, want string) {
	e.t.Helper()
	e.ensureStarted()
	e.waitFor(fmt.Sprintf("custom status %q on %s", want, instance), instance, func() bool {
		e.t.Helper()
		st := e.Status(instance)
		if st.Terminal() && (st.CustomStatus == nil || *st.CustomStatus != want) {
			e.t.Fatalf("dxtest: instance %s finished (%s) while a test waited for custom status %q (it is %s)",
				instance, describeEnd(st), want, showStatus(st.CustomStatus))
		}
		return st.CustomStatus != nil && *st.CustomStatus == want
	})
}

// WaitForEventWait waits until the instance waits for the external event name (dx.WaitEvent), so
// that RaiseEvent will be delivered. Like Wait, it moves the virtual clock when nothing else can
// happen (a retry's backoff, a timer before the wait), and not once the wait is pending.
func (e *Env) WaitForEventWait(instance, name string) {
	e.t.Helper()
	e.ensureStarted()
	e.waitFor(fmt.Sprintf("%s to wait for event %q", instance, name), instance, func() bool {
		e.t.Helper()
		if st := e.Status(instance); st.Terminal() {
			e.t.Fatalf("dxtest: instance %s finished (%s) while a test waited for it to wait for event %q",
				instance, describeEnd(st), name)
		}
		return pendingWaits(e.History(instance), name) > 0
	})
}

// pendingWaits counts the waits for event name that are neither satisfied nor cancelled.
func pendingWaits(hist []provider.Event, name string) int {
	open := 0
	cancelled := map[uint64]bool{}
	for _, ev := range hist {
		if _, ok := ev.Kind.(provider.ExternalSubscribedCancelledEvent); ok && ev.SourceEventID != nil {
			cancelled[*ev.SourceEventID] = true
		}
	}
	for _, ev := range hist {
		switch k := ev.Kind.(type) {
		case provider.ExternalSubscribedEvent:
			if k.Name == name && !cancelled[ev.EventID] {
				open++
			}
		case provider.ExternalEventEvent:
			if k.Name == name && open > 0 {
				open-- // delivered to the oldest pending wait
			}
		}
	}
	return open
}

// KV reads a key of the instance's KV store ("" and false when absent).
func (e *Env) KV(instance, key string) (string, bool) {
	e.t.Helper()
	v, ok, err := e.Client.KV(e.ctx, instance, key)
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		e.t.Fatalf("dxtest: KV %s of %s: %v", key, instance, err)
	}
	return v, ok
}

// KVAll reads the instance's whole KV store.
func (e *Env) KVAll(instance string) map[string]string {
	e.t.Helper()
	m, err := e.Client.KVAll(e.ctx, instance)
	if err != nil {
		e.t.Fatalf("dxtest: KV of %s: %v", instance, err)
	}
	return m
}

// History reads the instance's current execution's events.
func (e *Env) History(instance string) []provider.Event {
	e.t.Helper()
	h, err := e.Client.History(e.ctx, instance, 0)
	if err != nil {
		e.t.Fatalf("dxtest: history of %s: %v", instance, err)
	}
	return h
}

// EventTypes lists the event types of the instance's current execution, e.g. to compare with a
// golden list: "OrchestrationStarted ActivityScheduled ActivityCompleted OrchestrationCompleted".
func (e *Env) EventTypes(instance string) string {
	e.t.Helper()
	var b []string
	for _, ev := range e.History(instance) {
		b = append(b, ev.EventType())
	}
	return strings.Join(b, " ")
}

// Replay replays the instance's recorded history (every execution) against the code registered
// on Runtime and fails the test on nondeterminism, so a test can check that an instance started
// by older code still replays (see also Replayer).
func (e *Env) Replay(instance string) {
	e.t.Helper()
	hist, err := ReadHistory(e.ctx, e.Provider, instance)
	if err != nil {
		e.t.Fatalf("dxtest: %v", err)
	}
	if err := dx.Replay(e.Runtime, hist); err != nil {
		e.t.Fatalf("dxtest: %v", err)
	}
}

func describeEnd(st dx.Status) string {
	if st.State == dx.StateFailed {
		return "failed: " + st.Err.Error()
	}
	return "completed with output " + st.Output
}

func showStatus(s *string) string {
	if s == nil {
		return "unset"
	}
	return fmt.Sprintf("%q", *s)
}

// problem records a misconfiguration seen by the runtime; the next wait fails the test with it.
func (e *Env) problem(msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.problems {
		if p == msg {
			return
		}
	}
	e.problems = append(e.problems, msg)
}

// watch is the runtime's Metrics: it notices items abandoned for want of a handler, and instances
// held for nondeterminism.
type watch struct {
	env  *Env
	next dx.Metrics
}

func (w *watch) Count(name string, n int64, l dx.Labels) {
	if name == dx.MetricUnregistered {
		if l.Activity != "" {
			w.env.problem(fmt.Sprintf("activity %q is neither registered nor mocked: dx.RegisterActivity(env.Runtime, %q, fn) or env.OnActivity(%q).Return(...)",
				l.Activity, l.Activity, l.Activity))
		} else {
			w.env.problem(fmt.Sprintf("orchestration %q version %q is not registered: dx.Register(env.Runtime, %q, fn)",
				l.Orchestration, l.Version, l.Orchestration))
		}
	}
	if name == dx.MetricNondeterminism && l.Result == "held" {
		w.env.problem(fmt.Sprintf("orchestration %q version %q is nondeterministic: an instance is held (dx.HoldOnNondeterminism; the runtime's log names the event, DXTEST_LOG=1 shows it)",
			l.Orchestration, l.Version))
	}
	if name == dx.MetricDroppedEvents {
		w.env.mu.Lock()
		w.env.nDropped += int(n)
		w.env.mu.Unlock()
	}
	if w.next != nil {
		w.next.Count(name, n, l)
	}
}

func (w *watch) Observe(name string, d time.Duration, l dx.Labels) {
	if w.next != nil {
		w.next.Observe(name, d, l)
	}
}

// checkDropped fails the test when the runtime dropped an external event (see AllowDroppedEvents).
func (e *Env) checkDropped() {
	e.mu.Lock()
	dropped, n := slices.Clone(e.dropped), e.nDropped
	e.mu.Unlock()
	for len(dropped) < n {
		dropped = append(dropped, "an external event") // counted, but its log record was not seen
	}
	for _, d := range dropped {
		e.t.Errorf("dxtest: %s was dropped: the orchestration was not waiting for it (raised before its dx.WaitEvent, or after the wait ended). "+
			"Raise it after env.WaitForEventWait, or use dx.Dequeue and env.Enqueue for messages that may come early; "+
			"dxtest.AllowDroppedEvents() lets a test drop events", d)
	}
}

// dropWatch is the runtime's log handler: it notes the external events the runtime drops (its
// "dx: external event dropped" warning, with the instance and event attributes) and passes every
// record on to the logger it wraps.
type dropWatch struct {
	env      *Env
	next     slog.Handler
	instance string // from WithAttrs
}

func (h *dropWatch) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *dropWatch) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "dx: external event dropped") {
		instance, event := h.instance, ""
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "instance":
				instance = a.Value.String()
			case "event":
				event = a.Value.String()
			}
			return true
		})
		h.env.mu.Lock()
		h.env.dropped = append(h.env.dropped, fmt.Sprintf("external event %q raised on instance %s", event, instance))
		h.env.mu.Unlock()
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *dropWatch) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	for _, a := range as {
		if a.Key == "instance" {
			c.instance = a.Value.String()
		}
	}
	return &c
}

func (h *dropWatch) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	return &c
}
