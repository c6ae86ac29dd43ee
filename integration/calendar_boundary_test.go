package integration

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// TestCalendarBoundaryOnRedis runs the calendar boundary contract on a
// real Redis, under every algorithm: the script picks the period by
// Redis's clock (TIME), so the harness reads that clock and waits for
// it, and checks each period key's PEXPIRETIME.
func TestCalendarBoundaryOnRedis(t *testing.T) {
	t.Parallel()
	calendarBoundary(t, startRedis(t).Client)
}

// TestCalendarBoundaryOnCluster: the same on a Redis Cluster, each key
// on its tenant's master (TIME asks any node: the containers share
// this host's clock).
func TestCalendarBoundaryOnCluster(t *testing.T) {
	t.Parallel()
	calendarBoundary(t, sharedClusterFor(t).Client)
}

func calendarBoundary(t *testing.T, rdb goredis.UniversalClient) {
	ctx := context.Background()
	now := func() time.Time {
		at, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatalf("TIME: %v", err)
		}
		return at
	}
	// until waits until a command sent next cannot reach Redis before
	// at, less lead: until Redis's TIME plus the shortest round trip seen
	// so far reads it (the round trip just measured, if a stall stretched
	// it, would end the wait early, and a decision would land before the
	// boundary it is meant to follow). A loaded machine can only delay
	// the decision after that: the checks' slack takes it.
	var fastest atomic.Int64 // the shortest TIME round trip, ns
	fastest.Store(int64(time.Hour))
	// Generous: Docker's port proxy and a loaded machine put tens to
	// hundreds of ms between a wait and its decision (435 ms seen beside
	// a CPU hog). The harness aims half the slack from the boundary,
	// and the wait ends lead early, so that a decision lands 50 ms or
	// more from the boundary on the side it is meant for, and may come
	// 750 ms late; landing anywhere within it tests the same.
	const slack = 800 * time.Millisecond
	const lead = slack/2 - 50*time.Millisecond
	until := func(at time.Time) {
		at = at.Add(-lead)
		for {
			sent := time.Now()
			rt := now()
			rtt := time.Since(sent)
			if f := fastest.Load(); int64(rtt) < f {
				fastest.CompareAndSwap(f, int64(rtt)) // lost to another: close enough
			}
			left := at.Sub(rt) - time.Duration(fastest.Load())
			if left <= 0 {
				return
			}
			if left > 5*time.Millisecond {
				time.Sleep(left - 2*time.Millisecond)
			}
		}
	}
	client := conn.NewClient(rdb, testConn)
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
				Slack: slack,
				Keys:  keylayout.Layout{Prefix: portstest.KeyPrefix, Algorithm: a.Name},
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
