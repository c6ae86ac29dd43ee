package redis_test

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// testRedisURL names a Redis these tests may write to (keys under
// portstest:, each with a TTL): TOLLGATE_TEST_REDIS_URL, such as
// redis://127.0.0.1:6379/0. Without it they skip; integration/ runs the
// rest of the contract on Redis in containers.
func testRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("TOLLGATE_TEST_REDIS_URL")
	if u == "" || testing.Short() {
		t.Skip("no TOLLGATE_TEST_REDIS_URL (or -short): needs a Redis server")
	}
	return u
}

// TestCalendarBoundaryOnRedis runs the calendar boundary contract on a
// real Redis, under every algorithm: the script picks the period by
// Redis's clock (TIME), so the harness reads that clock and waits for
// it, and checks each period key's PEXPIRETIME.
func TestCalendarBoundaryOnRedis(t *testing.T) {
	t.Parallel()
	opts, err := goredis.ParseURL(testRedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := goredis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	now := func() time.Time {
		at, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return at
	}
	// until waits until a command sent next reaches Redis at about at:
	// until TIME, plus the round trip it took, reads at.
	until := func(at time.Time) {
		for {
			sent := time.Now()
			rt := now()
			rtt := time.Since(sent)
			left := at.Sub(rt) - rtt
			if left <= 0 {
				return
			}
			if left > 5*time.Millisecond {
				time.Sleep(left - 2*time.Millisecond)
			}
		}
	}
	client := redis.NewClient(rdb)
	for _, a := range domain.Algorithms {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			portstest.TestCalendarBoundary(t, portstest.CalendarHarness{
				New: func(t *testing.T) ports.Limiter {
					l, err := redis.New(client, a.Name, redis.Options{Timeout: 5 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				Now:   now,
				Until: until,
				Slack: 20 * time.Millisecond,
				ExpireAt: func(t *testing.T, key string) (time.Time, bool) {
					d, err := rdb.PExpireTime(ctx, key).Result()
					if err != nil {
						t.Fatalf("PEXPIRETIME %s: %v", key, err)
					}
					return time.UnixMilli(d.Milliseconds()), d > 0
				},
			})
		})
	}
}
