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

// BookTrip runs each step with its compensation; on failure it runs the compensations of the
// completed steps, last first, and fails with the step's error.
func BookTrip(ctx dx.Context, t Trip) (string, error) {
	steps := []struct{ do, undo string }{
		{"ReserveFlight", "CancelFlight"},
		{"ReserveHotel", "CancelHotel"},
		{"ChargeCard", "RefundCard"},
	}
	var undo []string
	for _, s := range steps {
		if _, err := dx.Call[string](ctx, s.do, t).Await(ctx); err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				if _, cerr := dx.Call[string](ctx, undo[i], t).Await(ctx); cerr != nil {
					return "", fmt.Errorf("%s failed (%v) and compensation %s failed too: %w", s.do, err, undo[i], cerr)
				}
			}
			return "", fmt.Errorf("%s failed, booking rolled back: %w", s.do, err)
		}
		undo = append(undo, s.undo)
	}
	return "booked for " + t.Traveller, nil
}

func register(rt *dx.Runtime) error {
	for _, name := range []string{"ReserveFlight", "ReserveHotel", "CancelFlight", "CancelHotel", "RefundCard"} {
		if err := dx.RegisterActivity(rt, name, func(_ context.Context, t Trip) (string, error) {
			fmt.Printf("  %s for %s\n", name, t.Traveller)
			return name + " done", nil
		}); err != nil {
			return err
		}
	}
	return errors.Join(
		dx.RegisterActivity(rt, "ChargeCard", func(_ context.Context, t Trip) (string, error) {
			if t.Cents > 100_000 {
				return "", errors.New("card declined")
			}
			fmt.Printf("  ChargeCard %d cents\n", t.Cents)
			return "charged", nil
		}),
		dx.Register(rt, "BookTrip", BookTrip),
	)
}

func main() {
	exenv.Main("saga", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		for _, t := range []Trip{{"ada", 50_000}, {"bob", 500_000}} {
			fmt.Printf("trip for %s:\n", t.Traveller)
			id, err := c.Start(ctx, "BookTrip", t)
			if err != nil {
				return err
			}
			out, err := dx.Result[string](ctx, c, id)
			if err != nil {
				fmt.Println("=>", err)
				continue
			}
			fmt.Println("=>", out)
		}
		return nil
	})
}
