package app

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tollgate/tollgate/domain"
)

// Metrics are the gateway's Prometheus collectors. None has a per-tenant
// label: tenants are unbounded, series must not be. A nil *Metrics records
// nothing.
type Metrics struct {
	decisions   [len(outcomeLabels)]prometheus.Counter // by domain.Outcome
	storeErrors prometheus.Counter
	storeUp     prometheus.Gauge
	opens       prometheus.Counter
	replicas    prometheus.Gauge
	duration    prometheus.Observer
}

// outcomeLabels are the outcome label values, indexed by domain.Outcome.
var outcomeLabels = func() (l [7]string) {
	for _, o := range domain.Outcomes {
		l[o] = o.String()
	}
	return l
}()

// NewMetrics registers the gateway's collectors, and the Go and process
// collectors, on reg, labelling decisions with algorithm.
func NewMetrics(reg prometheus.Registerer, algorithm string) *Metrics {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_decisions_total",
		Help: "Rate-limit decisions, by algorithm and outcome (allowed, denied, shadow_denied, error, local_allowed, local_denied, cached_denied).",
	}, []string{"algorithm", "outcome"})
	storeErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Failed store calls, probes included.",
	})
	storeUp := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tollgate_store_up",
		Help: "1 while decisions go to the store, 0 while its breaker is open (the store failing: decisions take the fail mode at once).",
	})
	storeUp.Set(1)
	opens := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_breaker_opens_total",
		Help: "Times the store's breaker opened (the store failing: no decision succeeded for TOLLGATE_REDIS_TIMEOUT and several failed in a row).",
	})
	replicas := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tollgate_replicas",
		Help: "N of the local fail mode: TOLLGATE_REPLICAS, or the replicas alive at the last count through the store (1 before any).",
	})
	replicas.Set(1)
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tollgate_decision_duration_seconds",
		Help:    "Time taken by the limiter to decide, store round trip included.",
		Buckets: []float64{.00001, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25},
	}, []string{"algorithm"})
	reg.MustRegister(decisions, storeErrors, storeUp, opens, replicas, duration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{storeErrors: storeErrors, storeUp: storeUp, opens: opens, replicas: replicas, duration: duration.WithLabelValues(algorithm)}
	for o, label := range outcomeLabels {
		m.decisions[o] = decisions.WithLabelValues(algorithm, label)
	}
	return m
}

// observe records one decision's outcome and duration.
func (m *Metrics) observe(o domain.Outcome, took time.Duration) {
	if m == nil {
		return
	}
	if int(o) < len(m.decisions) {
		m.decisions[o].Inc()
	}
	m.duration.Observe(took.Seconds())
}

// storeError counts one failed store call.
func (m *Metrics) storeError() {
	if m != nil {
		m.storeErrors.Inc()
	}
}

// setStoreUp records the store's state, as its breaker sees it.
func (m *Metrics) setStoreUp(up bool) {
	if m == nil {
		return
	}
	if up {
		m.storeUp.Set(1)
	} else {
		m.storeUp.Set(0)
		m.opens.Inc()
	}
}

// setReplicas records the local fail mode's N.
func (m *Metrics) setReplicas(n int) {
	if m != nil {
		m.replicas.Set(float64(n))
	}
}
