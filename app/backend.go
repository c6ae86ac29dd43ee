package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/tollgate/tollgate/adapters"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/ports"
)

// backend is the store side of the gateway, built from the config: the
// Limiter the middleware sees (the store's, wrapped in its layers), the
// store's readiness check, and what to close at the end.
type backend struct {
	limiter ports.Limiter
	pinger  ports.Pinger
	closer  io.Closer
}

// newBackend is the composition root: the only place in tollgate that
// knows the adapters. It builds cfg.Algorithm on cfg.Store from the
// table of algorithms, and wraps it in the layers a request meets, in
// order: the fail mode, then the store.
//
// Without a policy file (one limit, cost 1) the fixed window runs the
// seed's design, over the store's Counter (INCR first, denied requests
// counted); with one, every algorithm decides all limits before it
// spends.
func newBackend(ctx context.Context, cfg Config, onStoreError func(error), log *slog.Logger) (backend, error) {
	algo, ok := adapters.Lookup(cfg.Algorithm)
	if !ok {
		return backend{}, fmt.Errorf("algorithm %q: not in the table", cfg.Algorithm) // Validate rejects it first
	}
	var be backend
	switch cfg.Store {
	case StoreMemory:
		opts := memory.Options{}
		if algo.MemoryCounter != nil && cfg.PolicyFile == "" {
			c := algo.MemoryCounter(opts)
			be = backend{limiter: adapters.SeedLimiter(c), pinger: alwaysUp{}, closer: c}
		} else {
			l := algo.Memory(opts)
			be = backend{limiter: l, pinger: alwaysUp{}, closer: l}
		}
	case StoreRedis:
		client, err := redis.Open(cfg.RedisURL, redis.ClientOptions{
			Timeout: cfg.RedisTimeout,
			Cluster: cfg.RedisMode == RedisCluster,
		})
		if err != nil {
			return backend{}, fmt.Errorf("redis url %s: %w", MaskURL(cfg.RedisURL), err)
		}
		checkRedis(ctx, client, cfg, log)
		opts := redis.Options{Timeout: cfg.RedisTimeout}
		be = backend{pinger: client, closer: client}
		if algo.RedisCounter != nil && cfg.PolicyFile == "" {
			be.limiter = adapters.SeedLimiter(algo.RedisCounter(client, opts))
		} else {
			be.limiter = algo.Redis(client, opts)
		}
	default:
		return backend{}, fmt.Errorf("store %q: not implemented", cfg.Store)
	}
	failMode := layers.FailOpen
	if cfg.FailMode == FailClosed {
		failMode = layers.FailClosed
	}
	be.limiter = ports.Chain(be.limiter, failMode(onStoreError))
	return be, nil
}

// alwaysUp is the Pinger of a store in process memory.
type alwaysUp struct{}

func (alwaysUp) Ping(context.Context) error { return nil }

// redisStartupTimeout bounds the start-up check of Redis. It is longer
// than a decision's deadline (a first connection may need TLS), and short
// enough that a gateway whose Redis is unreachable still starts promptly.
const redisStartupTimeout = 2 * time.Second

// checkRedis asks Redis for its version and logs whether it answered. A
// gateway whose Redis is down still starts: the fail mode covers that,
// and /readyz says so. The URL is logged with its secrets masked;
// go-redis errors never contain them.
func checkRedis(ctx context.Context, client *redis.Client, cfg Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, max(redisStartupTimeout, cfg.RedisTimeout))
	defer cancel()
	version, err := client.Version(ctx)
	if err != nil {
		log.Warn("redis is not answering; starting anyway (TOLLGATE_FAIL_MODE applies until it does)",
			"redis_url", MaskURL(cfg.RedisURL), "err", err)
		return
	}
	log.Info("redis answered", "redis_url", MaskURL(cfg.RedisURL), "redis_mode", cfg.RedisMode, "redis_version", version)
}
