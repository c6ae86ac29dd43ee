package proxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
	"github.com/tollgate/tollgate/ports"
)

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
	fc := newFakeStore()
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
			fc := newFakeStore()
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
	fc := newFakeStore()
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
		fc := newFakeStore()
		fc.left = tt.window
		w := serve(newLimited(fc, domain.Rule{Limit: 5, Window: tt.window}, limited{}), "acme")
		if got := strings.Join(w.Header()["RateLimit-Policy"], ","); got != tt.want {
			t.Errorf("window %v: RateLimit-Policy = %q, want %q", tt.window, got, tt.want)
		}
	}
}

func TestRateLimitRetryAfterAtLeastOneSecond(t *testing.T) {
	t.Parallel()
	fc := newFakeStore()
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
	fc := newFakeStore()
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
			fc := newFakeStore()
			fc.err = storeErr
			var errs atomic.Int64
			h := newLimited(fc, domain.Rule{Limit: 1, Window: time.Minute}, limited{
				failClosed: tt.failClosed,
				onError: func(err error) {
					if errors.Is(err, storeErr) {
						errs.Add(1)
					}
				},
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
			if n := errs.Load(); n != 500 {
				t.Errorf("500 store errors: the fail mode was told of %d, want 500 (the reporter logs one line a second: app)", n)
			}
		})
	}
}

func TestNewPanicsWithoutEngine(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("proxy.New without an engine did not panic")
		}
	}()
	proxy.New(proxy.Options{Upstream: proxy.Echo()})
}

func TestServerRecoversFromPanics(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	h := proxy.New(proxy.Options{Engine: newEngine(newFakeStore(), defaultRule, nil), Log: log,
		Upstream: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("kaboom") })})
	w := serve(h, "acme")
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "kaboom") {
		t.Errorf("panic answered %d %q, want 500 without the panic value", w.Code, w.Body.String())
	}
	if got := logtest.Lines(t, logs.String(), "handler panic"); len(got) != 1 || got[0]["panic"] != "kaboom" {
		t.Errorf("panic log lines = %v, want one with panic=kaboom", got)
	}
}

// TestRateLimitClientGoneIsNoStoreError: a client that disconnects while
// the store decides is not a store error: no metric, no log line, no
// answer.
func TestRateLimitClientGoneIsNoStoreError(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "fixed_window")
	var told atomic.Int64
	lim := ports.Chain(ports.LimiterFunc(func(ctx context.Context, _ domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		<-ctx.Done()
		return domain.Verdict{}, ctx.Err()
	}), layers.FailClosed(func(error) { told.Add(1); m.StoreError() }))
	called := false
	h := proxy.New(proxy.Options{Engine: newEngine(lim, domain.Rule{Limit: 1, Window: time.Minute}, nil), Metrics: m,
		Upstream: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	if called || w.Code != 200 || w.Body.Len() != 0 || len(w.Header()) != 0 {
		t.Errorf("client gone: handler called %v, wrote %d %q %v; want nothing", called, w.Code, w.Body.String(), w.Header())
	}
	if told.Load() != 0 {
		t.Errorf("client gone: the fail mode was told of %d store errors, want 0", told.Load())
	}
	if got := metricstest.Value(t, reg, "tollgate_store_errors_total"); got != 0 {
		t.Errorf("tollgate_store_errors_total = %v, want 0", got)
	}
}

// TestRateLimitLocalDecisions: the local fail mode's verdicts reach the
// client as decisions do, with the local budget in the headers.
func TestRateLimitLocalDecisions(t *testing.T) {
	t.Parallel()
	local, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	failing := ports.LimiterFunc(func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
		return domain.Verdict{}, ports.ErrBreakerOpen
	})
	lim := ports.Chain(failing, layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 2 }}))
	h := proxy.New(proxy.Options{Engine: newEngine(lim, domain.Rule{Limit: 3, Window: time.Minute}, nil),
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })})
	for i, want := range []int{200, 200, 429} { // ⌈3/2⌉ = 2 per replica
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant-ID", "acme")
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
		}
		if got := w.Header()[httpface.HeaderRateLimitPolicy]; len(got) != 1 || got[0] != `"default";q=2;w=60` {
			t.Errorf("request %d: RateLimit-Policy %v, want the local budget q=2", i+1, got)
		}
		if want == 429 && w.Header().Get(httpface.HeaderRetryAfter) == "" {
			t.Errorf("local denial without Retry-After")
		}
	}
}
