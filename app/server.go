package app

import (
	"log/slog"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tollgate/tollgate/ports"
)

// NewServer returns the public listener's handler: every request is
// metered by lim against its tenant's budget (resolved by tenants), then
// handed to upstream, which is the reverse proxy or the echo responder.
func NewServer(log *slog.Logger, cfg Config, lim ports.Limiter, tenants TenantResolver, metrics *Metrics, upstream http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(RateLimit(lim, tenants, RateLimitOptions{
		KeyPrefix:  cfg.KeyPrefix,
		FailClosed: cfg.FailMode == FailClosed,
		Log:        log,
		Metrics:    metrics,
	}))
	addRoutes(r, upstream)
	return r
}

// addRoutes is the whole public HTTP surface: everything goes upstream.
func addRoutes(r chi.Router, upstream http.Handler) {
	r.Handle("/*", upstream)
}
