package redisprovider

// Management side (provider.Admin): listing, inspection, metrics, hierarchy, deletion and pruning.
// Every read of the keyspace goes through an admin_* script (keys are built in one place, the
// scripts' lib.lua); nothing here SCANs the keyspace: listings walk the indexes, O(result).
// One file per concern: admin_list.go (listing, paging), admin_inspect.go (instances, executions,
// histories, hierarchy), admin_stats.go (metrics, queue depths), admin_delete.go (deletes,
// purges), admin_prune.go (old executions), admin_namespace.go (dropping a namespace).

import (
	"context"
	"strconv"

	"github.com/duroxide-go/dxredis/internal/luascripts"
	"github.com/duroxide-go/dxredis/provider"
)

var _ provider.Admin = (*Provider)(nil)

const (
	// listPageSize is the page ListInstances and the bulk operations walk indexes with.
	listPageSize = 1000
	// scanPageSize bounds the index entries one bulk-delete or statistics script examines, so a
	// large namespace is handled in many short scripts instead of one that blocks the server.
	scanPageSize = 500
	// idChunk bounds the ids one bulk script call takes.
	idChunk = 500
	// DefaultPageLimit is the page size ListInstancesPage uses when limit <= 0.
	DefaultPageLimit = 100
	// MaxPageLimit caps ListInstancesPage's limit.
	MaxPageLimit = 10000
)

// terminalStatuses are the statuses bulk deletion considers, in the order their indexes are walked.
var terminalStatuses = []string{provider.StatusCompleted, provider.StatusFailed, provider.StatusContinuedAsNew}

func notFound(op, instance string) error {
	return provider.NewPermanentError(op, "instance "+strconv.Quote(instance)+" not found").WithKind(provider.ErrNotFound)
}

// inspect runs admin_inspect's view what of instance (extra: name, value pairs that follow, see
// argsOf).
func (p *Provider) inspect(ctx context.Context, op, what, instance string, extra ...string) (any, error) {
	if err := checkID(op, instance); err != nil {
		return nil, err
	}
	args, err := argsOf(op, luascripts.AdminInspect, append([]string{"what", what, "id", instance}, extra...)...)
	if err != nil {
		return nil, err
	}
	return p.run(ctx, op, luascripts.AdminInspect.Op, p.keys.PartitionOf(instance), args...)
}
