package main

import (
	"testing"

	"github.com/duroxide-go/dxredis/dxtest"
)

func TestHello(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	if got := dxtest.Result[string](env, env.Start(Hello.Name(), "world")); got != "Hello, world!" {
		t.Fatalf("got %q", got)
	}
}
