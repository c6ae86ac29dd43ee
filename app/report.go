package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

// What the wiring says about the store: the start-up check of Redis, and
// the throttled report of store errors.

// redisStartupTimeout bounds the start-up check of Redis. It is longer
// than a decision's deadline (a first connection may need TLS), and short
// enough that a gateway whose Redis is unreachable still starts promptly.
const redisStartupTimeout = 2 * time.Second

// redisChecker is what checkRedis asks of the Redis client
// (*conn.Client, which only backend.go sees).
type redisChecker interface {
	// Warm opens and verifies the connections decisions will use.
	Warm(ctx context.Context) error
	// Version is the server's version.
	Version(ctx context.Context) (string, error)
}

// checkRedis opens and verifies the connections the decisions will use
// (Warm: a burst right after start-up finds them open), asks
// Redis for its version and logs whether it answered. A gateway whose
// Redis is down still starts: the fail mode covers that, and /readyz says
// so until the connections are up. The URL is logged with its secrets
// masked; go-redis errors never contain them.
func checkRedis(ctx context.Context, client redisChecker, cfg Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, max(redisStartupTimeout, cfg.RedisTimeout))
	defer cancel()
	err := client.Warm(ctx)
	var version string
	if err == nil {
		version, err = client.Version(ctx)
	}
	if err != nil {
		log.Warn("redis is not answering; starting anyway (TOLLGATE_FAIL_MODE applies until it does)",
			"redis_url", MaskURL(cfg.RedisURL), "err", err)
		return
	}
	log.Info("redis answered", "redis_url", MaskURL(cfg.RedisURL), "redis_mode", cfg.RedisMode, "redis_version", version)
}

// storeErrorReporter returns what the fail-mode layer, the slot leases
// and the replica count call on every store error: it counts failed
// store calls and logs at most one line a second per process, however
// many requests fail; each line says how many errors it stood for. A
// decision the open breaker refused ([ports.ErrBreakerOpen]) is logged
// with them but not counted: no call was made.
func storeErrorReporter(log *slog.Logger, m *metrics.Metrics, failMode string) func(error) {
	tl := &throttle.Log{Interval: time.Second}
	msg := "rate-limit store error; failing " + failMode
	switch failMode {
	case FailOpen:
		msg += ": admitting"
	case FailClosed:
		msg += ": answering 503"
	case FailLocal:
		msg += ": deciding in process"
	}
	return func(err error) {
		if !errors.Is(err, ports.ErrBreakerOpen) {
			m.StoreError()
		}
		tl.Do(func(n int64) { log.Error(msg, "err", err, "errors_since_last_line", n) })
	}
}

// probeErrorReporter returns what the breaker calls on every failed ping
// of the store: no request waits on one and none is decided by it, so it
// is neither a store error of a decision nor logged as one. It counts
// them apart (tollgate_store_probe_failures_total) and logs at most one
// warning a second, which says how many failed pings it stood for.
func probeErrorReporter(log *slog.Logger, m *metrics.Metrics) func(error) {
	tl := &throttle.Log{Interval: time.Second}
	return func(err error) {
		m.StoreProbeFailed()
		tl.Do(func(n int64) {
			log.Warn("rate-limit store probe failed; the store still does not answer", "err", err, "probes_since_last_line", n)
		})
	}
}
