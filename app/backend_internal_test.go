package app

import (
	"testing"

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
