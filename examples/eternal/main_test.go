package main

import (
	"testing"
	"time"

	"github.com/duroxide-go/dxredis/dxtest"
)

// Ten hourly steps, three per execution: four executions, ten virtual hours, milliseconds of real time.
func TestCountsAcrossExecutions(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	start := env.Now()
	id := env.Start(Counter.Name(), Plan{Limit: 10, PerExec: 3, Every: time.Hour})
	if n := dxtest.Result[int](env, id); n != 10 {
		t.Fatalf("counted to %d", n)
	}
	st := env.Status(id)
	if st.ExecutionID != 4 || env.Now().Sub(start) != 10*time.Hour {
		t.Fatalf("execution %d, clock moved %v", st.ExecutionID, env.Now().Sub(start))
	}
	if v, _ := env.KV(id, "count"); v != "10" {
		t.Fatalf("KV count %q", v)
	}
	if s := env.CustomStatus(id); s != "count 10, execution 4" {
		t.Fatalf("custom status %q", s)
	}
	env.Replay(id) // every execution still replays against this code
}
