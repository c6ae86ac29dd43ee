package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters/fixedwindow"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/domain"
)

// BenchmarkRateLimitMiddleware is one request through the middleware with
// the memory store and metrics, into a handler that writes nothing.
func BenchmarkRateLimitMiddleware(b *testing.B) {
	c := memory.NewCounter(memory.Options{})
	defer c.Close()
	mw := app.RateLimit(fixedwindow.Limiter{Counter: c},
		app.HeaderTenants{Header: "X-Tenant-ID", Rule: domain.Rule{Limit: 1 << 40, Window: time.Hour}},
		app.RateLimitOptions{KeyPrefix: "rl:", Metrics: app.NewMetrics(prometheus.NewRegistry(), "fixed_window")})
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var seed atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seed.Add(7919))
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		for pb.Next() {
			i++
			r.Header.Set("X-Tenant-ID", "tenant-"+strconv.Itoa(i%1000))
			clear(w.Header())
			h.ServeHTTP(w, r)
		}
	})
}
