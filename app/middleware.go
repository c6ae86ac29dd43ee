package app

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Header names the rate-limit middleware writes. RateLimit and
// RateLimit-Policy follow draft-ietf-httpapi-ratelimit-headers-11; the
// X-RateLimit-* trio is what existing clients read.
const (
	HeaderRateLimit        = "RateLimit"
	HeaderRateLimitPolicy  = "RateLimit-Policy"
	HeaderXRateLimitLimit  = "X-RateLimit-Limit"
	HeaderXRateLimitRemain = "X-RateLimit-Remaining"
	HeaderXRateLimitReset  = "X-RateLimit-Reset"
	HeaderRetryAfter       = "Retry-After"
	deniedBody             = "rate limit exceeded"
	unavailableBody        = "rate limiter unavailable"
	storeErrorLogInterval  = time.Second
)

// RateLimitOptions are the optional settings of [RateLimit].
type RateLimitOptions struct {
	// KeyPrefix prefixes every key (TOLLGATE_KEY_PREFIX).
	KeyPrefix string
	// Algorithm names the algorithm, which is part of the keys
	// ([domain.Key]). Empty means fixed window.
	Algorithm string
	// Metrics records every decision and request. May be nil.
	Metrics *Metrics
	// Log gets one line per second at most about requests admitted
	// although a shadow limit would have denied them. May be nil.
	Log *slog.Logger
	// Now returns the current time, for the X-RateLimit-Reset header. If
	// nil, time.Now is used.
	Now func() time.Time
}

// RateLimit returns middleware that meters every request against its
// tenant's budgets: it resolves the tenant with tenants, matches the
// request's route in the tenant's policy (the path must be normal, see
// [domain.NormalizePath]), puts the request of the route's limits and
// cost to lim, and maps the verdict to HTTP:
//
//   - a route of cost 0, or one without limits: next is called, with no
//     store work and no rate-limit headers;
//   - admitted with decisions: next is called, with the rate-limit
//     headers set (also when a shadow limit would have denied: the
//     outcome is then shadow_denied, logged at most once a second);
//   - denied with decisions: 429, the rate-limit headers and Retry-After;
//   - admitted without decisions (the fail mode open): next is called
//     without rate-limit headers;
//   - denied without decisions (the fail mode closed): 503, Retry-After 1.
//
// Store errors never reach it: the fail-mode layer inside lim turns them
// into verdicts. It is plain net/http, usable with any router.
func RateLimit(lim ports.Limiter, tenants TenantResolver, opts RateLimitOptions) func(http.Handler) http.Handler {
	if lim == nil || tenants == nil {
		panic("app: RateLimit needs a limiter and a tenant resolver")
	}
	if opts.Algorithm == "" {
		opts.Algorithm = domain.AlgorithmFixedWindow
	}
	m := &meter{lim: lim, tenants: tenants, opts: opts,
		implicit: domain.DefaultPolicy(domain.Rule{Limit: 1, Window: time.Second}, false)}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(next, w, r)
		})
	}
}

type meter struct {
	lim      ports.Limiter
	tenants  TenantResolver
	opts     RateLimitOptions
	implicit *domain.Policy // of tenants without a policy: "default" with their Rule
	shadow   throttledLog   // of shadow denials
}

func (m *meter) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	t := m.tenants.ResolveTenant(r)
	route, req, metered := m.resolve(r, t)
	r = r.WithContext(withTenant(r.Context(), t.ID))
	if !metered {
		setOutcome(r.Context(), t.ID, route.Name, outcomeUnmetered)
		m.forward(next, w, r, route)
		return
	}
	start := time.Now()
	v, err := m.lim.Allow(r.Context(), req)
	if err != nil {
		// Only a client gone mid-decision gets here (the fail mode
		// answers for the store): nobody reads an answer.
		return
	}
	end := time.Now() // one read for the duration and, by default, the headers
	m.opts.Metrics.observe(v.Outcome, end.Sub(start))
	m.opts.Metrics.observeLimits(route, v)
	setOutcome(r.Context(), t.ID, route.Name, v.Outcome.String())

	if v.Decisions == nil {
		if v.Allowed {
			m.forward(next, w, r, route)
			return
		}
		abandonBody(w, r)
		w.Header().Set(HeaderRetryAfter, "1")
		writeError(w, r, http.StatusServiceUnavailable, unavailableBody)
		m.opts.Metrics.request(route, http.StatusServiceUnavailable)
		return
	}
	if m.opts.Now != nil {
		end = m.opts.Now()
	}
	setRateLimitHeaders(w.Header(), req.Limits, v, end)
	if !v.Allowed {
		abandonBody(w, r)
		w.Header().Set(HeaderRetryAfter, strconv.FormatInt(max(domain.CeilSeconds(v.RetryAfter()), 1), 10))
		writeError(w, r, http.StatusTooManyRequests, deniedBody)
		m.opts.Metrics.request(route, http.StatusTooManyRequests)
		return
	}
	if v.Outcome == domain.OutcomeShadowDenied {
		m.logShadow(t.ID, route, req, v)
	}
	m.forward(next, w, r, route)
}

// forward hands an admitted request to next, timing it and counting its
// status by route.
func (m *meter) forward(next http.Handler, w http.ResponseWriter, r *http.Request, route *domain.Route) {
	if m.opts.Metrics == nil {
		next.ServeHTTP(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	start := time.Now()
	next.ServeHTTP(sw, r)
	m.opts.Metrics.upstream(route, time.Since(start))
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	m.opts.Metrics.request(route, status)
}

// logShadow logs, at most once per storeErrorLogInterval, a request that
// shadow limits would have denied: the route, the tenant and the limits.
func (m *meter) logShadow(tenant domain.TenantID, route *domain.Route, req domain.Request, v domain.Verdict) {
	if m.opts.Log == nil {
		return
	}
	m.shadow.do(func(suppressed int64) {
		var names []string
		for i, d := range v.Decisions {
			if d.Shadow && !d.Allowed {
				names = append(names, req.Limits[i].Name)
			}
		}
		m.opts.Log.Info("shadow limit would deny; admitted", "route", route.Name, "tenant", string(tenant),
			"limits", strings.Join(names, ","), "shadow_denials_since_last_line", suppressed)
	})
}

// newRequestBuffers returns room for a request's n limits and for its
// verdict's n decisions ([domain.Request.Decisions]): one allocation for
// up to two limits, where a slice of each would be two, and two beyond.
func newRequestBuffers(n int) ([]domain.Limit, []domain.Decision) {
	const inline = 2
	if n > inline {
		return make([]domain.Limit, n), make([]domain.Decision, 0, n)
	}
	b := new(struct {
		limits    [inline]domain.Limit
		decisions [inline]domain.Decision
	})
	return b.limits[:n:n], b.decisions[:0:n]
}

// setRateLimitHeaders writes the contract's five rate-limit headers for
// verdict v of limits at now: RateLimit-Policy and RateLimit with one item
// per limit, X-RateLimit-* for the most constrained one. Times are
// rounded up to whole seconds, so a client that waits as told is never
// early. It runs on every metered request, so it writes the keys
// directly (Header.Set would canonicalize, and allocate, each time) and
// makes two allocations in all: the five values are formatted into one
// buffer on the stack and become substrings of one string, and one slice
// backs the five one-element value slices.
func setRateLimitHeaders(h http.Header, limits []domain.Limit, v domain.Verdict, now time.Time) {
	var (
		stack [256]byte // a handful of limits fit
		ends  [len(rateLimitHeaderKeys)]int
	)
	b := stack[:0]
	for i, d := range v.Decisions { // RateLimit-Policy
		// A limit name is a-z 0-9 -: a valid sf-string as it is.
		b = appendItem(b, i, limits[i].Name, ";q=", d.Limit, ";w=", max(domain.CeilSeconds(limits[i].Rule.Window), 1))
	}
	ends[0] = len(b)
	for i, d := range v.Decisions { // RateLimit
		b = appendItem(b, i, limits[i].Name, ";r=", max(d.Remaining, 0), ";t=", domain.CeilSeconds(d.ResetAfter))
	}
	ends[1] = len(b)
	d := v.Decisions[v.Tightest()]
	resetAt := now.Add(d.ResetAfter)
	resetUnix := resetAt.Unix()
	if resetAt.Nanosecond() > 0 {
		resetUnix++
	}
	for i, n := range [...]int64{d.Limit, max(d.Remaining, 0), resetUnix} {
		b = strconv.AppendInt(b, n, 10)
		ends[2+i] = len(b)
	}
	all := string(b)
	vals := make([]string, len(rateLimitHeaderKeys))
	from := 0
	for i, k := range rateLimitHeaderKeys {
		vals[i] = all[from:ends[i]]
		h[k] = vals[i : i+1 : i+1]
		from = ends[i]
	}
}

// appendItem appends the i-th item of a RateLimit or RateLimit-Policy
// list to b: `"name";<k1><v1><k2><v2>`, after ", " unless it is the first.
func appendItem(b []byte, i int, name, k1 string, v1 int64, k2 string, v2 int64) []byte {
	if i > 0 {
		b = append(b, ", "...)
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, '"')
	b = append(b, k1...)
	b = strconv.AppendInt(b, v1, 10)
	b = append(b, k2...)
	return strconv.AppendInt(b, v2, 10)
}

// rateLimitHeaderKeys are the keys setRateLimitHeaders writes, in the
// order of its values, spelled as the draft and existing clients spell
// them (RateLimit, X-RateLimit-Limit), not in http.Header's canonical
// form (Ratelimit, X-Ratelimit-Limit): net/http writes a map key to the
// wire as it is, and some clients compare names case-sensitively.
// Header.Get does not find these keys; index the map with them.
var rateLimitHeaderKeys = [...]string{
	HeaderRateLimitPolicy,
	HeaderRateLimit,
	HeaderXRateLimitLimit,
	HeaderXRateLimitRemain,
	HeaderXRateLimitReset,
}

// writeError answers status with msg: as {"error": msg} when the client
// accepts application/json, as plain text otherwise. It never echoes an
// internal error to the client.
func writeError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if acceptsJSON(r) {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":` + strconv.Quote(msg) + "}\n"))
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

func acceptsJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "application/json") {
			return true
		}
	}
	return false
}

// StoreErrorReporter returns what the fail-mode layer and the breaker's
// probe call on every store error: it counts failed store calls and logs
// at most one line per storeErrorLogInterval per process, however many
// requests fail. During an outage every request fails, and a line per
// request would flood the log when it matters most; each line says how
// many errors it stood for. A decision the open breaker refused
// ([layers.ErrBreakerOpen]) is logged with them but not counted: no call
// was made.
func StoreErrorReporter(log *slog.Logger, metrics *Metrics, failMode string) func(error) {
	var tl throttledLog
	msg := "rate-limit store error; failing " + failMode
	switch failMode {
	case FailOpen:
		msg += ": admitting"
	case FailClosed:
		msg += ": answering 503"
	case FailLocal:
		msg += ": deciding in process"
	}
	return func(err error) {
		if !errors.Is(err, layers.ErrBreakerOpen) {
			metrics.storeError()
		}
		tl.log(log, msg, err)
	}
}

// throttledLog writes at most one line per storeErrorLogInterval.
type throttledLog struct {
	last       atomic.Int64 // unix nanos of the last line
	suppressed atomic.Int64 // errors since the last line
}

func (l *throttledLog) log(log *slog.Logger, msg string, err error) {
	l.do(func(n int64) { log.Error(msg, "err", err, "errors_since_last_line", n) })
}

// do calls write with the number of events the line stands for (this
// one and those suppressed since the last line), unless a line was
// written less than storeErrorLogInterval ago.
func (l *throttledLog) do(write func(n int64)) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(storeErrorLogInterval) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	write(l.suppressed.Swap(0) + 1)
}
