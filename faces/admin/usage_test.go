package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
)

const token = "s3cret-token-of-32-bytes-0123456"

// fixture is the usage API over an engine on the memory store, with the
// admin listener's own paths under it.
type fixture struct {
	h       http.Handler
	eng     *engine.Engine
	store   *memory.Limiter
	log     *bytes.Buffer
	mu      sync.Mutex
	actions map[string]int
}

func newFixture(t *testing.T, tenants *engine.Directory, usage func(*memory.Limiter) engine.Options) *fixture {
	t.Helper()
	month := &domain.Calendar{Unit: domain.PeriodMonth}
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{
			{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
			{Name: "monthly", Rule: domain.Rule{Limit: 1000, Window: domain.NominalWindow(domain.PeriodMonth)}, Calendar: month},
		},
		[]domain.Route{{Name: "search", Path: "/search", Cost: 2, Limits: []domain.PolicyLimit{
			{Name: "searches", Rule: domain.Rule{Limit: 10, Window: time.Hour}, Shadow: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	store, err := memory.New(domain.AlgorithmTokenBucket, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts := engine.Options{Limiter: store, Usage: store, Keys: keys.Layout{Prefix: "rl:", Algorithm: domain.AlgorithmTokenBucket}, Algorithm: domain.AlgorithmTokenBucket}
	if usage != nil {
		opts = usage(store)
	}
	f := &fixture{eng: engine.New(&engine.Snapshot{Policy: p, Tenants: tenants}, opts), store: store, log: new(bytes.Buffer), actions: map[string]int{}}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("admin's own " + r.URL.Path)) })
	f.h = admin.WithUsage(inner, admin.UsageOptions{
		Engine: f.eng, Token: token,
		Log: slog.New(slog.NewJSONHandler(f.log, nil)),
		Count: func(a string) {
			f.mu.Lock()
			f.actions[a]++
			f.mu.Unlock()
		},
	})
	return f
}

// call sends method path with auth as the Authorization header.
func (f *fixture) call(t *testing.T, method, path, auth string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *fixture) spend(t *testing.T, tenant, path string) {
	t.Helper()
	if _, err := f.eng.Decide(t.Context(), engine.Described{Method: "GET", Path: path, Credentials: engine.Credentials{Header: tenant, APIKey: "k-" + tenant}}); err != nil {
		t.Fatal(err)
	}
}

func decode(t *testing.T, w *httptest.ResponseRecorder) admin.UsageBody {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	var b admin.UsageBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return b
}

func TestUsageNeedsTheToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	for _, auth := range []string{"", "Bearer", "Bearer wrong", "Basic " + token, "Bearer " + token + "x", "Bearer " + token[:len(token)-1], token} {
		for _, call := range [][2]string{{"GET", "/v1/tenants/acme/usage"}, {"POST", "/v1/tenants/acme/reset"}, {"GET", "/v1/nothing"}, {"DELETE", "/v1/tenants/acme/usage"}} {
			w := f.call(t, call[0], call[1], auth)
			if w.Code != http.StatusUnauthorized || !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with %q: %d %v, want 401 with WWW-Authenticate: Bearer", call[0], call[1], auth, w.Code, w.Header())
			}
		}
	}
	if f.actions["unauthorized"] != 28 || f.actions["usage"]+f.actions["reset"] != 0 {
		t.Errorf("actions counted %v, want 28 unauthorized and nothing else", f.actions)
	}
	if strings.Count(f.log.String(), "\n") != 1 || strings.Contains(f.log.String(), token) {
		t.Errorf("log %q, want one line a second, without the token", f.log)
	}
	for _, auth := range []string{"Bearer " + token, "bearer " + token, "BEARER  " + token} {
		if w := f.call(t, "GET", "/v1/tenants/acme/usage", auth); w.Code != http.StatusOK {
			t.Errorf("%q: %d %s, want 200", auth, w.Code, w.Body)
		}
	}
	if w := f.call(t, "GET", "/healthz", ""); w.Code != http.StatusOK || w.Body.String() != "admin's own /healthz" {
		t.Errorf("admin's own path: %d %q, want it served as before, with no token", w.Code, w.Body)
	}
}

func TestUsageBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	f.spend(t, "acme", "/search")
	f.spend(t, "acme", "/search")
	f.spend(t, "acme", "/other")
	keys := f.store.Len()
	w := f.call(t, "GET", "/v1/tenants/acme/usage", "Bearer "+token)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("usage: %d %v %s", w.Code, w.Header(), w.Body)
	}
	b := decode(t, w)
	if b.Tenant != "acme" || len(b.Limits) != 3 {
		t.Fatalf("usage: %+v, want acme's three limits", b)
	}
	pm, mo, se := b.Limits[0], b.Limits[1], b.Limits[2]
	if pm.Name != "per-minute" || pm.Route != "" || pm.Algorithm != "token_bucket" || pm.Limit != 60 || pm.WindowSeconds != 60 ||
		pm.Used != 5 || pm.Remaining != 55 || pm.ResetSeconds < 1 || pm.ResetSeconds > 60 || pm.Shadow || pm.Period != "" {
		t.Errorf("per-minute: %+v", pm)
	}
	if mo.Name != "monthly" || mo.Algorithm != "fixed_window" || mo.Period != "month" || mo.Timezone != "UTC" || mo.Used != 5 || mo.Remaining != 995 ||
		mo.WindowSeconds < 28*86400 || mo.WindowSeconds > 31*86400 || mo.ResetSeconds > mo.WindowSeconds {
		t.Errorf("monthly: %+v", mo)
	}
	if se.Name != "searches" || se.Route != "search" || !se.Shadow || se.Used != 4 || se.Remaining != 6 || se.WindowSeconds != 3600 {
		t.Errorf("searches: %+v", se)
	}
	for _, field := range []string{`"name"`, `"route"`, `"algorithm"`, `"limit"`, `"window_seconds"`, `"used"`, `"remaining"`, `"reset_seconds"`, `"shadow"`} {
		if !strings.Contains(w.Body.String(), field) {
			t.Errorf("body lacks %s: %s", field, w.Body)
		}
	}
	if f.store.Len() != keys {
		t.Errorf("usage changed the store's keys: %d, was %d", f.store.Len(), keys)
	}
	if w := f.call(t, "GET", "/v1/tenants/nobody/usage", "Bearer "+token); w.Code != http.StatusOK || decode(t, w).Limits[0].Used != 0 {
		t.Errorf("a tenant never seen: %d %s, want 200 with nothing used", w.Code, w.Body)
	}
	if f.store.Len() != keys {
		t.Errorf("usage of a tenant never seen created keys: %d, was %d", f.store.Len(), keys)
	}
}

func TestUsageReset(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	f.spend(t, "acme", "/search")
	// The id is decoded: %61cme is acme (chi matches the escaped path).
	if w := f.call(t, "GET", "/v1/tenants/%61cme/usage", "Bearer "+token); w.Code != http.StatusOK ||
		decode(t, w).Tenant != "acme" || decode(t, w).Limits[0].Used == 0 {
		t.Errorf("usage of %%61cme: %d %s, want acme's", w.Code, w.Body)
	}
	w := f.call(t, "POST", "/v1/tenants/acme/reset?limit=monthly", "Bearer "+token)
	b := decode(t, w)
	if w.Code != http.StatusOK || b.Limits[0].Used != 2 || b.Limits[1].Used != 0 || b.Limits[2].Used != 2 {
		t.Errorf("reset of monthly: %d %+v, want monthly alone whole", w.Code, b)
	}
	w = f.call(t, "POST", "/v1/tenants/acme/reset", "Bearer "+token)
	if b := decode(t, w); w.Code != http.StatusOK || b.Limits[0].Used+b.Limits[1].Used+b.Limits[2].Used != 0 {
		t.Errorf("reset of all: %d %+v, want every limit whole", w.Code, b)
	}
	log := f.log.String()
	if !strings.Contains(log, `"msg":"usage API: reset","tenant":"acme","limit":"monthly","client":"192.0.2.1"`) ||
		!strings.Contains(log, `"limit":"all"`) {
		t.Errorf("audit log %q, want a line per reset with tenant, limit and client", log)
	}
	if f.actions["reset"] != 2 {
		t.Errorf("actions %v, want 2 resets", f.actions)
	}
	if w := f.call(t, "GET", "/v1/tenants/acme/reset", "Bearer "+token); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "POST" {
		t.Errorf("GET of reset: %d %v, want 405 with Allow: POST", w.Code, w.Header())
	}
	if w := f.call(t, "POST", "/v1/tenants/acme/usage", "Bearer "+token); w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET" {
		t.Errorf("POST of usage: %d %v, want 405 with Allow: GET", w.Code, w.Header())
	}
}

func TestUsageBadRequests(t *testing.T) {
	t.Parallel()
	dir := engine.NewDirectory([]engine.Tenant{{ID: "acme"}}, [][]string{{"k-acme"}})
	f := newFixture(t, dir, nil)
	for _, tt := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/v1/tenants/acme/usage", 200},
		{"GET", "/v1/tenants/unknown/usage", 200},
		{"GET", "/v1/tenants/globex/usage", 404},
		{"POST", "/v1/tenants/globex/reset", 404},
		{"GET", "/v1/tenants/a%20b/usage", 400},
		{"GET", "/v1/tenants/a%2Fb/usage", 400},
		{"GET", "/v1/tenants/" + strings.Repeat("a", 200) + "/usage", 400},
		{"POST", "/v1/tenants/acme/reset?limit=nope", 400},
		{"POST", "/v1/tenants/acme/reset?limit=", 400},
		{"POST", "/v1/tenants/acme/reset?limit=monthly&limit=per-minute", 400},
		{"POST", "/v1/tenants/acme/reset?limit=Bad_Name", 400},
		{"GET", "/v1/tenants/%2561cme/usage", 400}, // decoded once: %61cme
		{"POST", "/v1/tenants/acme/reset?LIMIT=monthly", 400},
		{"POST", "/v1/tenants/acme/reset?limit=monthly&dry-run=1", 400},
		{"POST", "/v1/tenants/acme/reset?limit=%zz", 400},
		{"GET", "/v1/tenants/acme", 404},
		{"GET", "/v1/", 404},
	} {
		w := f.call(t, tt.method, tt.path, "Bearer "+token)
		if w.Code != tt.code {
			t.Errorf("%s %s: %d %s, want %d", tt.method, tt.path, w.Code, w.Body, tt.code)
		}
		var e struct{ Error string }
		if tt.code != 200 && (json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error == "") {
			t.Errorf("%s %s: body %q, want a JSON error", tt.method, tt.path, w.Body)
		}
	}
	if f.store.Len() != 0 {
		t.Errorf("bad requests created %d keys", f.store.Len())
	}
	// Every reset call has its audit line, and its count.
	log := f.log.String()
	if n := strings.Count(log, `"msg":"usage API: reset not done"`); n != 8 || f.actions["reset"] != 8 ||
		!strings.Contains(log, `"tenant":"globex","client":"192.0.2.1","status":404`) ||
		strings.Contains(log, `"limit":"all"`) ||
		!strings.Contains(log, `"limit":"monthly,per-minute","client":"192.0.2.1","status":400`) {
		t.Errorf("%d resets counted, audit log %s: want 8 lines of resets not done, with their statuses", f.actions["reset"], log)
	}
}

// failing is a store whose usage calls fail.
type failing struct{ *memory.Limiter }

func (failing) Peek(context.Context, domain.Request) (domain.Verdict, error) {
	return domain.Verdict{}, errors.New("connection refused")
}
func (failing) Reset(context.Context, domain.Request) error { return errors.New("connection refused") }

func TestUsageStoreFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(m *memory.Limiter) engine.Options {
		return engine.Options{Keys: keys.Layout{}, Limiter: m, Usage: failing{m}}
	})
	for _, call := range [][2]string{{"GET", "/v1/tenants/acme/usage"}, {"POST", "/v1/tenants/acme/reset"}} {
		w := f.call(t, call[0], call[1], "Bearer "+token)
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
			t.Errorf("%s %s on a failing store: %d %v, want 503 with Retry-After: 1", call[0], call[1], w.Code, w.Header())
		}
	}
	if log := f.log.String(); strings.Contains(log, `"msg":"usage API: reset",`) ||
		!strings.Contains(log, `"msg":"usage API: reset failed: the store did not answer (it may still make it)","tenant":"acme","limit":"all","client":"192.0.2.1","status":503`) {
		t.Errorf("audit log %s, want the failed reset logged as not done, with its status", log)
	}
}

// TestUsageStoreFailsLogsOnceASecond: while the store fails, the usage
// API's error line is written at most once a second, however many calls
// fail (a billing page polling every tenant in an outage), saying how
// many it stands for, as the decisions' store-error line is.
func TestUsageStoreFailsLogsOnceASecond(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(m *memory.Limiter) engine.Options {
		return engine.Options{Keys: keys.Layout{}, Limiter: m, Usage: failing{m}}
	})
	const calls = 50
	for range calls {
		if w := f.call(t, "GET", "/v1/tenants/acme/usage", "Bearer "+token); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("usage on a failing store: %d, want 503", w.Code)
		}
	}
	log := f.log.String()
	// 50 calls take well under a second; a stalled machine may let a
	// second line through, not one per call.
	if n := strings.Count(log, `"msg":"usage API: the store failed"`); n < 1 || n > 3 {
		t.Errorf("%d calls on a failing store logged %d lines, want 1 (at most one a second):\n%s", calls, n, log)
	}
	if !strings.Contains(log, `"failures_since_last_line":1`) {
		t.Errorf("log %s, want the line to say how many failures it stands for", log)
	}
}

// readFails is a store whose resets are made and whose usage reads fail.
type readFails struct{ *memory.Limiter }

func (readFails) Peek(context.Context, domain.Request) (domain.Verdict, error) {
	return domain.Verdict{}, errors.New("connection refused")
}

// TestUsageResetMadeReadFailed: a reset made whose usage after it could
// not be read is answered 503 saying the reset was made, and audited as
// a reset, not as a failed one.
func TestUsageResetMadeReadFailed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, func(m *memory.Limiter) engine.Options {
		return engine.Options{Keys: keys.Layout{}, Limiter: m, Usage: readFails{m}}
	})
	w := f.call(t, "POST", "/v1/tenants/acme/reset", "Bearer "+token)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "the reset was made") {
		t.Errorf("a reset made, its usage unread: %d %s, want 503 saying the reset was made", w.Code, w.Body)
	}
	if log := f.log.String(); !strings.Contains(log, `"msg":"usage API: reset","tenant":"acme","limit":"all","client":"192.0.2.1","status":503`) ||
		strings.Contains(log, "reset failed") {
		t.Errorf("audit log %s, want the reset logged as made", log)
	}
}

// TestUsageInFlight: a concurrency limit's usage gives the requests in
// flight (in_flight, and as used) and the slots free; a rate limit has
// no in_flight; a reset leaves running requests' slots.
func TestUsageInFlight(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
		{Name: "inflight", Rule: domain.Rule{Limit: 3, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	eng := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Usage: store, Keys: keys.Layout{Prefix: "rl:"}})
	h := admin.WithUsage(http.NotFoundHandler(), admin.UsageOptions{Engine: eng, Token: token, Log: slog.New(slog.DiscardHandler), Count: func(string) {}})
	for range 2 {
		res, err := eng.Decide(t.Context(), engine.Described{Method: "GET", Path: "/", Credentials: engine.Credentials{Header: "acme"}})
		if err != nil || !res.Verdict.Allowed {
			t.Fatalf("Decide: %+v, %v", res.Verdict, err)
		}
		defer res.Release()
	}
	for _, call := range [][2]string{{"GET", "/v1/tenants/acme/usage"}, {"POST", "/v1/tenants/acme/reset"}} {
		path := call[1]
		r := httptest.NewRequest(call[0], path, nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		b := decode(t, w)
		if len(b.Limits) != 2 {
			t.Fatalf("%s: %s", path, w.Body)
		}
		rate, slots := b.Limits[0], b.Limits[1]
		if rate.InFlight != nil {
			t.Errorf("%s: the rate limit has in_flight %d", path, *rate.InFlight)
		}
		if slots.InFlight == nil || *slots.InFlight != 2 || slots.Used != 2 || slots.Remaining != 1 || slots.Limit != 3 || slots.Algorithm != "concurrency" {
			t.Errorf("%s: the concurrency limit %+v (in_flight %v), want 2 in flight, 1 free", path, slots, slots.InFlight)
		}
		if !strings.Contains(w.Body.String(), `"in_flight":2`) {
			t.Errorf("%s: body %s lacks \"in_flight\":2", path, w.Body)
		}
	}
	// A reload lowers the limit to 1 under the 2 running requests: they
	// are all still in flight, none free (in_flight is not capped at 1).
	lowered, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
		{Name: "inflight", Rule: domain.Rule{Limit: 1, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng.Swap(&engine.Snapshot{Policy: lowered})
	r := httptest.NewRequest("GET", "/v1/tenants/acme/usage", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if slots := decode(t, w).Limits[1]; slots.InFlight == nil || *slots.InFlight != 2 || slots.Used != 2 || slots.Remaining != 0 || slots.Limit != 1 {
		t.Errorf("the limit lowered to 1 under 2 running requests: %+v (in_flight %v), want 2 in flight, none free", slots, slots.InFlight)
	}
}

// TestUsageResetRefusesABody: a reset takes no body. One sent anyway (a
// form's limit=monthly, as curl -d sends it) is refused with 400 and
// resets nothing: ignored, it reset every limit of the tenant.
func TestUsageResetRefusesABody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil, nil)
	f.spend(t, "acme", "/search")
	for _, tt := range []struct {
		name string
		body io.Reader
		set  func(*http.Request)
	}{
		{"a form", strings.NewReader("limit=monthly"), func(r *http.Request) {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}},
		{"JSON", strings.NewReader(`{"limit":"monthly"}`), func(r *http.Request) { r.Header.Set("Content-Type", "application/json") }},
		{"chunked", strings.NewReader("limit=monthly"), func(r *http.Request) { r.ContentLength = -1 }},
	} {
		r := httptest.NewRequest("POST", "/v1/tenants/acme/reset", tt.body)
		r.Header.Set("Authorization", "Bearer "+token)
		tt.set(r)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		var e struct{ Error string }
		if w.Code != http.StatusBadRequest || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, "?limit=") {
			t.Errorf("a reset with %s body: %d %s, want 400 naming ?limit=", tt.name, w.Code, w.Body)
		}
	}
	b := decode(t, f.call(t, "GET", "/v1/tenants/acme/usage", "Bearer "+token))
	if b.Limits[0].Used != 2 || b.Limits[1].Used != 2 {
		t.Errorf("after resets with a body: %+v, want nothing reset", b)
	}
	// An empty body (Content-Length: 0, what some clients send with a
	// POST) is no body.
	r := httptest.NewRequest("POST", "/v1/tenants/acme/reset?limit=monthly", strings.NewReader(""))
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("a reset with an empty body: %d %s, want 200", w.Code, w.Body)
	}
	if n := strings.Count(f.log.String(), `"msg":"usage API: reset not done"`); n != 3 {
		t.Errorf("audit log %s: want 3 lines of resets not done", f.log)
	}
}
