package redisprovider

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// OutcomeMinutes is how many minutes of outcome counts a namespace keeps (24 hours; scripts/lib.lua,
// STATS_MINUTES).
const OutcomeMinutes = 1440

// MinuteOutcomes counts what finished during one minute, summed over the namespace's partitions.
type MinuteOutcomes struct {
	Minute                  time.Time // the minute's start, UTC
	OrchestrationsCompleted uint64    // instances whose current execution completed
	OrchestrationsFailed    uint64    // instances whose current execution failed
	ActivitiesCompleted     uint64    // activity results acknowledged (ActivityCompleted)
	ActivitiesFailed        uint64    // activity failures acknowledged (ActivityFailed)
}

// outcomeKinds are the stats hash's kinds, in MinuteOutcomes's field order.
var outcomeKinds = [4]string{"oc", "of", "ac", "af"}

// OutcomeStats returns the outcome counts of the last minutes minutes (1 to OutcomeMinutes),
// oldest first, the last one the current minute by the server's clock; a minute without outcomes
// is there with zeros. The acks count them as they commit (one HINCRBY in the script that already
// runs: orch_ack when an instance completes or fails, work_ack with an activity's result), in a
// hash per partition that keeps 24 hours (keys.go, P stats), so they survive restarts of the
// readers and, with persistence, of Redis. One round trip per partition.
func (p *Provider) OutcomeStats(ctx context.Context, minutes int) ([]MinuteOutcomes, error) {
	const op = "outcome_stats"
	if minutes < 1 || minutes > OutcomeMinutes {
		return nil, invalid(op, "minutes must be 1-%d, got %d", OutcomeMinutes, minutes)
	}
	now, err := p.rdb.Time(ctx).Result()
	if err != nil {
		return nil, p.mapErr(op, err)
	}
	last := now.UnixMilli() / 60000
	first := last - int64(minutes) + 1
	fields := make([]string, 0, 4*minutes)
	for m := first; m <= last; m++ {
		ms := strconv.FormatInt(m, 10) + ":"
		for _, k := range outcomeKinds {
			fields = append(fields, ms+k)
		}
	}
	counts := make([][]any, p.keys.Partitions())
	if err := p.inPartitions(ctx, func(ctx context.Context, part int) error {
		v, err := p.rdb.HMGet(ctx, p.keys.Prefix(part)+"stats", fields...).Result()
		if err != nil && err != redis.Nil {
			return p.mapErr(op, err)
		}
		counts[part] = v
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]MinuteOutcomes, minutes)
	for i := range out {
		o := &out[i]
		o.Minute = time.UnixMilli((first + int64(i)) * 60000).UTC()
		sums := [4]*uint64{&o.OrchestrationsCompleted, &o.OrchestrationsFailed, &o.ActivitiesCompleted, &o.ActivitiesFailed}
		for _, c := range counts {
			for k, sum := range sums {
				if s, ok := c[4*i+k].(string); ok {
					n, _ := strconv.ParseUint(s, 10, 64)
					*sum += n
				}
			}
		}
	}
	return out, nil
}
