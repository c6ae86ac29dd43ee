package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/metrics"
)

// keyTrust is how long after its last read of a shared key store a
// replica still resolves the runtime API keys it holds: a revocation it
// may have missed stops resolving here within that.
const keyTrust = time.Second

// newKeyRing returns the ring of the API keys issued at runtime on be's
// store, read once: nil without TOLLGATE_ADMIN_TOKEN (no key API, and
// only the tenants file's keys resolve). On a store other replicas
// share, the ring trusts what it holds for keyTrust after its last read.
func newKeyRing(ctx context.Context, cfg Config, be backend, reg prometheus.Registerer, log *slog.Logger) *engine.KeyRing {
	if cfg.AdminToken == "" || be.apiKeys == nil {
		return nil
	}
	opts := engine.KeyRingOptions{Store: be.apiKeys, Log: log, OnRead: metrics.NewKeys(reg).Read}
	if be.shared {
		opts.Trust = keyTrust
	}
	ring := engine.NewKeyRing(opts)
	// Bounded as the start-up check of Redis is; Run reads again every
	// 100ms, and a failure is logged.
	sctx, cancel := context.WithTimeout(ctx, max(redisStartupTimeout, cfg.RedisTimeout))
	defer cancel()
	_ = ring.Sync(sctx)
	return ring
}

// withKeyAPI returns h with the key API when eng has a key ring.
func withKeyAPI(h http.Handler, cfg Config, eng *engine.Engine, m *metrics.Metrics, log *slog.Logger) http.Handler {
	if eng.KeyRing() == nil {
		return h
	}
	return admin.WithKeys(h, admin.KeysOptions{Engine: eng, Token: cfg.AdminToken, Log: log, Count: m.AdminAction})
}
