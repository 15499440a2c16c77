package dx

import "fmt"

// Each call that takes options takes its own option type, so the compiler refuses an option that
// does not apply (WithRetry on a sub-orchestration, WithInstanceID on a continue-as-new):
//
//	option          Call  CallSub  Client.Start  ContinueAsNew  StartOrchestration
//	OnSession        x
//	WithTag          x
//	WithRetry        x
//	WithInstanceID         x        x
//	WithVersion            x        x             x              x
//
// The typed handles' methods take the same types as the calls they stand for (Activity.Call a
// CallOption, Orchestration.Start a StartOption, ...). A nil option is ignored.

// CallOption configures an activity call: Call and Activity.Call. OnSession, WithTag and WithRetry
// are CallOptions.
type CallOption interface{ applyCall(*options) }

// SubOption configures a sub-orchestration: CallSub and Orchestration.CallSub. WithInstanceID and
// WithVersion are SubOptions.
type SubOption interface{ applySub(*options) }

// StartOption configures a client's start: Client.Start and Orchestration.Start. WithInstanceID and
// WithVersion are StartOptions.
type StartOption interface{ applyStart(*options) }

// ContinueOption configures a continue-as-new: ContinueAsNew and Orchestration.ContinueAsNew.
// WithVersion is a ContinueOption.
type ContinueOption interface{ applyContinue(*options) }

// DetachedOption configures a detached start from orchestration code: Context.StartOrchestration
// and Orchestration.StartDetached. WithVersion is a DetachedOption.
type DetachedOption interface{ applyDetached(*options) }

type options struct {
	session  *string
	tag      *string
	retry    *RetryPolicy
	instance *string
	version  *string
}

// callOption is an option that only activity calls take.
type callOption func(*options)

func (f callOption) applyCall(o *options) { f(o) }

// OnSession routes the activity to the worker that owns session id (any worker claims an unowned
// session), so activities of one session run on one process in order of scheduling. An empty id
// fails the call with ErrInvalidInput.
func OnSession(id string) CallOption { return callOption(func(o *options) { o.session = &id }) }

// WithTag routes the activity to workers whose tag filter accepts tag. An empty tag fails the call
// with ErrInvalidInput.
func WithTag(tag string) CallOption { return callOption(func(o *options) { o.tag = &tag }) }

// WithRetry retries the activity under policy; a policy with MaxAttempts below 1 or a negative
// Timeout fails the call with ErrInvalidInput.
func WithRetry(policy RetryPolicy) CallOption {
	return callOption(func(o *options) { o.retry = &policy })
}

// InstanceOption is WithInstanceID's option: a SubOption and a StartOption.
type InstanceOption struct{ id string }

func (i InstanceOption) applySub(o *options)   { o.instance = &i.id }
func (i InstanceOption) applyStart(o *options) { o.instance = &i.id }

// WithInstanceID names the instance a sub-orchestration or a client's start creates. An empty id
// fails the call with ErrInvalidInput.
func WithInstanceID(id string) InstanceOption { return InstanceOption{id} }

// VersionOption is WithVersion's option: a SubOption, a StartOption, a ContinueOption and a
// DetachedOption.
type VersionOption struct{ v string }

func (v VersionOption) applySub(o *options)      { o.version = &v.v }
func (v VersionOption) applyStart(o *options)    { o.version = &v.v }
func (v VersionOption) applyContinue(o *options) { o.version = &v.v }
func (v VersionOption) applyDetached(o *options) { o.version = &v.v }

// WithVersion picks the orchestration version (a semantic version such as "2.0.0"); one that is
// not a semantic version fails the call with ErrInvalidInput.
func WithVersion(v string) VersionOption { return VersionOption{v} }

// collect applies the options of one call site and checks their values.
func collect[O any](opts []O, apply func(O, *options)) (options, error) {
	var o options
	for _, opt := range opts {
		if any(opt) != nil {
			apply(opt, &o)
		}
	}
	if o.retry != nil && o.retry.MaxAttempts < 1 {
		return o, fmt.Errorf("dx: RetryPolicy.MaxAttempts must be at least 1, got %d (%w)", o.retry.MaxAttempts, ErrInvalidInput)
	}
	if o.retry != nil && o.retry.Timeout < 0 {
		return o, fmt.Errorf("dx: RetryPolicy.Timeout must not be negative, got %v (use 0 for no timeout) (%w)", o.retry.Timeout, ErrInvalidInput)
	}
	if o.session != nil && *o.session == "" {
		return o, fmt.Errorf("dx: OnSession needs a non-empty session id (%w)", ErrInvalidInput)
	}
	if o.tag != nil && *o.tag == "" {
		// The store refuses an empty tag, and its ack with it: refused here, the call's future
		// fails instead of the whole turn.
		return o, fmt.Errorf("dx: WithTag needs a non-empty tag (%w)", ErrInvalidInput)
	}
	if o.instance != nil && *o.instance == "" {
		return o, fmt.Errorf("dx: WithInstanceID needs a non-empty id (%w)", ErrInvalidInput)
	}
	if o.version != nil {
		if _, err := parseVersion(*o.version); err != nil {
			return o, err
		}
	}
	return o, nil
}
