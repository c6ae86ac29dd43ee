package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/metrics"
)

// BenchmarkRateLimitMiddleware is one request through the proxy face with
// the memory store and metrics, into a handler that writes nothing.
func BenchmarkRateLimitMiddleware(b *testing.B) {
	c, _ := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
	defer c.Close()
	h := proxy.New(proxy.Options{
		Engine:   newEngine(c, domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}, nil),
		Metrics:  metrics.New(prometheus.NewRegistry(), "fixed_window"),
		Upstream: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
	})
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
