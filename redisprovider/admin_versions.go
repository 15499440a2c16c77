package redisprovider

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// VersionInFlight counts the live instances of one orchestration version: what dxctl versions
// and the console's Versions page show, so that a team knows when an old version has drained.
type VersionInFlight struct {
	Orchestration string
	Version       string
	// Running counts the instances whose current execution runs this version: status Running,
	// or ContinuedAsNew (between a continue-as-new and its next execution's first turn: counted
	// under the version they ran, until that turn).
	Running int
	// Held counts those of them the runtime holds (dx.HoldOnNondeterminism: the code no longer
	// replays their history).
	Held int
	// OldestStart and NewestStart are when the first and the last of their current executions
	// started.
	OldestStart, NewestStart time.Time
}

// versionsPage is the page size of the walk: one script per this many instances.
const versionsPage = 500

// VersionsInFlight counts the instances in flight by orchestration name and version, sorted by
// name, then version (semantic order). An instance whose start is queued but not run yet
// (Pending) has no version yet and is not counted.
//
// Cost (per partition, the partitions at once): a walk of the status indexes of Running and ContinuedAsNew instances, one read-only
// script per 500 of them (O(log N + 500): two hash reads per instance), so O(instances in
// flight) in all; finished instances cost nothing. Nothing is added to a start or a finish: there
// is no index of its own. The counts are exact when nothing changes during the walk (up to 500
// instances in flight, the walk is one script: one instant). While instances start and finish,
// each is counted at most once, in its last state seen, and one in flight during the whole walk
// is counted.
func (p *Provider) VersionsInFlight(ctx context.Context) ([]VersionInFlight, error) {
	const op = "versions_in_flight"
	// Each partition is walked (at once); an instance lives in one.
	parts := make([]map[string]flight, p.keys.Partitions())
	if err := p.inPartitions(ctx, func(ctx context.Context, part int) error {
		parts[part] = map[string]flight{}
		return p.flightsIn(ctx, op, part, parts[part])
	}); err != nil {
		return nil, err
	}
	seen := map[string]flight{}
	for _, m := range parts {
		maps.Copy(seen, m)
	}
	groups := map[[2]string]*VersionInFlight{}
	for _, f := range seen {
		key := [2]string{f.name, f.version}
		g := groups[key]
		if g == nil {
			g = &VersionInFlight{Orchestration: f.name, Version: f.version, OldestStart: f.started, NewestStart: f.started}
			groups[key] = g
		}
		g.Running++
		if f.held {
			g.Held++
		}
		if f.started.Before(g.OldestStart) {
			g.OldestStart = f.started
		}
		if f.started.After(g.NewestStart) {
			g.NewestStart = f.started
		}
	}
	out := make([]VersionInFlight, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b VersionInFlight) int {
		return cmp.Or(cmp.Compare(a.Orchestration, b.Orchestration), compareVersionText(a.Version, b.Version))
	})
	return out, nil
}

// compareVersionText orders semantic versions by precedence (2.0.0 before 10.0.0), anything
// else by its text, after them.
func compareVersionText(a, b string) int {
	va, errA := semver.NewVersion(a)
	vb, errB := semver.NewVersion(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Or(va.Compare(vb), cmp.Compare(a, b))
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// flight is one instance in flight as admin_versions reports it.
type flight struct {
	name, version string
	started       time.Time
	held          bool
}

// flightsIn walks one partition's in-flight status indexes into seen (by instance id).
func (p *Provider) flightsIn(ctx context.Context, op string, part int, seen map[string]flight) error {
	for _, status := range []string{provider.StatusRunning, provider.StatusContinuedAsNew} {
		score, member := "", ""
		for {
			args, err := argsOf(op, luascripts.AdminVersions, "status", status, "cscore", score, "cmember", member,
				"limit", strconv.Itoa(versionsPage))
			if err != nil {
				return err
			}
			res, err := p.run(ctx, op, luascripts.AdminVersions.Op, part, args...)
			if err != nil {
				return err
			}
			r := list(res)
			if len(r) < 2 || (len(r)-2)%5 != 0 {
				return provider.NewPermanentError(op, "unexpected reply from admin_versions")
			}
			for i := 2; i < len(r); i += 5 {
				seen[str(r[i])] = flight{name: str(r[i+1]), version: str(r[i+2]),
					started: time.UnixMilli(num(r[i+3])).UTC(), held: str(r[i+4]) == "1"}
			}
			if score, member = str(r[0]), str(r[1]); score == "" {
				break
			}
		}
	}
	return nil
}
