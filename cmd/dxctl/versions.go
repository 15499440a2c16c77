package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

// versionsCommand is dxctl versions: the versions in flight (redisprovider.VersionsInFlight).
var versionsCommand = command{
	name:    "versions",
	usage:   "",
	summary: "Versions in flight: per orchestration and version, the instances running, held, and their oldest and newest start.",
	details: `An old version has drained once it is no longer listed: no instance runs it, and a build
that no longer registers it breaks nothing. RUNNING counts the instances whose current execution
runs the version (status Running, or between a continue-as-new and its next execution's first
turn); HELD those of them the runtime holds (HoldOnNondeterminism: the code no longer replays
them; "dxctl show ID" says why); OLDEST and NEWEST START when their current executions started.
Instances whose start is queued but not run yet (Pending) have no version yet and are not listed.
Cost: a walk of the Running and ContinuedAsNew status indexes, one read-only script per 500
instances in flight (finished instances cost nothing).`,
	setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
		return func(ctx context.Context, a *app, _ []string) error { return a.versions(ctx) }
	},
}

type versionOut struct {
	Orchestration string    `json:"orchestration"`
	Version       string    `json:"version"`
	Running       int       `json:"running"`
	Held          int       `json:"held"`
	OldestStart   time.Time `json:"oldest_start"`
	NewestStart   time.Time `json:"newest_start"`
}

func (a *app) versions(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	vs, err := a.p.VersionsInFlight(ctx)
	if err != nil {
		return err
	}
	if a.json {
		out := make([]versionOut, 0, len(vs))
		for _, v := range vs {
			out = append(out, versionOut{v.Orchestration, v.Version, v.Running, v.Held, v.OldestStart, v.NewestStart})
		}
		return a.printJSON(out)
	}
	if len(vs) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no instance in flight")
		return err
	}
	t := newTable(a.stdout, "ORCHESTRATION", "VERSION", "RUNNING", "HELD", "OLDEST START", "NEWEST START")
	for _, v := range vs {
		t.row(v.Orchestration, v.Version, v.Running, v.Held, v.OldestStart.Format(time.RFC3339), v.NewestStart.Format(time.RFC3339))
	}
	return t.flush()
}
