package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tollgate/tollgate/adapters/fixedwindow"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// fakeCounter is a scripted Counter: it counts like a store and records
// the keys and windows it was asked for. err, when set, fails every call.
type fakeCounter struct {
	mu      sync.Mutex // guards the fields below
	counts  map[string]int64
	keys    []string
	windows []time.Duration
	left    time.Duration
	err     error
}

func newFakeCounter() *fakeCounter {
	return &fakeCounter{counts: map[string]int64{}, left: 30 * time.Second}
}

func (f *fakeCounter) Incr(_ context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	f.windows = append(f.windows, window)
	if f.err != nil {
		return 0, 0, f.err
	}
	f.counts[key]++
	return f.counts[key], f.left, nil
}

func (f *fakeCounter) lastKey() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[len(f.keys)-1]
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 250_000_000, time.UTC)

// limited are the settings of newLimited: the fail mode and its log.
type limited struct {
	failClosed bool
	log        *slog.Logger
	metrics    *app.Metrics
}

// newLimited returns the middleware around a handler that answers 200,
// over the seed's fixed window on counter in the fail-mode layer, as the
// composition root stacks them, with every tenant on rule.
func newLimited(counter ports.Counter, rule domain.Rule, opts limited) http.Handler {
	if opts.log == nil {
		opts.log = slog.New(slog.DiscardHandler)
	}
	mode, layer := app.FailOpen, layers.FailOpen
	if opts.failClosed {
		mode, layer = app.FailClosed, layers.FailClosed
	}
	lim := ports.Chain(fixedwindow.Limiter{Counter: counter}, layer(app.StoreErrorReporter(opts.log, opts.metrics, mode)))
	mw := app.RateLimit(lim, app.HeaderTenants{Header: "X-Tenant-ID", Rule: rule},
		app.RateLimitOptions{KeyPrefix: "rl:", Metrics: opts.metrics, Now: func() time.Time { return t0 }})
	return mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("tenant=" + string(app.TenantFrom(r.Context()))))
	}))
}

func serve(h http.Handler, tenant string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	if tenant != "" {
		r.Header.Set("X-Tenant-ID", tenant)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestRateLimitAllowsUpToTheBudgetThenBlocks(t *testing.T) {
	t.Parallel()
	fc := newFakeCounter()
	h := newLimited(fc, domain.Rule{Limit: 3, Window: time.Minute}, limited{})
	want := []int{200, 200, 200, 429, 429}
	for i, w := range want {
		if got := serve(h, "acme").Code; got != w {
			t.Errorf("request %d: status = %d, want %d", i+1, got, w)
		}
	}
	if got := fc.lastKey(); got != "rl:{acme}" {
		t.Errorf("key = %q, want rl:{acme}", got)
	}
	if got := fc.windows[0]; got != time.Minute {
		t.Errorf("window = %v, want 1m", got)
	}
	// Another tenant has its own budget.
	if got := serve(h, "globex").Code; got != 200 {
		t.Errorf("other tenant: status = %d, want 200", got)
	}
}

func TestRateLimitKeys(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, header, wantKey, wantTenant string
	}{
		{"valid tenant", "acme", "rl:{acme}", "acme"},
		{"no header", "", "rl:{unknown}", "unknown"},
		{"too long", strings.Repeat("a", 65), "rl:{unknown}", "unknown"},
		{"bad bytes", "acme/../x", "rl:{unknown}", "unknown"},
		{"spaces", "ac me", "rl:{unknown}", "unknown"},
		{"key-like", "rl:acme", "rl:{unknown}", "unknown"},
		{"hash tag", "{acme}", "rl:{unknown}", "unknown"},
		{"longest valid", strings.Repeat("a", 64), "rl:{" + strings.Repeat("a", 64) + "}", strings.Repeat("a", 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := newFakeCounter()
			h := newLimited(fc, domain.Rule{Limit: 10, Window: time.Minute}, limited{})
			w := serve(h, tt.header)
			if w.Code != 200 {
				t.Fatalf("status = %d, want 200", w.Code)
			}
			if got := fc.lastKey(); got != tt.wantKey {
				t.Errorf("key = %q, want %q", got, tt.wantKey)
			}
			if got, want := w.Body.String(), "tenant="+tt.wantTenant; got != want {
				t.Errorf("handler saw %q, want %q", got, want)
			}
		})
	}
}

func TestRateLimitHeaders(t *testing.T) {
	t.Parallel()
	fc := newFakeCounter()
	fc.left = 29*time.Second + 100*time.Millisecond
	h := newLimited(fc, domain.Rule{Limit: 2, Window: time.Minute}, limited{})
	// t0 is 12:00:00.25; the reset is at 12:00:29.35, announced as :30.
	reset := "1795953630"
	steps := []struct {
		status                           int
		rateLimit, remaining, retryAfter string
	}{
		{200, `"default";r=1;t=30`, "1", ""},
		{200, `"default";r=0;t=30`, "0", ""},
		{429, `"default";r=0;t=30`, "0", "30"},
	}
	for i, s := range steps {
		w := serve(h, "acme")
		hdr := w.Header()
		if w.Code != s.status {
			t.Errorf("step %d: status = %d, want %d", i, w.Code, s.status)
		}
		for name, want := range map[string]string{
			"RateLimit-Policy":      `"default";q=2;w=60`,
			"RateLimit":             s.rateLimit,
			"X-RateLimit-Limit":     "2",
			"X-RateLimit-Remaining": s.remaining,
			"X-RateLimit-Reset":     reset,
			"Retry-After":           s.retryAfter,
		} {
			// Exact keys: the draft's names are not in canonical form.
			if got := strings.Join(hdr[name], ","); got != want {
				t.Errorf("step %d: %s = %q, want %q", i, name, got, want)
			}
		}
	}
}

func TestRateLimitPolicyWindowSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		window time.Duration
		want   string
	}{
		{time.Millisecond, `"default";q=5;w=1`},
		{1500 * time.Millisecond, `"default";q=5;w=2`},
		{time.Hour, `"default";q=5;w=3600`},
	}
	for _, tt := range tests {
		fc := newFakeCounter()
		fc.left = tt.window
		w := serve(newLimited(fc, domain.Rule{Limit: 5, Window: tt.window}, limited{}), "acme")
		if got := strings.Join(w.Header()["RateLimit-Policy"], ","); got != tt.want {
			t.Errorf("window %v: RateLimit-Policy = %q, want %q", tt.window, got, tt.want)
		}
	}
}

func TestRateLimitRetryAfterAtLeastOneSecond(t *testing.T) {
	t.Parallel()
	fc := newFakeCounter()
	fc.left = 10 * time.Millisecond
	h := newLimited(fc, domain.Rule{Limit: 1, Window: time.Second}, limited{})
	serve(h, "acme")
	w := serve(h, "acme")
	if w.Code != 429 || w.Header().Get("Retry-After") != "1" {
		t.Errorf("status %d Retry-After %q, want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestRateLimitDeniedBody(t *testing.T) {
	t.Parallel()
	fc := newFakeCounter()
	h := newLimited(fc, domain.Rule{Limit: 1, Window: time.Minute}, limited{})
	serve(h, "acme")

	w := serve(h, "acme")
	if got, want := w.Body.String(), "rate limit exceeded\n"; got != want {
		t.Errorf("plain body = %q, want %q", got, want)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("plain Content-Type = %q", ct)
	}

	w = serve(h, "acme", "Accept", "text/html, application/json;q=0.9")
	var body struct{ Error string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != "rate limit exceeded" {
		t.Errorf("JSON body = %q (%v), want {\"error\":\"rate limit exceeded\"}", w.Body.String(), err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("JSON Content-Type = %q", ct)
	}
}

func TestRateLimitStoreErrors(t *testing.T) {
	t.Parallel()
	storeErr := errors.New("dial tcp 10.0.0.1:6379: connection refused")
	tests := []struct {
		name           string
		failClosed     bool
		wantStatus     int
		wantRetryAfter string
	}{
		{"fail open admits without headers", false, 200, ""},
		{"fail closed answers 503", true, 503, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fc := newFakeCounter()
			fc.err = storeErr
			var logs syncBuffer
			h := newLimited(fc, domain.Rule{Limit: 1, Window: time.Minute}, limited{
				failClosed: tt.failClosed,
				log:        slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			for i := range 500 {
				w := serve(h, "acme")
				if w.Code != tt.wantStatus {
					t.Fatalf("request %d: status = %d, want %d", i, w.Code, tt.wantStatus)
				}
				if got := w.Header().Get("Retry-After"); got != tt.wantRetryAfter {
					t.Fatalf("request %d: Retry-After = %q, want %q", i, got, tt.wantRetryAfter)
				}
				if got := w.Header().Get("X-RateLimit-Limit"); got != "" {
					t.Fatalf("request %d: X-RateLimit-Limit = %q on a store error, want none", i, got)
				}
				if strings.Contains(w.Body.String(), "10.0.0.1") {
					t.Fatalf("request %d: body leaks the store error: %q", i, w.Body.String())
				}
			}
			if n := strings.Count(logs.String(), "\n"); n != 1 {
				t.Errorf("500 store errors within a second logged %d lines, want 1:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), "connection refused") {
				t.Errorf("log line lacks the error: %s", logs.String())
			}
		})
	}
}

func TestRateLimitStoreErrorLogIsThrottledConcurrently(t *testing.T) {
	t.Parallel()
	fc := newFakeCounter()
	fc.err = errors.New("boom")
	var logs syncBuffer
	h := newLimited(fc, domain.Rule{Limit: 1, Window: time.Minute}, limited{
		log: slog.New(slog.NewJSONHandler(&logs, nil)),
	})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				serve(h, "acme")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Errorf("1600 concurrent store errors logged %d lines, want 1", n)
	}
}

func TestRateLimitPanicsWithoutLimiter(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("RateLimit(nil, ...) did not panic")
		}
	}()
	app.RateLimit(nil, app.HeaderTenants{}, app.RateLimitOptions{})
}

func TestServerRecoversFromPanics(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg, _ := app.LoadConfig(nil)
	h := app.NewServer(log, cfg, fixedwindow.Limiter{Counter: newFakeCounter()},
		app.HeaderTenants{Header: "X-Tenant-ID", Rule: cfg.Rule()}, nil,
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("kaboom") }))
	w := serve(h, "acme")
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "kaboom") {
		t.Errorf("panic answered %d %q, want 500 without the panic value", w.Code, w.Body.String())
	}
	if got := logLines(t, logs.String(), "handler panic"); len(got) != 1 || got[0]["panic"] != "kaboom" {
		t.Errorf("panic log lines = %v, want one with panic=kaboom", got)
	}
}

// TestRateLimitClientGoneIsNoStoreError: a client that disconnects while
// the store decides is not a store error: no metric, no log line, no
// answer.
func TestRateLimitClientGoneIsNoStoreError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	metrics := app.NewMetrics(reg, "fixed_window")
	lim := ports.Chain(ports.LimiterFunc(func(ctx context.Context, _ domain.Request) (domain.Verdict, error) {
		<-ctx.Done()
		return domain.Verdict{}, ctx.Err()
	}), layers.FailClosed(app.StoreErrorReporter(slog.New(slog.NewJSONHandler(&logs, nil)), metrics, app.FailClosed)))
	called := false
	h := app.RateLimit(lim, app.HeaderTenants{Header: "X-Tenant-ID", Rule: domain.Rule{Limit: 1, Window: time.Minute}},
		app.RateLimitOptions{Metrics: metrics})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	if called || w.Code != 200 || w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("client gone: handler called %v, wrote %d %q %v; want nothing", called, w.Code, w.Body.String(), w.Header())
	}
	if logs.String() != "" {
		t.Errorf("client gone logged: %s", logs.String())
	}
	if got := storeErrors(t, reg); got != 0 {
		t.Errorf("tollgate_store_errors_total = %v, want 0", got)
	}
}

// storeErrors returns tollgate_store_errors_total from reg.
func storeErrors(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "tollgate_store_errors_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no tollgate_store_errors_total")
	return 0
}
