package main

import (
	"testing"

	"github.com/duroxide-go/dxredis/dxtest"
)

func TestHello(t *testing.T) {
	env := dxtest.New(t)
	register(env.Runtime)
	if got := dxtest.Result[string](env, env.Start("Hello", "world")); got != "Hello, world!" {
		t.Fatalf("got %q", got)
	}
}
