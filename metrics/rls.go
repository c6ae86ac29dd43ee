package metrics

import (
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rlsMetrics are the series of Envoy's rate limit service: answers per
// domain and code, and what each descriptor's rule answered. Their labels
// are bounded by the face: a domain label is a configured domain (or the
// face's one label for every other), and a rule label a configured rule
// (a value appears in one only with detailed_metric or value_to_metric,
// under the face's cap).
type rlsMetrics struct {
	requests    *prometheus.CounterVec // domain, code
	descriptors *prometheus.CounterVec // domain, rule, outcome
	counters    sync.Map               // rlsLabels → prometheus.Counter
}

// rlsLabels are one series' labels: rule is empty for a request's.
type rlsLabels struct{ domain, rule, value string }

func newRLSMetrics() *rlsMetrics {
	return &rlsMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_rls_requests_total",
			Help: "Answers of Envoy's rate limit service (TOLLGATE_RLS_ADDR), by domain and code: OK, OVER_LIMIT, or the gRPC error's code (INVALID_ARGUMENT, UNAVAILABLE, ...).",
		}, []string{"domain", "code"}),
		descriptors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_rls_descriptors_total",
			Help: "Descriptors of Envoy's rate limit service decided against a limit, by domain, rule (its configuration path, as envoyproxy/ratelimit names its stats) and outcome: ok, over_limit, shadow_over_limit (a shadow_mode rule that would deny).",
		}, []string{"domain", "rule", "outcome"}),
	}
}

// counter returns the series of l, creating it once. A label that is
// not UTF-8 (a configuration's !!binary value, which a request can match
// through a wildcard pattern) has its bad bytes replaced by U+FFFD:
// Prometheus refuses it, and WithLabelValues would panic.
func (r *rlsMetrics) counter(l rlsLabels) prometheus.Counter {
	if c, ok := r.counters.Load(l); ok {
		return c.(prometheus.Counter)
	}
	domain, rule := strings.ToValidUTF8(l.domain, "\uFFFD"), strings.ToValidUTF8(l.rule, "\uFFFD")
	var c prometheus.Counter
	if l.rule == "" {
		c = r.requests.WithLabelValues(domain, l.value)
	} else {
		c = r.descriptors.WithLabelValues(domain, rule, l.value)
	}
	v, _ := r.counters.LoadOrStore(l, c)
	return v.(prometheus.Counter)
}

// RLSRequest counts one answer of Envoy's rate limit service in domain
// with code. The caller keeps domain bounded.
func (m *Metrics) RLSRequest(domain, code string) {
	if m != nil {
		m.rls.counter(rlsLabels{domain: domain, value: code}).Inc()
	}
}

// RLSDescriptor counts one descriptor of domain decided against rule
// with outcome. The caller keeps rule bounded.
func (m *Metrics) RLSDescriptor(domain, rule, outcome string) {
	if m != nil {
		m.rls.counter(rlsLabels{domain: domain, rule: rule, value: outcome}).Inc()
	}
}
