package integration

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

var prefixID atomic.Int64

// uniquePrefix returns a key prefix no other test of this run uses.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("it:%d:%s:", prefixID.Add(1), strings.ReplaceAll(t.Name(), "/", "."))
}

func newCounter(s *redisServer) *redis.Counter {
	return redis.NewCounter(redis.NewClient(s.Client), redis.Options{Timeout: 5 * time.Second})
}

// forEachMode runs test against srv with a fresh counter and a key
// prefix of its own.
func forEachMode(t *testing.T, srv *redisServer, test func(t *testing.T, c *redis.Counter, prefix string)) {
	t.Helper()
	test(t, newCounter(srv), uniquePrefix(t))
}

func TestRedisCounterContract(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	portstest.TestCounter(t, portstest.CounterHarness{
		New:    func(t *testing.T) ports.Counter { return newCounter(srv) },
		Clock:  portstest.Sleeper{},
		Window: 400 * time.Millisecond,
		Slack:  50 * time.Millisecond,
	})
}

// TestRedisCounterStorm: concurrent decisions on one key admit exactly
// the limit, and leave no key without a TTL.
func TestRedisCounterStorm(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	forEachMode(t, srv, func(t *testing.T, c *redis.Counter, prefix string) {
		lim := adapters.SeedLimiter(c)
		rule := domain.Rule{Limit: 50, Window: time.Minute}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				d, err := lim.Allow(t.Context(), one(fmt.Sprintf("%stenant-%d", prefix, i%2), rule))
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if got, want := admitted.Load(), int64(2*50); got != want {
			t.Errorf("admitted %d of 200 requests over two tenants with limit 50, want %d", got, want)
		}
		if n := srv.checkTTLs(t, prefix+"*", 2*rule.Window); n != 2 {
			t.Errorf("found %d keys under %s*, want 2", n, prefix)
		}
	})
}

// TestRedisCounterCommandsPerDecision: each decision is one EVALSHA
// running INCR and PTTL, with PEXPIRE only on a window's first hit.
func TestRedisCounterCommandsPerDecision(t *testing.T) {
	t.Parallel()
	srv := startRedis(t) // its own server: CONFIG RESETSTAT is global
	const keys, perKey = 10, 20
	const decisions = keys * perKey
	want := map[string]int64{"incr": decisions, "pexpire": keys, "pttl": decisions, "evalsha": decisions, "eval": 0}
	{
		{
			c := newCounter(srv)
			prefix := uniquePrefix(t)
			if _, _, err := c.Incr(t.Context(), prefix+"warm-up", time.Minute); err != nil {
				t.Fatal(err) // loads the script; not counted
			}
			srv.resetStats(t)
			for i := range decisions {
				if _, _, err := c.Incr(t.Context(), fmt.Sprintf("%s%d", prefix, i%keys), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			got := srv.commandCalls(t)
			for cmd, n := range want {
				if got[cmd] != n {
					t.Errorf("%d decisions on %d keys: %s called %d times, want %d (all: %v)", decisions, keys, cmd, got[cmd], n, got)
				}
			}
		}
	}
}

// TestRedisCounterRepairsKeyWithoutTTL: a key that somehow has no TTL is
// given one by the next increment, never left to count forever.
func TestRedisCounterRepairsKeyWithoutTTL(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	forEachMode(t, srv, func(t *testing.T, c *redis.Counter, prefix string) {
		key := prefix + "immortal"
		if err := srv.Client.Set(t.Context(), key, 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		n, left, err := c.Incr(t.Context(), key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if n != 6 || left <= 0 || left > time.Minute {
			t.Errorf("Incr of a key without TTL = %d, %v; want 6, (0, 1m]", n, left)
		}
		if ttl := srv.Client.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL after Incr = %v, want (0, 1m]", ttl)
		}
	})
}

// TestRedisCounterWrapsErrors: a store error names the key.
func TestRedisCounterWrapsErrors(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	forEachMode(t, srv, func(t *testing.T, c *redis.Counter, prefix string) {
		key := prefix + "list"
		if err := srv.Client.RPush(t.Context(), key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.Incr(t.Context(), key, time.Minute)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("redis: incr %q", key)) || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("Incr of a list: err = %v, want redis: incr %q: WRONGTYPE…", err, key)
		}
	})
}
