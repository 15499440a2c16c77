package dx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/duroxide-go/dxredis/provider"
)

// The check before a deploy: replay what is live now against the new build's registrations and
// say which instances it would break (docs/changing-orchestrations.md).

// CheckReplayOptions bound what CheckReplay reads. The zero value is the documented defaults.
type CheckReplayOptions struct {
	// MaxRunning is how many running instances are replayed at most, those that entered the
	// Running status first (the store's status index order) first (default 10,000; negative:
	// none). CheckReplayReport.Truncated says when more were running.
	MaxRunning int
	// RecentFinished is how many finished instances (Completed or Failed) of each orchestration
	// and version are replayed too, the most recently finished first (default 5; negative: none).
	// They exercise the code paths that run to the end.
	RecentFinished int
	// FinishedScan is how many of the most recently finished instances of each status
	// (Completed, Failed) are looked at to choose them (default 500).
	FinishedScan int
	// ReadsPerSecond is the read budget: the provider calls the check makes per second at most
	// (default 500; negative: no limit). Every call counts as one read, whatever it returns.
	ReadsPerSecond float64
	// SkipUnknownOrchestrations leaves out running instances of orchestrations this build
	// registers no version of, for a namespace that other programs serve too. By default such an
	// instance is a break (BreakNotRegistered), as is one whose version alone is missing.
	SkipUnknownOrchestrations bool
	// ActivitiesElsewhere says that this build's activities run in other programs: an activity
	// a running instance waits for that this runtime does not register is then not a break.
	ActivitiesElsewhere bool
}

// Defaults of CheckReplayOptions.
const (
	DefaultCheckMaxRunning     = 10_000
	DefaultCheckRecentFinished = 5
	DefaultCheckFinishedScan   = 500
	DefaultCheckReadsPerSecond = 500
)

// BreakKind says why an instance would break.
type BreakKind string

const (
	// BreakNondeterminism: the build's code does not reproduce the instance's history; its next
	// turn fails with a nondeterminism error (or is held, Options.OnNondeterminism).
	BreakNondeterminism BreakKind = "nondeterminism"
	// BreakNotRegistered: the build does not register the orchestration version a running
	// instance runs; no process of the build can take its next turn.
	BreakNotRegistered BreakKind = "not registered"
	// BreakActivityNotRegistered: a running instance waits for an activity the build does not
	// register (see CheckReplayOptions.ActivitiesElsewhere); it would fail as poison.
	BreakActivityNotRegistered BreakKind = "activity not registered"
)

// ReplayBreak is one instance the build would break: where and why.
type ReplayBreak struct {
	Kind     BreakKind
	Instance string
	// Orchestration and Version are what the instance's current execution runs; Status is its
	// status when it was listed (Running, Completed or Failed).
	Orchestration, Version, Status string
	ExecutionID                    uint64
	// EventID is the event where it breaks (0 when no one event is: a version not registered).
	EventID uint64
	// History is what the history records at EventID, Code what the build does there instead.
	History, Code string
	// Message is the whole explanation.
	Message string
}

func (b ReplayBreak) String() string {
	s := fmt.Sprintf("%s: instance %q (%s, %s %s, execution %d)", b.Kind, b.Instance, b.Status, b.Orchestration, b.Version, b.ExecutionID)
	if b.EventID != 0 {
		s += fmt.Sprintf(" at event %d\n  history: %s\n  code:    %s", b.EventID, b.History, b.Code)
	} else {
		s += ": " + b.Message
	}
	return s
}

// CheckReplayGroup counts what the check found for one orchestration version.
type CheckReplayGroup struct {
	Orchestration, Version string
	// Registered says whether the build registers this version.
	Registered bool
	// Running and Finished count the instances checked; Clean and Broken split them.
	Running, Finished, Clean, Broken int
	// Skipped counts instances looked at but not replayed: finished instances of a version the
	// build does not register (they never run again) and, with SkipUnknownOrchestrations,
	// running instances of orchestrations the build does not know.
	Skipped int
}

// CheckReplayReport is what CheckReplay found.
type CheckReplayReport struct {
	// Groups has one row per orchestration version seen, by name, then version.
	Groups []CheckReplayGroup
	// Breaks lists every instance the build would break: running ones first, then by
	// orchestration, version and instance.
	Breaks []ReplayBreak
	// Truncated says that more instances were running than MaxRunning: the rest was not checked.
	Truncated bool
	// Gone counts instances listed but deleted (or expired) before their history was read, and
	// running ones that finished (or continued as new) in between: not checked.
	Gone int
	// Reads is the provider calls made; Elapsed the check's time.
	Reads   int
	Elapsed time.Duration
}

// OK reports whether the build breaks no instance checked.
func (r *CheckReplayReport) OK() bool { return r != nil && len(r.Breaks) == 0 }

// String renders the report for a terminal: one line per orchestration version, then each break.
func (r *CheckReplayReport) String() string {
	if r == nil {
		return "no report"
	}
	var b strings.Builder
	checked := 0
	for _, g := range r.Groups {
		checked += g.Running + g.Finished
	}
	verdict := "OK: the build replays every instance checked"
	if !r.OK() {
		verdict = fmt.Sprintf("BROKEN: the build would break %d of the %d instances checked", len(r.Breaks), checked)
	}
	fmt.Fprintf(&b, "%s (%d reads in %v)\n", verdict, r.Reads, r.Elapsed.Round(time.Millisecond))
	if r.Truncated {
		b.WriteString("more instances were running than MaxRunning: the rest was not checked\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ORCHESTRATION\tVERSION\tREGISTERED\tRUNNING\tFINISHED\tCLEAN\tBROKEN\tSKIPPED")
	for _, g := range r.Groups {
		reg := "no"
		if g.Registered {
			reg = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", g.Orchestration, g.Version, reg, g.Running, g.Finished, g.Clean, g.Broken, g.Skipped)
	}
	_ = tw.Flush()
	for _, br := range r.Breaks {
		b.WriteString(br.String() + "\n")
	}
	return b.String()
}

// CheckReplay replays instances stored in p against the orchestrations (and activities)
// registered on rt, the build about to be deployed, and reports which it would break and why:
// every running instance (up to MaxRunning) and the most recently finished ones of each
// orchestration version (RecentFinished). rt need not be started (NewRuntime(nil, ...) with the
// build's registrations will do); nothing runs but the replays.
//
// A running instance is checked as its next turn would run on the build: its current
// execution's history is replayed (with the KV its earlier executions left) and must be
// reproduced event for event; its orchestration version must be registered; and the activities
// it waits for must be registered (unless ActivitiesElsewhere). An instance between a
// continue-as-new and its next execution has nothing to replay: that execution starts afresh. A
// finished instance's last execution is replayed up to its last turn, as a live instance that had
// not run that turn yet would be: a sample of the code's paths. Changes that a replay cannot see
// are not found, as they break nothing: a changed activity body, a timer's duration (timers match
// by position), code after the point every instance has reached.
//
// It is read-only and safe to point at production: it only lists instances and reads their
// histories and metadata through p.Admin() (and, where p has them, redisprovider's paged listing
// and provider.LiteFetcher's ReadForReplay), takes no lock, writes nothing, and makes at most
// ReadsPerSecond calls per second, one at a time. Cost: a running instance of one execution is
// one read (its history), of several executions two with a LiteFetcher, else one per execution;
// a finished instance considered is one read (its metadata), one chosen one read per execution
// more; listings are one read per 1,000 ids (the finished ones: every page of the status index,
// to reach its newest end).
//
// It fails with ErrInvalidInput for a nil context, provider or runtime, a provider without Admin
// or a bad option; a failed read ends it with that error and the report of what was checked so far.
func CheckReplay(ctx context.Context, p provider.Provider, rt *Runtime, opts CheckReplayOptions) (*CheckReplayReport, error) {
	if ctx == nil || nilProvider(p) || rt == nil {
		return nil, fmt.Errorf("dx: CheckReplay needs a context, a provider and a runtime with the build's registrations (%w)", ErrInvalidInput)
	}
	admin, ok := p.Admin()
	if !ok || admin == nil {
		return nil, fmt.Errorf("dx: CheckReplay needs a provider with management support (Provider.Admin) (%w)", ErrInvalidInput)
	}
	if math.IsNaN(opts.ReadsPerSecond) || opts.FinishedScan < 0 {
		return nil, fmt.Errorf("dx: CheckReplay: bad options: ReadsPerSecond %v, FinishedScan %d (%w)", opts.ReadsPerSecond, opts.FinishedScan, ErrInvalidInput)
	}
	opts.MaxRunning = orDefault(opts.MaxRunning, DefaultCheckMaxRunning)
	opts.RecentFinished = orDefault(opts.RecentFinished, DefaultCheckRecentFinished)
	opts.FinishedScan = orDefault(opts.FinishedScan, DefaultCheckFinishedScan)
	if opts.ReadsPerSecond == 0 {
		opts.ReadsPerSecond = DefaultCheckReadsPerSecond
	}
	c := &checker{ctx: ctx, p: p, admin: admin, rt: rt, opts: opts, rep: &CheckReplayReport{},
		groups: map[[2]string]*CheckReplayGroup{}}
	if opts.ReadsPerSecond > 0 {
		c.pace.every = time.Duration(float64(time.Second) / opts.ReadsPerSecond)
	}
	began := time.Now()
	err := c.run()
	for _, g := range c.groups {
		c.rep.Groups = append(c.rep.Groups, *g)
	}
	slices.SortFunc(c.rep.Groups, func(a, b CheckReplayGroup) int {
		return cmp.Or(cmp.Compare(a.Orchestration, b.Orchestration), cmp.Compare(a.Version, b.Version))
	})
	slices.SortStableFunc(c.rep.Breaks, func(a, b ReplayBreak) int {
		return cmp.Or(cmp.Compare(statusRank(a.Status), statusRank(b.Status)), cmp.Compare(a.Orchestration, b.Orchestration),
			cmp.Compare(a.Version, b.Version), cmp.Compare(a.Instance, b.Instance))
	})
	c.rep.Elapsed = time.Since(began)
	return c.rep, err
}

func statusRank(s string) int {
	if s == provider.StatusRunning {
		return 0
	}
	return 1
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return max(v, 0)
}

// checker is one CheckReplay.
type checker struct {
	ctx    context.Context
	p      provider.Provider
	admin  provider.Admin
	rt     *Runtime
	opts   CheckReplayOptions
	pace   pacer
	rep    *CheckReplayReport
	groups map[[2]string]*CheckReplayGroup
}

// pacer spaces calls every apart: at most 1 + elapsed/every calls in any stretch of time.
type pacer struct {
	every time.Duration
	next  time.Time
}

func (p *pacer) wait(ctx context.Context) error {
	if p.every <= 0 {
		return ctx.Err()
	}
	now := time.Now()
	if d := p.next.Sub(now); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case now = <-t.C:
		}
	}
	p.next = now.Add(p.every)
	return ctx.Err()
}

// read makes one provider call within the budget.
func (c *checker) read(call func() error) error {
	if err := c.pace.wait(c.ctx); err != nil {
		return err
	}
	c.rep.Reads++
	return call()
}

// pagedLister is redisprovider's paged listing: one call per page instead of the whole index.
type pagedLister interface {
	ListInstancesPage(ctx context.Context, cursor string, limit int, status string) ([]string, string, error)
}

const checkPage = 1000

// list returns the first n ids of a status index (oldest first) and whether more followed, or,
// with newest, its last n ids, newest first.
func (c *checker) list(status string, n int, newest bool) ([]string, bool, error) {
	if n <= 0 {
		return nil, false, nil
	}
	var ids []string
	more := false
	if pl, ok := c.p.(pagedLister); ok {
		cursor := ""
		for {
			limit := checkPage
			if !newest {
				limit = min(checkPage, n-len(ids)+1) // one more says whether more follow
			}
			var page []string
			err := c.read(func() (err error) {
				page, cursor, err = pl.ListInstancesPage(c.ctx, cursor, limit, status)
				return err
			})
			if err != nil {
				return nil, false, err
			}
			ids = append(ids, page...)
			if newest && len(ids) > n {
				ids = append(ids[:0], ids[len(ids)-n:]...)
			}
			if cursor == "" || !newest && len(ids) > n {
				break
			}
		}
	} else if err := c.read(func() (err error) {
		ids, err = c.admin.ListInstancesByStatus(c.ctx, status)
		return err
	}); err != nil {
		return nil, false, err
	}
	if newest {
		ids = ids[max(0, len(ids)-n):]
		slices.Reverse(ids)
		return ids, false, nil
	}
	if len(ids) > n {
		ids, more = ids[:n], true
	}
	return ids, more, nil
}

func (c *checker) run() error {
	running, more, err := c.list(provider.StatusRunning, c.opts.MaxRunning, false)
	if err != nil {
		return err
	}
	c.rep.Truncated = more
	for _, id := range running {
		if err := c.check(id, provider.StatusRunning); err != nil {
			return err
		}
	}
	return c.checkFinished()
}

// checkFinished replays the RecentFinished most recently finished instances of each
// orchestration version, among the FinishedScan newest of each finished status.
func (c *checker) checkFinished() error {
	if c.opts.RecentFinished <= 0 {
		return nil
	}
	type cand struct {
		info   provider.InstanceInfo
		status string
	}
	var cands []cand
	for _, status := range []string{provider.StatusCompleted, provider.StatusFailed} {
		ids, _, err := c.list(status, c.opts.FinishedScan, true)
		if err != nil {
			return err
		}
		for _, id := range ids {
			var info provider.InstanceInfo
			err := c.read(func() (err error) {
				info, err = c.admin.GetInstanceInfo(c.ctx, id)
				return err
			})
			if errors.Is(err, provider.ErrNotFound) {
				c.rep.Gone++
				continue
			}
			if err != nil {
				return err
			}
			if info.Status == status { // (not one deleted and started again since the listing)
				cands = append(cands, cand{info, status})
			}
		}
	}
	slices.SortStableFunc(cands, func(a, b cand) int { return cmp.Compare(b.info.UpdatedAt, a.info.UpdatedAt) })
	taken := map[[2]string]int{}
	for _, x := range cands {
		key := [2]string{x.info.OrchestrationName, x.info.OrchestrationVersion}
		if taken[key] >= c.opts.RecentFinished {
			continue
		}
		taken[key]++
		if g := c.group(key[0], key[1]); !g.Registered {
			g.Skipped++ // it never runs again
			continue
		}
		if err := c.check(x.info.InstanceID, x.status); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) group(name, version string) *CheckReplayGroup {
	key := [2]string{name, version}
	g := c.groups[key]
	if g == nil {
		_, reg := c.rt.reg.resolve(name, &version)
		g = &CheckReplayGroup{Orchestration: name, Version: version, Registered: reg}
		c.groups[key] = g
	}
	return g
}

// check reads one instance's latest execution and replays it.
func (c *checker) check(id, status string) error {
	var hist []provider.Event
	err := c.read(func() (err error) {
		hist, err = c.admin.ReadHistory(c.ctx, id)
		return err
	})
	if err != nil && !errors.Is(err, provider.ErrNotFound) {
		return err
	}
	if len(hist) == 0 || status == provider.StatusRunning && hist[len(hist)-1].IsTerminal() {
		c.rep.Gone++ // deleted, or (listed as running) finished or continued as new meanwhile
		return nil
	}
	first := hist[0]
	st, ok := first.Kind.(provider.OrchestrationStartedEvent)
	if !ok {
		g := c.group("", "")
		c.broke(g, status, ReplayBreak{Kind: BreakNondeterminism, Instance: id, ExecutionID: first.ExecutionID,
			Message: fmt.Sprintf("the history starts with %s, not OrchestrationStarted", first.EventType())})
		return nil
	}
	g := c.group(st.Name, st.Version)
	b := ReplayBreak{Instance: id, Orchestration: st.Name, Version: st.Version, ExecutionID: first.ExecutionID}
	running := status == provider.StatusRunning
	if !g.Registered {
		if !running || c.opts.SkipUnknownOrchestrations && !c.rt.reg.knows(st.Name) {
			g.Skipped++
			return nil
		}
		b.Kind = BreakNotRegistered
		b.Message = fmt.Sprintf("orchestration %q version %s is not registered on this build: no process of it can run the instance's next turn",
			st.Name, st.Version)
		c.broke(g, status, b)
		return nil
	}
	kv, err := c.kvBefore(id, first.ExecutionID, running)
	if errors.Is(err, provider.ErrNotFound) {
		c.rep.Gone++
		return nil
	}
	if err != nil {
		return err
	}
	if err := replayExecution(c.rt, hist, kv, running); err != nil {
		var re *ReplayError
		if !errors.As(err, &re) {
			return err
		}
		b.Kind, b.EventID, b.History, b.Code, b.Message = BreakNondeterminism, re.EventID, re.History, re.Code, re.Message
		c.broke(g, status, b)
		return nil
	}
	if running && !c.opts.ActivitiesElsewhere {
		if ev, ok := c.missingActivity(hist); ok {
			k := ev.Kind.(provider.ActivityScheduledEvent)
			b.Kind, b.EventID = BreakActivityNotRegistered, ev.EventID
			b.History = "activity " + describeActivity(k.Name, k.Input, k.SessionID, k.Tag) + ", not finished"
			b.Code = fmt.Sprintf("activity %q is not registered", k.Name)
			b.Message = fmt.Sprintf("the instance waits for activity %q, which this build does not register (ActivitiesElsewhere when other programs run it)", k.Name)
			c.broke(g, status, b)
			return nil
		}
	}
	c.count(g, status)
	g.Clean++
	return nil
}

func (c *checker) count(g *CheckReplayGroup, status string) {
	if status == provider.StatusRunning {
		g.Running++
	} else {
		g.Finished++
	}
}

func (c *checker) broke(g *CheckReplayGroup, status string, b ReplayBreak) {
	c.count(g, status)
	g.Broken++
	b.Status = status
	c.rep.Breaks = append(c.rep.Breaks, b)
}

// kvBefore returns the KV store as execution exec of instance id began: what its earlier
// executions left.
func (c *checker) kvBefore(id string, exec uint64, running bool) (map[string]provider.KVEntry, error) {
	kv := map[string]provider.KVEntry{}
	if exec <= 1 {
		return kv, nil
	}
	if lite, ok := c.p.(provider.LiteFetcher); ok && running {
		// The store's KV of a running instance is its earlier executions' (the current one's
		// changes are merged when it ends).
		err := c.read(func() (err error) {
			_, kv, _, err = lite.ReadForReplay(c.ctx, id, exec)
			return err
		})
		return kv, err
	}
	var execs []uint64
	if err := c.read(func() (err error) {
		execs, err = c.admin.ListExecutions(c.ctx, id)
		return err
	}); err != nil {
		return nil, err
	}
	for _, e := range execs {
		if e >= exec {
			break
		}
		var evs []provider.Event
		if err := c.read(func() (err error) {
			evs, err = c.admin.ReadHistoryWithExecutionID(c.ctx, id, e)
			return err
		}); err != nil {
			return nil, err
		}
		applyKV(kv, evs)
	}
	return kv, nil
}

// missingActivity returns the first activity the history schedules, that has not finished nor
// been cancelled, and that the build does not register.
func (c *checker) missingActivity(hist []provider.Event) (provider.Event, bool) {
	done := map[uint64]bool{}
	for _, ev := range hist {
		switch ev.Kind.(type) {
		case provider.ActivityCompletedEvent, provider.ActivityFailedEvent, provider.ActivityCancelRequestedEvent:
			if ev.SourceEventID != nil {
				done[*ev.SourceEventID] = true
			}
		}
	}
	for _, ev := range hist {
		if k, ok := ev.Kind.(provider.ActivityScheduledEvent); ok && !done[ev.EventID] &&
			!strings.HasPrefix(k.Name, "__duroxide_syscall:") {
			if _, ok := c.rt.reg.activity(k.Name); !ok {
				return ev, true
			}
		}
	}
	return provider.Event{}, false
}

// applyKV applies an execution's KV events to kv.
func applyKV(kv map[string]provider.KVEntry, events []provider.Event) {
	for _, ev := range events {
		switch k := ev.Kind.(type) {
		case provider.KeyValueSetEvent:
			kv[k.Key] = provider.KVEntry{Value: k.Value, LastUpdatedAtMs: k.LastUpdatedAtMs}
		case provider.KeyValueClearedEvent:
			delete(kv, k.Key)
		case provider.KeyValuesClearedEvent:
			clear(kv)
		}
	}
}
