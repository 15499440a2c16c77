package dx

import "time"

// Metrics receives the runtime's measurements: counters and duration samples, by fixed name, with a
// few labels. Ready adapters live in modules of their own, so that this one depends on neither
// Prometheus nor OpenTelemetry: github.com/duroxide-go/dxredis/contrib/dxprom and
// github.com/duroxide-go/dxredis/contrib/dxotel. Calls come from many goroutines at once.
type Metrics interface {
	// Count adds n to the counter name.
	Count(name string, n int64, l Labels)
	// Observe records one duration sample of name.
	Observe(name string, d time.Duration, l Labels)
}

// Labels qualify a measurement; fields that do not apply are empty.
type Labels struct {
	Queue         string // "orchestrator" or "worker"
	Orchestration string
	Version       string
	Activity      string
	// Result: for turns "continue", "completed", "failed", "continued_as_new", "cancelled"; for
	// activities "ok", "failed", "panicked", "dropped" (lock lost); for MetricPoison
	// "not_registered" when this runtime has no handler for the item's name (or version), "held"
	// when an activity is parked as a dead letter instead (Options.OnPoison HoldPoison); for
	// MetricNondeterminism "failed" or "held" (Options.OnNondeterminism); for MetricReplayChecks
	// "ok" or "mismatch".
	Result string
}

// The measurements the runtime reports.
const (
	MetricTurns            = "dx_orchestration_turns_total"   // Count: turns acknowledged
	MetricTurnDuration     = "dx_orchestration_turn_seconds"  // Observe: time to run a turn (without its ack)
	MetricActivities       = "dx_activities_total"            // Count: activities finished
	MetricActivityDuration = "dx_activity_seconds"            // Observe: time an activity ran
	MetricFetchWait        = "dx_fetch_wait_seconds"          // Observe: time a fetch took (long poll included)
	MetricAckFailures      = "dx_ack_failures_total"          // Count: failed acknowledgements
	MetricPoison           = "dx_poison_total"                // Count: items failed (or parked) as poison
	MetricUnregistered     = "dx_unregistered_abandons_total" // Count: items abandoned for want of a handler here
	MetricCacheHits        = "dx_executor_cache_hits_total"   // Count: turns that found their instance kept (resumed, or dropped as stale)
	// Count: external events (RaiseEvent) that no wait received, so were dropped: raised before the
	// orchestration waited for the name (use Dequeue and EnqueueEvent for those), or after its wait
	// ended. Counted once per event, when its turn is stored.
	MetricDroppedEvents  = "dx_external_events_dropped_total"
	MetricNondeterminism = "dx_nondeterminism_total" // Count: turns whose code no longer reproduces the history (failed or held)
	MetricReplayChecks   = "dx_replay_checks_total"  // Count: turns checked against a fresh replay (Options.ReplayCheckRate)
	// Count: turns failed because the instance's history is lost (missing, or shorter than its
	// record says: a lost key); each is also logged at Warn, naming the instance.
	MetricHistoryLost = "dx_history_lost_total"
)

// Orchestration goroutines stuck outside dx are not a metric call: read StuckGoroutines.

type noMetrics struct{}

func (noMetrics) Count(string, int64, Labels)           {}
func (noMetrics) Observe(string, time.Duration, Labels) {}
