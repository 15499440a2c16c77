package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide-go/dxredis/cmd/dxctl/web"
	"github.com/duroxide-go/dxredis/provider"
	"github.com/duroxide-go/dxredis/redisprovider"
	"github.com/redis/go-redis/v9"
)

// commands are dxctl's commands in the order help lists them: inspection and administration,
// then the client commands (client.go).
var commands = append([]command{
	{
		name:    "instances",
		usage:   "[--status S] [--limit N] [--cursor C]",
		summary: "List instances (oldest first) with their status, orchestration and times.",
		details: `Without --status every instance is listed by creation time; with it, the instances whose
current status is S (Pending, Running, Completed, Failed, ContinuedAsNew; any case), least
recently updated first. Pending instances (started, their start queued, not run by a runtime
yet) come first, on the first page; CREATED is when their start was queued.
At most --limit rows are printed; when more remain, the last line gives the --cursor that
continues the listing (in JSON: "next_cursor"). Each page costs O(limit) on the server.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			status := fs.String("status", "", "only instances whose current status is `S`")
			limit := fs.Int("limit", 100, "print at most `N` instances")
			cursor := fs.String("cursor", "", "continue a listing from the cursor `C` a previous page printed")
			return func(ctx context.Context, a *app, _ []string) error {
				if *limit <= 0 {
					return usagef("instances: --limit must be positive")
				}
				s, err := canonicalStatus(*status)
				if err != nil {
					return err
				}
				return a.instances(ctx, s, *limit, *cursor)
			}
		},
	},
	{
		name:    "namespaces",
		usage:   "[--max-keys N]",
		summary: "List the namespaces on the server (--ns is not needed), with their instance counts.",
		details: `A namespace is found by its key "{<ns>:0}:seq", created by its first start or message. The
server's keyspace is SCANned (every primary of a cluster), at most --max-keys keys per node;
a listing cut short there says so.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			maxKeys := fs.Int("max-keys", 1_000_000, "scan at most `N` keys per server")
			return func(ctx context.Context, a *app, _ []string) error {
				if *maxKeys <= 0 {
					return usagef("namespaces: --max-keys must be positive")
				}
				return a.namespaces(ctx, *maxKeys)
			}
		},
	},
	{
		name:    "show",
		usage:   "ID [--exec N]",
		summary: "Show one instance: details, executions, custom status, KV and history (one event per line).",
		details: `The history shown is the current execution's, or execution N's with --exec.
Each history line reads: event id, time (UTC), event type, then the event's fields
(source=#N links a completion to the event that scheduled it). Long values are shortened;
--json prints everything in full, events in duroxide's JSON form.`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			exec := fs.Uint64("exec", 0, "show the history of execution `N` (default: the current one)")
			return func(ctx context.Context, a *app, args []string) error { return a.show(ctx, args[0], *exec) }
		},
	},
	{
		name:    "queues",
		usage:   "",
		summary: "Queue depths: unlocked (visible, delayed) and locked messages, locks, age of the oldest visible message.",
		details: `Orchestrator messages are counted per state: visible (fetchable now, or as soon as their
instance's lock is released), delayed (timers and delayed retries) and locked (taken by a turn in
progress). Worker items are unlocked (visible or delayed) or locked, in total and per tag (one row
per tag; visible counts session-less and session items). "Oldest visible" is how long
the oldest message a dispatcher could take now has been waiting: a growing value means the
dispatchers do not keep up. Cost: O(instances with queued messages + locked and delayed worker
items), walked in short scripts.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, _ []string) error { return a.queues(ctx) }
		},
	},
	{
		name:    "limits",
		usage:   "",
		summary: "The caps per tag: concurrency (running / cap) and rate limits set on the namespace.",
		details: `Set with "dxctl set-limit TAG". Running counts the tag's activities locked by a worker now
(unexpired locks); an activity over a cap waits in its queue, "dxctl queues" shows how many.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, _ []string) error { return a.limits(ctx) }
		},
	},
	{
		name:    "set-limit",
		usage:   "TAG [--concurrency K] [--rate R] [--burst B]",
		summary: "Cap a tag's activities over all workers: at most K running at once, at most R starts a second.",
		details: `Sets the tag's limits, enforced atomically by the worker fetch script across every worker
process (docs/operations.md, "Caps per tag"): --concurrency K allows at most K of the tag's
activities to run at once, --rate R at most R starts a second with bursts of up to --burst B
(default 1). An activity over a cap waits; it is never failed or lost. A worker that dies frees
its slots when its locks expire. Every limit 0 removes the tag's caps. TAG "" is the untagged
activities. Processes apply a change within about a second; session activities are not capped.`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			k := fs.Int("concurrency", 0, "at most `K` running at once (0: no cap)")
			r := fs.Float64("rate", 0, "at most `R` starts a second (0: no limit)")
			b := fs.Int("burst", 0, "bursts of up to `B` starts (with --rate; default 1)")
			return func(ctx context.Context, a *app, args []string) error {
				return a.limit(ctx, args[0], redisprovider.TagLimits{Concurrency: *k, Rate: *r, Burst: *b})
			}
		},
	},
	{
		name:    "dead",
		usage:   "list | show ID | redrive ID... | redrive --all [--activity NAME] [--instance PREFIX] | discard ID... | discard --all --yes",
		summary: "Dead letters: activities parked past their attempts (dx.Options.OnPoison HoldPoison).",
		details: `A runtime with OnPoison HoldPoison parks an activity delivered more often than MaxAttempts
instead of failing it: nothing is written to its instance's history, which waits (docs/operations.md,
"Dead letters"). list shows them, oldest first (ID, instance, activity, deliveries, when parked,
the failure); show prints one with its failure in full; redrive puts them back with a fresh
delivery count, run by the next worker that takes them (deploy the fix first); discard applies
the default rule: the activity fails with the poison error it was parked with. --all acts on every
dead letter (at most --limit), or those --activity and --instance select; discard --all needs
--yes.`,
		nargs: -1, // an action, then IDs
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			all := fs.Bool("all", false, "redrive or discard every dead letter (at most --limit; --activity and --instance narrow it)")
			yes := fs.Bool("yes", false, "discard --all without refusing")
			limit := fs.Int("limit", 100, "list or act on at most `N`")
			activity := fs.String("activity", "", "with --all or list: only the activities named `NAME`")
			instance := fs.String("instance", "", "with --all or list: only the activities of instances whose id starts with `PREFIX`")
			return func(ctx context.Context, a *app, args []string) error {
				if len(args) == 0 {
					return usagef("dead: want an action: list, show, redrive or discard")
				}
				return a.dead(ctx, args[0], args[1:], *all, *yes, *limit, deadFilter{*activity, *instance})
			}
		},
	},
	{
		name:    "stats",
		usage:   "",
		summary: "Orchestrations and activities completed and failed, per minute, over the last day at most.",
		details: `The acks count what finishes as they commit: an instance whose current execution completes or
fails (a continue-as-new is not counted), an activity result or failure a worker acknowledges. The
counts are kept per minute for 24 hours in the namespace, so they survive restarts of dxctl web,
of the runtimes and, with persistence, of Redis (docs/operations.md, "Outcome counts"). --last
picks the range (whole minutes up to 24h), --step sums minutes into rows; rows without outcomes
are left out of the table (not of --json). Times are the server's, UTC. Cost: one HMGET per
partition.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			last := fs.Duration("last", time.Hour, "the range, up to 24h")
			step := fs.Duration("step", time.Minute, "minutes per row; must divide --last")
			return func(ctx context.Context, a *app, _ []string) error { return a.stats(ctx, *last, *step) }
		},
	},
	{
		name:    "partitions",
		usage:   "",
		summary: "The namespace's partitions: slot, node, instances, queue depths, outbox backlog, node load.",
		details: `One row per partition. TAG is the partition's hash tag and SLOT the Redis Cluster hash slot
every key of the partition lives in; NODE the primary serving that slot (CLUSTER SLOTS on a cluster,
else the server's address). INSTANCES counts the instances the partition holds. ORCH QUEUE and
WORKER QUEUE are its queue depths as "queues" counts them for the namespace (orchestrator messages
no lock covers, unlocked worker items). OUTBOX is the number of messages for other partitions not
forwarded yet, OLDEST OUTBOX how long the oldest has waited: entries normally leave within
milliseconds; a backlog that stays means no process forwards them. NODE OPS/S is the commands per
second the node executes (INFO stats, instantaneous_ops_per_sec), for every client and namespace it
serves, with how many of the namespace's partitions it serves: compare it between nodes. Cost: the
queue walk of "queues", partition by partition, and one INFO per node.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, _ []string) error { return a.partitions(ctx) }
		},
	},
	{
		name:    "metrics",
		usage:   "",
		summary: "System metrics: instances by status, executions and history events.",
		details: `Instance counts come from the indexes (O(1)); executions and events are summed over every
instance, O(instances + executions), in short scripts.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			return func(ctx context.Context, a *app, _ []string) error { return a.metrics(ctx) }
		},
	},
	versionsCommand,
	{
		name:    "fsck",
		usage:   "[--repair [--yes]]",
		summary: "Check the namespace's storage invariants; --repair fixes what it can. Exit status 1 when one is broken (or left).",
		details: `Walks every key and index of the namespace and checks each instance and worker item against
the invariants the scripts keep (keys.go): every lock indexed, every queued message reachable by a
fetch, index entries backed by their instance, records in their status index, retention counts,
orphaned keys. Each instance is checked in one script, so a live system's turns in flight never
show as damage. Without --repair it only reads; one line per violation: code, instance (or worker item), and what
is wrong with the keys involved. Cost: a SCAN of the namespace and O(keys) small scripts.
--repair then fixes each violation whose fix the other keys tell (docs/operations.md lists what
each code's repair does), each in one script that re-checks the violation first and changes
nothing when it no longer holds, so it is safe while runtimes run; histories are never changed.
It asks first (type the namespace's name); --yes repairs without asking. One line per repair
(repaired, clean: no longer broken, left: with why), then the check after the repairs; exit
status 0 when that is clean, 1 when something was left.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			repair := fs.Bool("repair", false, "repair what can be repaired, then check again")
			yes := fs.Bool("yes", false, "with --repair: repair without asking for confirmation")
			return func(ctx context.Context, a *app, _ []string) error {
				if *yes && !*repair {
					return usagef("fsck: --yes goes with --repair")
				}
				return a.fsck(ctx, *repair, *yes)
			}
		},
	},
	{
		name:    "delete",
		usage:   "ID [--force]",
		summary: "Delete a root instance with all its sub-orchestrations and every piece of their data.",
		details: `Refused for a sub-orchestration (delete its root) and, without --force, when an instance of
the tree is Running. --force deletes running instances too: a turn in progress then fails to
commit and cannot recreate the instance; activities in progress cannot report back. Force
delete removes stored state only; it does not stop code that is running.`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			force := fs.Bool("force", false, "delete even if an instance of the tree is Running")
			return func(ctx context.Context, a *app, args []string) error { return a.delete(ctx, args[0], *force) }
		},
	},
	{
		name:    "purge",
		usage:   "--completed-before DURATION|RFC3339 [--limit N]",
		summary: "Delete finished root instances (Completed, Failed, ContinuedAsNew) completed before a time, with their trees.",
		details: `--completed-before takes an age ("72h", "7d", "1d12h": completed longer ago than that) or an
RFC 3339 time ("2026-01-02T15:04:05Z"). Running instances, sub-orchestrations (deleted with
their root) and roots with a running sub-orchestration are never purged. At most --limit roots
are deleted per run; run again to continue.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			before := fs.String("completed-before", "", "age (`DURATION`, e.g. 7d) or RFC 3339 time")
			limit := fs.Uint("limit", provider.DefaultBulkLimit, "delete at most `N` root instances")
			return func(ctx context.Context, a *app, _ []string) error {
				if *before == "" {
					return usagef("purge: --completed-before is required")
				}
				cutoff, err := parseBefore(*before, time.Now())
				if err != nil {
					return usagef("purge: --completed-before %q: %v", *before, err)
				}
				if *limit == 0 || *limit > 1<<31 {
					return usagef("purge: --limit must be between 1 and %d", 1<<31)
				}
				return a.purge(ctx, cutoff, uint32(*limit))
			}
		},
	},
	{
		name:    "prune",
		usage:   "ID --keep N",
		summary: "Delete old executions of an instance, keeping the newest N (the current one is always kept).",
		details: `Running executions are never pruned; KV data belongs to the instance and stays. --keep 0 and
--keep 1 both keep only the current execution.`,
		nargs: 1,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			keep := fs.Int("keep", -1, "keep the newest `N` executions (required)")
			return func(ctx context.Context, a *app, args []string) error {
				if *keep < 0 {
					return usagef("prune: --keep N is required (N >= 0)")
				}
				if int64(*keep) > int64(^uint32(0)) {
					return usagef("prune: --keep %d is too large", *keep)
				}
				return a.prune(ctx, args[0], uint32(*keep))
			}
		},
	},
	{
		name:    "drop",
		usage:   "[--yes]",
		summary: "Delete the whole namespace: every instance, history, queue, lock and session, running or not.",
		details: `Asks first: type the namespace's name to confirm. --yes drops without asking (for scripts);
without it dxctl refuses when stdin is not a terminal. Stop the namespace's runtimes and workers
first: turns in progress fail to commit and activities cannot report back. Cost: a SCAN of the
server's whole keyspace (every primary's, on a cluster) for the namespace's keys.`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			yes := fs.Bool("yes", false, "drop without asking for confirmation")
			return func(ctx context.Context, a *app, _ []string) error { return a.drop(ctx, *yes) }
		},
	},
	{
		name:    "migrate",
		usage:   "[--partitions N]",
		summary: "Convert the namespace to this release's storage format (format 2), or move it to N partitions, with its runtimes stopped.",
		details: `Stop every runtime, worker and client process that uses the namespace first: migrate refuses
while a turn or an activity is locked, a session is owned or a fetcher waits, and from its first step
on every process of the older release fails on the namespace (loudly, writing nothing) until the
runtimes are started again with this release. Each step is atomic: a migration stopped anywhere (a
crash, Ctrl-C) is finished by running migrate again. On a namespace in format 2 it converts only the
execution records that a release before the one record layout wrote (nothing when there are none).
The downtime is the time between stopping the old runtimes and starting the new ones; the steps take
about 25-50 us per instance (docs/operations.md, "Upgrading a namespace").
--partitions N (1-256) re-partitions the namespace: every instance, worker item and session moves to
its partition under N, the indexes are rebuilt there, and the records come last. It refuses (writing
nothing) while anything uses the namespace or an outbox holds entries it cannot forward; from its
plan on every process refuses the namespace until it is done; a move that stopped is finished by
running migrate again (with the same N, or none). Start the runtimes afterwards with
Options.Partitions 0 or N (docs/operations.md, "Changing the partition count").`,
		setup: func(fs *flag.FlagSet) func(context.Context, *app, []string) error {
			partitions := fs.Int("partitions", 0, "move the namespace to `N` partitions, 1-256 (default: keep its count)")
			return func(ctx context.Context, a *app, _ []string) error { return a.migrate(ctx, *partitions) }
		},
	},
}, append(clientCommands, scheduleCommand)...)

// statusPending is the status dxctl gives an instance whose start is queued but not run yet (it
// has no instance record; redisprovider.ListPendingStarts).
const statusPending = "Pending"

// statuses are the values of --status.
var statuses = []string{statusPending, provider.StatusRunning, provider.StatusCompleted, provider.StatusFailed, provider.StatusContinuedAsNew}

// canonicalStatus returns the status named s (any case; "" for none) or says which exist.
func canonicalStatus(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range statuses {
		if strings.EqualFold(s, st) {
			return st, nil
		}
	}
	return "", usagef("instances: unknown status %q: want one of %s", s, strings.Join(statuses, ", "))
}

// parseBefore reads an age (Go duration, plus a "d" day unit) or an RFC 3339 time.
func parseBefore(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := parseAge(s)
	if err != nil {
		return time.Time{}, errors.New("want an age like 24h or 7d, or an RFC 3339 time")
	}
	if d < 0 {
		return time.Time{}, errors.New("the age must not be negative")
	}
	return now.Add(-d), nil
}

// parseAge is time.ParseDuration with leading whole days allowed ("7d", "1d12h").
func parseAge(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, err
		}
		d := time.Duration(days) * 24 * time.Hour
		if s[i+1:] == "" {
			return d, nil
		}
		more, err := time.ParseDuration(s[i+1:])
		return d + more, err
	}
	return time.ParseDuration(s)
}

func (a *app) instances(ctx context.Context, status string, limit int, cursor string) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	var rows []web.Instance
	if cursor == "" && (status == "" || status == statusPending) {
		// Starts queued but not run yet have no instance record; they come first, on the first page.
		pending, err := a.p.ListPendingStarts(ctx, limit)
		if err != nil {
			return err
		}
		for _, ps := range pending {
			rows = append(rows, web.Instance{ID: ps.InstanceID, Status: statusPending, Orchestration: ps.Orchestration,
				Version: ps.Version, CreatedAt: ps.QueuedAt, Parent: ps.ParentInstanceID})
		}
	}
	var ids []string
	var next string
	if status != statusPending {
		var err error
		if ids, next, err = a.p.ListInstancesPage(ctx, cursor, limit, status); err != nil {
			return err
		}
	}
	for _, id := range ids {
		info, err := a.p.GetInstanceInfo(ctx, id)
		if errors.Is(err, provider.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil {
			return err
		}
		rows = append(rows, web.InstanceOf(info))
	}
	if a.json {
		return a.printJSON(struct {
			Instances  []web.Instance `json:"instances"`
			NextCursor string         `json:"next_cursor,omitempty"`
		}{rows, next})
	}
	t := newTable(a.stdout, "INSTANCE", "STATUS", "ORCHESTRATION", "VERSION", "EXEC", "CREATED", "UPDATED", "PARENT")
	for _, r := range rows {
		exec := fmt.Sprint(r.Execution)
		if r.Status == statusPending {
			exec = "-"
		}
		t.row(r.ID, r.Status, dash(r.Orchestration), dash(r.Version), exec, msTime(r.CreatedAt), msTime(r.UpdatedAt), dash(r.Parent))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "(no instances)")
	}
	if next != "" {
		fmt.Fprintf(a.stdout, "more: dxctl %s instances%s --limit %d --cursor %s\n", a.connectionArgs(), statusArg(status), limit, shellQuote(next))
	}
	return nil
}

func (a *app) namespaces(ctx context.Context, maxKeys int) error {
	if err := a.connect(ctx); err != nil {
		return err
	}
	found, complete, err := redisprovider.ListNamespaces(ctx, a.p.Client(), maxKeys)
	if err != nil {
		return err
	}
	if a.json {
		type ns struct {
			Name      string `json:"namespace"`
			Instances int64  `json:"instances"`
		}
		out := struct {
			Namespaces []ns `json:"namespaces"`
			Complete   bool `json:"complete"`
		}{[]ns{}, complete}
		for _, n := range found {
			out.Namespaces = append(out.Namespaces, ns{n.Name, n.Instances})
		}
		return a.printJSON(out)
	}
	t := newTable(a.stdout, "NAMESPACE", "INSTANCES")
	for _, n := range found {
		t.row(n.Name, n.Instances)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(found) == 0 {
		fmt.Fprintln(a.stdout, "(no namespaces)")
	}
	if !complete {
		fmt.Fprintf(a.stdout, "(stopped after %d keys per server: more may exist; raise --max-keys)\n", maxKeys)
	}
	return nil
}

// connectionArgs repeats the global flags a follow-up command needs to reach the same
// namespace: --addr, --ns and --timeout (when not the default); the password stays in
// DXCTL_PASSWORD.
func (a *app) connectionArgs() string {
	args := "--addr " + shellQuote(a.addr) + " --ns " + shellQuote(a.ns)
	if a.timeout != defaultTimeout {
		args += " --timeout " + a.timeout.String()
	}
	return args
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain word characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/=+,@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func statusArg(status string) string {
	if status == "" {
		return ""
	}
	return " --status " + status
}

type executionRow struct {
	ExecutionID uint64  `json:"execution_id"`
	Status      string  `json:"status"`
	Output      *string `json:"output"`
	StartedAt   uint64  `json:"started_at_ms"`
	CompletedAt uint64  `json:"completed_at_ms,omitempty"`
	EventCount  uint64  `json:"event_count"`
}

type customStatusOut struct {
	Status  *string `json:"status"`
	Version uint64  `json:"version"`
}

func (a *app) show(ctx context.Context, id string, exec uint64) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	info, err := a.p.GetInstanceInfo(ctx, id)
	if errors.Is(err, provider.ErrNotFound) {
		ps, ok, perr := a.p.PendingStartOf(ctx, id)
		if perr != nil {
			return perr
		}
		if ok {
			return a.showPending(ps)
		}
	}
	if err != nil {
		return err
	}
	execIDs, err := a.p.ListExecutions(ctx, id)
	if err != nil {
		return err
	}
	execs := make([]executionRow, 0, len(execIDs))
	for _, e := range execIDs {
		x, err := a.p.GetExecutionInfo(ctx, id, e)
		if errors.Is(err, provider.ErrNotFound) {
			continue // pruned meanwhile
		}
		if err != nil {
			return err
		}
		execs = append(execs, executionRow{x.ExecutionID, x.Status, x.Output, x.StartedAt, x.CompletedAt, x.EventCount})
	}
	if exec == 0 {
		exec = info.CurrentExecutionID
	} else if _, err := a.p.GetExecutionInfo(ctx, id, exec); err != nil {
		return err
	}
	history, err := a.p.ReadHistoryWithExecutionID(ctx, id, exec)
	if err != nil {
		return err
	}
	children, err := a.p.ListChildren(ctx, id)
	if err != nil {
		return err
	}
	cs, err := a.p.GetCustomStatus(ctx, id, 0)
	if err != nil {
		return err
	}
	kv, err := a.p.GetKVAllValues(ctx, id)
	if err != nil {
		return err
	}
	held, heldSince, err := a.p.HeldReason(ctx, id)
	if err != nil {
		return err
	}

	if a.json {
		var csOut *customStatusOut
		if cs != nil {
			csOut = &customStatusOut{cs.Status, cs.Version}
		}
		events := make([]json.RawMessage, len(history))
		for i, e := range history {
			b, err := provider.Marshal(e)
			if err != nil {
				return err
			}
			events[i] = b
		}
		return a.printJSON(struct {
			Instance         web.Instance      `json:"instance"`
			Children         []string          `json:"children"`
			CustomStatus     *customStatusOut  `json:"custom_status"`
			KV               map[string]string `json:"kv"`
			Executions       []executionRow    `json:"executions"`
			HistoryExecution uint64            `json:"history_execution_id"`
			History          []json.RawMessage `json:"history"`
			Held             string            `json:"held,omitempty"`
		}{web.InstanceOf(info), children, csOut, kv, execs, exec, events, held})
	}

	w := a.stdout
	t := newTable(w)
	t.row("Instance:", info.InstanceID)
	t.row("Orchestration:", strings.TrimSpace(info.OrchestrationName+" "+info.OrchestrationVersion))
	t.row("Status:", info.Status)
	if held != "" {
		t.row("Held:", held+" (since "+heldSince.Format(time.RFC3339)+"; it resumes when a runtime whose code replays its history takes it)")
	}
	switch {
	case info.Output != nil && info.Status == provider.StatusFailed:
		t.row("Error:", shorten(*info.Output, 200))
	case info.Output != nil:
		t.row("Output:", shorten(render(*info.Output), 120))
	}
	for _, e := range history {
		if f, ok := e.Kind.(provider.OrchestrationFailedEvent); ok {
			if h := poisonHint(f.Details, info.OrchestrationName, info.OrchestrationVersion); h != "" {
				t.row("Hint:", h)
			}
		}
	}
	t.row("Execution:", fmt.Sprintf("%d (%d stored)", info.CurrentExecutionID, len(execs)))
	t.row("Parent:", dash(info.ParentInstanceID))
	t.row("Children:", dash(strings.Join(children, ", ")))
	t.row("Created:", msTime(info.CreatedAt))
	t.row("Updated:", msTime(info.UpdatedAt))
	switch {
	case cs == nil:
		t.row("Custom status:", "-")
	case cs.Status == nil:
		t.row("Custom status:", fmt.Sprintf("(cleared, version %d)", cs.Version))
	default:
		t.row("Custom status:", fmt.Sprintf("%s (version %d)", shorten(render(*cs.Status), 120), cs.Version))
	}
	t.row("KV keys:", len(kv))
	if err := t.flush(); err != nil {
		return err
	}
	if len(kv) > 0 {
		fmt.Fprintln(w)
		t = newTable(w, "KEY", "VALUE")
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			t.row(shorten(k, 60), shorten(render(kv[k]), 100))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	t = newTable(w, "EXECUTION", "STATUS", "STARTED", "COMPLETED", "EVENTS", "OUTPUT")
	for _, x := range execs {
		out := "-"
		switch {
		case x.Output != nil && x.Status == provider.StatusFailed:
			out = "error: " + shorten(*x.Output, 60)
		case x.Output != nil:
			out = shorten(render(*x.Output), 60)
		}
		t.row(x.ExecutionID, x.Status, msTime(x.StartedAt), msTime(x.CompletedAt), x.EventCount, out)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nHistory of execution %d (%d events):\n", exec, len(history))
	t = newTable(w)
	for _, e := range history {
		t.row(fmt.Sprintf("#%d", e.EventID), eventTime(e.TimestampMs), e.Kind.EventType(), eventDetails(e))
	}
	return t.flush()
}

// showPending shows an instance whose start is queued and has not run yet (no instance record).
func (a *app) showPending(ps redisprovider.PendingStart) error {
	row := web.Instance{ID: ps.InstanceID, Status: statusPending, Orchestration: ps.Orchestration,
		Version: ps.Version, CreatedAt: ps.QueuedAt, Parent: ps.ParentInstanceID}
	if a.json {
		return a.printJSON(struct {
			Instance web.Instance `json:"instance"`
			Locked   bool         `json:"locked"`
		}{row, ps.Locked})
	}
	t := newTable(a.stdout)
	t.row("Instance:", ps.InstanceID)
	t.row("Orchestration:", dash(strings.TrimSpace(ps.Orchestration+" "+ps.Version)))
	note := "its start is queued; no runtime has run its first turn yet"
	if ps.Locked {
		note = "a runtime is running its first turn now"
	}
	t.row("Status:", statusPending+" ("+note+")")
	t.row("Parent:", dash(ps.ParentInstanceID))
	t.row("Queued:", msTime(ps.QueuedAt))
	return t.flush()
}

type queuesOut struct {
	Queue           string `json:"queue"`
	Visible         uint64 `json:"visible"`
	Delayed         uint64 `json:"delayed"`
	Unlocked        uint64 `json:"unlocked"`
	Locked          uint64 `json:"locked"`
	OldestVisibleMs int64  `json:"oldest_visible_age_ms"`
}

func (a *app) queues(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	qs, err := a.p.GetQueueStats(ctx)
	if err != nil {
		return err
	}
	o, wq := qs.Orchestrator, qs.Worker
	ls, err := a.p.GetTagLimits(ctx)
	if err != nil {
		return err
	}
	caps := web.TagCapsOf(ls, wq.Tags)
	if a.json {
		return a.printJSON(struct {
			Caps                  []web.TagCap    `json:"caps"`
			Orchestrator          queuesOut       `json:"orchestrator"`
			LockedInstances       uint64          `json:"locked_instances"`
			ExpiredLocks          uint64          `json:"expired_locks"`
			WorkerUnlocked        uint64          `json:"worker_unlocked"`
			WorkerLocked          uint64          `json:"worker_locked"`
			WorkerOldestVisibleMs int64           `json:"worker_oldest_visible_age_ms"`
			WorkerTags            []web.WorkerTag `json:"worker_tags"`
			ServerTime            time.Time       `json:"server_time"`
		}{caps, queuesOut{"orchestrator", o.Visible, o.Delayed, o.Visible + o.Delayed, o.Locked, o.OldestVisibleAge.Milliseconds()},
			o.LockedInstances, o.ExpiredLocks, wq.Unlocked, wq.Locked, wq.OldestVisibleAge.Milliseconds(), web.WorkerTagsOf(wq.Tags), qs.ServerTime.UTC()})
	}
	t := newTable(a.stdout, "QUEUE", "UNLOCKED", "VISIBLE", "DELAYED", "LOCKED", "OLDEST VISIBLE")
	t.row("orchestrator", o.Visible+o.Delayed, o.Visible, o.Delayed, o.Locked, age(o.OldestVisibleAge))
	t.row("worker", wq.Unlocked, "-", "-", wq.Locked, age(wq.OldestVisibleAge))
	for _, tg := range wq.Tags {
		name := "  untagged"
		if tg.Tag != "" {
			name = fmt.Sprintf("  tag %q", tg.Tag)
		}
		t.row(name, tg.Ready+tg.Session+tg.Delayed, tg.Ready+tg.Session, tg.Delayed, tg.Locked, "-")
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "\nLocked instances: %d (%d expired, reclaimed by the next fetch)\n", o.LockedInstances, o.ExpiredLocks)
	if len(caps) == 0 {
		return nil
	}
	fmt.Fprintln(a.stdout)
	t = newTable(a.stdout, "CAPPED TAG", "RUNNING", "CONCURRENCY", "RATE/S", "WAITING")
	for _, c := range caps {
		waiting := "-"
		if c.Waiting > 0 {
			waiting = fmt.Sprintf("%d (capped)", c.Waiting)
		}
		t.row(tagName(c.Tag), c.Running, capText(c.Concurrency), rateText(c.Rate), waiting)
	}
	return t.flush()
}

func (a *app) limits(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	ls, err := a.p.GetTagLimits(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			Limits []web.TagCap `json:"limits"`
		}{web.TagCapsOf(ls, nil)})
	}
	t := newTable(a.stdout, "TAG", "RUNNING", "CONCURRENCY", "RATE/S", "BURST")
	for _, l := range ls {
		t.row(tagName(l.Tag), l.Running, capText(l.Concurrency), rateText(l.Rate), l.Burst)
	}
	return t.flush()
}

func (a *app) limit(ctx context.Context, tag string, l redisprovider.TagLimits) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	if err := a.p.SetTagLimits(ctx, tag, l); err != nil {
		return err
	}
	if l == (redisprovider.TagLimits{}) {
		_, err := fmt.Fprintf(a.stdout, "%s: no caps\n", tagName(tag))
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s: concurrency %s, rate %s/s, burst %d\n", tagName(tag), capText(l.Concurrency), rateText(l.Rate), max(l.Burst, 1))
	return err
}

// tagName is how dxctl names a tag ("" the untagged activities).
func tagName(tag string) string {
	if tag == "" {
		return "untagged"
	}
	return fmt.Sprintf("tag %q", tag)
}

func capText(k int) string {
	if k == 0 {
		return "-"
	}
	return strconv.Itoa(k)
}

func rateText(r float64) string {
	if r == 0 {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

func (a *app) stats(ctx context.Context, last, step time.Duration) error {
	minutes, stepMinutes, err := web.OutcomeRange(last, step)
	if err != nil {
		return usagef("stats: %v", err)
	}
	if err := a.open(ctx); err != nil {
		return err
	}
	o, err := web.ReadOutcomes(ctx, a.p, minutes, stepMinutes)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(o)
	}
	t := newTable(a.stdout, "FROM (UTC)", "ORCH COMPLETED", "ORCH FAILED", "ACT COMPLETED", "ACT FAILED")
	for _, b := range o.Buckets {
		if b.OutcomeCounts != (web.OutcomeCounts{}) {
			t.row(b.At.Format("2006-01-02 15:04"), b.OrchestrationsCompleted, b.OrchestrationsFailed, b.ActivitiesCompleted, b.ActivitiesFailed)
		}
	}
	c := o.Totals
	t.row("total", c.OrchestrationsCompleted, c.OrchestrationsFailed, c.ActivitiesCompleted, c.ActivitiesFailed)
	if err := t.flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(a.stdout, "\nLast %v from %s, %v per row.\n", last, o.From.Format("2006-01-02 15:04"), step)
	return err
}

func (a *app) partitions(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	stats, err := a.p.GetPartitionStats(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(web.PartitionsOf(a.ns, stats))
	}
	t := newTable(a.stdout, "PARTITION", "TAG", "SLOT", "NODE", "INSTANCES", "ORCH QUEUE", "WORKER QUEUE", "OUTBOX", "OLDEST OUTBOX", "NODE OPS/S")
	for _, s := range stats {
		t.row(s.Partition, s.Tag, s.Slot, s.Node, s.Instances, s.Orchestrator, s.Worker, s.OutboxEntries, age(s.OutboxOldestAge),
			fmt.Sprintf("%d (%d of these)", s.NodeOpsPerSec, s.NodePartitions))
	}
	return t.flush()
}

func (a *app) fsck(ctx context.Context, repair, yes bool) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	rep, err := a.p.Fsck(ctx)
	if err != nil {
		return err
	}
	if repair && len(rep.Violations) == 0 {
		return a.printRepair(redisprovider.RepairReport{After: rep})
	}
	if repair {
		if !a.json {
			a.printFsck(rep)
		}
		if !yes {
			prompt := fmt.Sprintf("Repair %d violation(s) in namespace %q at %s? Each repair re-checks its violation and\n"+
				"changes nothing that moved on; histories are never changed.\nType the namespace's name to confirm: ",
				len(rep.Violations), a.ns, a.addr)
			if err := a.confirm("fsck --repair", prompt, "pass --yes to repair without asking", "nothing repaired"); err != nil {
				return err
			}
		}
		return a.repair(ctx)
	}
	if a.json {
		if err := a.printJSON(fsckJSON(rep)); err != nil {
			return err
		}
	} else {
		a.printFsck(rep)
	}
	if len(rep.Violations) > 0 {
		return errFsckViolations
	}
	return nil
}

type fsckViolation struct {
	Code      string `json:"code"`
	Subject   string `json:"subject"`
	Detail    string `json:"detail"`
	Partition int    `json:"partition"`
}

type fsckOut struct {
	Keys       int             `json:"keys"`
	Instances  int             `json:"instances"`
	Items      int             `json:"worker_items"`
	Violations []fsckViolation `json:"violations"`
}

func fsckJSON(rep redisprovider.FsckReport) fsckOut {
	out := fsckOut{rep.Keys, rep.Instances, rep.Items, []fsckViolation{}}
	for _, v := range rep.Violations {
		out.Violations = append(out.Violations, fsckViolation(v))
	}
	return out
}

func (a *app) printFsck(rep redisprovider.FsckReport) {
	for _, v := range rep.Violations {
		fmt.Fprintf(a.stdout, "%s %s: %s\n", v.Code, quoteID(v.Subject), v.Detail)
	}
	fmt.Fprintf(a.stdout, "checked %d keys, %d instances, %d worker items: %d violation(s)\n",
		rep.Keys, rep.Instances, rep.Items, len(rep.Violations))
}

// repair runs Provider.Repair and prints what it did and what the check after it found.
func (a *app) repair(ctx context.Context) error {
	rep, err := a.p.Repair(ctx)
	if err != nil {
		return err
	}
	return a.printRepair(rep)
}

// printRepair prints a repair's report; it fails (exit status 1) when violations were left.
func (a *app) printRepair(rep redisprovider.RepairReport) error {
	if a.json {
		type action struct {
			Code    string `json:"code"`
			Subject string `json:"subject"`
			Outcome string `json:"outcome"`
			Detail  string `json:"detail"`
		}
		out := struct {
			Found   []fsckViolation `json:"found"`
			Repairs []action        `json:"repairs"`
			After   fsckOut         `json:"after"`
		}{[]fsckViolation{}, []action{}, fsckJSON(rep.After)}
		for _, v := range rep.Found {
			out.Found = append(out.Found, fsckViolation(v))
		}
		for _, r := range rep.Actions {
			out.Repairs = append(out.Repairs, action{r.Code, r.Subject, r.Outcome, r.Why})
		}
		if err := a.printJSON(out); err != nil {
			return err
		}
	} else if len(rep.Found) == 0 {
		a.printFsck(rep.After)
	} else {
		fmt.Fprintln(a.stdout)
		for _, r := range rep.Actions {
			fmt.Fprintf(a.stdout, "%s %s %s: %s\n", r.Outcome, r.Code, quoteID(r.Subject), r.Why)
		}
		fmt.Fprintf(a.stdout, "\nafter repair: ")
		a.printFsck(rep.After)
	}
	if len(rep.After.Violations) > 0 {
		return errFsckLeft
	}
	return nil
}

// errFsckViolations makes fsck exit with status 1 once its report is printed.
var errFsckViolations = errors.New("fsck: the namespace breaks its invariants (listed above)")

// errFsckLeft makes fsck --repair exit with status 1 once its report is printed.
var errFsckLeft = errors.New("fsck --repair: violations were left unrepaired (listed above)")

// quoteID prints an instance id so that spaces and control characters stay visible.
func quoteID(id string) string {
	if id == "" {
		return "(namespace)"
	}
	return strconv.Quote(id)
}

func (a *app) metrics(ctx context.Context) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	m, err := a.p.GetSystemMetrics(ctx)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			TotalInstances     uint64 `json:"total_instances"`
			TotalExecutions    uint64 `json:"total_executions"`
			RunningInstances   uint64 `json:"running_instances"`
			CompletedInstances uint64 `json:"completed_instances"`
			FailedInstances    uint64 `json:"failed_instances"`
			TotalEvents        uint64 `json:"total_events"`
		}{m.TotalInstances, m.TotalExecutions, m.RunningInstances, m.CompletedInstances, m.FailedInstances, m.TotalEvents})
	}
	t := newTable(a.stdout, "METRIC", "VALUE")
	t.row("instances", m.TotalInstances)
	t.row("  running", m.RunningInstances)
	t.row("  completed", m.CompletedInstances)
	t.row("  failed", m.FailedInstances)
	t.row("executions", m.TotalExecutions)
	t.row("history events", m.TotalEvents)
	return t.flush()
}

type deleteOut struct {
	InstancesDeleted     uint64 `json:"instances_deleted"`
	ExecutionsDeleted    uint64 `json:"executions_deleted"`
	EventsDeleted        uint64 `json:"events_deleted"`
	QueueMessagesDeleted uint64 `json:"queue_messages_deleted"`
}

func (a *app) printDeleted(r provider.DeleteInstanceResult) error {
	if a.json {
		return a.printJSON(deleteOut{r.InstancesDeleted, r.ExecutionsDeleted, r.EventsDeleted, r.QueueMessagesDeleted})
	}
	t := newTable(a.stdout, "DELETED", "COUNT")
	t.row("instances", r.InstancesDeleted)
	t.row("executions", r.ExecutionsDeleted)
	t.row("history events", r.EventsDeleted)
	t.row("queue messages", r.QueueMessagesDeleted)
	return t.flush()
}

func (a *app) delete(ctx context.Context, id string, force bool) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	r, err := a.p.DeleteInstance(ctx, id, force)
	if err != nil {
		return err
	}
	return a.printDeleted(r)
}

func (a *app) purge(ctx context.Context, before time.Time, limit uint32) error {
	ms := before.UnixMilli()
	if ms <= 0 {
		return usagef("purge: --completed-before is before 1970")
	}
	if err := a.open(ctx); err != nil {
		return err
	}
	r, err := a.p.DeleteInstanceBulk(ctx, provider.InstanceFilter{CompletedBeforeMs: uint64(ms), Limit: limit})
	if err != nil {
		return err
	}
	return a.printDeleted(r)
}

func (a *app) prune(ctx context.Context, id string, keep uint32) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	r, err := a.p.PruneExecutions(ctx, id, provider.PruneOptions{KeepLast: keep})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			InstancesProcessed uint64 `json:"instances_processed"`
			ExecutionsDeleted  uint64 `json:"executions_deleted"`
			EventsDeleted      uint64 `json:"events_deleted"`
		}{r.InstancesProcessed, r.ExecutionsDeleted, r.EventsDeleted})
	}
	t := newTable(a.stdout, "PRUNED", "COUNT")
	t.row("executions", r.ExecutionsDeleted)
	t.row("history events", r.EventsDeleted)
	return t.flush()
}

func (a *app) drop(ctx context.Context, yes bool) error {
	if err := a.open(ctx); err != nil {
		return err
	}
	if !yes {
		if err := a.confirmDrop(ctx); err != nil {
			return err
		}
	}
	n, err := redisprovider.DropNamespace(ctx, a.p.Client(), a.ns)
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			Namespace   string `json:"namespace"`
			KeysDeleted int    `json:"keys_deleted"`
		}{a.ns, n})
	}
	fmt.Fprintf(a.stdout, "dropped namespace %q: %d keys deleted\n", a.ns, n)
	return nil
}

// confirmDrop asks whether to drop the namespace (confirm).
func (a *app) confirmDrop(ctx context.Context) error {
	if err := a.needTerminal("drop", "pass --yes to drop without asking"); err != nil {
		return err
	}
	m, err := a.p.GetSystemMetrics(ctx)
	if err != nil {
		return err
	}
	prompt := fmt.Sprintf("Drop namespace %q at %s: %d instances (%d running) and everything else in it?\n"+
		"Type the namespace's name to confirm: ", a.ns, a.addr, m.TotalInstances, m.RunningInstances)
	return a.confirm("drop", prompt, "pass --yes to drop without asking", fmt.Sprintf("namespace %q not dropped", a.ns))
}

// needTerminal refuses when stdin is a file that is not a terminal: nobody could answer.
func (a *app) needTerminal(cmd, skip string) error {
	if f, ok := a.stdin.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			return usagef("%s: stdin is not a terminal, so dxctl cannot ask for confirmation; %s", cmd, skip)
		}
	}
	return nil
}

// confirm asks prompt on stderr and reads the answer from stdin, which must be a terminal (or, in
// tests, a reader): the namespace's name confirms, anything else refuses (the error ends with
// refused, what was not done).
func (a *app) confirm(cmd, prompt, skip, refused string) error {
	if err := a.needTerminal(cmd, skip); err != nil {
		return err
	}
	fmt.Fprint(a.stderr, prompt)
	var line string
	if a.stdin != nil {
		line, _ = bufio.NewReader(a.stdin).ReadString('\n')
	}
	fmt.Fprintln(a.stderr)
	switch answer := strings.TrimSpace(line); answer {
	case a.ns:
		return nil
	case "":
		return fmt.Errorf("%s: no answer, %s (%s)", cmd, refused, skip)
	default:
		return fmt.Errorf("%s: %q is not the namespace's name: %s", cmd, answer, refused)
	}
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// migrate converts the namespace to format 2 or moves it to other partitions
// (redisprovider.Migrate). It needs no provider: the provider refuses a namespace in another
// format or being moved.
func (a *app) migrate(ctx context.Context, partitions int) error {
	if partitions < 0 || partitions > 256 {
		return usagef("migrate: --partitions must be 1-256 (or 0 to keep the namespace's count)")
	}
	c := redis.NewClient(&redis.Options{Addr: a.addr, Password: a.password})
	defer c.Close()
	rep, err := redisprovider.Migrate(ctx, c, a.ns, redisprovider.MigrateOptions{Partitions: partitions})
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			Namespace      string   `json:"namespace"`
			From           int      `json:"from_format"`
			To             int      `json:"to_format"`
			FromPartitions int      `json:"from_partitions"`
			ToPartitions   int      `json:"to_partitions"`
			Steps          []string `json:"steps"`
			ElapsedMS      float64  `json:"elapsed_ms"`
		}{rep.Namespace, rep.From, rep.To, rep.FromPartitions, rep.ToPartitions, append([]string{}, rep.Steps...), float64(rep.Elapsed.Microseconds()) / 1000})
	}
	took := fmt.Sprintf("in %s (steps: %s)", rep.Elapsed.Round(time.Microsecond), strings.Join(rep.Steps, ", "))
	switch {
	case rep.From == 0:
		fmt.Fprintf(a.stdout, "namespace %q holds nothing: its first write gives it format %d\n", a.ns, rep.To)
	case len(rep.Steps) == 0:
		fmt.Fprintf(a.stdout, "namespace %q is in format %d already: nothing to do\n", a.ns, rep.To)
	case rep.FromPartitions != rep.ToPartitions:
		fmt.Fprintf(a.stdout, "namespace %q moved from %d to %d partitions %s: start its runtimes (Options.Partitions 0 or %d)\n",
			a.ns, rep.FromPartitions, rep.ToPartitions, took, rep.ToPartitions)
	case rep.From == rep.To:
		fmt.Fprintf(a.stdout, "namespace %q (format %d): converted what an older release wrote %s: start its runtimes with this release\n",
			a.ns, rep.To, took)
	default:
		fmt.Fprintf(a.stdout, "namespace %q migrated from format %d to format %d %s: start its runtimes with this release\n",
			a.ns, rep.From, rep.To, took)
	}
	return nil
}
