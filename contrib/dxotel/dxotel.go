// Package dxotel exports a dx runtime's measurements (dx.Metrics) through an OpenTelemetry meter:
// an Int64Counter per dx counter and a Float64Histogram (seconds) per dx duration, with the
// labels as attributes.
//
//	m := dxotel.New(otel.Meter("dxredis"))
//	rt := dx.NewRuntime(p, dx.Options{Metrics: m})
//
// It is its own module so that dxredis itself does not depend on OpenTelemetry.
package dxotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/duroxide-go/dxredis/dx"
)

// Metrics implements dx.Metrics on an OpenTelemetry meter.
type Metrics struct {
	meter      metric.Meter
	mu         sync.Mutex
	counters   map[string]metric.Int64Counter
	histograms map[string]metric.Float64Histogram
}

var _ dx.Metrics = (*Metrics)(nil)

// New returns Metrics that creates its instruments on meter as the runtime first reports each one.
func New(meter metric.Meter) *Metrics {
	return &Metrics{meter: meter, counters: map[string]metric.Int64Counter{}, histograms: map[string]metric.Float64Histogram{}}
}

func attrs(l dx.Labels) metric.MeasurementOption {
	kv := make([]attribute.KeyValue, 0, 5)
	for _, a := range []struct{ k, v string }{{"queue", l.Queue}, {"orchestration", l.Orchestration},
		{"version", l.Version}, {"activity", l.Activity}, {"result", l.Result}} {
		if a.v != "" {
			kv = append(kv, attribute.String(a.k, a.v))
		}
	}
	return metric.WithAttributes(kv...)
}

// Count adds n to the counter name.
func (m *Metrics) Count(name string, n int64, l dx.Labels) {
	m.mu.Lock()
	c, ok := m.counters[name]
	if !ok {
		c, _ = m.meter.Int64Counter(name) // on error the meter returns a no-op instrument
		m.counters[name] = c
	}
	m.mu.Unlock()
	c.Add(context.Background(), n, attrs(l))
}

// Observe records a duration, in seconds, in the histogram name.
func (m *Metrics) Observe(name string, d time.Duration, l dx.Labels) {
	m.mu.Lock()
	h, ok := m.histograms[name]
	if !ok {
		h, _ = m.meter.Float64Histogram(name, metric.WithUnit("s"))
		m.histograms[name] = h
	}
	m.mu.Unlock()
	h.Record(context.Background(), d.Seconds(), attrs(l))
}
