package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"runtime"
	"strconv"
	"sync"
	"time"

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
	case StoreRedis:
		return newRedisBackend(ctx, cfg, log)
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

// newRedisBackend connects to cfg.RedisURL, checks the connection once
// (logging the outcome, and starting anyway when Redis is down: the fail
// mode covers that), and builds cfg.Algorithm on it.
func newRedisBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend, error) {
	client, err := newRedisClient(cfg)
	if err != nil {
		return backend{}, err
	}
	mode := checkRedis(ctx, client, cfg, log)
	opts := redis.Options{Timeout: cfg.RedisTimeout}
	be := backend{pinger: redisPinger{client}, closer: client}
	if cfg.Algorithm == AlgorithmFixedWindow {
		c := redis.NewCounter(client, redis.CounterOptions{Options: opts, Mode: mode})
		be.limiter, be.closer = FixedWindowLimiter{Counter: c}, closers{c, client}
		return be, nil
	}
	if be.limiter, err = newRedisLimiter(client, cfg); err != nil {
		client.Close()
		return backend{}, err
	}
	return be, nil
}

// redisStartupTimeout bounds the start-up check of Redis. It is longer
// than a decision's deadline (a first connection may need TLS), and short
// enough that a gateway whose Redis is unreachable still starts promptly.
const redisStartupTimeout = 2 * time.Second

// checkRedis asks Redis for its version, logs whether it answered, and
// returns the fixed-window mode for it: the pipeline with EXPIRE NX on
// Redis ≥ 7, the Lua script before. When Redis does not answer it returns
// ModeAuto: the counter then uses the script (correct on every version)
// and detects again after its first success. The URL is logged with its
// password masked; go-redis errors never contain it.
func checkRedis(ctx context.Context, client goredis.UniversalClient, cfg Config, log *slog.Logger) redis.Mode {
	ctx, cancel := context.WithTimeout(ctx, max(redisStartupTimeout, cfg.RedisTimeout))
	defer cancel()
	mode, err := redis.Detect(ctx, client)
	if err != nil {
		log.Warn("redis is not answering; starting anyway (TOLLGATE_FAIL_MODE applies until it does)",
			"redis_url", MaskURL(cfg.RedisURL), "err", err)
		return redis.ModeAuto
	}
	log.Info("redis answered", "redis_url", MaskURL(cfg.RedisURL), "fixed_window_mode", mode.String())
	return mode
}

// newRedisClient returns a go-redis client for cfg.RedisURL (redis://,
// rediss:// or unix://, credentials in the URL) tuned for a gateway. A
// setting given in the URL's query (pool_size=…, max_retries=…) wins over
// these defaults:
//
//   - ContextTimeoutEnabled: without it go-redis ignores context
//     deadlines, and TOLLGATE_REDIS_TIMEOUT would not bound a decision.
//   - Read/WriteTimeout = TOLLGATE_REDIS_TIMEOUT, so even a call without a
//     deadline cannot hang on a stalled Redis.
//   - MaxRetries: none. A retried INCR whose first attempt reached Redis
//     (reply lost to a timeout) counts the request twice, and within a
//     50 ms budget a retry rarely has time anyway; a failed attempt goes to
//     the fail mode instead.
//   - DialerRetries: one attempt, so a refused connection fails at once
//     instead of retrying with back-off for the whole deadline.
//   - PoolSize: 16 connections per core, at least 64: each in-flight
//     decision holds one for a round trip; MinIdleConns keeps a few warm.
func newRedisClient(cfg Config) (*goredis.Client, error) {
	opt, err := goredis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %w", MaskURL(cfg.RedisURL), err)
	}
	u, err := url.Parse(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis url %s: %w", MaskURL(cfg.RedisURL), err)
	}
	q := u.Query()
	set := func(name string, apply func()) {
		if !q.Has(name) {
			apply()
		}
	}
	procs := runtime.GOMAXPROCS(0)
	set("pool_size", func() { opt.PoolSize = max(64, 16*procs) })
	set("min_idle_conns", func() { opt.MinIdleConns = 2 * procs })
	set("max_retries", func() { opt.MaxRetries = -1 })
	set("read_timeout", func() { opt.ReadTimeout = cfg.RedisTimeout })
	set("write_timeout", func() { opt.WriteTimeout = cfg.RedisTimeout })
	set("dial_timeout", func() { opt.DialTimeout = max(2*cfg.RedisTimeout, time.Second) })
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	quietRedisLogs.Do(func() { goredis.SetLogger(discardLogger{}) })
	return goredis.NewClient(opt), nil
}

// quietRedisLogs silences go-redis's own logger, once per process: it
// prints a line per failed dial to stderr, which during an outage floods
// the log the contract limits to one store-error line per second. Every
// failure still reaches the gateway as an error, which the rate-limit
// middleware logs (throttled) and counts.
var quietRedisLogs sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// redisPinger is the /readyz check of the Redis store.
type redisPinger struct{ client goredis.UniversalClient }

func (p redisPinger) Ping(ctx context.Context) error {
	if err := p.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: ping: %w", err)
	}
	return nil
}

// closers closes each in order and joins the errors: the store's own
// resources first, then the client they use.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// validRedisURL reports whether s is a URL the Redis client accepts:
// redis://, rediss:// or unix://, a port in range, and only options
// go-redis knows. Config validation calls it, so a bad URL stops the
// process at start-up (exit 2) rather than when the store is built.
func validRedisURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch u.Scheme {
	case "redis", "rediss":
		if p := u.Port(); p != "" {
			if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
				return false
			}
		}
		if u.Hostname() == "" {
			return false
		}
	case "unix":
		if u.Path == "" {
			return false
		}
	default:
		return false
	}
	_, err = goredis.ParseURL(s)
	return err == nil
}
