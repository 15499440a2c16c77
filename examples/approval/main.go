// Command approval asks a person to approve an expense: the orchestration waits for an external
// event, gives up after a timeout, and shows where it stands in its custom status.
//
//	go run ./examples/approval
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Expense is the request.
type Expense struct {
	ID    string `json:"id"`
	Cents int    `json:"cents"`
}

// Decision is the approver's answer, raised as the event "Decision".
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// Timeout is how long the approver has.
const Timeout = 72 * time.Hour

// Pay and Approve are the activity and the orchestration, by name and types.
var (
	Pay     = dx.NewActivity[Expense, string]("Pay")
	Approve = dx.NewOrchestration[Expense, string]("Approve")
)

// approve waits for a Decision or the timeout, whichever comes first. The custom status tells
// clients what it waits for; once it reads "awaiting approval" the event will be delivered (an
// event raised before the orchestration waits for it is recorded but not delivered).
func approve(ctx dx.Context, e Expense) (string, error) {
	if e.Cents < 10_000 {
		return "auto-approved", nil
	}
	decision := dx.WaitEvent[Decision](ctx, "Decision")
	timeout := ctx.Timer(Timeout)
	ctx.SetCustomStatus("awaiting approval")
	switch dx.Select(ctx, decision, timeout) {
	case decision:
		d, err := decision.Await(ctx)
		if err != nil {
			return "", err
		}
		ctx.SetCustomStatus("decided")
		if !d.Approved {
			return "rejected by " + d.By, nil
		}
		if _, err := Pay.Call(ctx, e).Await(ctx); err != nil {
			return "", err
		}
		return "approved by " + d.By + " and paid", nil
	default:
		ctx.SetCustomStatus("timed out")
		return "escalated: nobody decided in time", nil
	}
}

func register(rt *dx.Runtime) error {
	return errors.Join(
		Pay.Register(rt, func(_ context.Context, e Expense) (string, error) { return "paid " + e.ID, nil }),
		Approve.Register(rt, approve),
	)
}

func main() {
	exenv.Main("approval", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		id, err := Approve.Start(ctx, c, Expense{ID: "exp-42", Cents: 125_000})
		if err != nil {
			return err
		}
		// Wait until the orchestration waits for the decision, then decide.
		var seen uint64
		for {
			st, err := c.WaitForStatusChange(ctx, id, seen)
			if err != nil {
				return err
			}
			seen = st.CustomStatusVersion
			if st.CustomStatus != nil {
				fmt.Println("status:", *st.CustomStatus)
				if *st.CustomStatus == "awaiting approval" {
					break
				}
			}
		}
		if err := c.RaiseEvent(ctx, id, "Decision", Decision{Approved: true, By: "grace"}); err != nil {
			return err
		}
		out, err := Approve.Result(ctx, c, id)
		if err != nil {
			return err
		}
		fmt.Println(out)
		return nil
	})
}
