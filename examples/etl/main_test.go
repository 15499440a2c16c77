package main

import (
	"testing"

	"github.com/duroxide-go/dxredis/dxtest"
	"github.com/duroxide-go/dxredis/provider"
)

func TestPipeline(t *testing.T) {
	env := dxtest.New(t, dxtest.WithRuntimeOptions(options()))
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	id := env.Start(Pipeline.Name(), Batch{ID: "b1", Rows: []string{"a", " b"}})
	if n := dxtest.Result[int](env, id); n != 2 {
		t.Fatalf("loaded %d", n)
	}
	var sessions, tags int
	for _, ev := range env.History(id) {
		if a, ok := ev.Kind.(provider.ActivityScheduledEvent); ok {
			if a.SessionID != nil && *a.SessionID == "b1" && a.Name == "Transform" {
				sessions++
			}
			if a.Tag != nil && *a.Tag == "warehouse" && a.Name == "Load" {
				tags++
			}
		}
	}
	if sessions != 2 || tags != 1 {
		t.Fatalf("transforms on the session: %d, loads tagged: %d", sessions, tags)
	}
}
