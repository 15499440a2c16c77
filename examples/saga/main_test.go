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
	if got := dxtest.Result[string](env, env.Start(BookTrip.Name(), Trip{"ada", 100})); got != "booked for ada" {
		t.Fatalf("got %q", got)
	}
}

func TestFailedChargeIsCompensatedInReverse(t *testing.T) {
	env := dxtest.New(t)
	if err := BookTrip.Register(env.Runtime, bookTrip); err != nil {
		t.Fatal(err)
	}
	var calls []string
	mocks := map[string]*dxtest.Mock[Trip, string]{}
	for _, a := range []dx.Activity[Trip, string]{ReserveFlight, ReserveHotel, CancelFlight, CancelHotel, RefundCard} {
		mocks[a.Name()] = dxtest.OnActivity(env, a).Return("ok")
	}
	dxtest.OnActivity(env, ChargeCard).ReturnError(errors.New("card declined"))

	id := env.Start(BookTrip.Name(), Trip{"bob", 1})
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
	refund, hotel, flight := mocks["RefundCard"].Calls(), mocks["CancelHotel"].Calls(), mocks["CancelFlight"].Calls()
	if refund != 0 || hotel != 1 || flight != 1 {
		t.Fatalf("compensations: refund %d hotel %d flight %d", refund, hotel, flight)
	}
}
