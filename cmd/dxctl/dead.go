package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/cmd/dxctl/web"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
)

// deadFilter selects dead letters by activity name and instance id prefix ("" any).
type deadFilter struct{ activity, instance string }

func (f deadFilter) keep(d redisprovider.DeadLetter) bool {
	return (f.activity == "" || d.Name == f.activity) && strings.HasPrefix(d.Instance, f.instance)
}

// listDead lists up to limit dead letters that f keeps (reading at most 10,000).
func (a *app) listDead(ctx context.Context, limit int, f deadFilter) ([]redisprovider.DeadLetter, error) {
	n := limit
	if f != (deadFilter{}) {
		n = 10_000
	}
	ds, err := a.p.ListDeadLetters(ctx, n)
	if err != nil {
		return nil, err
	}
	out := ds[:0]
	for _, d := range ds {
		if f.keep(d) && len(out) < limit {
			out = append(out, d)
		}
	}
	return out, nil
}

func (a *app) dead(ctx context.Context, verb string, ids []string, all, yes bool, limit int, filter deadFilter) error {
	if limit <= 0 {
		return usagef("dead: --limit must be positive")
	}
	if filter != (deadFilter{}) && !all && verb != "list" {
		return usagef("dead %s: --activity and --instance go with --all", verb)
	}
	switch verb {
	case "list":
		if len(ids) > 0 || all {
			return usagef("dead list: takes no ID and no --all")
		}
	case "show":
		if len(ids) != 1 || all {
			return usagef("dead show: want one ID")
		}
	case "redrive", "discard":
		if all == (len(ids) > 0) {
			return usagef("dead %s: want IDs or --all", verb)
		}
		if verb == "discard" && all && !yes {
			return usagef("dead discard --all fails every dead letter's activity: pass --yes to do it")
		}
	default:
		return usagef("dead: unknown action %q: want list, show, redrive or discard", verb)
	}
	if err := a.open(ctx); err != nil {
		return err
	}
	switch verb {
	case "list":
		ds, err := a.listDead(ctx, limit, filter)
		if err != nil {
			return err
		}
		if a.json {
			out := make([]web.DeadLetter, len(ds))
			for i, d := range ds {
				out[i] = web.DeadLetterOf(d)
			}
			return a.printJSON(struct {
				DeadLetters []web.DeadLetter `json:"dead_letters"`
			}{out})
		}
		t := newTable(a.stdout, "ID", "INSTANCE", "WORK", "TAG", "DELIVERIES", "PARKED", "FAILURE")
		for _, d := range ds {
			o := web.DeadLetterOf(d)
			t.row(o.ID, shorten(o.Instance, 40), o.What(), dash(o.Tag), o.Attempts, o.ParkedAt.Format(time.RFC3339), shorten(o.Error, 60))
		}
		return t.flush()
	case "show":
		d, err := a.p.GetDeadLetter(ctx, ids[0])
		if err != nil {
			return err
		}
		o := web.DeadLetterOf(d)
		if a.json {
			return a.printJSON(o)
		}
		t := newTable(a.stdout)
		t.row("Dead letter:", o.ID)
		t.row("Instance:", o.Instance)
		t.row("Execution:", o.ExecutionID)
		t.row("Work:", o.What())
		t.row("Tag:", dash(o.Tag))
		t.row("Session:", dash(o.Session))
		t.row("Deliveries:", o.Attempts)
		t.row("Parked:", o.ParkedAt.Format(time.RFC3339))
		t.row("Failure:", o.Error)
		return t.flush()
	}
	if all {
		ds, err := a.listDead(ctx, limit, filter)
		if err != nil {
			return err
		}
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
	}
	act := a.p.RedriveDeadLetter
	if verb == "discard" {
		act = a.p.DiscardDeadLetter
	}
	done := 0
	for _, id := range ids {
		if err := act(ctx, id); err != nil {
			if all && isNotFound(err) {
				continue // redriven or discarded by someone else meanwhile
			}
			return fmt.Errorf("%s %s after %d done: %w", verb, id, done, err)
		}
		done++
	}
	past := map[string]string{"redrive": "redriven", "discard": "discarded"}[verb]
	_, err := fmt.Fprintf(a.stdout, "%d dead letter(s) %s\n", done, past)
	return err
}

func isNotFound(err error) bool { return errors.Is(err, provider.ErrNotFound) }
