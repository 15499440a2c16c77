// Command saga books a trip in three steps; when a step fails, the steps already done are undone
// (compensated) in reverse order.
//
//	go run ./examples/saga
package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Trip is the booking request.
type Trip struct {
	Traveller string `json:"traveller"`
	Cents     int    `json:"cents"`
}

// The activities and the orchestration, each a name with its input and output types.
var (
	ReserveFlight = dx.NewActivity[Trip, string]("ReserveFlight")
	ReserveHotel  = dx.NewActivity[Trip, string]("ReserveHotel")
	ChargeCard    = dx.NewActivity[Trip, string]("ChargeCard")
	CancelFlight  = dx.NewActivity[Trip, string]("CancelFlight")
	CancelHotel   = dx.NewActivity[Trip, string]("CancelHotel")
	RefundCard    = dx.NewActivity[Trip, string]("RefundCard")

	BookTrip = dx.NewOrchestration[Trip, string]("BookTrip")
)

// bookTrip runs each step with its compensation; on failure it runs the compensations of the
// completed steps, last first, and fails with the step's error.
func bookTrip(ctx dx.Context, t Trip) (string, error) {
	steps := []struct{ do, undo dx.Activity[Trip, string] }{
		{ReserveFlight, CancelFlight},
		{ReserveHotel, CancelHotel},
		{ChargeCard, RefundCard},
	}
	var undo []dx.Activity[Trip, string]
	for _, s := range steps {
		if _, err := s.do.Call(ctx, t).Await(ctx); err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				if _, cerr := undo[i].Call(ctx, t).Await(ctx); cerr != nil {
					return "", fmt.Errorf("%s failed (%v) and compensation %s failed too: %w", s.do.Name(), err, undo[i].Name(), cerr)
				}
			}
			return "", fmt.Errorf("%s failed, booking rolled back: %w", s.do.Name(), err)
		}
		undo = append(undo, s.undo)
	}
	return "booked for " + t.Traveller, nil
}

func register(rt *dx.Runtime) error {
	for _, a := range []dx.Activity[Trip, string]{ReserveFlight, ReserveHotel, CancelFlight, CancelHotel, RefundCard} {
		if err := a.Register(rt, func(_ context.Context, t Trip) (string, error) {
			fmt.Printf("  %s for %s\n", a.Name(), t.Traveller)
			return a.Name() + " done", nil
		}); err != nil {
			return err
		}
	}
	return errors.Join(
		ChargeCard.Register(rt, func(_ context.Context, t Trip) (string, error) {
			if t.Cents > 100_000 {
				return "", errors.New("card declined")
			}
			fmt.Printf("  ChargeCard %d cents\n", t.Cents)
			return "charged", nil
		}),
		BookTrip.Register(rt, bookTrip),
	)
}

func main() {
	exenv.Main("saga", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		for _, t := range []Trip{{"ada", 50_000}, {"bob", 500_000}} {
			fmt.Printf("trip for %s:\n", t.Traveller)
			id, err := BookTrip.Start(ctx, c, t)
			if err != nil {
				return err
			}
			out, err := BookTrip.Result(ctx, c, id)
			if err != nil {
				fmt.Println("=>", err)
				continue
			}
			fmt.Println("=>", out)
		}
		return nil
	})
}
