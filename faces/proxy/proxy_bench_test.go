package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/metrics"
)

// BenchmarkGatewayOverhead measures what tollgate adds to a reverse proxy:
// the same loopback upstream behind a bare httputil.ReverseProxy and
// behind tollgate's full public handler (chi, rate-limit middleware on the
// memory store, metrics, tenant resolution, NewUpstream), both served by
// httptest over loopback and driven by one keep-alive client, 1000
// tenants, GOMAXPROCS×16 concurrent requests. Each reports req/s and the
// p50 and p99 latency the client saw. Compare the two with medians of
// -count=5; client, proxy and upstream share the machine's cores.
func BenchmarkGatewayOverhead(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	}))
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("proxy=bare", func(b *testing.B) {
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.MaxIdleConnsPerHost = 256
		bare := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
			},
			Transport: transport,
		}
		benchProxy(b, bare)
	})
	b.Run("proxy=tollgate", func(b *testing.B) {
		store, _ := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
		defer store.Close()
		log := slog.New(slog.DiscardHandler)
		// A budget no run exhausts, so every request is proxied.
		benchProxy(b, proxy.New(proxy.Options{
			Engine:   newEngine(store, domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}, nil),
			Upstream: proxy.NewUpstream(target, proxy.UpstreamOptions{Timeout: 30 * time.Second, Log: log}),
			Log:      log,
			Metrics:  metrics.New(prometheus.NewRegistry(), domain.AlgorithmFixedWindow),
		}))
	})
}

// benchProxy serves h on loopback and sends it b.N GETs from many
// goroutines, spread over 1000 tenants.
func benchProxy(b *testing.B, h http.Handler) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 256
	client := &http.Client{Transport: transport}
	defer transport.CloseIdleConnections()
	tenants := make([]string, 1000)
	for i := range tenants {
		tenants[i] = "tenant-" + strconv.Itoa(i)
	}

	var (
		mu        sync.Mutex // guards latencies
		latencies = make([]time.Duration, 0, b.N)
		next      int
	)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		n := next
		next++
		mu.Unlock()
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/items?q=1", nil)
			if err != nil {
				b.Error(err)
				return
			}
			req.Header.Set("X-Tenant-ID", tenants[n%len(tenants)])
			n += 7
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			local = append(local, time.Since(t0))
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		latencies = append(latencies, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(latencies) == 0 {
		return
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(latencies[len(latencies)/2]), "p50-ns")
	b.ReportMetric(float64(latencies[len(latencies)*99/100]), "p99-ns")
}

// BenchmarkProxyHandler counts what one proxied request costs the
// gateway itself: the public handler (chi, path normalisation, the
// rate-limit middleware on the memory store, metrics, NewUpstream) against
// a bare httputil.ReverseProxy, both called directly with an in-memory
// upstream (a RoundTripper that answers "ok\n") and a ResponseWriter that
// discards, so no socket, client or server is in the numbers. Both sides
// pay the same fake upstream: compare allocs/op and B/op between them.
func BenchmarkProxyHandler(b *testing.B) {
	target, err := url.Parse("http://upstream.test")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proxy=bare", func(b *testing.B) {
		bare := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				pr.SetXForwarded()
			},
			Transport: okTransport{},
		}
		benchHandler(b, bare)
	})
	b.Run("proxy=tollgate", func(b *testing.B) {
		store, _ := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
		defer store.Close()
		log := slog.New(slog.DiscardHandler)
		benchHandler(b, proxy.New(proxy.Options{
			Engine:    newEngine(store, domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}, nil),
			Upstream:  proxy.NewUpstream(target, proxy.UpstreamOptions{Timeout: 30 * time.Second, Log: log, Transport: okTransport{}}),
			Describer: httpface.Describer{TenantHeader: "X-Tenant-Id"},
			Log:       log,
			Metrics:   metrics.New(prometheus.NewRegistry(), domain.AlgorithmFixedWindow),
		}))
	})
}

// okTransport is an upstream in memory: every request is answered 200
// "ok\n", as the gateway benchmark's nginx upstream answers.
type okTransport struct{}

func (okTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"text/plain"}, "Content-Length": {"3"}},
		ContentLength: 3,
		Body:          io.NopCloser(strings.NewReader("ok\n")),
		Request:       r,
	}, nil
}

// discardWriter is a ResponseWriter that keeps the header map and
// nothing else.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) Flush()                      {}

// benchHandler calls h with GETs of 1000 tenants from GOMAXPROCS
// goroutines, each with its own writer. The requests are made once and
// shared: handlers do not modify the request they are given.
func benchHandler(b *testing.B, h http.Handler) {
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		reqs[i] = httptest.NewRequest(http.MethodGet, "http://gateway.test/v1/items?q=1", nil)
		reqs[i].Header.Set("X-Tenant-ID", "tenant-"+strconv.Itoa(i))
		reqs[i].Header.Set("User-Agent", "bench")
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := &discardWriter{h: make(http.Header)}
		i := int(seed.Add(7919))
		for pb.Next() {
			i++
			clear(w.h)
			h.ServeHTTP(w, reqs[i%len(reqs)])
			if w.status != http.StatusOK {
				b.Errorf("status %d", w.status)
				return
			}
		}
	})
}
