package redisprovider

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/duroxide-go/dxredis/provider"
)

// ListExecutions implements provider.Admin: execution ids ascending; empty for unknown instances.
func (p *Provider) ListExecutions(ctx context.Context, instance string) ([]uint64, error) {
	res, err := p.inspect(ctx, "list_executions", "execs", instance)
	if err != nil {
		return nil, err
	}
	out := []uint64{}
	for _, v := range list(res) {
		e, _ := strconv.ParseUint(str(v), 10, 64)
		out = append(out, e)
	}
	return out, nil
}

// ReadHistoryWithExecutionID implements provider.Admin (as ReadWithExecution: empty when unknown).
func (p *Provider) ReadHistoryWithExecutionID(ctx context.Context, instance string, executionID uint64) ([]provider.Event, error) {
	return p.ReadWithExecution(ctx, instance, executionID)
}

// ReadHistory implements provider.Admin (as Read: the latest execution, empty when unknown).
func (p *Provider) ReadHistory(ctx context.Context, instance string) ([]provider.Event, error) {
	return p.Read(ctx, instance)
}

// LatestExecutionID implements provider.Admin; ErrNotFound for unknown instances.
func (p *Provider) LatestExecutionID(ctx context.Context, instance string) (uint64, error) {
	const op = "latest_execution_id"
	res, err := p.inspect(ctx, op, "latest", instance)
	if err != nil {
		return 0, err
	}
	if res == nil {
		return 0, notFound(op, instance)
	}
	return strconv.ParseUint(str(res), 10, 64)
}

// GetInstanceInfo implements provider.Admin; ErrNotFound for unknown instances. An instance that
// was acked without a name and version (no instance record) is described from its current
// execution, with empty name and version.
func (p *Provider) GetInstanceInfo(ctx context.Context, instance string) (provider.InstanceInfo, error) {
	const op = "get_instance_info"
	res, err := p.inspect(ctx, op, "info", instance)
	if err != nil {
		return provider.InstanceInfo{}, err
	}
	r := list(res)
	if len(r) < 10 || num(r[0]) != 1 {
		return provider.InstanceInfo{}, notFound(op, instance)
	}
	info := provider.InstanceInfo{
		InstanceID:           instance,
		OrchestrationName:    str(r[2]),
		OrchestrationVersion: str(r[3]),
		CurrentExecutionID:   uint64(num(r[4])),
		Status:               str(r[5]),
		CreatedAt:            uint64(num(r[7])),
		UpdatedAt:            uint64(num(r[8])),
		ParentInstanceID:     str(r[9]),
	}
	if info.Output, err = replyOutput(op, r, 6, 10); err != nil {
		return provider.InstanceInfo{}, err
	}
	return info, nil
}

// GetExecutionInfo implements provider.Admin; ErrNotFound when the execution does not exist.
func (p *Provider) GetExecutionInfo(ctx context.Context, instance string, executionID uint64) (provider.ExecutionInfo, error) {
	const op = "get_execution_info"
	res, err := p.inspect(ctx, op, "exec", instance, "exec_id", strconv.FormatUint(executionID, 10))
	if err != nil {
		return provider.ExecutionInfo{}, err
	}
	r := list(res)
	if len(r) < 6 || num(r[0]) != 1 {
		return provider.ExecutionInfo{}, provider.NewPermanentError(op, fmt.Sprintf(
			"execution %d of instance %q not found", executionID, instance)).WithKind(provider.ErrNotFound)
	}
	info := provider.ExecutionInfo{
		ExecutionID: executionID,
		Status:      str(r[1]),
		StartedAt:   uint64(num(r[3])),
		CompletedAt: uint64(num(r[4])),
		EventCount:  uint64(num(r[5])),
	}
	if info.Output, err = replyOutput(op, r, 2, 6); err != nil {
		return provider.ExecutionInfo{}, err
	}
	return info, nil
}

// ListChildren implements provider.Admin: direct sub-orchestrations, empty when none or unknown.
func (p *Provider) ListChildren(ctx context.Context, instance string) ([]string, error) {
	res, err := p.inspect(ctx, "list_children", "children", instance)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, v := range list(res) {
		out = append(out, str(v))
	}
	slices.Sort(out)
	return out, nil
}

// GetParentID implements provider.Admin: ok false for a root; ErrNotFound for unknown instances.
func (p *Provider) GetParentID(ctx context.Context, instance string) (string, bool, error) {
	const op = "get_parent_id"
	res, err := p.inspect(ctx, op, "parent", instance)
	if err != nil {
		return "", false, err
	}
	r := list(res)
	if len(r) < 2 || num(r[0]) != 1 {
		return "", false, notFound(op, instance)
	}
	if r[1] == nil {
		return "", false, nil
	}
	return str(r[1]), true, nil
}

// GetInstanceTree implements provider.Admin (duroxide's default: breadth-first ListChildren).
func (p *Provider) GetInstanceTree(ctx context.Context, instance string) (provider.InstanceTree, error) {
	if err := checkID("get_instance_tree", instance); err != nil {
		return provider.InstanceTree{}, err
	}
	return provider.GetInstanceTreeOf(ctx, p, instance)
}
