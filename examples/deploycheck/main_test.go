package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
	"github.com/duroxide-go/dxredis/redisprovider"
)

func versionsText(vs []redisprovider.VersionInFlight) string {
	var b strings.Builder
	for _, v := range vs {
		fmt.Fprintf(&b, "%s %s %d; ", v.Orchestration, v.Version, v.Running)
	}
	return b.String()
}

// The whole story, on an embedded miniredis: the reordered build is caught with the orders
// named, the versioned one passes, the meter moves onto 2.0.0 at its continue-as-new, the old
// versions drain and a build without them passes.
func TestDeployCheckStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := redisprovider.New(ctx, redisprovider.Options{Addr: miniredis.RunT(t).Addr(), Namespace: "deploycheck",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	o, err := demo(ctx, p, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	for _, b := range o.Reordered.Breaks {
		if b.Kind != dx.BreakNondeterminism || b.EventID != 2 || b.History != `activity Reserve("`+b.Instance+`")` ||
			b.Code != `calls activity Charge("`+b.Instance+`")` {
			t.Errorf("break %v", b)
		}
		broken = append(broken, b.Instance)
	}
	if strings.Join(broken, " ") != "order-1 order-2 order-3" {
		t.Fatalf("the reordered build breaks %v; report:\n%v", broken, o.Reordered)
	}
	if !o.Versioned.OK() || !o.Drained.OK() || len(o.TooEarly.Breaks) != 4 {
		t.Fatalf("versioned:\n%v\ndrained:\n%v\ntoo early:\n%v", o.Versioned, o.Drained, o.TooEarly)
	}
	for _, c := range []struct{ got, want string }{
		{versionsText(o.MeterBefore), "Meter 1.0.0 1; Order 1.0.0 3; "},
		{versionsText(o.MeterAfter), "Meter 2.0.0 1; Order 1.0.0 3; "},
		{versionsText(o.Final), "Meter 2.0.0 1; "},
	} {
		if c.got != c.want {
			t.Errorf("versions in flight: %q, want %q", c.got, c.want)
		}
	}

	// The same checks as a CI step: the drained build against what is live now.
	rt := dx.NewRuntime(nil, dx.Options{})
	if err := drained(rt); err != nil {
		t.Fatal(err)
	}
	dxtest.RequireReplayable(t, p, rt)
}
