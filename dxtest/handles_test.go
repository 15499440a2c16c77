package dxtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
)

var (
	chargeA   = dx.NewActivity[order, string]("Charge")
	shipA     = dx.NewActivity[string, bool]("Ship")
	checkoutO = dx.NewOrchestration[order, receipt]("Checkout")
)

func checkoutByHandle(ctx dx.Context, o order) (receipt, error) {
	ch, err := chargeA.Call(ctx, o).Await(ctx)
	if err != nil {
		return receipt{}, err
	}
	if _, err := shipA.Call(ctx, o.ID).Await(ctx); err != nil {
		return receipt{}, err
	}
	return receipt{OrderID: o.ID, Charge: ch}, nil
}

// A mock made from a handle answers and reports with the handle's types, and is the mock that
// the activity's name gives.
func TestTypedMock(t *testing.T) {
	env := dxtest.New(t)
	if err := checkoutO.Register(env.Runtime, checkoutByHandle); err != nil {
		t.Fatal(err)
	}
	charge := dxtest.OnActivity(env, chargeA).ReturnError(errors.New("card declined")).Return("ch-2")
	ship := dxtest.OnActivity(env, shipA).Do(func(_ context.Context, id string) (bool, error) { return id == "o-2", nil })

	if err := env.Err(env.Start(checkoutO.Name(), order{ID: "o-1", Cents: 5})); err == nil || !strings.Contains(err.Error(), "card declined") {
		t.Fatalf("first checkout: %v", err)
	}
	id, err := checkoutO.Start(context.Background(), env.Client, order{ID: "o-2", Cents: 7})
	if err != nil {
		t.Fatal(err)
	}
	if got := dxtest.Result[receipt](env, id); got != (receipt{OrderID: "o-2", Charge: "ch-2"}) {
		t.Fatalf("second checkout %+v", got)
	}
	if got := charge.Inputs(); len(got) != 2 || got[0] != (order{ID: "o-1", Cents: 5}) || got[1] != (order{ID: "o-2", Cents: 7}) {
		t.Fatalf("Charge inputs %+v", got)
	}
	if ship.Calls() != 1 || ship.Inputs()[0] != "o-2" {
		t.Fatalf("Ship calls %d inputs %v", ship.Calls(), ship.Inputs())
	}
	if env.OnActivity("Charge").Calls() != 2 {
		t.Fatalf("the string-named mock of Charge is another mock")
	}
}

// A typed mock of raw payloads gets the JSON text as it is.
func TestTypedMockOfRawPayloads(t *testing.T) {
	env := dxtest.New(t)
	echo := dx.NewActivity[dx.Raw, dx.Raw]("Echo")
	o := dx.NewOrchestration[order, dx.Raw]("EchoOrder")
	if err := o.Register(env.Runtime, func(ctx dx.Context, in order) (dx.Raw, error) {
		b, err := dx.NewActivity[order, dx.Raw]("Echo").Call(ctx, in).Await(ctx)
		return b, err
	}); err != nil {
		t.Fatal(err)
	}
	m := dxtest.OnActivity(env, echo).Do(func(_ context.Context, in dx.Raw) (dx.Raw, error) { return "[" + in + "]", nil })
	if got := dxtest.Result[dx.Raw](env, env.Start(o.Name(), order{ID: "o"})); got != `[{"id":"o","cents":0}]` {
		t.Fatalf("result %s", got)
	}
	if got := m.Inputs(); len(got) != 1 || got[0] != `{"id":"o","cents":0}` {
		t.Fatalf("inputs %q", got)
	}
}
