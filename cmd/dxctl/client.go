package main

// Commands that act on instances through the dx client: start, raise, enqueue, cancel, wait.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/dx"
	"github.com/duroxide-go/dxredis/provider"
)

var clientCommands = []command{
	{
		name:    "start",
		usage:   "NAME [--id ID] [--version V] [--input JSON]",
		summary: "Start an instance of the orchestration NAME and print its id.",
		details: `A runtime serving the namespace runs it. The id is --id's, else a new UUID; --version picks
the orchestration version (default: the latest the runtime has registered); --input is the
orchestration's input as JSON (default null). Here --version is the orchestration's version:
"dxctl --version start ..." still prints dxctl's own. Works on an empty namespace.
dxctl cannot see which orchestrations the runtimes register: a start of a NAME (or version) no
runtime registers succeeds, the instance stays "not found" while the runtimes abandon it (each
logs a warning "not registered" once, with the names it registers), and it fails as poison after
their MaxAttempts (about five minutes by default; "dxctl wait ID" then prints a hint).`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			id := fs.String("id", "", "the new instance's `ID` (default: a new UUID)")
			version := fs.String("version", "", "orchestration version `V`, a semantic version such as 2.0.0 (default: the latest)")
			input := fs.String("input", "null", "the orchestration's input, as `JSON`")
			return func(ctx context.Context, a *app, args []string) error {
				if err := checkJSON("input", *input); err != nil {
					return err
				}
				var opts []dx.StartOption
				if *id != "" {
					opts = append(opts, dx.WithInstanceID(*id))
				}
				if *version != "" {
					if _, err := semver.StrictNewVersion(*version); err != nil {
						return usagef("start: --version %q is not a semantic version like 1.2.0", *version)
					}
					opts = append(opts, dx.WithVersion(*version))
				}
				return a.start(ctx, args[0], *id, *input, opts)
			}
		},
	},
	{
		name:    "raise",
		usage:   "ID EVENT [--data JSON]",
		summary: "Raise the external event EVENT on a running instance.",
		details: `Only a wait already pending receives it (WaitEvent): an event raised before the orchestration
waits for it is recorded but not delivered (dropped; the runtime logs a warning). raise reads the
instance's history first and warns when no wait for EVENT is pending ("waiting": false with
--json). For messages that may come before the orchestration reads them, use enqueue (Dequeue).
--data is the event's data as JSON (default null).`,
		nargs: 2,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			data := fs.String("data", "null", "the event's data, as `JSON`")
			return func(ctx context.Context, a *app, args []string) error {
				if err := checkJSON("data", *data); err != nil {
					return err
				}
				return a.raise(ctx, args[0], args[1], *data)
			}
		},
	},
	{
		name:    "enqueue",
		usage:   "ID QUEUE [--data JSON]",
		summary: "Append a message to a running instance's queue QUEUE (read in order by Dequeue).",
		details: `Messages wait in the queue until the orchestration dequeues them. --data is the message as
JSON (default null). Like raise and cancel, it refuses an instance that does not exist yet (a
start no runtime has run) or has finished.`,
		nargs: 2,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			data := fs.String("data", "null", "the message, as `JSON`")
			return func(ctx context.Context, a *app, args []string) error {
				if err := checkJSON("data", *data); err != nil {
					return err
				}
				return a.send(ctx, args[0], func(c *dx.Client) error {
					return c.EnqueueEvent(ctx, args[0], args[1], json.RawMessage(*data))
				}, fmt.Sprintf("enqueued a message on queue %q of instance %q", args[1], args[0]), func() map[string]any { return map[string]any{"queue": args[1]} })
			}
		},
	},
	{
		name:    "cancel",
		usage:   "ID [--reason R]",
		summary: "Cancel a running instance: it fails with a Cancelled error, with its activities and sub-orchestrations.",
		details: `The cancellation is queued: the instance fails at its next turn, once a runtime takes it
("dxctl wait ID" shows it).`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			reason := fs.String("reason", "cancelled with dxctl", "the cancellation reason `R`")
			return func(ctx context.Context, a *app, args []string) error {
				return a.send(ctx, args[0], func(c *dx.Client) error { return c.Cancel(ctx, args[0], *reason) },
					fmt.Sprintf("cancellation of instance %q requested", args[0]), func() map[string]any { return map[string]any{"reason": *reason} })
			}
		},
	},
	{
		name:    "wait",
		usage:   "ID [--timeout D]",
		summary: "Wait until an instance finishes and print its status with its output or error.",
		details: `Waits up to the global --timeout (default 30s) for the instance to complete or fail, following
it across continue-as-new; an instance whose start no runtime has run yet is waited for too.
Exit status: 0 when it completed, 2 when it failed (cancelled included; the error is printed on
stdout), 1 when --timeout passed first or on any other error.`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, args []string) error { return a.wait(ctx, args[0]) }
		},
	},
}

// checkJSON refuses a flag value that is not JSON, before anything is sent.
func checkJSON(flagName, v string) error {
	if !json.Valid([]byte(v)) {
		return usagef("--%s is not valid JSON: %s (a JSON string needs its quotes: --%s '\"text\"')", flagName, shorten(v, 60), flagName)
	}
	return nil
}

// exitStatus ends dxctl with a status other than 1 and nothing more on stderr.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// userWords strips the dx package's prefix from a client error.
func userWords(err error) error {
	if _, ok := provider.AsProviderError(err); ok {
		return err // explain rewrites it
	}
	return errors.New(strings.TrimPrefix(err.Error(), "dx: "))
}

func (a *app) start(ctx context.Context, name, wantID, input string, opts []dx.StartOption) error {
	if err := a.connect(ctx); err != nil { // an empty namespace is fine: this creates its first instance
		return err
	}
	id, err := dx.NewClient(a.p).Start(ctx, name, json.RawMessage(input), opts...)
	if errors.Is(err, dx.ErrInstanceExists) {
		return fmt.Errorf("start: instance %q already exists in namespace %q (or its start is queued)", wantID, a.ns)
	}
	if err != nil {
		return userWords(err)
	}
	if a.json {
		return a.printJSON(map[string]string{"instance_id": id})
	}
	_, err = fmt.Fprintln(a.stdout, id)
	return err
}

// send checks that instance exists and is running, runs do and reports what it did.
func (a *app) send(ctx context.Context, instance string, do func(*dx.Client) error, done string, extra func() map[string]any) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	c := dx.NewClient(a.p)
	st, err := c.Status(ctx, instance)
	if err != nil {
		return err
	}
	switch {
	case st.State == dx.StateNotFound:
		return fmt.Errorf("instance %q not found in namespace %q (an instance exists once a runtime has run its start)", instance, a.ns)
	case st.Terminal():
		return fmt.Errorf("instance %q has already finished (%s)", instance, st.State)
	}
	if err := do(c); err != nil {
		return userWords(err)
	}
	if a.json {
		out := map[string]any{"instance_id": instance}
		for k, v := range extra() {
			out[k] = v
		}
		return a.printJSON(out)
	}
	_, err = fmt.Fprintln(a.stdout, done)
	return err
}

// raise raises an event and says so when the instance's stored history has no wait pending for it:
// the event would be dropped.
func (a *app) raise(ctx context.Context, instance, event, data string) error {
	waiting := true
	err := a.send(ctx, instance, func(c *dx.Client) error {
		h, err := c.History(ctx, instance, 0)
		if err != nil {
			return err
		}
		waiting = waitsFor(h, event)
		return c.RaiseEvent(ctx, instance, event, json.RawMessage(data))
	}, fmt.Sprintf("raised event %q on instance %q", event, instance), func() map[string]any {
		return map[string]any{"event": event, "waiting": waiting}
	})
	if err != nil || waiting || a.json {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "warning: instance %q is not waiting for event %q now (no pending WaitEvent in its history): "+
		"unless it waits for it before the event is processed, the event is dropped. For events that may come early, "+
		"use Dequeue in the orchestration and \"dxctl enqueue\".\n", instance, event)
	return err
}

// waitsFor reports whether a history holds a wait for the external event name that no event has
// answered and no cancellation ended: the runtime's matching (the Nth active wait of a name gets
// the Nth event of that name that arrived while a wait was pending).
func waitsFor(history []provider.Event, name string) bool {
	active, delivered := map[uint64]bool{}, 0
	for _, ev := range history {
		switch k := ev.Kind.(type) {
		case provider.ExternalSubscribedEvent:
			if k.Name == name {
				active[ev.EventID] = true
			}
		case provider.ExternalSubscribedCancelledEvent:
			if ev.SourceEventID != nil {
				delete(active, *ev.SourceEventID)
			}
		case provider.ExternalEventEvent:
			if k.Name == name && len(active) > delivered {
				delivered++
			}
		}
	}
	return len(active) > delivered
}

// waitOut is an instance's final status as wait prints it.
type waitOut struct {
	ID          string          `json:"instance_id"`
	Status      string          `json:"status"`
	Name        string          `json:"orchestration_name"`
	Version     string          `json:"orchestration_version"`
	ExecutionID uint64          `json:"execution_id"`
	Output      json.RawMessage `json:"output"` // JSON as stored, or the stored text as a JSON string
	Error       *string         `json:"error"`
	Hint        string          `json:"hint,omitempty"` // what a poison failure most likely means
}

func (a *app) wait(ctx context.Context, instance string) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	st, err := dx.NewClient(a.p).Wait(ctx, instance)
	if ctx.Err() != nil {
		if st.State == dx.StateNotFound {
			return fmt.Errorf("instance %q does not exist after --timeout %v (never started, or no runtime has run its start yet)", instance, a.timeout)
		}
		return fmt.Errorf("instance %q is still %s after --timeout %v: rerun with a longer --timeout", instance, st.State, a.timeout)
	}
	if err != nil {
		return err
	}
	out := waitOut{ID: instance, Status: string(st.State), Name: st.Name, Version: st.Version, ExecutionID: st.ExecutionID}
	if st.State == dx.StateCompleted {
		out.Output = json.RawMessage(st.Output)
		if !json.Valid(out.Output) {
			out.Output, _ = json.Marshal(st.Output)
		}
	}
	if st.Err != nil {
		msg := st.Err.Error()
		out.Error = &msg
		out.Hint = poisonHint(st.Err.Details, st.Name, st.Version)
	}
	if a.json {
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else {
		t := newTable(a.stdout)
		t.row("Instance:", out.ID)
		t.row("Orchestration:", strings.TrimSpace(out.Name+" "+out.Version))
		t.row("Execution:", out.ExecutionID)
		t.row("Status:", out.Status)
		if st.State == dx.StateCompleted {
			t.row("Output:", render(st.Output))
		}
		if out.Error != nil {
			t.row("Error:", *out.Error)
		}
		if out.Hint != "" {
			t.row("Hint:", out.Hint)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if st.State == dx.StateFailed {
		return exitStatus(2)
	}
	return nil
}

// poisonHint explains a poison failure, whose recorded message (duroxide's) only counts attempts:
// the usual cause is a name that no runtime serving the namespace registers. dxctl cannot see the
// runtimes' registrations; their logs say "not registered" when that is the cause.
func poisonHint(d provider.ErrorDetails, orchestration, version string) string {
	p, ok := d.Kind.(provider.PoisonError)
	if !ok {
		return ""
	}
	var what string
	switch k := p.MessageType.Kind.(type) {
	case provider.PoisonActivity:
		what = fmt.Sprintf("activity %q", k.ActivityName)
	case provider.PoisonOrchestration:
		what = fmt.Sprintf("orchestration %q", orchestration)
		if version != "" && version != "unknown" {
			what += " version " + version
		}
	default:
		return ""
	}
	return fmt.Sprintf("poison: the work was fetched %d times without finishing; most often no runtime serving this namespace "+
		"has %s registered (not registered: a typo, a missing registration, or a worker tag filter); "+
		"a runtime's log says \"not registered\" if so, else it crashed on the work each time", p.AttemptCount, what)
}
