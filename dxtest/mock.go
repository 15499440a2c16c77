package dxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/internal/dxhook"
	"github.com/duroxide-go/dxredis/provider"
)

// ActivityMock stands in for an activity. Each call takes the next answer given with Return,
// ReturnError or Do, in order; the last answer repeats:
//
//	env.OnActivity("Charge").ReturnError(errors.New("card declined")).Return(Receipt{ID: "r-1"})
//
// fails the first call and succeeds every later one.
type ActivityMock struct {
	env  *Env
	name string

	mu      sync.Mutex
	answers []func(ctx context.Context, input string) (string, error)
	inputs  []string
}

// OnActivity mocks the activity name on env.Runtime, or returns the mock of that name already made
// (OnActivity, the function, mocks an activity handle with typed answers). A mock overrides the
// activity registered under that name with dx.RegisterActivity, before or after, for this
// environment only: a test registers the real activities, as the program does, and mocks the one
// it needs to control.
func (e *Env) OnActivity(name string) *ActivityMock {
	e.t.Helper()
	e.mu.Lock()
	m, ok := e.mocks[name]
	if !ok {
		m = &ActivityMock{env: e, name: name}
		e.mocks[name] = m
	}
	e.mu.Unlock()
	if !ok {
		call := func(ctx context.Context, input string) (string, error) {
			out, err := m.call(ctx, dx.Raw(input))
			return string(out), err
		}
		if err := dxhook.MockActivity(e.Runtime, name, call); err != nil {
			e.t.Fatalf("dxtest: OnActivity(%q): %v", name, err)
		}
	}
	return m
}

// Return makes a call return v (encoded as JSON, as the real activity's result would be).
func (m *ActivityMock) Return(v any) *ActivityMock {
	m.env.t.Helper()
	out, err := encode(v)
	if err != nil {
		m.env.t.Fatalf("dxtest: OnActivity(%q).Return: %v", m.name, err)
	}
	return m.add(func(context.Context, string) (string, error) { return out, nil })
}

// ReturnError makes a call fail with err; the orchestration's Await returns a *dx.Error with its text.
func (m *ActivityMock) ReturnError(err error) *ActivityMock {
	m.env.t.Helper()
	if err == nil {
		m.env.t.Fatalf("dxtest: OnActivity(%q).ReturnError(nil): give an error (use Return for success)", m.name)
	}
	return m.add(func(context.Context, string) (string, error) { return "", err })
}

// Do makes a call run fn, a func(context.Context, In) (Out, error) like a real activity.
func (m *ActivityMock) Do(fn any) *ActivityMock {
	m.env.t.Helper()
	v := reflect.ValueOf(fn)
	ft := v.Type()
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	if ft.Kind() != reflect.Func || ft.NumIn() != 2 || ft.In(0) != ctxType || ft.NumOut() != 2 || ft.Out(1) != errType {
		m.env.t.Fatalf("dxtest: OnActivity(%q).Do: want a func(context.Context, In) (Out, error), got %T", m.name, fn)
	}
	return m.add(func(ctx context.Context, input string) (string, error) {
		in := reflect.New(ft.In(1))
		if err := json.Unmarshal([]byte(input), in.Interface()); err != nil {
			return "", fmt.Errorf("dxtest: mock %s: input %s does not decode into %v: %w", m.name, input, ft.In(1), err)
		}
		out := v.Call([]reflect.Value{reflect.ValueOf(ctx), in.Elem()})
		if err, _ := out[1].Interface().(error); err != nil {
			return "", err
		}
		return encode(out[0].Interface())
	})
}

func (m *ActivityMock) add(a func(context.Context, string) (string, error)) *ActivityMock {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.answers = append(m.answers, a)
	return m
}

// Calls returns how many times the activity was called.
func (m *ActivityMock) Calls() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.inputs)
}

// Inputs returns the JSON input of every call, in call order.
func (m *ActivityMock) Inputs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.inputs...)
}

func (m *ActivityMock) call(ctx context.Context, input dx.Raw) (dx.Raw, error) {
	m.mu.Lock()
	n := len(m.inputs)
	m.inputs = append(m.inputs, string(input))
	var a func(context.Context, string) (string, error)
	if len(m.answers) > 0 {
		a = m.answers[min(n, len(m.answers)-1)]
	}
	m.mu.Unlock()
	if a == nil {
		return "", errors.New("dxtest: mock " + m.name + " has no answer: give one with Return, ReturnError or Do")
	}
	out, err := a(ctx, string(input))
	return dx.Raw(out), err
}

func encode(v any) (string, error) {
	if r, ok := v.(dx.Raw); ok {
		return string(r), nil
	}
	b, err := provider.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%T does not encode as JSON: %w", v, err)
	}
	return string(b), nil
}
