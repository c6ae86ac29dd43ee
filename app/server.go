package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/ports"
)

// NewServer returns the public listener's handler: every request's path
// is normalised (a path that climbs above "/" is 400, see
// [domain.NormalizePath]), then the request is metered by lim against its
// tenant's budget (resolved by tenants), then handed to upstream, which is
// the reverse proxy or the echo responder. With cfg.AccessLog, one line
// per request goes to log's handler.
func NewServer(log *slog.Logger, cfg Config, lim ports.Limiter, tenants TenantResolver, metrics *Metrics, upstream http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(recoverer(log))
	if cfg.AccessLog {
		r.Use(accessLog(log.Handler(), nil))
	}
	r.Use(normalizePath(metrics))
	r.Use(bodyIdleTimeout(BodyIdleTimeout))
	r.Use(RateLimit(lim, tenants, RateLimitOptions{
		KeyPrefix: cfg.KeyPrefix,
		Algorithm: cfg.Algorithm,
		Metrics:   metrics,
		Log:       log,
	}))
	addRoutes(r, upstream)
	return r
}

// addRoutes is the whole public HTTP surface: everything goes upstream,
// whatever its method. chi routes only the methods it knows (and those
// registered with the global chi.RegisterMethod), answering 405 to the
// rest; a gateway must proxy any RFC 9110 token (PROPFIND, PURGE, a
// lowercase "get"), so the not-found and method-not-allowed handlers are
// the upstream too. The one route is "/" exactly, and every other path is
// "not found", that is the upstream as well: a catch-all "/*" would have
// chi set the path value "*" on every request (two allocations) that
// nothing reads.
func addRoutes(r chi.Router, upstream http.Handler) {
	r.Handle("/", upstream)
	r.NotFound(upstream.ServeHTTP)
	r.MethodNotAllowed(upstream.ServeHTTP)
}

// recoverer turns a panic in a handler into a 500 and one JSON log line,
// instead of a dropped connection and a stack trace on stderr.
// http.ErrAbortHandler is re-panicked: it is how a handler aborts a
// response on purpose (the reverse proxy does, when a client goes away).
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("handler panic", "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path,
					"stack", string(debug.Stack()))
				writeError(w, r, http.StatusInternalServerError, "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}
