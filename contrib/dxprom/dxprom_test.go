package dxprom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/duroxide-go/dxredis/contrib/dxprom"
	"github.com/duroxide-go/dxredis/dx"
)

func TestCountsAndDurations(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := dxprom.New(reg)
	m.Count(dx.MetricTurns, 2, dx.Labels{Orchestration: "Hello", Result: "completed"})
	m.Count(dx.MetricTurns, 1, dx.Labels{Orchestration: "Hello", Result: "completed"})
	m.Observe(dx.MetricActivityDuration, 3*time.Millisecond, dx.Labels{Activity: "Greet", Result: "ok"})
	want := `
# HELP dx_orchestration_turns_total dx: dx_orchestration_turns_total
# TYPE dx_orchestration_turns_total counter
dx_orchestration_turns_total{activity="",orchestration="Hello",queue="",result="completed",version=""} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), dx.MetricTurns); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, dx.MetricActivityDuration); n != 1 {
		t.Fatalf("%d activity duration series", n)
	}
	// A second Metrics on the same registry reuses the collectors.
	dxprom.New(reg).Count(dx.MetricTurns, 1, dx.Labels{Orchestration: "Hello", Result: "completed"})
}
