package dx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide-go/dxredis/provider"
)

// Client starts orchestrations, talks to running ones and reads their state. It needs no Runtime:
// any process with the provider can use one.
type Client struct {
	p provider.Provider
}

// NewClient returns a client over p. A nil p (also a typed nil, such as the *redisprovider.Provider
// of a failed redisprovider.New) makes every call return an error matching ErrInvalidInput.
func NewClient(p provider.Provider) *Client { return &Client{p: p} }

// check refuses a call on a nil client or a client without a provider.
func (c *Client) check(call string) error {
	if c == nil {
		return fmt.Errorf("dx: %s on a nil *Client: use dx.NewClient (%w)", call, ErrInvalidInput)
	}
	if nilProvider(c.p) {
		return fmt.Errorf("dx: %s: NewClient was given a nil provider (%T): check the error of the provider's constructor (%w)", call, c.p, ErrInvalidInput)
	}
	return nil
}

// ErrInstanceExists is returned by Start (errors.Is) when an instance with the requested id
// already exists or, with a provider that implements provider.StartIfAbsentEnqueuer, has a start
// queued.
var ErrInstanceExists = errors.New("dx: instance already exists")

// ErrNotFound matches (errors.Is) the error of a call about an instance that does not exist (Info,
// Executions, Delete, Prune, ...; Status reports StateNotFound instead).
var ErrNotFound = provider.ErrNotFound

// ErrInvalidInput matches (errors.Is) the error of a call refused for its arguments (an empty or
// malformed name or id, an input that does not encode as JSON, an invalid option value, a
// negative Options duration): nothing was written.
var ErrInvalidInput = provider.ErrInvalidInput

// Start starts an instance of the orchestration name with input (encoded as JSON) and returns its
// id: WithInstanceID's, else a new UUID. WithVersion runs that version, else the latest registered.
// It is the string-named form of Orchestration.Start.
// The client cannot see any runtime's registrations: a start of a name (or version) no runtime
// registers succeeds, the instance stays NotFound while runtimes abandon it with backoff (each logs
// a warning naming it, once, with the names it registers), and after Options.MaxAttempts fetches
// it fails as poison (about five minutes with the defaults).
// With WithInstanceID it returns ErrInstanceExists when the instance exists (whatever its status;
// a deleted instance, or one whose retention expired, does not). With a provider that implements
// provider.StartIfAbsentEnqueuer (redisprovider does) the check and the enqueue are one atomic
// step and a start already queued for the id counts too: of two Starts of one id racing, exactly
// one succeeds. With other providers Start checks the instance, then enqueues: two Starts racing
// before the instance's first turn both return nil, and the first one enqueued runs (as in
// duroxide, the runtime ignores a start for an instance that has one).
func (c *Client) Start(ctx context.Context, name string, input any, opts ...StartOption) (string, error) {
	if err := c.check("Start"); err != nil {
		return "", err
	}
	o, err := collect(opts, StartOption.applyStart)
	if err != nil {
		return "", err
	}
	if name == "" {
		return "", fmt.Errorf("dx: Start needs an orchestration name (%w)", ErrInvalidInput)
	}
	in, err := encode(input)
	if err != nil {
		return "", err
	}
	id := deref(o.instance)
	if id == "" {
		id = uuid.NewString()
	}
	item := provider.WorkItem{Kind: provider.StartOrchestration{Instance: id, Orchestration: name, Input: in,
		Version: o.version, ExecutionID: 1}}
	if o.instance != nil {
		if se, ok := c.p.(provider.StartIfAbsentEnqueuer); ok {
			started, err := se.EnqueueStartIfAbsent(ctx, item)
			if err != nil {
				return "", err
			}
			if !started {
				return "", fmt.Errorf("%w: %q (or a start of it is queued)", ErrInstanceExists, id)
			}
			return id, nil
		}
		if admin, ok := c.p.Admin(); ok {
			if _, err := admin.GetInstanceInfo(ctx, id); err == nil {
				return "", fmt.Errorf("%w: %q", ErrInstanceExists, id)
			} else if !errors.Is(err, provider.ErrNotFound) {
				return "", err
			}
		}
	}
	if err := c.p.EnqueueForOrchestrator(ctx, item, 0); err != nil {
		return "", err
	}
	return id, nil
}

// RaiseEvent raises the external event name with data (encoded as JSON) on an instance. Only a wait
// already pending (WaitEvent) receives it; an event raised earlier is recorded but not delivered
// (the runtime logs a warning): send what may arrive early with EnqueueEvent (read by Dequeue).
// For an instance that does not exist (yet) it returns nil: as in duroxide, the event is kept for
// an hour and reaches the first turn of a start of that id (so does Cancel's cancellation).
func (c *Client) RaiseEvent(ctx context.Context, instance, name string, data any) error {
	if err := c.check("RaiseEvent"); err != nil {
		return err
	}
	d, err := encode(data)
	if err != nil {
		return err
	}
	return c.p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.ExternalRaised{Instance: instance, Name: name, Data: d}}, 0)
}

// EnqueueEvent appends data (encoded as JSON) to the instance's persistent queue name, read in order
// by Dequeue. Messages wait in the queue until the orchestration dequeues them.
func (c *Client) EnqueueEvent(ctx context.Context, instance, queue string, data any) error {
	if err := c.check("EnqueueEvent"); err != nil {
		return err
	}
	d, err := encode(data)
	if err != nil {
		return err
	}
	return c.p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.QueueMessage{Instance: instance, Name: queue, Data: d}}, 0)
}

// Cancel cancels an instance: it fails with a Cancelled error, its running activities are cancelled
// and its sub-orchestrations are cancelled too.
func (c *Client) Cancel(ctx context.Context, instance, reason string) error {
	if err := c.check("Cancel"); err != nil {
		return err
	}
	return c.p.EnqueueForOrchestrator(ctx, provider.WorkItem{Kind: provider.CancelInstance{Instance: instance, Reason: reason}}, 0)
}

// State is an instance's lifecycle state as the client sees it.
type State string

// The states of an instance. A cancelled instance is Failed (with a Cancelled error).
const (
	StateNotFound  State = "NotFound"
	StateRunning   State = "Running"
	StateCompleted State = "Completed"
	StateFailed    State = "Failed"
)

// Status is an instance's state.
type Status struct {
	InstanceID  string
	State       State
	Name        string
	Version     string
	ExecutionID uint64
	// Output is the JSON output of a Completed instance.
	Output string
	// Err is the failure of a Failed instance.
	Err *Error
	// CustomStatus is the custom status, nil when unset; CustomStatusVersion counts the turns
	// that changed it.
	CustomStatus        *string
	CustomStatusVersion uint64
	// Held says why a runtime holds the instance (Options.OnNondeterminism HoldOnNondeterminism:
	// its code no longer replays its history), "" when it is not held; the hold ends with the
	// instance's next stored turn (after a rollback of the deploy). Read when the provider
	// implements provider.Holder (redisprovider does). A hold at the first turn leaves the state
	// NotFound, with Held set. redisprovider also reports an activity of the instance parked as a
	// dead letter (Options.OnPoison HoldPoison) here, while the state stays Running.
	Held string
}

// Terminal reports whether the instance has finished (Completed or Failed).
func (s Status) Terminal() bool { return s.State == StateCompleted || s.State == StateFailed }

// Status reads an instance's state. A missing instance has State NotFound and no error.
func (c *Client) Status(ctx context.Context, instance string) (Status, error) {
	if err := c.check("Status"); err != nil {
		return Status{}, err
	}
	st := Status{InstanceID: instance, State: StateNotFound}
	admin, ok := c.p.Admin()
	if !ok {
		return st, errors.New("dx: Status needs a provider with management support (Provider.Admin)")
	}
	if h, ok := c.p.(provider.Holder); ok {
		held, _, err := h.HeldReason(ctx, instance)
		if err != nil {
			return st, err
		}
		st.Held = held
	}
	info, err := admin.GetInstanceInfo(ctx, instance)
	if errors.Is(err, provider.ErrNotFound) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Name, st.Version, st.ExecutionID = info.OrchestrationName, info.OrchestrationVersion, info.CurrentExecutionID
	cs, err := c.p.GetCustomStatus(ctx, instance, 0)
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		return st, err
	}
	if cs != nil {
		st.CustomStatus, st.CustomStatusVersion = cs.Status, cs.Version
	}
	switch st.State = stateOf(info.Status); st.State {
	case StateCompleted:
		if info.Output != nil {
			st.Output = *info.Output
		}
	case StateFailed:
		st.Err, err = c.failure(ctx, instance, info)
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// failure reads the details of a failed instance from its last event.
func (c *Client) failure(ctx context.Context, instance string, info provider.InstanceInfo) (*Error, error) {
	hist, err := c.p.Read(ctx, instance)
	if err != nil {
		return nil, err
	}
	for i := len(hist) - 1; i >= 0; i-- {
		if f, ok := hist[i].Kind.(provider.OrchestrationFailedEvent); ok {
			return &Error{Details: f.Details}, nil
		}
	}
	msg := ""
	if info.Output != nil {
		msg = *info.Output
	}
	return &Error{Details: appError(provider.AppOrchestrationFailed, msg)}, nil
}

// Wait waits until the instance has finished (following it across continue-as-new) or ctx ends,
// and returns its final status. A failed instance is not an error of Wait: look at Status.Err.
// Transient store errors (a Redis restart) are waited out.
//
// With a provider that pushes status changes (provider.StatusWatcher, as redisprovider does) Wait
// returns as soon as the instance finishes and costs one read of the instance's state per change
// plus one every few seconds; with others it polls, backing off from 5 ms to 250 ms.
func (c *Client) Wait(ctx context.Context, instance string) (Status, error) {
	return c.watch(ctx, instance, func(s State) (bool, error) { return s == StateCompleted || s == StateFailed, nil })
}

// WaitForStatusChange waits until the instance's custom status version is greater than
// lastSeenVersion, or the instance finishes, or ctx ends.
func (c *Client) WaitForStatusChange(ctx context.Context, instance string, lastSeenVersion uint64) (Status, error) {
	return c.watch(ctx, instance, func(s State) (bool, error) {
		if s == StateCompleted || s == StateFailed {
			return true, nil
		}
		cs, err := c.p.GetCustomStatus(ctx, instance, lastSeenVersion) // nil while unchanged
		return cs != nil, err
	})
}

// watchFallback is how often a watching client reads the state anyway, in case a push was missed.
const watchFallback = 3 * time.Second

// watch reads the instance's state (one read) until done says the wait is over, then returns the
// full Status (read once, at the end).
func (c *Client) watch(ctx context.Context, instance string, done func(State) (bool, error)) (Status, error) {
	if err := c.check("Wait"); err != nil {
		return Status{}, err
	}
	var changes <-chan struct{}
	if w, ok := c.p.(provider.StatusWatcher); ok {
		ch, stop := w.WatchStatus(instance)
		defer stop()
		changes = ch
	}
	last := Status{InstanceID: instance, State: StateNotFound}
	delay := 5 * time.Millisecond
	for {
		state, err := c.state(ctx, instance)
		ok := false
		if err == nil {
			last.State = state
			ok, err = done(state)
		}
		if err == nil && ok {
			var st Status
			if st, err = c.Status(ctx, instance); err == nil {
				return st, nil
			}
		}
		if err != nil && !provider.IsRetryable(err) {
			return last, err
		}
		wait := delay
		if changes != nil && err == nil {
			wait = watchFallback
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, ctx.Err()
		case <-changes:
			t.Stop()
		case <-t.C:
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

// state reads an instance's lifecycle state alone (one read).
func (c *Client) state(ctx context.Context, instance string) (State, error) {
	admin, err := c.admin()
	if err != nil {
		return StateNotFound, err
	}
	info, err := admin.GetInstanceInfo(ctx, instance)
	switch {
	case errors.Is(err, provider.ErrNotFound):
		return StateNotFound, nil
	case err != nil:
		return StateNotFound, err
	}
	return stateOf(info.Status), nil
}

// stateOf maps a stored status to the client's state (ContinuedAsNew is still Running).
func stateOf(status string) State {
	switch status {
	case provider.StatusCompleted:
		return StateCompleted
	case provider.StatusFailed:
		return StateFailed
	}
	return StateRunning
}

// Result waits for the instance to finish and decodes its output into T. A failed instance returns
// its *Error (errors.Is(err, ErrCanceled) for a cancelled one). Orchestration.Result is the same
// with T taken from the handle.
func Result[T any](ctx context.Context, c *Client, instance string) (T, error) {
	var zero T
	st, err := c.Wait(ctx, instance)
	if err != nil {
		return zero, err
	}
	if st.State == StateFailed {
		return zero, st.Err
	}
	return decode[T](st.Output)
}

// KV reads a key of an instance's key-value store.
func (c *Client) KV(ctx context.Context, instance, key string) (string, bool, error) {
	if err := c.check("KV"); err != nil {
		return "", false, err
	}
	return c.p.GetKVValue(ctx, instance, key)
}

// KVAll reads an instance's whole key-value store.
func (c *Client) KVAll(ctx context.Context, instance string) (map[string]string, error) {
	if err := c.check("KVAll"); err != nil {
		return nil, err
	}
	return c.p.GetKVAllValues(ctx, instance)
}

// WaitForKV waits until the instance's key-value store holds key and returns its value.
func (c *Client) WaitForKV(ctx context.Context, instance, key string) (string, error) {
	if err := c.check("WaitForKV"); err != nil {
		return "", err
	}
	delay := 5 * time.Millisecond
	for {
		v, ok, err := c.p.GetKVValue(ctx, instance, key)
		if err != nil && !errors.Is(err, provider.ErrNotFound) && !provider.IsRetryable(err) {
			return "", err
		}
		if ok {
			return v, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// The management calls below are thin wrappers over provider.Admin; they fail when the provider has
// no management support.

func (c *Client) admin() (provider.Admin, error) {
	if err := c.check("a management call"); err != nil {
		return nil, err
	}
	a, ok := c.p.Admin()
	if !ok {
		return nil, errors.New("dx: this provider has no management support (Provider.Admin)")
	}
	return a, nil
}

// ListInstances lists instance ids, all of them or those in state (Running, Completed, Failed).
func (c *Client) ListInstances(ctx context.Context, state State) ([]string, error) {
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	switch state {
	case "":
		return a.ListInstances(ctx)
	case StateRunning, StateCompleted, StateFailed:
		return a.ListInstancesByStatus(ctx, string(state))
	}
	return nil, fmt.Errorf("dx: ListInstances: state %q is none of Running, Completed, Failed (%w)", state, ErrInvalidInput)
}

// Info reads an instance's metadata.
func (c *Client) Info(ctx context.Context, instance string) (provider.InstanceInfo, error) {
	a, err := c.admin()
	if err != nil {
		return provider.InstanceInfo{}, err
	}
	return a.GetInstanceInfo(ctx, instance)
}

// Executions reads the metadata of every execution of an instance, oldest first.
func (c *Client) Executions(ctx context.Context, instance string) ([]provider.ExecutionInfo, error) {
	a, err := c.admin()
	if err != nil {
		return nil, err
	}
	ids, err := a.ListExecutions(ctx, instance)
	if err != nil {
		return nil, err
	}
	out := make([]provider.ExecutionInfo, 0, len(ids))
	for _, id := range ids {
		info, err := a.GetExecutionInfo(ctx, instance, id)
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// History reads the events of one execution of an instance; execution 0 means the latest.
func (c *Client) History(ctx context.Context, instance string, execution uint64) ([]provider.Event, error) {
	if err := c.check("History"); err != nil {
		return nil, err
	}
	if execution == 0 {
		return c.p.Read(ctx, instance)
	}
	return c.p.ReadWithExecution(ctx, instance, execution)
}

// Tree returns an instance and all its sub-orchestrations.
func (c *Client) Tree(ctx context.Context, instance string) (provider.InstanceTree, error) {
	a, err := c.admin()
	if err != nil {
		return provider.InstanceTree{}, err
	}
	return a.GetInstanceTree(ctx, instance)
}

// Delete deletes a root instance with its sub-orchestrations; a running one only with force.
func (c *Client) Delete(ctx context.Context, instance string, force bool) (provider.DeleteInstanceResult, error) {
	a, err := c.admin()
	if err != nil {
		return provider.DeleteInstanceResult{}, err
	}
	return a.DeleteInstance(ctx, instance, force)
}

// Purge deletes the finished root instances the filter selects (ids, finished before a time, a limit).
func (c *Client) Purge(ctx context.Context, filter provider.InstanceFilter) (provider.DeleteInstanceResult, error) {
	a, err := c.admin()
	if err != nil {
		return provider.DeleteInstanceResult{}, err
	}
	return a.DeleteInstanceBulk(ctx, filter)
}

// Prune deletes old executions of an instance (continue-as-new leaves them behind), keeping the
// current one and what opts keeps.
func (c *Client) Prune(ctx context.Context, instance string, opts provider.PruneOptions) (provider.PruneResult, error) {
	a, err := c.admin()
	if err != nil {
		return provider.PruneResult{}, err
	}
	return a.PruneExecutions(ctx, instance, opts)
}
