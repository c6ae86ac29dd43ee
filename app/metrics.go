package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the gateway's Prometheus collectors. None has a per-tenant
// label: tenants are unbounded, series must not be. A nil *Metrics records
// nothing.
type Metrics struct {
	allowed, denied, failed prometheus.Counter
	storeErrors             prometheus.Counter
	duration                prometheus.Observer
}

// NewMetrics registers the gateway's collectors, and the Go and process
// collectors, on reg, labelling decisions with algorithm.
func NewMetrics(reg prometheus.Registerer, algorithm string) *Metrics {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_decisions_total",
		Help: "Rate-limit decisions, by algorithm and outcome (allowed, denied, error).",
	}, []string{"algorithm", "outcome"})
	storeErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Decisions that failed because the store did not answer.",
	})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tollgate_decision_duration_seconds",
		Help:    "Time taken by the limiter to decide, store round trip included.",
		Buckets: []float64{.00001, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
	}, []string{"algorithm"})
	reg.MustRegister(decisions, storeErrors, duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Metrics{
		allowed:     decisions.WithLabelValues(algorithm, "allowed"),
		denied:      decisions.WithLabelValues(algorithm, "denied"),
		failed:      decisions.WithLabelValues(algorithm, "error"),
		storeErrors: storeErrors,
		duration:    duration.WithLabelValues(algorithm),
	}
}

// observe records one decision's outcome and duration.
func (m *Metrics) observe(allowed bool, err error, took time.Duration) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.failed.Inc()
		m.storeErrors.Inc()
	case allowed:
		m.allowed.Inc()
	default:
		m.denied.Inc()
	}
	m.duration.Observe(took.Seconds())
}
