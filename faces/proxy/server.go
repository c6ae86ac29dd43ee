// Package proxy is tollgate's reverse-proxy face: the public listener
// that meters every request through the decision engine and forwards
// what it admits to the upstream (or the built-in echo responder). It
// translates HTTP into the engine's described request and the verdict
// back into HTTP; it knows no store.
package proxy

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
)

// Options configure [New].
type Options struct {
	// Engine decides. Required.
	Engine *engine.Engine
	// Upstream receives the admitted requests: [NewUpstream]'s reverse
	// proxy or [Echo]. Required.
	Upstream http.Handler
	// Describer reads a request's credentials and client address.
	Describer httpface.Describer
	// AccessLog writes one line per request to Log.
	AccessLog bool
	// Log gets the access lines and one line per handler panic. Nil: none.
	Log *slog.Logger
	// Metrics records answers and upstream times. May be nil.
	Metrics httpface.Metrics
	// Now returns the time of the X-RateLimit-Reset header. Nil:
	// time.Now.
	Now func() time.Time
}

// New returns the public listener's handler: every request's path is
// normalised (a path that climbs above "/" is 400, see
// [httpface.Normalize]), then the request is metered by the engine
// against its tenant's budget, then handed to the upstream.
func New(opts Options) http.Handler {
	if opts.Engine == nil || opts.Upstream == nil {
		panic("proxy: New needs an engine and an upstream")
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	m := &meter{engine: opts.Engine, describe: opts.Describer, metrics: opts.Metrics, now: opts.Now, log: opts.Log}
	r := chi.NewRouter()
	r.Use(httpface.Recoverer(opts.Log))
	r.Use(responseIdleTimeout(ResponseIdleTimeout))
	if opts.AccessLog {
		r.Use(httpface.AccessLog(opts.Log.Handler(), nil, opts.Describer))
	}
	r.Use(refuseH2CUpgrade)
	r.Use(httpface.Normalize(opts.Metrics))
	r.Use(bodyIdleTimeout(BodyIdleTimeout))
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(next, w, r) })
	})
	addRoutes(r, opts.Upstream)
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
