package dxotel_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/duroxide-go/dxredis/contrib/dxotel"
	"github.com/duroxide-go/dxredis/dx"
)

func TestCountsAndDurations(t *testing.T) {
	reader := metric.NewManualReader()
	m := dxotel.New(metric.NewMeterProvider(metric.WithReader(reader)).Meter("dx"))
	m.Count(dx.MetricActivities, 2, dx.Labels{Activity: "Greet", Result: "ok"})
	m.Count(dx.MetricActivities, 1, dx.Labels{Activity: "Greet", Result: "ok"})
	m.Observe(dx.MetricActivityDuration, 3*time.Millisecond, dx.Labels{Activity: "Greet", Result: "ok"})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, mm := range sm.Metrics {
			got[mm.Name] = true
			if sum, ok := mm.Data.(metricdata.Sum[int64]); ok && sum.DataPoints[0].Value != 3 {
				t.Fatalf("%s = %d, want 3", mm.Name, sum.DataPoints[0].Value)
			}
		}
	}
	if !got[dx.MetricActivities] || !got[dx.MetricActivityDuration] {
		t.Fatalf("instruments %v", got)
	}
}
