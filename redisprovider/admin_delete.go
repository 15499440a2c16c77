package redisprovider

import (
	"context"
	"slices"
	"strconv"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// DeleteInstancesAtomic implements provider.Admin in one script: everything or nothing. It fails,
// deleting nothing, when an instance is Running and force is false (ErrInstanceRunning) or when an
// existing child of a listed instance is not listed (ErrInvalidInput: it would be orphaned).
// Unknown ids are not an error (their queued messages, if any, are deleted and counted). Deleting
// a locked instance removes its lock and token, so the in-flight ack fails with
// ErrInvalidLockToken instead of recreating it; its worker items go too, so stale worker tokens
// fail as well. Counts are exact: instances that existed, their executions, events, and the
// orchestrator messages and worker items deleted.
// Cost: O(ids + children + executions + events + messages deleted).
func (p *Provider) DeleteInstancesAtomic(ctx context.Context, ids []string, force bool) (provider.DeleteInstanceResult, error) {
	const op = "delete_instances_atomic"
	var args []string
	seen := map[string]bool{}
	for _, id := range ids {
		if err := checkID(op, id); err != nil {
			return provider.DeleteInstanceResult{}, err
		}
		if !seen[id] {
			seen[id] = true
			args = append(args, id)
		}
	}
	if len(seen) == 0 {
		return provider.DeleteInstanceResult{}, nil
	}
	groups := p.byPartition(args)
	if len(groups) == 1 {
		r, _, _, _, err := p.deleteCall(ctx, op, groups[0].part, "atomic", force, "0", 0, args)
		return r, err
	}
	// Ids in several partitions (a tree whose children were named explicitly): every partition
	// checks its share first, then each deletes it. Not atomic as a whole: an instance that
	// starts running, or a child created, between the two steps is deleted all the same.
	share := func(g idGroup) []string {
		vals := append([]string{strconv.Itoa(len(g.ids))}, g.ids...)
		for _, id := range args {
			if p.keys.PartitionOf(id) != g.part {
				vals = append(vals, id)
			}
		}
		return vals
	}
	for _, g := range groups {
		if _, _, _, _, err := p.deleteCall(ctx, op, g.part, "pcheck", force, "0", 0, share(g)); err != nil {
			return provider.DeleteInstanceResult{}, err
		}
	}
	var total provider.DeleteInstanceResult
	for _, g := range groups {
		r, _, _, _, err := p.deleteCall(ctx, op, g.part, "pdelete", force, "0", 0, share(g))
		total = total.Add(r)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// deleteCall runs admin_delete in partition part (its arguments: see scripts/admin_delete.lua) and
// decodes {counts..., roots, next score, next id, deferred roots}. Messages it left for other
// partitions (a parent elsewhere forgets a deleted child) are forwarded.
func (p *Provider) deleteCall(ctx context.Context, op string, part int, mode string, force bool, before string, limit int, vals []string) (provider.DeleteInstanceResult, int, string, []string, error) {
	e := luascripts.AdminDelete.Encoder(5 + len(vals))
	e.Set("retention", ms(p.opts.Retention))
	e.Set("mode", mode)
	e.Flag("force", force)
	e.Set("before", before)
	e.Set("limit", strconv.Itoa(limit))
	e.Section("list")
	for _, v := range vals {
		e.Entry(v)
	}
	args, err := encoded(op, e)
	if err != nil {
		return provider.DeleteInstanceResult{}, 0, "", nil, err
	}
	res, err := p.run(ctx, op, luascripts.AdminDelete.Op, part, args...)
	if err != nil {
		return provider.DeleteInstanceResult{}, 0, "", nil, err
	}
	r := list(res)
	if len(r) < 7 {
		return provider.DeleteInstanceResult{}, 0, "", nil, provider.NewPermanentError(op, "unexpected reply from admin_delete")
	}
	if p.keys.Partitions() > 1 && mode != "pcheck" {
		p.forward(ctx, part)
	}
	next := ""
	if s := str(r[5]); s != "" {
		next = encodeCursor(s, str(r[6]))
	}
	var deferred []string
	if len(r) >= 8 {
		for _, v := range list(r[7]) {
			deferred = append(deferred, str(v))
		}
	}
	return provider.DeleteInstanceResult{
		InstancesDeleted:     uint64(num(r[0])),
		ExecutionsDeleted:    uint64(num(r[1])),
		EventsDeleted:        uint64(num(r[2])),
		QueueMessagesDeleted: uint64(num(r[3])),
	}, int(num(r[4])), next, deferred, nil
}

// deleteTrees deletes the trees of roots that reach several partitions (bulk deletes skip them
// in their scripts), each with the rules of the bulk modes: a terminal root without a parent,
// completed before `before` (ms, 0 none), whose tree holds no Running instance. It returns the
// counts and how many roots it deleted, at most limit.
func (p *Provider) deleteTrees(ctx context.Context, roots []string, before uint64, limit int) (provider.DeleteInstanceResult, int, error) {
	var total provider.DeleteInstanceResult
	n := 0
	for _, root := range roots {
		if n >= limit {
			break
		}
		tree, err := p.GetInstanceTree(ctx, root)
		if err != nil {
			continue // gone meanwhile
		}
		ok := true
		for i, id := range tree.AllIDs {
			info, err := p.GetInstanceInfo(ctx, id)
			if err != nil || info.Status == provider.StatusRunning || (i == 0 && (info.ParentInstanceID != "" || !provider.IsTerminalStatus(info.Status))) {
				ok = false
				break
			}
			if i == 0 && before > 0 {
				e, err := p.GetExecutionInfo(ctx, id, info.CurrentExecutionID)
				if err != nil || e.CompletedAt == 0 || e.CompletedAt >= before {
					ok = false
					break
				}
			}
		}
		if !ok {
			continue
		}
		r, err := p.DeleteInstancesAtomic(ctx, tree.AllIDs, false)
		if err != nil {
			continue // changed meanwhile: a later purge finds it
		}
		total = total.Add(r)
		n++
	}
	return total, n, nil
}

// DeleteInstance implements provider.Admin (duroxide's default): sub-orchestrations are refused
// (delete the root), unknown ids are ErrNotFound, and the whole tree goes in one
// DeleteInstancesAtomic call (which refuses Running instances unless force, and fails if a child
// appeared meanwhile).
func (p *Provider) DeleteInstance(ctx context.Context, instance string, force bool) (provider.DeleteInstanceResult, error) {
	if err := checkID("delete_instance", instance); err != nil {
		return provider.DeleteInstanceResult{}, err
	}
	return provider.DeleteInstanceTree(ctx, p, instance, force)
}

// DeleteInstanceBulk implements provider.Admin. It deletes root instances (no parent) whose
// current status is terminal (Completed, Failed, ContinuedAsNew), with their whole trees; a root
// whose tree still holds a Running instance is skipped, as are Running roots and
// sub-orchestrations (no error). Filter: InstanceIDs (nil = every instance), CompletedBeforeMs
// (the current execution's completion time), Limit roots (0 = provider.DefaultBulkLimit);
// InstancesDeleted counts the cascaded children too.
//
// Each root's tree is deleted atomically; the bulk call as a whole is not (it runs as several
// scripts, each examining at most scanPageSize candidates, so it never blocks the server long).
// Without InstanceIDs it walks idx:status:<status> for the three terminal statuses, lowest score
// first; with CompletedBeforeMs it stops at the first entry scored at or after the cutoff. The
// score is the instance's last update, never before its completion: an instance completed before
// the cutoff but acked again later (say, for an event raised after it finished) is found by a
// later purge, not this one. (Scoring idx:status by the time an instance entered the status —
// ZADD NX in orch_ack — would make the cutoff exact.)
// Cost: O(candidates examined + data deleted).
func (p *Provider) DeleteInstanceBulk(ctx context.Context, filter provider.InstanceFilter) (provider.DeleteInstanceResult, error) {
	const op = "delete_instance_bulk"
	limit := int(filter.Limit)
	if limit == 0 {
		limit = provider.DefaultBulkLimit
	}
	before := strconv.FormatUint(filter.CompletedBeforeMs, 10)
	var total provider.DeleteInstanceResult
	roots := 0
	// Trees that reach several partitions are left by the scripts and deleted by their ids.
	var deferred []string
	if filter.InstanceIDs != nil {
		for _, g := range p.byPartition(dedupe(filter.InstanceIDs)) {
			for start := 0; start < len(g.ids) && roots < limit; start += idChunk {
				r, n, _, d, err := p.deleteCall(ctx, op, g.part, "roots", false, before, limit-roots, g.ids[start:min(start+idChunk, len(g.ids))])
				total, roots, deferred = total.Add(r), roots+n, append(deferred, d...)
				if err != nil {
					return total, err
				}
			}
		}
	} else {
		for part := range p.keys.Partitions() {
			for _, status := range terminalStatuses {
				score, member := "", ""
				for roots < limit {
					r, n, next, d, err := p.deleteCall(ctx, op, part, "scan", false, before, limit-roots,
						[]string{status, score, member, strconv.Itoa(scanPageSize)})
					total, roots, deferred = total.Add(r), roots+n, append(deferred, d...)
					if err != nil {
						return total, err
					}
					if next == "" {
						break
					}
					score, member, _ = decodeCursor(next)
				}
			}
		}
	}
	r, _, err := p.deleteTrees(ctx, deferred, filter.CompletedBeforeMs, limit-roots)
	return total.Add(r), err
}

func dedupe(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// PurgeOrphanMessages deletes every parked orphan message (see OrchestratorQueueStats.Orphaned)
// and returns how many, in scripts of scanPageSize orphan instances each. It runs when Redis is
// out of memory.
func (p *Provider) PurgeOrphanMessages(ctx context.Context) (int, error) {
	const op = "purge_orphan_messages"
	counts := make([]int, p.keys.Partitions())
	err := p.inPartitions(ctx, func(ctx context.Context, part int) (err error) {
		counts[part], err = p.purgeOrphans(ctx, op, part)
		return err
	})
	total := 0
	for _, n := range counts {
		total += n
	}
	return total, err
}

// purgeOrphans is PurgeOrphanMessages in one partition.
func (p *Provider) purgeOrphans(ctx context.Context, op string, part int) (int, error) {
	total := 0
	for {
		args, err := argsOf(op, luascripts.AdminOrphans, "n", strconv.Itoa(scanPageSize))
		if err != nil {
			return total, err
		}
		res, err := p.run(ctx, op, luascripts.AdminOrphans.Op, part, args...)
		if err != nil {
			return total, err
		}
		r := list(res)
		if len(r) < 2 {
			return total, provider.NewPermanentError(op, "unexpected reply from admin_orphans")
		}
		total += int(num(r[1]))
		if num(r[0]) < scanPageSize {
			return total, nil
		}
	}
}

// partitionRuns cuts ids, in their order, into runs of one partition each.
func (p *Provider) partitionRuns(ids []string) []idGroup {
	var out []idGroup
	for _, id := range ids {
		part := p.keys.PartitionOf(id)
		if n := len(out); n > 0 && out[n-1].part == part {
			out[n-1].ids = append(out[n-1].ids, id)
		} else {
			out = append(out, idGroup{part, []string{id}})
		}
	}
	return out
}

// idGroup is the ids of one partition.
type idGroup struct {
	part int
	ids  []string
}

// byPartition groups ids by partition, in partition order, each group in the order given.
func (p *Provider) byPartition(ids []string) []idGroup {
	if p.keys.Partitions() == 1 {
		return []idGroup{{0, ids}}
	}
	m := map[int][]string{}
	for _, id := range ids {
		part := p.keys.PartitionOf(id)
		m[part] = append(m[part], id)
	}
	out := make([]idGroup, 0, len(m))
	for part, g := range m {
		out = append(out, idGroup{part, g})
	}
	slices.SortFunc(out, func(a, b idGroup) int { return a.part - b.part })
	return out
}
