package reconcileutil

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics creates the Prometheus collectors of one kind's controller, named
// deckhand_<kind>_<name>, and registers them with controller-runtime's
// registry, which the manager serves on its metrics endpoint.
type Metrics struct {
	kind string
	reg  prometheus.Registerer
}

// NewMetrics returns the metrics factory of kind ("podset", "sidecarset", ...).
func NewMetrics(kind string) Metrics {
	return Metrics{kind: kind, reg: metrics.Registry}
}

func (m Metrics) register(c prometheus.Collector) {
	m.reg.MustRegister(c)
}

// Counter creates and registers a counter.
func (m Metrics) Counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "deckhand", Subsystem: m.kind, Name: name, Help: help})
	m.register(c)
	return c
}

// CounterVec creates and registers a counter with labels.
func (m Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "deckhand", Subsystem: m.kind, Name: name, Help: help}, labels)
	m.register(c)
	return c
}

// GaugeVec creates and registers a gauge with labels.
func (m Metrics) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "deckhand", Subsystem: m.kind, Name: name, Help: help}, labels)
	m.register(g)
	return g
}

// Histogram creates and registers a histogram with the given buckets.
func (m Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "deckhand", Subsystem: m.kind, Name: name, Help: help, Buckets: buckets})
	m.register(h)
	return h
}
