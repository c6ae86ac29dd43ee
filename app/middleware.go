package app

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

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
	// KeyPrefix prefixes every tenant's key: the key is KeyPrefix+tenant.
	KeyPrefix string
	// FailClosed answers 503 on a store error instead of admitting.
	FailClosed bool
	// Log receives at most one line per second about store errors. If nil,
	// slog.Default() is used.
	Log *slog.Logger
	// Metrics records every decision. May be nil.
	Metrics *Metrics
	// Now returns the current time, for the X-RateLimit-Reset header. If
	// nil, time.Now is used.
	Now func() time.Time
}

// RateLimit returns middleware that meters every request against its
// tenant's budget: it resolves the tenant with tenants, asks lim, and either
// calls next with the rate-limit headers set, or answers 429. On a store
// error it admits without rate-limit headers, or answers 503 when
// opts.FailClosed is set. It is plain net/http, usable with any router.
func RateLimit(lim ports.Limiter, tenants TenantResolver, opts RateLimitOptions) func(http.Handler) http.Handler {
	if lim == nil || tenants == nil {
		panic("app: RateLimit needs a limiter and a tenant resolver")
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	m := &meter{lim: lim, tenants: tenants, opts: opts}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(next, w, r)
		})
	}
}

type meter struct {
	lim     ports.Limiter
	tenants TenantResolver
	opts    RateLimitOptions
	errLog  throttledLog
}

func (m *meter) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	t := m.tenants.ResolveTenant(r)
	start := time.Now()
	d, err := m.lim.Allow(r.Context(), domain.Key(m.opts.KeyPrefix, t.ID), t.Rule)
	if err != nil && r.Context().Err() != nil {
		// The client went away mid-decision: nobody reads an answer, and
		// it is no store error (it must not fill the metric or the log).
		return
	}
	end := time.Now() // one read for the duration and, by default, the headers
	m.opts.Metrics.observe(d.Allowed, err, end.Sub(start))
	setOutcome(r.Context(), t.ID, outcomeOf(d.Allowed, err))
	r = r.WithContext(withTenant(r.Context(), t.ID))

	if err != nil {
		m.errLog.log(m.opts.Log, err, m.opts.FailClosed)
		if m.opts.FailClosed {
			abandonBody(w, r)
			w.Header().Set(HeaderRetryAfter, "1")
			writeError(w, r, http.StatusServiceUnavailable, unavailableBody)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	if m.opts.Now != nil {
		end = m.opts.Now()
	}
	setRateLimitHeaders(w.Header(), d, t.Rule, end)
	if !d.Allowed {
		abandonBody(w, r)
		w.Header().Set(HeaderRetryAfter, strconv.FormatInt(max(domain.CeilSeconds(d.RetryAfter), 1), 10))
		writeError(w, r, http.StatusTooManyRequests, deniedBody)
		return
	}
	next.ServeHTTP(w, r)
}

// setRateLimitHeaders writes the contract's five rate-limit headers for d
// under rule at now. Times are rounded up to whole seconds, so a client
// that waits as told is never early. It runs on every metered request, so
// it writes the keys directly (Header.Set would canonicalize, and
// allocate, each time) and backs the five values with one slice.
func setRateLimitHeaders(h http.Header, d domain.Decision, rule domain.Rule, now time.Time) {
	limit := strconv.FormatInt(d.Limit, 10)
	remaining := strconv.FormatInt(max(d.Remaining, 0), 10)
	resetAt := now.Add(d.ResetAfter)
	resetUnix := resetAt.Unix()
	if resetAt.Nanosecond() > 0 {
		resetUnix++
	}
	windowSecs := max(domain.CeilSeconds(rule.Window), 1)
	v := [...]string{
		`"default";q=` + limit + `;w=` + strconv.FormatInt(windowSecs, 10),
		`"default";r=` + remaining + `;t=` + strconv.FormatInt(domain.CeilSeconds(d.ResetAfter), 10),
		limit,
		remaining,
		strconv.FormatInt(resetUnix, 10),
	}
	vals := v[:] // one allocation for the five one-element slices
	for i, k := range rateLimitHeaderKeys {
		h[k] = vals[i : i+1 : i+1]
	}
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

// throttledLog logs store errors at most once per storeErrorLogInterval per
// process, however many requests fail: during an outage every request
// fails, and a line per request would flood the log when it matters most.
// The next line says how many errors it stood for.
type throttledLog struct {
	last       atomic.Int64 // unix nanos of the last line
	suppressed atomic.Int64 // errors since the last line
}

func (l *throttledLog) log(log *slog.Logger, err error, failClosed bool) {
	now := time.Now().UnixNano()
	last := l.last.Load()
	if now-last < int64(storeErrorLogInterval) || !l.last.CompareAndSwap(last, now) {
		l.suppressed.Add(1)
		return
	}
	mode := "open: admitting"
	if failClosed {
		mode = "closed: answering 503"
	}
	log.Error("rate-limit store error; failing "+mode,
		"err", err, "errors_since_last_line", l.suppressed.Swap(0)+1)
}
