package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/dxtest"
	"github.com/duroxide-go/dxredis/provider"
)

func TestBookingSucceeds(t *testing.T) {
	env := dxtest.New(t)
	if err := register(env.Runtime); err != nil {
		t.Fatal(err)
	}
	if got := dxtest.Result[string](env, env.Start("BookTrip", Trip{"ada", 100})); got != "booked for ada" {
		t.Fatalf("got %q", got)
	}
}

func TestFailedChargeIsCompensatedInReverse(t *testing.T) {
	env := dxtest.New(t)
	if err := dx.Register(env.Runtime, "BookTrip", BookTrip); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, name := range []string{"ReserveFlight", "ReserveHotel", "CancelFlight", "CancelHotel", "RefundCard"} {
		env.OnActivity(name).Return("ok")
	}
	env.OnActivity("ChargeCard").ReturnError(errors.New("card declined"))

	id := env.Start("BookTrip", Trip{"bob", 1})
	err := env.Err(id)
	if err == nil || !strings.Contains(err.Error(), "ChargeCard failed, booking rolled back: card declined") {
		t.Fatalf("error %v", err)
	}
	for _, ev := range env.History(id) {
		if a, ok := ev.Kind.(provider.ActivityScheduledEvent); ok {
			calls = append(calls, a.Name)
		}
	}
	if got := strings.Join(calls, " "); got != "ReserveFlight ReserveHotel ChargeCard CancelHotel CancelFlight" {
		t.Fatalf("calls in order: %s", got)
	}
	if env.OnActivity("RefundCard").Calls() != 0 || env.OnActivity("CancelHotel").Calls() != 1 || env.OnActivity("CancelFlight").Calls() != 1 {
		t.Fatalf("compensations: refund %d hotel %d flight %d", env.OnActivity("RefundCard").Calls(),
			env.OnActivity("CancelHotel").Calls(), env.OnActivity("CancelFlight").Calls())
	}
}
