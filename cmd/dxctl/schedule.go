package main

// The schedule command: list, show and control durable schedules (dx.Client's schedule API).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/dx"
)

var scheduleCommand = command{
	name:    "schedule",
	usage:   "list | show ID | pause ID [--reason R] | resume ID | trigger ID | backfill ID --from T --to T | delete ID",
	summary: "List and show durable schedules; pause, resume, trigger, backfill or delete one.",
	details: `list prints every schedule (deleted ones too) with its state, spec, orchestration, next fire
time and counts. show prints one: its spec and policies, next fire times, last runs (with their
state now), skipped fire times with the reason, buffered fire times. The other subcommands send
the schedule a control message (kept while it sleeps): pause (fire times are skipped, recorded as
"paused", until resume; --reason is shown), resume, trigger (a run now), backfill (the fire
times between --from and --to, RFC 3339, at most 1,000; a fire time already run is not run again),
delete (it fires nothing more; runs in progress go on). Schedules are created by programs
(dx.Client.CreateSchedule); a runtime of the namespace runs them (docs/schedules.md).`,
	nargs: -1,
	setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		reason := fs.String("reason", "paused with dxctl", "pause: the reason `R` shown while paused")
		from := fs.String("from", "", "backfill: the first fire time `T` (RFC 3339)")
		to := fs.String("to", "", "backfill: the last fire time `T` (RFC 3339)")
		return func(ctx context.Context, a *app, args []string) error {
			if len(args) == 0 {
				return usagef("schedule: give a subcommand: usage: dxctl schedule list | show ID | pause ID | resume ID | trigger ID | backfill ID --from T --to T | delete ID")
			}
			sub, args := args[0], args[1:]
			want := 1
			if sub == "list" {
				want = 0
			}
			switch sub {
			case "list", "show", "pause", "resume", "trigger", "backfill", "delete":
			default:
				return usagef("schedule: unknown subcommand %q (list, show, pause, resume, trigger, backfill, delete)", sub)
			}
			if len(args) != want {
				return usagef("schedule %s: want %d argument(s), got %d", sub, want, len(args))
			}
			var f, t time.Time
			if sub == "backfill" {
				var err error
				if f, err = time.Parse(time.RFC3339, *from); err != nil {
					return usagef("schedule backfill: --from %q is not an RFC 3339 time like 2026-03-01T00:00:00Z", *from)
				}
				if t, err = time.Parse(time.RFC3339, *to); err != nil {
					return usagef("schedule backfill: --to %q is not an RFC 3339 time like 2026-03-02T00:00:00Z", *to)
				}
			}
			if err := a.open(ctx); err != nil {
				return err
			}
			c := dx.NewClient(a.p)
			switch sub {
			case "list":
				return a.scheduleList(ctx, c)
			case "show":
				return a.scheduleShow(ctx, c, args[0])
			}
			id := args[0]
			var err error
			var done string
			switch sub {
			case "pause":
				err, done = c.PauseSchedule(ctx, id, *reason), "pause"
			case "resume":
				err, done = c.ResumeSchedule(ctx, id, ""), "resume"
			case "trigger":
				err, done = c.TriggerSchedule(ctx, id), "trigger"
			case "backfill":
				err, done = c.BackfillSchedule(ctx, id, f, t), fmt.Sprintf("backfill of %s to %s", f.UTC().Format(time.RFC3339), t.UTC().Format(time.RFC3339))
			case "delete":
				err, done = c.DeleteSchedule(ctx, id), "deletion"
			}
			if errors.Is(err, dx.ErrNotFound) {
				return fmt.Errorf("schedule %q not found in namespace %q (or deleted)", id, a.ns)
			}
			if err != nil {
				return userWords(err)
			}
			if a.json {
				return a.printJSON(map[string]string{"schedule": id, "sent": sub})
			}
			_, err = fmt.Fprintf(a.stdout, "%s of schedule %q sent (a runtime applies it at the schedule's next turn)\n", done, id)
			return err
		}
	},
}

func (a *app) scheduleList(ctx context.Context, c *dx.Client) error {
	list, err := c.ListSchedules(ctx)
	if err != nil {
		return userWords(err)
	}
	if a.json {
		if list == nil {
			list = []dx.ScheduleInfo{}
		}
		return a.printJSON(map[string]any{"schedules": list})
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no schedules in namespace %q\n", a.ns)
		return err
	}
	t := newTable(a.stdout, "ID", "STATE", "SPEC", "ORCHESTRATION", "OVERLAP", "NEXT", "FIRED", "SKIPPED", "NOTE")
	for _, s := range list {
		t.row(s.ID, s.State, specText(s.Schedule.Spec), s.Schedule.Action.Orchestration, s.Schedule.Overlap,
			nextText(s.Next[:min(len(s.Next), 1)]), s.Fired, s.SkippedTotal, dash(shorten(s.Schedule.Note, 40)))
	}
	return t.flush()
}

func (a *app) scheduleShow(ctx context.Context, c *dx.Client, id string) error {
	s, err := c.GetSchedule(ctx, id)
	if errors.Is(err, dx.ErrNotFound) {
		return fmt.Errorf("schedule %q not found in namespace %q (a schedule shows once a runtime has run its first turn)", id, a.ns)
	}
	if err != nil {
		return userWords(err)
	}
	if a.json {
		return a.printJSON(s)
	}
	t := newTable(a.stdout)
	t.row("Schedule:", s.ID)
	t.row("Instance:", dx.ScheduleInstancePrefix+s.ID)
	state := s.State
	if s.PausedReason != "" {
		state += " (" + s.PausedReason + ")"
	}
	t.row("State:", state)
	t.row("Spec:", specText(s.Schedule.Spec))
	act := s.Schedule.Action
	t.row("Orchestration:", strings.TrimSpace(act.Orchestration+" "+act.Version))
	t.row("Input:", render(fmt.Sprintf("%s", act.Input)))
	t.row("Overlap:", s.Schedule.Overlap)
	t.row("Catch-up window:", s.Schedule.CatchupWindow)
	if s.Schedule.Note != "" {
		t.row("Note:", s.Schedule.Note)
	}
	t.row("Next:", nextText(s.Next))
	t.row("Fired:", s.Fired)
	t.row("Skipped:", s.SkippedTotal)
	if len(s.Running) > 0 {
		t.row("Running:", strings.Join(s.Running, ", "))
	}
	if len(s.Buffered) > 0 {
		t.row("Buffered:", nextText(s.Buffered))
	}
	t.row("Execution:", s.Execution)
	if err := t.flush(); err != nil {
		return err
	}
	if len(s.Recent) > 0 {
		fmt.Fprintln(a.stdout, "\nRecent runs:")
		rt := newTable(a.stdout, "RUN", "WHY", "STARTED", "STATE")
		for _, r := range s.Recent {
			rt.row(r.RunID, r.Why, r.StartedAt.UTC().Format(time.RFC3339), r.State)
		}
		if err := rt.flush(); err != nil {
			return err
		}
	}
	if len(s.Skipped) > 0 {
		fmt.Fprintln(a.stdout, "\nSkipped:")
		st := newTable(a.stdout, "FROM", "TO", "COUNT", "REASON")
		for _, k := range s.Skipped {
			st.row(k.From.UTC().Format(time.RFC3339), k.To.UTC().Format(time.RFC3339), k.Count, k.Reason)
		}
		return st.flush()
	}
	return nil
}

// specText renders a spec on one line.
func specText(s dx.ScheduleSpec) string {
	var parts []string
	if s.Cron != "" {
		parts = append(parts, "cron "+s.Cron)
		if s.TimeZone != "" {
			parts = append(parts, s.TimeZone)
		}
	} else {
		p := "every " + s.Every.String()
		if s.Offset != 0 {
			p += " +" + s.Offset.String()
		}
		parts = append(parts, p)
	}
	if s.Jitter != 0 {
		parts = append(parts, "jitter "+s.Jitter.String())
	}
	if !s.Start.IsZero() {
		parts = append(parts, "from "+s.Start.UTC().Format(time.RFC3339))
	}
	if !s.End.IsZero() {
		parts = append(parts, "until "+s.End.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, ", ")
}

func nextText(ts []time.Time) string {
	if len(ts) == 0 {
		return "-"
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.UTC().Format(time.RFC3339)
	}
	return strings.Join(out, ", ")
}
