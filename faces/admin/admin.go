// Package admin is tollgate's admin face: the listener of /healthz,
// /readyz and /metrics ([New]), and when wrapped in them the usage API
// ([WithUsage]) and /debug/pprof/ ([WithPprof]); never rate limited and
// never proxied.
package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/ports"
)

// New returns the admin listener's handler: /healthz (the
// process serves), /readyz (the store answers store.Ping within timeout;
// a failure is logged on log, at most one line a second, which may be
// nil) and /metrics (gatherer in Prometheus text format). It is never
// rate limited and never proxied.
func New(store ports.Pinger, timeout time.Duration, gatherer prometheus.Gatherer, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	notReady := &throttle.Log{Interval: time.Second}
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := store.Ping(ctx); err != nil {
			notReady.Do(func(n int64) {
				log.Warn("readyz: the store does not answer", "err", err, "probes_since_last_line", n)
			})
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("store unavailable\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return r
}

// WithPprof returns admin with net/http/pprof's handlers under
// /debug/pprof/ (TOLLGATE_PPROF): the index, cmdline, profile (CPU),
// symbol, trace, and every runtime profile by name (heap, allocs,
// goroutine, mutex, block).
func WithPprof(admin http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", admin)
	return mux
}
