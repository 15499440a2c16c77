package web

import (
	"context"
	"fmt"
	"time"

	"github.com/duroxide-go/dxredis/redisprovider"
)

// OutcomeCounts counts what finished: instances completed and failed, activity results and
// failures acknowledged.
type OutcomeCounts struct {
	OrchestrationsCompleted uint64 `json:"orchestrations_completed"`
	OrchestrationsFailed    uint64 `json:"orchestrations_failed"`
	ActivitiesCompleted     uint64 `json:"activities_completed"`
	ActivitiesFailed        uint64 `json:"activities_failed"`
}

func (c *OutcomeCounts) add(o OutcomeCounts) {
	c.OrchestrationsCompleted += o.OrchestrationsCompleted
	c.OrchestrationsFailed += o.OrchestrationsFailed
	c.ActivitiesCompleted += o.ActivitiesCompleted
	c.ActivitiesFailed += o.ActivitiesFailed
}

// OutcomeBucket is the counts of the step that starts at At.
type OutcomeBucket struct {
	At time.Time `json:"at"`
	OutcomeCounts
}

// Outcomes is GET /api/stats (dxctl stats --json prints the same JSON): the per-minute outcome
// counts the namespace keeps for a day (redisprovider.OutcomeStats), summed by step, oldest first;
// the last bucket holds the current minute.
type Outcomes struct {
	Namespace string          `json:"namespace"`
	From      time.Time       `json:"from"`
	StepMs    int64           `json:"step_ms"`
	Buckets   []OutcomeBucket `json:"buckets"`
	Totals    OutcomeCounts   `json:"totals"`
}

// OutcomeRange checks a range and a step (whole minutes, the step dividing the range, the range
// at most redisprovider.OutcomeMinutes) and returns them in minutes.
func OutcomeRange(last, step time.Duration) (int, int, error) {
	if last < time.Minute || last > redisprovider.OutcomeMinutes*time.Minute || last%time.Minute != 0 {
		return 0, 0, fmt.Errorf("the range must be whole minutes from 1m to 24h, got %v", last)
	}
	if step < time.Minute || step%time.Minute != 0 || last%step != 0 {
		return 0, 0, fmt.Errorf("the step must be whole minutes that divide the range (%v), got %v", last, step)
	}
	return int(last / time.Minute), int(step / time.Minute), nil
}

// ReadOutcomes reads the last minutes of outcome counts from p, summed by step minutes (see
// OutcomeRange).
func ReadOutcomes(ctx context.Context, p *redisprovider.Provider, minutes, step int) (Outcomes, error) {
	ms, err := p.OutcomeStats(ctx, minutes)
	if err != nil {
		return Outcomes{}, err
	}
	out := Outcomes{Namespace: p.Keyspace().Namespace(), StepMs: int64(step) * 60_000, Buckets: []OutcomeBucket{}}
	for i, m := range ms {
		c := OutcomeCounts{m.OrchestrationsCompleted, m.OrchestrationsFailed, m.ActivitiesCompleted, m.ActivitiesFailed}
		if i%step == 0 {
			out.Buckets = append(out.Buckets, OutcomeBucket{At: m.Minute})
		}
		out.Buckets[len(out.Buckets)-1].add(c)
		out.Totals.add(c)
	}
	if len(ms) > 0 {
		out.From = ms[0].Minute
	}
	return out, nil
}

// outcomesQuery reads GET /api/stats's query: last (a duration, default 1h) and step (default 1m).
func outcomesQuery(q map[string][]string) (int, int, error) {
	get := func(name string, def time.Duration) (time.Duration, error) {
		v := q[name]
		if len(v) == 0 || v[0] == "" {
			return def, nil
		}
		d, err := time.ParseDuration(v[0])
		if err != nil {
			return 0, badf("%s: want a duration like 1h or 15m, got %q", name, v[0])
		}
		return d, nil
	}
	last, err := get("last", time.Hour)
	if err != nil {
		return 0, 0, err
	}
	step, err := get("step", time.Minute)
	if err != nil {
		return 0, 0, err
	}
	minutes, stepMinutes, err := OutcomeRange(last, step)
	if err != nil {
		return 0, 0, badRequest{err.Error()}
	}
	return minutes, stepMinutes, nil
}

// chartRanges are the ranges the overview chart draws: the last hour by minute, the last day by
// quarter hour.
var chartRanges = map[string]struct {
	minutes, step int
	caption       string
}{
	"hour": {60, 1, "the last hour, one bar per minute"},
	"day":  {redisprovider.OutcomeMinutes, 15, "the last 24 hours, one bar per 15 minutes"},
}
