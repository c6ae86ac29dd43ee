package integration

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// TestRedisSlidingWindowWeighsThePreviousWindow: in the window after one
// that admitted p units, a request sees them weighted by the part of the
// previous window still inside its sliding window, rounded down: its
// remaining is limit − 1 − ⌊p × (w − e)/w⌋ at the elapsed e of its
// decision, which the test brackets with this host's clock (Redis's, in
// a container on the same kernel).
func TestRedisSlidingWindowWeighsThePreviousWindow(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim := redisLimiter{algorithm: domain.AlgorithmSlidingWindow}.new(conn.NewClient(srv.Client, testConn), redis.Options{Timeout: 5 * time.Second})
	const w, limit, p = 2 * time.Second, 100, 40
	rule := domain.Rule{Limit: limit, Window: w}
	key := uniquePrefix(t) + "{it}"
	into := func(at time.Time) time.Duration { return time.Duration(at.UnixNano() % int64(w)) }
	// The p units, early in a window (windows are aligned to the epoch).
	if e := into(time.Now()); e > w/2 {
		time.Sleep(w - e)
	}
	fill := one(key, rule)
	fill.Limits[0].Cost = p
	if v, err := lim.Allow(t.Context(), fill, nil); err != nil || !v.Allowed {
		t.Fatalf("the first %d units: %+v, %v; want admitted", p, v, err)
	}
	// A quarter into the next window.
	time.Sleep(w - into(time.Now()) + w/4)
	before := into(time.Now())
	v, err := lim.Allow(t.Context(), one(key, rule), nil)
	after := into(time.Now())
	if err != nil || !v.Allowed {
		t.Fatalf("a unit in the next window: %+v, %v; want admitted", v, err)
	}
	if after < before {
		t.Fatalf("the decision straddled a window boundary (%v → %v): rerun", before, after)
	}
	weighted := func(e time.Duration) int64 { return int64(p) * int64(w-e) / int64(w) }
	lo, hi := limit-1-weighted(before), limit-1-weighted(after)
	if got := v.Decisions[0].Remaining; got < lo || got > hi {
		t.Errorf("remaining %d between %v and %v into the window after %d units, want %d to %d", got, before, after, p, lo, hi)
	}
}
