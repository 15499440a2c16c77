package dx

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"
)

// Context is what orchestration code receives: the durable operations it may use and facts about the
// running instance. Orchestration code must be deterministic: given the same history it must make
// the same calls in the same order. So it must not read the clock (use UtcNow or a Timer), start
// goroutines (use Go), use channels, select, mutexes or time.Sleep (use Select, Join and Timer),
// iterate over maps to decide what to schedule, or do I/O (put it in an activity).
//
// A Context is only valid on the goroutine dx runs the orchestration (or the branch) on, and only
// during its turn.
type Context interface {
	// InstanceID is the orchestration instance's id.
	InstanceID() string
	// ExecutionID is the execution number: 1, then +1 for each continue-as-new.
	ExecutionID() uint64
	// Name is the orchestration's registered name.
	Name() string
	// Version is the orchestration version this execution runs.
	Version() string
	// IsReplaying is true while the code re-runs steps already recorded in the history.
	IsReplaying() bool
	// Logger is a slog.Logger that drops records while the code is replaying, so each message is
	// logged once per execution, with the instance's id, execution, name and version attached.
	Logger() *slog.Logger

	// Timer returns a future that completes after d (a durable timer: it survives restarts).
	Timer(d time.Duration) Future[struct{}]
	// Sleep waits for a durable timer of d. It returns an error only when the wait is cancelled.
	Sleep(d time.Duration) error
	// NewGUID returns a fresh random UUID, recorded in the history (a worker round trip).
	NewGUID() Future[string]
	// UtcNow returns the current time, recorded in the history (a worker round trip), with
	// millisecond precision.
	UtcNow() Future[time.Time]
	// StartOrchestration starts another, independent orchestration instance (fire and forget: no
	// parent link, its result is not reported back). Options: WithVersion.
	//
	// The start is sent when the turn that makes it is stored, if that turn goes on or ends the
	// orchestration by completing or failing. As in duroxide, a start made in the turn that
	// continues as new, or that the instance's cancellation ends, is recorded but never started
	// (the runtime logs a warning naming both instances): await something (a timer, an activity)
	// between StartOrchestration and ContinueAsNew, or start it in the next execution.
	StartOrchestration(name, instance string, input any, opts ...DetachedOption) error

	// SetCustomStatus sets the instance's custom status, which clients can read and wait on.
	SetCustomStatus(status string)
	// ResetCustomStatus clears the custom status.
	ResetCustomStatus()
	// CustomStatus returns the custom status as this code last set it (ok false when unset).
	CustomStatus() (status string, ok bool)

	// SetKV stores a value in the instance's key-value store, readable by clients and other
	// orchestrations, and kept across continue-as-new.
	SetKV(key, value string)
	// KV reads a value of the instance's key-value store.
	KV(key string) (value string, ok bool)
	// ClearKV removes a key.
	ClearKV(key string)
	// ClearAllKV removes every key.
	ClearAllKV()
	// KVAll returns a copy of the whole store.
	KVAll() map[string]string
	// KVKeys returns the keys, sorted.
	KVKeys() []string
	// KVLen returns the number of keys.
	KVLen() int
	// PruneKV removes the keys last written before cutoff and returns how many it removed. As in
	// duroxide, a key this execution wrote counts as written when the code wrote it, on a replay
	// too (so a cutoff later than the turn prunes it).
	PruneKV(cutoff time.Time) int
	// KVFromInstance reads a key of another instance's store (a worker round trip); the result is
	// nil when the instance or the key does not exist.
	KVFromInstance(instance, key string) Future[*string]
}

// octx is the Context of one coroutine.
type octx struct {
	eng *engine
	co  *coroutine
}

// live reports whether c may record operations now: its coroutine is the one running a turn. A
// Context kept past its turn, or used from another goroutine or by another branch, may not: what
// it recorded would land in some later turn of the instance (a different history on replay).
// During teardown the engine ignores operations anyway.
func (c *octx) live() bool {
	e := c.eng
	return e.teardown || e.running != nil && e.running == c.co
}

// refuse reports, for the operations without an error result (custom status, KV writes), that c
// may not record now; the call is then dropped and logged.
func (c *octx) refuse(op string) bool {
	if c.live() {
		return false
	}
	c.eng.logBase.Error("dx: "+op+" ignored: "+errStaleContext.Error(), "instance", c.eng.instance)
	return true
}

func (c *octx) InstanceID() string   { return c.eng.instance }
func (c *octx) ExecutionID() uint64  { return c.eng.executionID }
func (c *octx) Name() string         { return c.eng.name }
func (c *octx) Version() string      { return c.eng.version }
func (c *octx) IsReplaying() bool    { return c.eng.replaying }
func (c *octx) Logger() *slog.Logger { return c.eng.userLogger() }

func (c *octx) Timer(d time.Duration) Future[struct{}] {
	e := c.eng
	if !c.live() {
		return failed[struct{}](e, errStaleContext)
	}
	if d < 0 {
		d = 0
	}
	f := e.schedule(&timer{fireAtMs: uint64(e.clock().Add(d).UnixMilli())})
	f.decode = func(string) (any, error) { return struct{}{}, nil } // a timer has no result
	return Future[struct{}]{f}
}

func (c *octx) Sleep(d time.Duration) error {
	_, err := c.Timer(d).Await(c)
	return err
}

// The builtins duroxide's runtime registers as activities; their input is the empty text.
const (
	syscallNewGUID    = "__duroxide_syscall:new_guid"
	syscallUtcNowMs   = "__duroxide_syscall:utc_now_ms"
	syscallGetKVValue = "__duroxide_syscall:get_kv_value"
)

func (c *octx) NewGUID() Future[string] {
	if !c.live() {
		return failed[string](c.eng, errStaleContext)
	}
	f := c.eng.schedule(&activity{name: syscallNewGUID})
	f.decode = func(s string) (any, error) { return s, nil } // bare text, not JSON
	return Future[string]{f}
}

func (c *octx) UtcNow() Future[time.Time] {
	if !c.live() {
		return failed[time.Time](c.eng, errStaleContext)
	}
	f := c.eng.schedule(&activity{name: syscallUtcNowMs})
	f.decode = func(s string) (any, error) {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("dx: utc_now result %q is not milliseconds: %w", s, err)
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	return Future[time.Time]{f}
}

func (c *octx) KVFromInstance(instance, key string) Future[*string] {
	if !c.live() {
		return failed[*string](c.eng, errStaleContext)
	}
	in, err := encode(struct {
		InstanceID string `json:"instance_id"`
		Key        string `json:"key"`
	}{instance, key})
	if err != nil {
		return Future[*string]{&future{eng: c.eng, preErr: err}}
	}
	return Future[*string]{c.eng.schedule(&activity{name: syscallGetKVValue, input: in})}
}

func (c *octx) StartOrchestration(name, instance string, input any, opts ...DetachedOption) error {
	if !c.live() {
		return errStaleContext
	}
	o, err := collect(opts, DetachedOption.applyDetached)
	if err != nil {
		return err
	}
	if name == "" || instance == "" {
		return fmt.Errorf("dx: StartOrchestration needs a name and an instance id (got %q, %q)", name, instance)
	}
	in, err := encode(input)
	if err != nil {
		return err
	}
	c.eng.emit(&detached{name: name, instance: instance, input: in, version: o.version})
	return nil
}

func (c *octx) SetCustomStatus(status string) {
	e := c.eng
	if e.teardown || c.refuse("SetCustomStatus") {
		return
	}
	s := status
	e.customStatus = &s
	e.emit(&customStatus{status: &s})
}

func (c *octx) ResetCustomStatus() {
	e := c.eng
	if e.teardown || c.refuse("ResetCustomStatus") {
		return
	}
	e.customStatus = nil
	e.emit(&customStatus{})
}

func (c *octx) CustomStatus() (string, bool) {
	if s := c.eng.customStatus; s != nil {
		return *s, true
	}
	return "", false
}

func (c *octx) SetKV(key, value string) {
	e := c.eng
	if e.teardown || c.refuse("SetKV") {
		return
	}
	now := uint64(e.clock().UnixMilli())
	e.kv[key] = value
	e.kvUpdated[key] = now
	e.emit(&kvWrite{op: kvSet, key: key, value: value, updatedMs: now})
}

func (c *octx) KV(key string) (string, bool) {
	v, ok := c.eng.kv[key]
	return v, ok
}

func (c *octx) ClearKV(key string) {
	e := c.eng
	if e.teardown || c.refuse("ClearKV") {
		return
	}
	delete(e.kv, key)
	delete(e.kvUpdated, key)
	e.emit(&kvWrite{op: kvClear, key: key})
}

func (c *octx) ClearAllKV() {
	e := c.eng
	if e.teardown || c.refuse("ClearAllKV") {
		return
	}
	clear(e.kv)
	clear(e.kvUpdated)
	e.emit(&kvWrite{op: kvClearAll})
}

func (c *octx) KVAll() map[string]string { return maps.Clone(c.eng.kv) }
func (c *octx) KVKeys() []string         { return slices.Sorted(maps.Keys(c.eng.kv)) }
func (c *octx) KVLen() int               { return len(c.eng.kv) }

func (c *octx) PruneKV(cutoff time.Time) int {
	if c.refuse("PruneKV") {
		return 0
	}
	before := uint64(cutoff.UnixMilli())
	n := 0
	for _, k := range c.KVKeys() { // sorted: the clears are recorded in a fixed order
		if ts, ok := c.eng.kvUpdated[k]; ok && ts < before {
			c.ClearKV(k)
			n++
		}
	}
	return n
}

// schedule emits an action that completes a future and returns the future.
func (e *engine) schedule(a action) *future {
	f := &future{eng: e, act: a, owner: e.running}
	if e.teardown {
		f.cancelled = true
		return f
	}
	a.base().fut = f
	e.emit(a)
	return f
}

// userLogger is the orchestration's logger: it drops records while the code replays (checked when
// a record is logged, so a logger kept in a variable behaves too).
func (e *engine) userLogger() *slog.Logger {
	if e.userLog == nil {
		e.userLog = slog.New(replayHandler{e, e.log().Handler()})
	}
	return e.userLog
}

type replayHandler struct {
	e *engine
	h slog.Handler
}

func (r replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !r.e.replaying && !r.e.teardown && r.h.Enabled(ctx, l)
}

func (r replayHandler) Handle(ctx context.Context, rec slog.Record) error {
	return r.h.Handle(ctx, rec)
}

func (r replayHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return replayHandler{r.e, r.h.WithAttrs(as)}
}

func (r replayHandler) WithGroup(g string) slog.Handler { return replayHandler{r.e, r.h.WithGroup(g)} }
