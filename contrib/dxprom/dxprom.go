// Package dxprom exports a dx runtime's measurements (dx.Metrics) to Prometheus: a counter vector
// per dx counter and a histogram vector (seconds) per dx duration, labelled by queue,
// orchestration, version, activity and result.
//
//	m := dxprom.New(prometheus.DefaultRegisterer)
//	rt := dx.NewRuntime(p, dx.Options{Metrics: m})
//
// It is its own module so that dxredis itself does not depend on Prometheus.
package dxprom

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/duroxide-go/dxredis/dx"
)

var labelNames = []string{"queue", "orchestration", "version", "activity", "result"}

// Metrics implements dx.Metrics on a Prometheus registerer.
type Metrics struct {
	reg        prometheus.Registerer
	mu         sync.Mutex
	counters   map[string]*prometheus.CounterVec
	histograms map[string]*prometheus.HistogramVec
}

var _ dx.Metrics = (*Metrics)(nil)

// New returns Metrics that registers its collectors on reg as the runtime first reports each one.
func New(reg prometheus.Registerer) *Metrics {
	return &Metrics{reg: reg, counters: map[string]*prometheus.CounterVec{}, histograms: map[string]*prometheus.HistogramVec{}}
}

func values(l dx.Labels) []string {
	return []string{l.Queue, l.Orchestration, l.Version, l.Activity, l.Result}
}

// Count adds n to the counter name.
func (m *Metrics) Count(name string, n int64, l dx.Labels) {
	m.mu.Lock()
	c, ok := m.counters[name]
	if !ok {
		c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "dx: " + name}, labelNames)
		c = register(m.reg, c)
		m.counters[name] = c
	}
	m.mu.Unlock()
	c.WithLabelValues(values(l)...).Add(float64(n))
}

// Observe records a duration, in seconds, in the histogram name.
func (m *Metrics) Observe(name string, d time.Duration, l dx.Labels) {
	m.mu.Lock()
	h, ok := m.histograms[name]
	if !ok {
		h = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name,
			Help: "dx: " + name, Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, labelNames)
		h = register(m.reg, h)
		m.histograms[name] = h
	}
	m.mu.Unlock()
	h.WithLabelValues(values(l)...).Observe(d.Seconds())
}

// register registers c, or returns the collector already registered under its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}
