package redisprovider

// Management side: stubs, replaced by the admin implementation.

import (
	"context"

	"github.com/duroxide-go/dxredis/provider"
)

var _ provider.Admin = (*Provider)(nil)

func (p *Provider) ListInstances(ctx context.Context) ([]string, error) {
	return nil, notYet("list_instances")
}
func (p *Provider) ListInstancesByStatus(ctx context.Context, status string) ([]string, error) {
	return nil, notYet("list_instances_by_status")
}
func (p *Provider) ListExecutions(ctx context.Context, instance string) ([]uint64, error) {
	return nil, notYet("list_executions")
}
func (p *Provider) ReadHistoryWithExecutionID(ctx context.Context, instance string, executionID uint64) ([]provider.Event, error) {
	return p.ReadWithExecution(ctx, instance, executionID)
}
func (p *Provider) ReadHistory(ctx context.Context, instance string) ([]provider.Event, error) {
	return p.Read(ctx, instance)
}
func (p *Provider) LatestExecutionID(ctx context.Context, instance string) (uint64, error) {
	return 0, notYet("latest_execution_id")
}
func (p *Provider) GetInstanceInfo(ctx context.Context, instance string) (provider.InstanceInfo, error) {
	return provider.InstanceInfo{}, notYet("get_instance_info")
}
func (p *Provider) GetExecutionInfo(ctx context.Context, instance string, executionID uint64) (provider.ExecutionInfo, error) {
	return provider.ExecutionInfo{}, notYet("get_execution_info")
}
func (p *Provider) GetSystemMetrics(ctx context.Context) (provider.SystemMetrics, error) {
	return provider.SystemMetrics{}, notYet("get_system_metrics")
}
func (p *Provider) GetQueueDepths(ctx context.Context) (provider.QueueDepths, error) {
	return provider.QueueDepths{}, notYet("get_queue_depths")
}
func (p *Provider) ListChildren(ctx context.Context, instance string) ([]string, error) {
	return nil, notYet("list_children")
}
func (p *Provider) GetParentID(ctx context.Context, instance string) (string, bool, error) {
	return "", false, notYet("get_parent_id")
}
func (p *Provider) DeleteInstancesAtomic(ctx context.Context, ids []string, force bool) (provider.DeleteInstanceResult, error) {
	return provider.DeleteInstanceResult{}, notYet("delete_instances_atomic")
}
func (p *Provider) GetInstanceTree(ctx context.Context, instance string) (provider.InstanceTree, error) {
	return provider.GetInstanceTreeOf(ctx, p, instance)
}
func (p *Provider) DeleteInstance(ctx context.Context, instance string, force bool) (provider.DeleteInstanceResult, error) {
	return provider.DeleteInstanceTree(ctx, p, instance, force)
}
func (p *Provider) DeleteInstanceBulk(ctx context.Context, filter provider.InstanceFilter) (provider.DeleteInstanceResult, error) {
	return provider.DeleteInstanceResult{}, notYet("delete_instance_bulk")
}
func (p *Provider) PruneExecutions(ctx context.Context, instance string, options provider.PruneOptions) (provider.PruneResult, error) {
	return provider.PruneResult{}, notYet("prune_executions")
}
func (p *Provider) PruneExecutionsBulk(ctx context.Context, filter provider.InstanceFilter, options provider.PruneOptions) (provider.PruneResult, error) {
	return provider.PruneResult{}, notYet("prune_executions_bulk")
}
