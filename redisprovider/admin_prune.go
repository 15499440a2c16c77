package redisprovider

import (
	"context"
	"strconv"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

// PruneExecutions implements provider.Admin in one script: it deletes the executions (and their
// histories) beyond the newest max(KeepLast, 1), only those completed before CompletedBeforeMs
// when set, never the current execution nor a Running one; KV data stays. ErrNotFound for unknown
// instances. Cost: O(executions + events deleted).
func (p *Provider) PruneExecutions(ctx context.Context, instance string, options provider.PruneOptions) (provider.PruneResult, error) {
	const op = "prune_executions"
	if err := checkID(op, instance); err != nil {
		return provider.PruneResult{}, err
	}
	return p.pruneCall(ctx, op, "one", options, 0, 1, []string{instance}, p.keys.PartitionOf(instance))
}

// PruneExecutionsBulk implements provider.Admin: PruneExecutions on every instance the filter
// selects, Running ones included: InstanceIDs (nil = every instance of idx:instances, oldest
// first), CompletedBeforeMs (the current execution completed before it), Limit instances
// (0 = provider.DefaultBulkLimit). InstancesProcessed counts the selected instances, pruned or
// not. Each instance is pruned atomically; the call runs as several scripts of at most idChunk
// (or listPageSize) instances.
func (p *Provider) PruneExecutionsBulk(ctx context.Context, filter provider.InstanceFilter, options provider.PruneOptions) (provider.PruneResult, error) {
	const op = "prune_executions_bulk"
	limit := int(filter.Limit)
	if limit == 0 {
		limit = provider.DefaultBulkLimit
	}
	var total provider.PruneResult
	run := func(ids []string) error {
		for _, g := range p.partitionRuns(ids) {
			if int(total.InstancesProcessed) >= limit {
				return nil
			}
			r, err := p.pruneCall(ctx, op, "bulk", options, filter.CompletedBeforeMs, limit-int(total.InstancesProcessed), g.ids, g.part)
			total.InstancesProcessed += r.InstancesProcessed
			total.ExecutionsDeleted += r.ExecutionsDeleted
			total.EventsDeleted += r.EventsDeleted
			if err != nil {
				return err
			}
		}
		return nil
	}
	if filter.InstanceIDs != nil {
		ids := dedupe(filter.InstanceIDs)
		for start := 0; start < len(ids) && int(total.InstancesProcessed) < limit; start += idChunk {
			if err := run(ids[start:min(start+idChunk, len(ids))]); err != nil {
				return total, err
			}
		}
		return total, nil
	}
	cursor := ""
	for int(total.InstancesProcessed) < limit {
		ids, next, err := p.listPage(ctx, op, cursor, listPageSize, "")
		if err != nil {
			return total, err
		}
		if len(ids) > 0 {
			if err := run(ids); err != nil {
				return total, err
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	return total, nil
}

func (p *Provider) pruneCall(ctx context.Context, op, mode string, o provider.PruneOptions, instBefore uint64, limit int, ids []string, part int) (provider.PruneResult, error) {
	e := luascripts.AdminPrune.Encoder(5 + len(ids))
	e.Set("mode", mode)
	e.Set("keep", strconv.FormatUint(uint64(o.KeepLast), 10))
	e.Set("exec_before", strconv.FormatUint(o.CompletedBeforeMs, 10))
	e.Set("inst_before", strconv.FormatUint(instBefore, 10))
	e.Set("limit", strconv.Itoa(limit))
	e.Section("ids")
	for _, id := range ids {
		e.Entry(id)
	}
	args, err := encoded(op, e)
	if err != nil {
		return provider.PruneResult{}, err
	}
	res, err := p.run(ctx, op, luascripts.AdminPrune.Op, part, args...)
	if err != nil {
		return provider.PruneResult{}, err
	}
	r := list(res)
	if len(r) < 3 {
		return provider.PruneResult{}, provider.NewPermanentError(op, "unexpected reply from admin_prune")
	}
	return provider.PruneResult{
		InstancesProcessed: uint64(num(r[0])),
		ExecutionsDeleted:  uint64(num(r[1])),
		EventsDeleted:      uint64(num(r[2])),
	}, nil
}
