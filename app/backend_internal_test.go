package app

import (
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis"
)

// TestNewRedisLimiter checks the algorithm switch; the limiters run
// against a real Redis in integration/.
func TestNewRedisLimiter(t *testing.T) {
	t.Parallel()
	client := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer client.Close()
	for algo, ok := range map[string]func(any) bool{
		AlgorithmSlidingLog:    func(l any) bool { _, ok := l.(*redis.SlidingLog); return ok },
		AlgorithmSlidingWindow: func(l any) bool { _, ok := l.(*redis.SlidingWindow); return ok },
		AlgorithmTokenBucket:   func(l any) bool { _, ok := l.(*redis.TokenBucket); return ok },
	} {
		l, err := newRedisLimiter(client, Config{Algorithm: algo})
		if err != nil || !ok(l) {
			t.Errorf("newRedisLimiter(%s) = %T, %v", algo, l, err)
		}
	}
	if _, err := newRedisLimiter(client, Config{Algorithm: AlgorithmFixedWindow}); err == nil {
		t.Errorf("newRedisLimiter(fixed_window): no error")
	}
}

func TestNewRedisClientOptions(t *testing.T) {
	t.Parallel()
	cfg := Config{RedisURL: "redis://:pw@redis:6379/2", RedisTimeout: 40 * time.Millisecond}
	c, err := newRedisClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.Options()
	if !o.ContextTimeoutEnabled {
		t.Error("ContextTimeoutEnabled = false: deadlines would be ignored")
	}
	if o.MaxRetries != 0 { // -1 normalised: no retry, so no double-counted INCR
		t.Errorf("MaxRetries = %d, want 0 after normalisation of -1", o.MaxRetries)
	}
	if o.ReadTimeout != cfg.RedisTimeout || o.WriteTimeout != cfg.RedisTimeout {
		t.Errorf("Read/WriteTimeout = %v/%v, want %v", o.ReadTimeout, o.WriteTimeout, cfg.RedisTimeout)
	}
	if o.DialTimeout < cfg.RedisTimeout || o.PoolSize < 64 || o.MinIdleConns < 1 {
		t.Errorf("DialTimeout %v, PoolSize %d, MinIdleConns %d: want >= timeout, >= 64, >= 1", o.DialTimeout, o.PoolSize, o.MinIdleConns)
	}
	if o.Password != "pw" || o.DB != 2 {
		t.Errorf("password/db from the URL not applied: %q/%d", o.Password, o.DB)
	}

	// Settings in the URL's query win.
	c2, err := newRedisClient(Config{RedisURL: "redis://redis:6379/0?pool_size=7&max_retries=2", RedisTimeout: cfg.RedisTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if o := c2.Options(); o.PoolSize != 7 || o.MaxRetries != 2 {
		t.Errorf("URL pool_size=7&max_retries=2: got %d, %d", o.PoolSize, o.MaxRetries)
	}
}
