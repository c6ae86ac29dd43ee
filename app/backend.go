package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/ports"
)

// backend is the store side of the gateway, built from the config.
type backend struct {
	limiter ports.Limiter
	pinger  ports.Pinger
	closer  io.Closer
}

// newBackend is the composition root: the only place in tollgate that
// knows the adapters. It picks the store and algorithm from cfg.
func newBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend, error) {
	switch cfg.Store {
	case StoreMemory:
		return newMemoryBackend(cfg)
	}
	return backend{}, fmt.Errorf("store %q: not implemented", cfg.Store)
}

func newMemoryBackend(cfg Config) (backend, error) {
	opts := memory.Options{}
	var (
		lim    ports.Limiter
		closer io.Closer
	)
	switch cfg.Algorithm {
	case AlgorithmFixedWindow:
		c := memory.NewCounter(opts)
		lim, closer = FixedWindowLimiter{Counter: c}, c
	case AlgorithmSlidingLog:
		l := memory.NewSlidingLog(opts)
		lim, closer = l, l
	case AlgorithmSlidingWindow:
		l := memory.NewSlidingWindow(opts)
		lim, closer = l, l
	case AlgorithmTokenBucket:
		l := memory.NewTokenBucket(opts)
		lim, closer = l, l
	default:
		return backend{}, fmt.Errorf("algorithm %q on the memory store: not implemented", cfg.Algorithm)
	}
	return backend{limiter: lim, pinger: alwaysUp{}, closer: closer}, nil
}

// newRedisLimiter returns the Redis limiter of cfg.Algorithm on client,
// for every algorithm but the fixed window (a FixedWindowLimiter over the
// Redis Counter). Each decision is one script run, bounded by
// TOLLGATE_REDIS_TIMEOUT. The caller owns and closes client.
func newRedisLimiter(client goredis.UniversalClient, cfg Config) (ports.Limiter, error) {
	opts := redis.Options{Timeout: cfg.RedisTimeout}
	switch cfg.Algorithm {
	case AlgorithmSlidingLog:
		return redis.NewSlidingLog(client, opts), nil
	case AlgorithmSlidingWindow:
		return redis.NewSlidingWindow(client, opts), nil
	case AlgorithmTokenBucket:
		return redis.NewTokenBucket(client, opts), nil
	}
	return nil, fmt.Errorf("algorithm %q on the redis store: not a script limiter", cfg.Algorithm)
}

// alwaysUp is the Pinger of a store in process memory.
type alwaysUp struct{}

func (alwaysUp) Ping(context.Context) error { return nil }
