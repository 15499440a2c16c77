package dxtest

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duroxide-go/dxredis/dx"
)

// Mock is an ActivityMock typed by an activity handle: its answers and inputs have the handle's
// types, checked by the compiler.
//
//	dxtest.OnActivity(env, Charge).ReturnError(errors.New("card declined")).Return(Receipt{ID: "r-1"})
type Mock[In, Out any] struct{ m *ActivityMock }

// OnActivity mocks the activity of handle a on env.Runtime: Env.OnActivity(a.Name()) with typed
// answers. The typed and the string-named mock of one name are one mock.
func OnActivity[In, Out any](e *Env, a dx.Activity[In, Out]) *Mock[In, Out] {
	e.t.Helper()
	return &Mock[In, Out]{e.OnActivity(a.Name())}
}

// Return makes a call return v.
func (m *Mock[In, Out]) Return(v Out) *Mock[In, Out] {
	m.m.env.t.Helper()
	m.m.Return(v)
	return m
}

// ReturnError makes a call fail with err; the orchestration's Await returns a *dx.Error with its text.
func (m *Mock[In, Out]) ReturnError(err error) *Mock[In, Out] {
	m.m.env.t.Helper()
	m.m.ReturnError(err)
	return m
}

// Do makes a call run fn, like the real activity.
func (m *Mock[In, Out]) Do(fn func(ctx context.Context, input In) (Out, error)) *Mock[In, Out] {
	m.m.add(func(ctx context.Context, input string) (string, error) {
		in, err := decode[In](input)
		if err != nil {
			return "", fmt.Errorf("dxtest: mock %s: %w", m.m.name, err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		return encode(out)
	})
	return m
}

// Calls returns how many times the activity was called.
func (m *Mock[In, Out]) Calls() int { return m.m.Calls() }

// Inputs returns the input of every call, in call order, decoded into In (a dx.Raw gets the JSON
// text as it is). An input that does not decode fails the test.
func (m *Mock[In, Out]) Inputs() []In {
	m.m.env.t.Helper()
	var ins []In
	for _, s := range m.m.Inputs() {
		in, err := decode[In](s)
		if err != nil {
			m.m.env.t.Fatalf("dxtest: mock %s: %v", m.m.name, err)
		}
		ins = append(ins, in)
	}
	return ins
}

// decode decodes a JSON payload into T, as dx does: a dx.Raw gets the text as it is.
func decode[T any](s string) (T, error) {
	var v T
	if r, ok := any(&v).(*dx.Raw); ok {
		*r = dx.Raw(s)
		return v, nil
	}
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return v, fmt.Errorf("input %s does not decode into %T: %w", s, v, err)
	}
	return v, nil
}
