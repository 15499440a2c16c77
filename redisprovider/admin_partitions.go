package redisprovider

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	dxredis "github.com/duroxide-go/dxredis"
)

// PartitionStats describes one partition of the namespace (GetPartitionStats; dxctl partitions).
type PartitionStats struct {
	// Partition is the partition's index, Tag its hash tag (keys.go, Keyspace) and Slot the
	// Redis Cluster hash slot of every key of the partition.
	Partition int
	Tag       string
	Slot      int
	// Node is the address of the primary serving the slot (on a cluster, as CLUSTER SLOTS reports
	// it at the call, so that slots moved since show on their new node; the server's address
	// otherwise).
	Node string
	// Instances is the number of instances the partition holds (created ones, as in
	// GetSystemMetrics).
	Instances uint64
	// Orchestrator and Worker are the partition's queue depths, counted as GetQueueDepths counts
	// the namespace's: orchestrator messages no lock covers (visible, delayed or parked) and
	// unlocked worker items.
	Orchestrator uint64
	Worker       uint64
	// OutboxEntries is the number of entries of the partition's outboxes not forwarded yet
	// (messages to other partitions, keys.go "Outboxes"); OutboxOldestAge how long the oldest of
	// them has waited (0 when there is none). Entries normally leave within milliseconds; a
	// backlog that stays means no process forwards them (every fetching process sweeps them).
	OutboxEntries   uint64
	OutboxOldestAge time.Duration
	// NodeOpsPerSec is the commands per second the node executes (INFO stats,
	// instantaneous_ops_per_sec: the server's own estimate over its last seconds), for every
	// client and namespace it serves, not this partition's share: compare it between nodes.
	// NodePartitions is how many of the namespace's partitions the node serves.
	NodeOpsPerSec  int64
	NodePartitions int
}

// GetPartitionStats describes each partition of the namespace: where it lives, what it holds and
// queues, its outbox backlog, and the load of the node serving it. Cost: per partition the queue
// walk of GetQueueStats (O(instances with queued messages + queued items)) and O(destinations)
// for the outboxes; per node one INFO stats.
func (p *Provider) GetPartitionStats(ctx context.Context) ([]PartitionStats, error) {
	const op = "get_partition_stats"
	if ctx == nil {
		return nil, errNilContext(op)
	}
	n := p.keys.Partitions()
	out := make([]PartitionStats, n)
	tags := p.keys.Tags()
	for part := range n {
		out[part] = PartitionStats{Partition: part, Tag: tags[part], Slot: dxredis.Slot(p.keys.Meta(part))}
	}
	err := p.inPartitions(ctx, func(ctx context.Context, part int) error {
		qs, err := p.partQueueStats(ctx, op, part)
		if err != nil {
			return err
		}
		s := &out[part]
		s.Orchestrator = qs.Orchestrator.Visible + qs.Orchestrator.Delayed + qs.Orchestrator.Orphaned
		s.Worker = qs.Worker.Unlocked
		return p.partOutbox(ctx, part, qs.ServerTime, s)
	})
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	if err := p.placePartitions(ctx, out); err != nil {
		return nil, p.mapErr(op, err)
	}
	return out, nil
}

// partOutbox reads a partition's instance count and outbox backlog into s (two round trips).
func (p *Provider) partOutbox(ctx context.Context, part int, now time.Time, s *PartitionStats) error {
	pre := p.keys.Prefix(part)
	pipe := p.rdb.Pipeline()
	inst := pipe.ZCard(ctx, pre+"idx:instances")
	dirty := pipe.ZRangeWithScores(ctx, pre+"ob:dirty", 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	s.Instances = uint64(inst.Val())
	zs := dirty.Val()
	if len(zs) == 0 {
		return nil
	}
	if at := time.UnixMilli(int64(zs[0].Score)); now.After(at) {
		s.OutboxOldestAge = now.Sub(at)
	}
	pipe = p.rdb.Pipeline()
	lens := make([]*redis.IntCmd, len(zs))
	for i, z := range zs {
		lens[i] = pipe.LLen(ctx, pre+"ob:"+z.Member.(string))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	for _, l := range lens {
		s.OutboxEntries += uint64(l.Val())
	}
	return nil
}

// placePartitions fills each partition's node and the nodes' load.
func (p *Provider) placePartitions(ctx context.Context, out []PartitionStats) error {
	ops := map[string]int64{}
	if cc, ok := p.rdb.(*redis.ClusterClient); ok {
		// The cluster's slot map read now (CLUSTER SLOTS): the client's own map may not know yet
		// of slots moved since (resharding), and is told to reload.
		cc.ReloadState(ctx)
		//lint:ignore SA1019 CLUSTER SLOTS answers on every Redis this supports (CLUSTER SHARDS is 7.0+)
		slots, err := cc.ClusterSlots(ctx).Result()
		if err != nil {
			return err
		}
		for i := range out {
			for _, r := range slots {
				if out[i].Slot >= int(r.Start) && out[i].Slot <= int(r.End) && len(r.Nodes) > 0 {
					out[i].Node = r.Nodes[0].Addr
				}
			}
			if out[i].Node == "" {
				n, err := cc.MasterForKey(ctx, p.keys.Meta(i))
				if err != nil {
					return err
				}
				out[i].Node = n.Options().Addr
			}
		}
	} else {
		addr := "?"
		if c, ok := p.rdb.(*redis.Client); ok {
			addr = c.Options().Addr
		}
		for i := range out {
			out[i].Node = addr
		}
	}
	err := eachPrimary(ctx, p.rdb, func(n *redis.Client) error {
		info, err := n.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		ops[n.Options().Addr] = infoInt(info, "instantaneous_ops_per_sec")
		return nil
	})
	if err != nil {
		return err
	}
	count := map[string]int{}
	for _, s := range out {
		count[s.Node]++
	}
	for i := range out {
		out[i].NodeOpsPerSec, out[i].NodePartitions = ops[out[i].Node], count[out[i].Node]
		if _, ok := ops[out[i].Node]; !ok && len(ops) == 1 {
			for _, v := range ops { // one server, known by another name
				out[i].NodeOpsPerSec = v
			}
		}
	}
	return nil
}

// infoInt reads an integer field of an INFO reply (0 when absent).
func infoInt(info, field string) int64 {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
