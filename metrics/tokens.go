package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
)

// tokenMetrics are the series of token limits: what requests reserved
// and then used, by route, and how their settlements went.
type tokenMetrics struct {
	reserved    *prometheus.CounterVec // route
	used        *prometheus.CounterVec // route
	settlements *prometheus.CounterVec // outcome: ok, failed
}

func newTokenMetrics() *tokenMetrics {
	t := &tokenMetrics{
		reserved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tokens_reserved_total",
			Help: "Units that admitted requests reserved from their route's token limits at admission (the least over the limits), by route.",
		}, []string{"route"}),
		used: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_tokens_used_total",
			Help: "Units that answers reported (or the reservation kept, when an answer reported none), settled into token limits, by route.",
		}, []string{"route"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_token_settlements_total",
			Help: "Settlements of token reservations, by outcome: ok, or failed (the store failed; the reservation stands).",
		}, []string{"outcome"}),
	}
	t.settlements.WithLabelValues("ok")
	t.settlements.WithLabelValues("failed")
	return t
}

func (t *tokenMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{t.reserved, t.used, t.settlements}
}

// Settled counts a request on route that reserved units of token limits
// and then used used of them. It implements engine.Observer.
func (m *Metrics) Settled(route *domain.Route, reserved, used int64, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.tokens.settlements.WithLabelValues("failed").Inc()
		return
	}
	m.tokens.settlements.WithLabelValues("ok").Inc()
	name := domain.DefaultRoute
	if route != nil {
		name = route.Name
	}
	m.tokens.reserved.WithLabelValues(name).Add(float64(reserved))
	m.tokens.used.WithLabelValues(name).Add(float64(used))
}
