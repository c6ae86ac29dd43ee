package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestStoreErrorReporterCountsCallsNotRefusals: failed store calls are
// counted; decisions the open breaker refused without a call are logged
// with them (one line a second) but not counted.
func TestStoreErrorReporterCountsCallsNotRefusals(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var logs syncBuffer
	report := app.StoreErrorReporter(slog.New(slog.NewJSONHandler(&logs, nil)), app.NewMetrics(reg, "fixed_window"), app.FailLocal)
	for range 3 {
		report(errors.New("redis: i/o timeout"))
	}
	for range 5 {
		report(fmt.Errorf("decide: %w", layers.ErrBreakerOpen))
	}
	if got := storeErrors(t, reg); got != 3 {
		t.Errorf("tollgate_store_errors_total = %v after 3 failed calls and 5 refusals, want 3", got)
	}
	lines := logLines(t, logs.String(), "rate-limit store error; failing local: deciding in process")
	if len(lines) != 1 {
		t.Errorf("store-error lines = %d, want 1 (at most one a second): %s", len(lines), logs.String())
	}
}

// TestRateLimitLocalDecisions: the local fail mode's verdicts reach the
// client as decisions do, with the local budget in the headers.
func TestRateLimitLocalDecisions(t *testing.T) {
	t.Parallel()
	local := memory.NewFixedWindow(memory.Options{SweepInterval: -1})
	defer local.Close()
	failing := ports.LimiterFunc(func(context.Context, domain.Request) (domain.Verdict, error) {
		return domain.Verdict{}, layers.ErrBreakerOpen
	})
	lim := ports.Chain(failing, layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 2 }}))
	h := app.RateLimit(lim, app.HeaderTenants{Header: "X-Tenant-ID", Rule: domain.Rule{Limit: 3, Window: time.Minute}},
		app.RateLimitOptions{})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	for i, want := range []int{200, 200, 429} { // ⌈3/2⌉ = 2 per replica
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant-ID", "acme")
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("request %d: status %d, want %d", i+1, w.Code, want)
		}
		if got := w.Header()[app.HeaderRateLimitPolicy]; len(got) != 1 || got[0] != `"default";q=2;w=60` {
			t.Errorf("request %d: RateLimit-Policy %v, want the local budget q=2", i+1, got)
		}
		if want == 429 && w.Header().Get(app.HeaderRetryAfter) == "" {
			t.Errorf("local denial without Retry-After")
		}
	}
}
