// Command nightly runs a durable schedule: a report every night at 02:00 Berlin time, with the
// buffer-one overlap policy (a night whose report is still running when the next night comes
// starts the next one right after it; a third night meanwhile is skipped, and recorded so).
//
// The demo runs the schedule every two seconds instead of nightly, lets it fire three times, and
// prints the schedule's state; examples/nightly/main_test.go runs the real spec over virtual weeks.
//
//	go run ./examples/nightly
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/examples/internal/exenv"
)

// Request says which report to build.
type Request struct {
	Kind string `json:"kind"`
}

// Report is what a night's run returns.
type Report struct {
	Day  string `json:"day"`
	Rows int    `json:"rows"`
}

var (
	// Nightly builds one night's report; the schedule starts it.
	Nightly = dx.NewOrchestration[Request, Report]("NightlyReport")
	// BuildReport does the work (the queries, the file): an activity.
	BuildReport = dx.NewActivity[string, Report]("BuildReport")
)

// nightly reads its night from its run id ("nightly@2026-03-02T01:00:00Z") and builds the report.
func nightly(ctx dx.Context, r Request) (Report, error) {
	_, fired, ok := dx.ScheduleRunOf(ctx.InstanceID())
	if !ok {
		return Report{}, errors.New("not started by a schedule: its instance id has no fire time")
	}
	return BuildReport.Call(ctx, fired.Format("2006-01-02")).Await(ctx)
}

func buildReport(_ context.Context, day string) (Report, error) {
	return Report{Day: day, Rows: len(day) * 100}, nil
}

func register(rt *dx.Runtime) error {
	return errors.Join(Nightly.Register(rt, nightly), BuildReport.Register(rt, buildReport))
}

// schedule is the nightly schedule; spec is when it fires.
func schedule(spec dx.ScheduleSpec) dx.Schedule {
	return dx.Schedule{Spec: spec, Action: Nightly.ScheduleAction(Request{Kind: "sales"}),
		Overlap: dx.OverlapBufferOne, CatchupWindow: 6 * time.Hour, Note: "sales report for the night before"}
}

// NightlySpec is the production spec: 02:00 every night, Berlin time.
var NightlySpec = dx.ScheduleSpec{Cron: "0 2 * * *", TimeZone: "Europe/Berlin"}

func main() {
	exenv.Main("nightly", dx.Options{}, register, func(ctx context.Context, c *dx.Client) error {
		if err := c.CreateSchedule(ctx, "nightly", schedule(dx.ScheduleSpec{Cron: "*/2 * * * * *"})); err != nil {
			return err
		}
		for {
			info, err := c.GetSchedule(ctx, "nightly")
			if err != nil && !errors.Is(err, dx.ErrNotFound) {
				return err
			}
			if info.Fired >= 3 && info.Recent[2].State == dx.StateCompleted {
				for _, r := range info.Recent {
					out, err := Nightly.Result(ctx, c, r.RunID)
					if err != nil {
						return err
					}
					fmt.Printf("%s: %s report for %s, %d rows\n", r.RunID, r.Why, out.Day, out.Rows)
				}
				fmt.Printf("next fire times: %v\n", info.Next)
				return c.DeleteSchedule(ctx, "nightly")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
}
