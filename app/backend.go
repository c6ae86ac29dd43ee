package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
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
	closers []io.Closer // closed in order: the layers' goroutines, then the store
}

// Close closes what the backend holds, in order, and returns the errors.
func (be backend) Close() error {
	var errs []error
	for _, c := range be.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// newBackend is the composition root: the only place in tollgate that
// knows the adapters. It builds cfg.Algorithm on cfg.Store from the
// table of algorithms, and wraps it in the layers a request meets, in
// order: the deny cache (TOLLGATE_DENY_CACHE), the fail mode (open,
// closed, or local: the same algorithm in memory, limits divided by the
// replicas), the breaker (Redis only: the memory store does not fail),
// then the store.
//
// Without a policy file (one limit, cost 1) the fixed window runs the
// seed's design, over the store's Counter (INCR first, denied requests
// counted); with one, every algorithm decides all limits before it
// spends.
func newBackend(ctx context.Context, cfg Config, onStoreError func(error), metrics *Metrics, log *slog.Logger) (backend, error) {
	algo, ok := adapters.Lookup(cfg.Algorithm)
	if !ok {
		return backend{}, fmt.Errorf("algorithm %q: not in the table", cfg.Algorithm) // Validate rejects it first
	}
	var (
		be       backend
		store    ports.Limiter
		breaker  []ports.Layer // at most one
		replicas = func() int { return 1 }
	)
	switch cfg.Store {
	case StoreMemory:
		opts := memory.Options{}
		if algo.MemoryCounter != nil && cfg.PolicyFile == "" {
			c := algo.MemoryCounter(opts)
			store, be = adapters.SeedLimiter(c), backend{pinger: alwaysUp{}, closers: []io.Closer{c}}
		} else {
			l := algo.Memory(opts)
			store, be = l, backend{pinger: alwaysUp{}, closers: []io.Closer{l}}
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
		if algo.RedisCounter != nil && cfg.PolicyFile == "" {
			store = adapters.SeedLimiter(algo.RedisCounter(client, opts))
		} else {
			store = algo.Redis(client, opts)
		}
		b := layers.NewBreaker(layers.BreakerOptions{
			Probe:        client,
			Timeout:      cfg.RedisTimeout,
			OnProbeError: onStoreError,
			OnChange:     metrics.setStoreUp,
		})
		breaker = append(breaker, b.Layer())
		be = backend{pinger: client, closers: []io.Closer{b}}
		if cfg.FailMode == FailLocal && cfg.Replicas == 0 {
			count := layers.NewReplicaCount(layers.ReplicaCountOptions{
				Announcer: redis.NewReplicas(client, cfg.KeyPrefix),
				ID:        replicaID(),
				OnError:   onStoreError,
				OnCount:   metrics.setReplicas,
			})
			replicas = count.N
			be.closers = append(be.closers, count) // withdraws before the client closes
		}
		be.closers = append(be.closers, client)
	default:
		return backend{}, fmt.Errorf("store %q: not implemented", cfg.Store)
	}
	if cfg.Replicas > 0 {
		replicas = func() int { return cfg.Replicas }
		metrics.setReplicas(cfg.Replicas)
	}

	var failMode ports.Layer
	switch cfg.FailMode {
	case FailClosed:
		failMode = layers.FailClosed(onStoreError)
	case FailLocal:
		local := algo.Memory(memory.Options{})
		be.closers = append(be.closers, local)
		failMode = layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: replicas, OnError: onStoreError})
	default:
		failMode = layers.FailOpen(onStoreError)
	}
	var outer []ports.Layer
	if cfg.DenyCache {
		outer = append(outer, layers.DenyCache(layers.DenyCacheOptions{}))
	}
	be.limiter = ports.Chain(store, slices.Concat(outer, []ports.Layer{failMode}, breaker)...)
	return be, nil
}

// replicaID names this process among the replicas: host, process id and
// random bits, so that two processes never share one.
func replicaID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
}

// alwaysUp is the Pinger of a store in process memory.
type alwaysUp struct{}

func (alwaysUp) Ping(context.Context) error { return nil }

// redisStartupTimeout bounds the start-up check of Redis. It is longer
// than a decision's deadline (a first connection may need TLS), and short
// enough that a gateway whose Redis is unreachable still starts promptly.
const redisStartupTimeout = 2 * time.Second

// checkRedis opens and verifies the connections the decisions will use
// (redis.Client.Warm: a burst right after start-up finds them open), asks
// Redis for its version and logs whether it answered. A gateway whose
// Redis is down still starts: the fail mode covers that, and /readyz says
// so until the connections are up. The URL is logged with its secrets masked;
// go-redis errors never contain them.
func checkRedis(ctx context.Context, client *redis.Client, cfg Config, log *slog.Logger) {
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
