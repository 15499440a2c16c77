package main

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dxtest"
)

func TestApproved(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	id := env.Start(Approve.Name(), Expense{ID: "e1", Cents: 50_000})
	env.WaitForCustomStatus(id, "awaiting approval")
	env.RaiseEvent(id, "Decision", Decision{Approved: true, By: "grace"})
	if got := dxtest.Result[string](env, id); got != "approved by grace and paid" {
		t.Fatalf("got %q", got)
	}
	if s := env.CustomStatus(id); s != "decided" {
		t.Fatalf("custom status %q", s)
	}
}

func TestRejectedAfterADay(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	id := env.Start(Approve.Name(), Expense{ID: "e2", Cents: 50_000})
	env.After(24*time.Hour, func() { env.RaiseEvent(id, "Decision", Decision{By: "linus"}) })
	if got := dxtest.Result[string](env, id); got != "rejected by linus" {
		t.Fatalf("got %q", got)
	}
}

// Nobody decides: the three-day timeout fires, in milliseconds of real time.
func TestTimeout(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	start := env.Now()
	id := env.Start(Approve.Name(), Expense{ID: "e3", Cents: 50_000})
	if got := dxtest.Result[string](env, id); got != "escalated: nobody decided in time" {
		t.Fatalf("got %q", got)
	}
	if env.CustomStatus(id) != "timed out" || env.Now().Sub(start) != Timeout {
		t.Fatalf("custom status %q, clock moved %v", env.CustomStatus(id), env.Now().Sub(start))
	}
}

func TestSmallExpensesNeedNoApproval(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	if got := dxtest.Result[string](env, env.Start(Approve.Name(), Expense{ID: "e4", Cents: 500})); got != "auto-approved" {
		t.Fatalf("got %q", got)
	}
}
