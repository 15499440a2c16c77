package main

import (
	"errors"
	"testing"

	"github.com/duroxide-go/dxredis/dxtest"
)

func TestPartialFailureIsReported(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	r := dxtest.Result[Report](env, env.Start(Process.Name(), []string{"a.csv", "missing.csv", "bb.csv"}))
	if r.Lines != 50+60 || len(r.Failed) != 1 || r.Failed["missing.csv"] != "missing.csv: no such file" {
		t.Fatalf("report %+v", r)
	}
}

func TestEveryFileFails(t *testing.T) {
	env := dxtest.New(t)
	dxtest.OnActivity(env, CountLines).ReturnError(errors.New("disk on fire"))
	if err := Process.Register(env.Runtime, process); err != nil {
		t.Fatal(err)
	}
	r := dxtest.Result[Report](env, env.Start(Process.Name(), []string{"a", "b"}))
	if r.Lines != 0 || len(r.Failed) != 2 || r.Failed["b"] != "disk on fire" {
		t.Fatalf("report %+v", r)
	}
}
