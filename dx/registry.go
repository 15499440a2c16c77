package dx

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/internal/dxhook"
)

func init() {
	dxhook.MockActivity = func(v any, name string, fn func(context.Context, string) (string, error)) error {
		rt, _ := v.(*Runtime)
		if rt == nil || name == "" || fn == nil {
			return fmt.Errorf("dx: mock activity %q needs a runtime, a name and a function (%w)", name, ErrInvalidInput)
		}
		rt.reg.mu.Lock()
		defer rt.reg.mu.Unlock()
		if rt.reg.mocks == nil {
			rt.reg.mocks = map[string]activityFunc{}
		}
		rt.reg.mocks[name] = fn
		return nil
	}
}

// orchestrationFunc is an orchestration after its input and output were bound to JSON.
type orchestrationFunc func(ctx Context, input string) (string, error)

// activityFunc is an activity after its input and output were bound to JSON.
type activityFunc func(ctx context.Context, input string) (string, error)

type orchVersion struct {
	version *semver.Version
	text    string // version.String(), what turns name it by
	fn      orchestrationFunc
}

// registry holds orchestrations by name and version, and activities by name.
type registry struct {
	mu            sync.RWMutex
	orchestration map[string][]orchVersion // sorted by version, ascending
	activities    map[string]activityFunc
	signatures    map[string]signature    // types of the handles orchestrations were registered through
	mocks         map[string]activityFunc // dxtest's mocks (internal/dxhook), run instead of activities
}

func newRegistry() *registry {
	r := &registry{orchestration: map[string][]orchVersion{}, activities: map[string]activityFunc{},
		signatures: map[string]signature{}}
	// The built-in schedule orchestration (schedule_run.go).
	v := semver.MustParse(scheduleVersion)
	r.orchestration[ScheduleOrchestration] = []orchVersion{{v, v.String(), bindOrchestration(ScheduleOrchestration, runSchedule)}}
	return r
}

// DefaultVersion is the version of an orchestration registered without one.
const DefaultVersion = "1.0.0"

// Register registers fn as the orchestration name, version 1.0.0: the string-named form of
// Orchestration.Register, for names known only at run time. fn receives the orchestration's
// input decoded from JSON into In (use Raw for the text as it is) and its output is stored as JSON.
//
// Registration is start-up code: it returns an error matching ErrInvalidInput, and registers
// nothing, for a nil runtime, an empty (or non-UTF-8) name, a nil fn, a name and version already
// registered, or a runtime already started. An error returned before Start is also returned by
// Start, so a program that ignores Register's result still fails at Start, not minutes later.
//
//	if err := dx.Register(rt, name, func(ctx dx.Context, in dx.Raw) (dx.Raw, error) {
//		return dx.Call[dx.Raw](ctx, name+".step", in).Await(ctx)
//	}); err != nil {
//		return err
//	}
func Register[In, Out any](rt *Runtime, name string, fn func(ctx Context, input In) (Out, error)) error {
	return RegisterVersion(rt, name, DefaultVersion, fn)
}

// RegisterVersion registers fn as version (a semantic version such as "2.0.0") of the orchestration
// name. Starting an instance without a version runs the latest registered version; an execution
// keeps the version it started with until it continues as new. It fails like Register, and on a
// version that is not a semantic version.
func RegisterVersion[In, Out any](rt *Runtime, name, version string, fn func(ctx Context, input In) (Out, error)) error {
	return registerVersion(rt, name, version, fn, nil)
}

// registerVersion registers an orchestration version; sig is the handle's types when registered
// through a handle (Orchestration.RegisterVersion), nil when registered by name.
func registerVersion[In, Out any](rt *Runtime, name, version string, fn func(ctx Context, input In) (Out, error), sig *signature) error {
	if rt == nil {
		return fmt.Errorf("dx: RegisterVersion(%q) on a nil *Runtime: use dx.NewRuntime (%w)", name, ErrInvalidInput)
	}
	if name == "" || fn == nil || !utf8.ValidString(name) {
		return rt.registrationFailed(fmt.Errorf("dx: Register(%q) needs a name (non-empty, valid UTF-8) and a function (%w)", name, ErrInvalidInput))
	}
	v, err := parseVersion(version)
	if err != nil {
		return rt.registrationFailed(fmt.Errorf("dx: Register(%q): %w", name, err))
	}
	if err := rt.registrable("orchestration", name); err != nil {
		return err
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ov := range r.orchestration[name] {
		if sameVersion(ov.version, v) {
			return rt.registrationFailed(fmt.Errorf("dx: orchestration %q version %s is already registered (%w)", name, v, ErrInvalidInput))
		}
	}
	if had, ok := r.signatures[name]; ok && sig != nil && had != *sig {
		return rt.registrationFailed(fmt.Errorf("dx: orchestration %q version %s: its handle has types %v, another handle registered with this name has %v: one name has one signature (%w)", name, v, *sig, had, ErrInvalidInput))
	}
	if sig != nil {
		r.signatures[name] = *sig
	}
	vs := append(r.orchestration[name], orchVersion{v, v.String(), bindOrchestration(name, fn)})
	slices.SortFunc(vs, func(a, b orchVersion) int { return compareVersions(a.version, b.version) })
	r.orchestration[name] = vs
	return nil
}

// RegisterActivity registers fn as the activity name: the string-named form of Activity.Register. fn receives the activity's input decoded from
// JSON into In and its result is stored as JSON; an error it returns fails the activity (the
// orchestration's Await returns it as an *Error). It fails like Register (the name already
// registered, the runtime started...).
//
//	if err := dx.RegisterActivity(rt, "Greet", func(ctx context.Context, name string) (string, error) {
//		return "Hello, " + name + "!", nil
//	}); err != nil {
//		return err
//	}
func RegisterActivity[In, Out any](rt *Runtime, name string, fn func(ctx context.Context, input In) (Out, error)) error {
	if rt == nil {
		return fmt.Errorf("dx: RegisterActivity(%q) on a nil *Runtime: use dx.NewRuntime (%w)", name, ErrInvalidInput)
	}
	if name == "" || fn == nil || !utf8.ValidString(name) {
		return rt.registrationFailed(fmt.Errorf("dx: RegisterActivity(%q) needs a name (non-empty, valid UTF-8) and a function (%w)", name, ErrInvalidInput))
	}
	if err := rt.registrable("activity", name); err != nil {
		return err
	}
	r := rt.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.activities[name]; ok {
		return rt.registrationFailed(fmt.Errorf("dx: activity %q is already registered (%w)", name, ErrInvalidInput))
	}
	r.activities[name] = bindActivity(name, fn)
	return nil
}

// registrable refuses a registration on a started runtime: its dispatchers are fetching already,
// and an item fetched before the registration would be abandoned (or fail as poison) for want of it.
func (rt *Runtime) registrable(what, name string) error {
	rt.mu.Lock()
	running := rt.running
	rt.mu.Unlock()
	if !running {
		return nil
	}
	err := fmt.Errorf("dx: %s %q registered after Start: register everything before Start (%w)", what, name, ErrInvalidInput)
	rt.opts.Logger.Error(err.Error())
	return err
}

// registrationFailed keeps the first registration error for Start to return.
func (rt *Runtime) registrationFailed(err error) error {
	rt.mu.Lock()
	if rt.regErr == nil {
		rt.regErr = err
	}
	rt.mu.Unlock()
	return err
}

// names returns the registered orchestrations (with their versions, the built-in schedule left
// out) and activities, sorted, for a log record.
func (r *registry) names() (orchestrations, activities []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for name, vs := range r.orchestration {
		if name == ScheduleOrchestration {
			continue // built in
		}
		for _, v := range vs {
			orchestrations = append(orchestrations, name+"@"+v.text)
		}
	}
	for name := range r.activities {
		activities = append(activities, name)
	}
	slices.Sort(orchestrations)
	slices.Sort(activities)
	return orchestrations, activities
}

// resolve finds the orchestration handler: the exact version when one is given, else the latest.
func (r *registry) resolve(name string, version *string) (orchVersion, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.orchestration[name]
	if len(vs) == 0 {
		return orchVersion{}, false
	}
	if version == nil {
		return vs[len(vs)-1], true
	}
	for _, ov := range vs { // the version as registered: no parse (a regexp) per turn
		if ov.text == *version {
			return ov, true
		}
	}
	want, err := semver.NewVersion(*version)
	if err != nil {
		return orchVersion{}, false
	}
	for _, ov := range vs {
		if sameVersion(ov.version, want) {
			return ov, true
		}
	}
	return orchVersion{}, false
}

// Versions compare as duroxide's (Rust semver's) do: build metadata counts, unlike in semver's
// precedence, so 1.0.0+b.1 and 1.0.0+b.2 are two versions, the second the later, and a start for
// 1.0.0+meta does not run 1.0.0.
func sameVersion(a, b *semver.Version) bool {
	return a.Equal(b) && a.Metadata() == b.Metadata()
}

func compareVersions(a, b *semver.Version) int {
	if c := a.Compare(b); c != 0 {
		return c
	}
	return strings.Compare(a.Metadata(), b.Metadata())
}

// knows reports whether some version of the orchestration name is registered.
func (r *registry) knows(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.orchestration[name]) > 0
}

func (r *registry) activity(name string) (activityFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if fn, ok := r.mocks[name]; ok {
		return fn, true
	}
	fn, ok := r.activities[name]
	return fn, ok
}

// inputError is an input that does not decode into the function's input type.
type inputError struct {
	what, name string
	typ        reflect.Type
	err        error
}

func (e *inputError) Error() string {
	return fmt.Sprintf("%s %s: input does not decode into %v: %v", e.what, e.name, e.typ, e.err)
}

func bindOrchestration[In, Out any](name string, fn func(Context, In) (Out, error)) orchestrationFunc {
	return func(ctx Context, input string) (string, error) {
		in, err := decode[In](input)
		if err != nil {
			return "", &inputError{"orchestration", name, reflect.TypeFor[In](), err}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		return encode(out)
	}
}

func bindActivity[In, Out any](name string, fn func(context.Context, In) (Out, error)) activityFunc {
	return func(ctx context.Context, input string) (string, error) {
		in, err := decode[In](input)
		if err != nil {
			return "", &inputError{"activity", name, reflect.TypeFor[In](), err}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		return encode(out)
	}
}
