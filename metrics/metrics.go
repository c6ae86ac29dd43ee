// Package metrics is tollgate's Prometheus instrumentation: the
// collectors of every decision, answer and store event. It implements
// the engine's, the HTTP faces' and the rate limit service face's
// observers. No series has a tenant
// label: tenants are unbounded, series must not be; routes and limit
// names are bounded by the policy.
package metrics

import (
	"strconv"
	"sync"
	"sync/atomic"
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
	probeFails  prometheus.Counter
	storeFull   prometheus.Counter
	storeUp     prometheus.Gauge
	opens       prometheus.Counter
	replicas    prometheus.Gauge
	duration    prometheus.Observer

	// By route and limit name: bounded by the policy file, never by
	// tenants.
	limitDecisions *prometheus.CounterVec   // route, limit, outcome
	requests       *prometheus.CounterVec   // route, code
	upstreamTime   *prometheus.HistogramVec // route
	adminActions   *prometheus.CounterVec   // action: AdminActions
	routes         atomic.Pointer[sync.Map] // *domain.Route → *routeMetrics, of the policy Routes last saw
	inFlight       *prometheus.GaugeVec     // limit
	inFlightOf     sync.Map                 // limit name → prometheus.Gauge

	rls    *rlsMetrics   // Envoy's rate limit service
	tokens *tokenMetrics // token limits
	leases *leaseMetrics // leases of hot keys
}

// Per-limit outcomes of tollgate_limit_decisions_total: what each limit
// answered on its own.
const (
	limitAllowed = iota
	limitDenied
	limitShadowDenied
)

var limitOutcomeLabels = [...]string{"allowed", "denied", "shadow_denied"}

// routeMetrics are one route's series, looked up once per route (a
// policy's routes live as long as it) rather than by label per request.
type routeMetrics struct {
	limits   [][len(limitOutcomeLabels)]prometheus.Counter // by index in Route.Applied
	upstream prometheus.Observer
	codes    [600]atomic.Pointer[prometheus.Counter] // by status code, created on first use
}

// outcomeLabels are the outcome label values, indexed by domain.Outcome.
var outcomeLabels = func() (l [7]string) {
	for _, o := range domain.Outcomes {
		l[o] = o.String()
	}
	return l
}()

// New registers the gateway's collectors, and the Go and process
// collectors, on reg, labelling decisions with algorithm.
func New(reg prometheus.Registerer, algorithm string) *Metrics {
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_decisions_total",
		Help: "Rate-limit decisions, by algorithm and outcome (allowed, denied, shadow_denied, error, local_allowed, local_denied, cached_denied).",
	}, []string{"algorithm", "outcome"})
	storeErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_errors_total",
		Help: "Failed store calls: decisions, slot leases and replica announcements (the breaker's probes are tollgate_store_probe_failures_total).",
	})
	probeFails := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_probe_failures_total",
		Help: "Failed pings of the breaker: the one that confirms a failing store, and those of the open breaker every 50 ms until the store answers.",
	})
	storeFull := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_store_full_total",
		Help: "Requests of a new tenant that the memory store, holding TOLLGATE_MEMORY_MAX_KEYS keys, decided as the shared unknown tenant.",
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
	limitDecisions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_limit_decisions_total",
		Help: "What each limit answered, by route, limit name and outcome (allowed, denied, shadow_denied: a limit in shadow mode that would have denied).",
	}, []string{"route", "limit", "outcome"})
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_requests_total",
		Help: "Requests answered on the public and check listeners, by route and status code.",
	}, []string{"route", "code"})
	upstreamTime := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tollgate_upstream_duration_seconds",
		Help:    "Time taken by the upstream (or the echo responder) to answer an admitted request, by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"})
	adminActions := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_admin_actions_total",
		Help: "Calls of the admin API, by action: usage (a read), reset, spend, key_create, key_list, key_revoke, top (the most denied tenants), denials (a feed opened), unauthorized (no or a wrong bearer token).",
	}, []string{"action"})
	for _, a := range AdminActions {
		adminActions.WithLabelValues(a)
	}
	rls := newRLSMetrics()
	inFlight := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "tollgate_in_flight",
		Help: "Slots of each concurrency limit that this replica's requests hold (on the store, or in its memory under the local fail mode), by limit name.",
	}, []string{"limit"})
	tokens := newTokenMetrics()
	reg.MustRegister(decisions, storeErrors, probeFails, storeFull, storeUp, opens, replicas, duration, limitDecisions, requests, upstreamTime, adminActions,
		rls.requests, rls.descriptors, inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(tokens.collectors()...)
	leases := newLeaseMetrics()
	reg.MustRegister(leases.collectors()...)
	m := &Metrics{storeErrors: storeErrors, probeFails: probeFails, storeFull: storeFull, storeUp: storeUp, opens: opens, replicas: replicas, duration: duration.WithLabelValues(algorithm),
		limitDecisions: limitDecisions, requests: requests, upstreamTime: upstreamTime, adminActions: adminActions, rls: rls, tokens: tokens, leases: leases, inFlight: inFlight}
	for o, label := range outcomeLabels {
		m.decisions[o] = decisions.WithLabelValues(algorithm, label)
	}
	m.routes.Store(new(sync.Map))
	return m
}

// Decided records one decision on route: its outcome, how long it took,
// and what each limit answered (not for a nil route: a request of
// Envoy's rate limit service, whose limits tollgate_rls_* counts). It
// implements engine.Observer.
func (m *Metrics) Decided(r *domain.Route, v domain.Verdict, took time.Duration) {
	if m == nil {
		return
	}
	if o := v.Outcome; int(o) < len(m.decisions) {
		m.decisions[o].Inc()
	}
	m.duration.Observe(took.Seconds())
	if r != nil {
		m.observeLimits(r, v)
	}
}

// StoreFull counts a request a full store refused, decided as the shared
// unknown tenant. It implements engine.Observer.
func (m *Metrics) StoreFull() {
	if m != nil {
		m.storeFull.Inc()
	}
}

// InFlight adds delta to the slots this replica holds of the
// concurrency limit named limit. It implements engine.Observer.
func (m *Metrics) InFlight(limit string, delta int) {
	if m != nil {
		m.inFlightGauge(limit).Add(float64(delta))
	}
}

// inFlightGauge returns limit's tollgate_in_flight series, looked up
// once per name rather than by label per request.
func (m *Metrics) inFlightGauge(limit string) prometheus.Gauge {
	if g, ok := m.inFlightOf.Load(limit); ok {
		return g.(prometheus.Gauge)
	}
	g, _ := m.inFlightOf.LoadOrStore(limit, m.inFlight.WithLabelValues(limit))
	return g.(prometheus.Gauge)
}

// StoreError counts one failed store call.
func (m *Metrics) StoreError() {
	if m != nil {
		m.storeErrors.Inc()
	}
}

// StoreProbeFailed counts one failed ping of the breaker.
func (m *Metrics) StoreProbeFailed() {
	if m != nil {
		m.probeFails.Inc()
	}
}

// Routes creates the series of every route and limit of p, so that they
// read 0 before the first request instead of being absent, and forgets
// the routes of the policy before p (a reload's): their series stay, and
// a request still on one of them finds its series again by name.
func (m *Metrics) Routes(p *domain.Policy) {
	if m == nil {
		return
	}
	m.routes.Store(new(sync.Map))
	for _, r := range p.Routes() {
		m.route(r)
		for _, l := range r.Applied() {
			if l.Concurrency {
				m.inFlightGauge(l.Name)
			}
		}
	}
}

// route returns r's series, creating them.
func (m *Metrics) route(r *domain.Route) *routeMetrics {
	routes := m.routes.Load()
	if v, ok := routes.Load(r); ok {
		return v.(*routeMetrics)
	}
	rm := &routeMetrics{upstream: m.upstreamTime.WithLabelValues(r.Name)}
	for _, l := range r.Applied() {
		var c [len(limitOutcomeLabels)]prometheus.Counter
		for o, label := range limitOutcomeLabels {
			c[o] = m.limitDecisions.WithLabelValues(r.Name, l.Name, label)
		}
		rm.limits = append(rm.limits, c)
	}
	v, _ := routes.LoadOrStore(r, rm)
	return v.(*routeMetrics)
}

// observeLimits counts what each limit of route answered in v, if any
// limit decided.
func (m *Metrics) observeLimits(r *domain.Route, v domain.Verdict) {
	if m == nil || v.Decisions == nil {
		return
	}
	rm := m.route(r)
	// A face that never learns when a request ends decides without the
	// route's concurrency limits (engine.Described.SkipConcurrency): its
	// decisions are the other limits', in order.
	skipSlots := len(v.Decisions) < len(rm.limits)
	i := -1
	for _, d := range v.Decisions {
		i++
		for skipSlots && i < len(rm.limits) && r.Applied()[i].Concurrency {
			i++
		}
		if i >= len(rm.limits) {
			break // a request built by hand, not from r
		}
		o := limitAllowed
		switch {
		case d.Allowed:
		case d.Shadow:
			o = limitShadowDenied
		default:
			o = limitDenied
		}
		rm.limits[i][o].Inc()
	}
}

// Upstream observes how long route's upstream took. It implements
// httpface.Metrics.
func (m *Metrics) Upstream(r *domain.Route, took time.Duration) {
	if m != nil {
		m.route(r).upstream.Observe(took.Seconds())
	}
}

// Request counts one answer on route with status code. It implements
// httpface.Metrics.
func (m *Metrics) Request(r *domain.Route, code int) {
	if m == nil {
		return
	}
	rm := m.route(r)
	if code < 0 || code >= len(rm.codes) {
		m.requests.WithLabelValues(r.Name, strconv.Itoa(code)).Inc()
		return
	}
	c := rm.codes[code].Load()
	if c == nil {
		counter := m.requests.WithLabelValues(r.Name, strconv.Itoa(code))
		rm.codes[code].CompareAndSwap(nil, &counter)
		c = rm.codes[code].Load()
	}
	(*c).Inc()
}

// Unrouted counts an answer given before a route was matched (a 400
// for the path), on the route "default". It implements httpface.Metrics.
func (m *Metrics) Unrouted(code int) {
	if m != nil {
		m.requests.WithLabelValues(domain.DefaultRoute, strconv.Itoa(code)).Inc()
	}
}

// AdminActions are the actions tollgate_admin_actions_total counts.
var AdminActions = []string{"usage", "reset", "spend", "key_create", "key_list", "key_revoke", "top", "denials", "unauthorized"}

// AdminAction counts one call of the usage or key API: action is one of
// [AdminActions].
func (m *Metrics) AdminAction(action string) {
	if m != nil {
		m.adminActions.WithLabelValues(action).Inc()
	}
}

// SetStoreUp records the store's state, as its breaker sees it.
func (m *Metrics) SetStoreUp(up bool) {
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

// SetReplicas records the local fail mode's N.
func (m *Metrics) SetReplicas(n int) {
	if m != nil {
		m.replicas.Set(float64(n))
	}
}
