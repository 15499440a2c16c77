package redisprovider

import (
	"context"
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
	r, _, _, err := p.deleteCall(ctx, op, "atomic", force, "0", 0, args)
	return r, err
}

// deleteCall runs admin_delete (its arguments: see scripts/admin_delete.lua) and decodes
// {counts..., roots, next score, next id}.
func (p *Provider) deleteCall(ctx context.Context, op, mode string, force bool, before string, limit int, vals []string) (provider.DeleteInstanceResult, int, string, error) {
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
		return provider.DeleteInstanceResult{}, 0, "", err
	}
	res, err := p.run(ctx, op, luascripts.AdminDelete.Op, 0, args...)
	if err != nil {
		return provider.DeleteInstanceResult{}, 0, "", err
	}
	r := list(res)
	if len(r) < 7 {
		return provider.DeleteInstanceResult{}, 0, "", provider.NewPermanentError(op, "unexpected reply from admin_delete")
	}
	next := ""
	if s := str(r[5]); s != "" {
		next = encodeCursor(s, str(r[6]))
	}
	return provider.DeleteInstanceResult{
		InstancesDeleted:     uint64(num(r[0])),
		ExecutionsDeleted:    uint64(num(r[1])),
		EventsDeleted:        uint64(num(r[2])),
		QueueMessagesDeleted: uint64(num(r[3])),
	}, int(num(r[4])), next, nil
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
	if filter.InstanceIDs != nil {
		ids := dedupe(filter.InstanceIDs)
		for start := 0; start < len(ids) && roots < limit; start += idChunk {
			r, n, _, err := p.deleteCall(ctx, op, "roots", false, before, limit-roots, ids[start:min(start+idChunk, len(ids))])
			total, roots = total.Add(r), roots+n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for _, status := range terminalStatuses {
		score, member := "", ""
		for roots < limit {
			r, n, next, err := p.deleteCall(ctx, op, "scan", false, before, limit-roots,
				[]string{status, score, member, strconv.Itoa(scanPageSize)})
			total, roots = total.Add(r), roots+n
			if err != nil {
				return total, err
			}
			if next == "" {
				break
			}
			score, member, _ = decodeCursor(next)
		}
	}
	return total, nil
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
	total := 0
	for {
		args, err := argsOf(op, luascripts.AdminOrphans, "n", strconv.Itoa(scanPageSize))
		if err != nil {
			return total, err
		}
		res, err := p.run(ctx, op, luascripts.AdminOrphans.Op, 0, args...)
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
