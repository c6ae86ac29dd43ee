package check_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/check"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/ports"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 250_000_000, time.UTC)

// recorder is a limiter that records the requests it is asked and
// answers with verdict (nil: a counting fixed window, see count).
type recorder struct {
	mu      sync.Mutex // guards the fields below
	reqs    []domain.Request
	counts  map[string]int64
	verdict func(domain.Request) domain.Verdict
}

func (r *recorder) Allow(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.verdict != nil {
		return r.verdict(req), nil
	}
	if r.counts == nil {
		r.counts = map[string]int64{}
	}
	v := domain.Settle(req, domain.CountAdmitted, nil, func(i int, cost int64) domain.Decision { return r.decide(req.Limits[i], cost) })
	for i, l := range req.Limits {
		if domain.Spends(req, domain.CountAdmitted, v, i) {
			r.counts[l.Key] += l.Cost
		}
	}
	return v, nil
}

// decide decides cost on l's fixed window, which has 30 s left. It
// requires r.mu held.
func (r *recorder) decide(l domain.Limit, cost int64) domain.Decision {
	used := r.counts[l.Key]
	d := domain.Decision{Allowed: used+cost <= l.Rule.Limit, Limit: l.Rule.Limit, ResetAfter: 30 * time.Second}
	if d.Allowed {
		d.Remaining = l.Rule.Limit - used - cost
	} else {
		d.Remaining = max(l.Rule.Limit-used, 0)
		d.RetryAfter = 30 * time.Second
	}
	return d
}

// asked returns the requests the limiter was asked so far.
func (r *recorder) asked() []domain.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]domain.Request(nil), r.reqs...)
}

// testPolicy has one global limit, per-minute (10), and the routes
// search (POST /v1/search, cost 5), export (/v1/export, its own limit
// exports: 2) and status (/status, cost 0).
func testPolicy(t testing.TB) *domain.Policy {
	t.Helper()
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "per-minute", Rule: domain.Rule{Limit: 10, Window: time.Minute}}},
		[]domain.Route{
			{Name: "search", Method: "POST", Path: "/v1/search", Cost: 5},
			{Name: "export", Path: "/v1/export", Cost: 1, Limits: []domain.PolicyLimit{{Name: "exports", Rule: domain.Rule{Limit: 2, Window: time.Hour}}}},
			{Name: "status", Path: "/status", Cost: 0},
			{Name: "items", Method: "GET", Path: "/v1/items", Cost: 1},
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// setup is what newCheck builds a check endpoint with.
type setup struct {
	policy     *domain.Policy // nil: testPolicy
	lim        ports.Limiter  // nil: a new recorder
	anonymous  engine.Anonymous
	trusted    string // TOLLGATE_TRUSTED_PROXIES
	denyStatus int
	accessLog  bool
	metrics    httpface.Metrics
}

// newCheck returns the check endpoint of s, tenants named by
// X-Tenant-ID, its limiter (a *recorder unless s gave one) and its log.
func newCheck(t testing.TB, s setup) (http.Handler, ports.Limiter, *logtest.Buffer) {
	t.Helper()
	if s.policy == nil {
		s.policy = testPolicy(t)
	}
	if s.lim == nil {
		s.lim = &recorder{}
	}
	trusted, err := domain.ParseTrustedProxies(s.trusted)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	e := engine.New(&engine.Snapshot{Policy: s.policy},
		engine.Options{Limiter: s.lim, Keys: keys.Layout{Prefix: "rl:"}, Anonymous: s.anonymous})
	h := check.New(check.Options{
		Engine:     e,
		Describer:  httpface.Describer{Trusted: trusted},
		DenyStatus: s.denyStatus,
		AccessLog:  s.accessLog,
		Log:        slog.New(slog.NewJSONHandler(logs, nil)),
		Metrics:    s.metrics,
		Now:        func() time.Time { return t0 },
	})
	return h, s.lim, logs
}

// ask sends h one check request: GET /check from 192.0.2.1 with header
// (name, value pairs), and returns the recorded answer.
func ask(h http.Handler, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/check", nil)
	r.RemoteAddr = "192.0.2.1:41000"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// rateLimitHeaders are the five rate-limit headers, as written.
var rateLimitHeaders = []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}

// header returns h's value of name, in the spelling the gateway writes
// it (the rate-limit headers are not in canonical form) or any other.
func header(h http.Header, name string) string {
	if v, ok := h[name]; ok {
		return strings.Join(v, ", ")
	}
	return h.Get(name)
}
