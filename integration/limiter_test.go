package integration

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// redisLimiter is one limiter under test: a row of the table of
// algorithms on Redis.
type redisLimiter struct {
	name, algorithm string
}

// new returns l's limiter on c.
func (l redisLimiter) new(c *conn.Client, o redis.Options) ports.Limiter {
	lim, err := redis.New(c, l.algorithm, o)
	if err != nil {
		panic(err) // every row has a Redis limiter: adapters/redis's TestEveryAlgorithm
	}
	return lim
}

// redisLimiters are every row of the table on Redis.
var redisLimiters = func() []redisLimiter {
	var ls []redisLimiter
	for _, a := range domain.Algorithms {
		ls = append(ls, redisLimiter{a.Name, a.Name})
	}
	return ls
}()

// one is a request of cost 1 against one limit, stored under key.
func one(key string, rule domain.Rule) domain.Request {
	return domain.Request{Tenant: "it", Route: "default",
		Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: key, Cost: 1}}}
}

// limiterHarness runs l on rdb (one Redis or a cluster) in real time,
// with slack for the round trips between the test's sleeps and Redis's
// TIME, and for the time between two decisions the contract compares
// (100 ms apart seen beside a CPU hog).
func limiterHarness(rdb goredis.UniversalClient, l redisLimiter, window time.Duration) portstest.LimiterHarness {
	client := conn.NewClient(rdb, testConn)
	return portstest.LimiterHarness{
		New: func(t *testing.T) ports.Limiter {
			return l.new(client, redis.Options{Timeout: 5 * time.Second, Leases: newLeases(t, client, testLease)})
		},
		NewView: func(t *testing.T, v portstest.View) (ports.Limiter, error) {
			return redis.New(client, l.algorithm, redis.Options{Timeout: 5 * time.Second, Leases: newLeases(t, client, testLease),
				Counting: v.Counting, Windows: v.Windows})
		},
		Clock:     portstest.Sleeper{},
		Window:    window,
		Slack:     150 * time.Millisecond,
		Algorithm: l.algorithm,
		Keys:      keylayout.Layout{Prefix: portstest.KeyPrefix, Algorithm: l.algorithm},
		TTLs:      func(t *testing.T, key string) map[string]time.Duration { return keyTTLs(t, rdb, key) },
		Lease:     testLease,
	}
}

// testConn is the client options of the tests' limiters: their waits
// bounded as the limiters' own 5 s timeout, not the default second, so
// that a loaded machine's delays do not pass for a silent Redis.
var testConn = conn.Options{Timeout: 5 * time.Second}

// testLease is the lease of the concurrency slots the contract's tests
// take.
const testLease = 2 * time.Second

// newLeases returns the leases of a replica of its own on c, renewed
// until t ends.
func newLeases(t testing.TB, c *conn.Client, lease time.Duration) *fleet.Leases {
	ls := fleet.NewLeases(c, fleet.LeaseOptions{Lease: lease, Replica: "it-" + string(portstest.Tenant())})
	t.Cleanup(func() { ls.Close() })
	return ls
}

// keyTTLs returns every key that starts with key, and its PTTL.
func keyTTLs(t *testing.T, rdb goredis.UniversalClient, key string) map[string]time.Duration {
	t.Helper()
	pattern := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(key) + "*"
	ttls := map[string]time.Duration{}
	for _, k := range scanKeys(t, rdb, pattern) {
		ttl, err := rdb.PTTL(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		ttls[k] = ttl
	}
	return ttls
}

func TestRedisLimiterContract(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real time: seconds")
	}
	limiterContract(t, startRedis(t).Client, contractWindow)
}

// contractWindow is the window of the contract on Redis, in real time:
// a burst of the limit and one more (5 + 1 decisions) must fit in one
// refill of a token bucket, a fifth of it, on a loaded machine (a CPU
// hog beside the suite stalls the process for hundreds of ms), and half
// that refill must exceed twice the slack, or the contract skips its
// check that RetryAfter is not early; the waits the contract makes grow
// with it.
const contractWindow = 4 * time.Second

// TestClusterLimiterContract: the whole conformance suite, every
// algorithm, on a Redis Cluster of 3 masters.
func TestClusterLimiterContract(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real time: seconds")
	}
	// A longer window than on one Redis: the TTL check finds a tenant's
	// keys on its master after a dozen decisions, slower under -race.
	limiterContract(t, sharedClusterFor(t).Client, contractWindow+time.Second)
}

func limiterContract(t *testing.T, rdb goredis.UniversalClient, window time.Duration) {
	for _, l := range redisLimiters {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			portstest.TestLimiter(t, limiterHarness(rdb, l, window))
		})
	}
}

// TestRedisBoundaryBurst measures what each algorithm admits around a
// window's edge on Redis time. The sliding log is exact; the others'
// windows are aligned to the epoch, not to the test, so they vary by a
// request.
func TestRedisBoundaryBurst(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real time: seconds")
	}
	srv := startRedis(t)
	const limit = 10
	for _, l := range redisLimiters {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			// A window long enough that a burst's round trips (slow
			// under -race on a loaded machine) fit in the twentieth of
			// it before the edge (300 ms), and what refills meanwhile is
			// at most a token. At 3 s (150 ms) a slow burst spilled over
			// the edge: 14 admitted for fixed window.
			got := portstest.BoundaryBurst(t, limiterHarness(srv.Client, l, 6*time.Second), limit)
			t.Logf("%s: %d admitted across the edge, limit %d", l.name, got, limit)
			switch {
			case l.algorithm == domain.AlgorithmFixedWindow:
				// The known sharp edge: about twice the limit.
				if got < 2*limit-2 || got > 2*limit {
					t.Errorf("BoundaryBurst = %d, want about %d", got, 2*limit)
				}
				return
			case l.name == "sliding_log" && got != limit:
				t.Errorf("BoundaryBurst = %d, want exactly %d", got, limit)
			}
			if got > limit+2 {
				t.Errorf("BoundaryBurst = %d, want about %d", got, limit)
			}
		})
	}
}

// TestRedisLimiterSurvivesScriptFlush: after SCRIPT FLUSH (or a restart)
// EVALSHA fails with NOSCRIPT; the limiter falls back to EVAL at once,
// and the tenant's state is intact.
func TestRedisLimiterSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	survivesScriptFlush(t, startRedis(t).Client)
}

// TestClusterLimiterSurvivesScriptFlush: the same on every master of a
// cluster, as after a failover to a replica whose script cache is empty.
func TestClusterLimiterSurvivesScriptFlush(t *testing.T) {
	t.Parallel()
	survivesScriptFlush(t, sharedClusterFor(t).Client)
}

func survivesScriptFlush(t *testing.T, rdb goredis.UniversalClient) {
	rule := domain.Rule{Limit: 5, Window: time.Hour}
	for _, l := range redisLimiters {
		lim := l.new(conn.NewClient(rdb, testConn), redis.Options{Timeout: 5 * time.Second})
		key := keylayout.Key("it:flush:", domain.TenantID(l.name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)), l.algorithm, "", domain.DefaultLimit)
		for i := range int64(4) {
			if i == 2 {
				err := eachMaster(t.Context(), rdb, func(ctx context.Context, c *goredis.Client) error {
					return c.ScriptFlush(ctx).Err()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			v, err := lim.Allow(t.Context(), one(key, rule), nil)
			if err != nil {
				t.Fatalf("%s: request %d after SCRIPT FLUSH: %v", l.name, i+1, err)
			}
			d := v.Decisions[0]
			if !d.Allowed || d.Remaining != rule.Limit-i-1 {
				t.Errorf("%s: request %d: %+v, want allowed, remaining %d", l.name, i+1, d, rule.Limit-i-1)
			}
		}
	}
}

// TestRedisLimiterOneRoundTrip: every decision is one EVALSHA, and the
// script's commands are the ones docs/redis.md lists.
func TestRedisLimiterOneRoundTrip(t *testing.T) {
	// Not parallel: it reads the server's command statistics.
	oneRoundTrip(t, startRedis(t).Client)
}

// TestClusterLimiterOneRoundTrip: on a cluster too, one EVALSHA per
// decision, on the tenant's master: no CROSSSLOT, no redirect.
func TestClusterLimiterOneRoundTrip(t *testing.T) {
	// Not parallel: it reads the masters' command statistics, and the
	// tests that share the cluster run in parallel after it.
	oneRoundTrip(t, sharedClusterFor(t).Client)
}

func oneRoundTrip(t *testing.T, rdb goredis.UniversalClient) {
	rule := domain.Rule{Limit: 3, Window: time.Hour}
	for _, l := range redisLimiters {
		lim := l.new(conn.NewClient(rdb, testConn), redis.Options{Timeout: 5 * time.Second})
		key := keylayout.Key("it:rtt:", domain.TenantID(l.name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)), l.algorithm, "", domain.DefaultLimit)
		if _, err := lim.Allow(t.Context(), one(key, rule), nil); err != nil { // loads the script
			t.Fatal(err)
		}
		resetStats(t, rdb)
		const n = 5 // 2 admitted, 3 denied
		for range n {
			if _, err := lim.Allow(t.Context(), one(key, rule), nil); err != nil {
				t.Fatal(err)
			}
		}
		calls := commandCalls(t, rdb)
		if got := calls["evalsha"]; got != n {
			t.Errorf("%s: %d decisions ran EVALSHA %d times, want %d; commands %v", l.name, n, got, n, calls)
		}
		if got := calls["eval"]; got != 0 {
			t.Errorf("%s: EVAL ran %d times, want 0", l.name, got)
		}
		t.Logf("%s: %d decisions (2 admitted): %v", l.name, n, calls)
	}
}

// BenchmarkRedisLimiters measures every algorithm's decision on a real
// Redis, serially and from 64 goroutines over 1000 tenants, reporting
// decisions/s and the commands Redis ran per decision.
func BenchmarkRedisLimiters(b *testing.B) {
	srv := startRedis(b)
	opts, err := goredis.ParseURL(srv.URL)
	if err != nil {
		b.Fatal(err)
	}
	opts.PoolSize = 64
	client := goredis.NewClient(opts)
	b.Cleanup(func() { client.Close() })
	keys := make([]string, 1000)
	prefix := "it:bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	ctx := context.Background()
	for _, l := range redisLimiters {
		lim := l.new(conn.NewClient(client, conn.Options{}), redis.Options{Timeout: time.Second})
		reqs := make([]domain.Request, len(keys))
		for i, k := range keys {
			reqs[i] = one(k, rule)
		}
		if _, err := lim.Allow(ctx, reqs[0], nil); err != nil {
			b.Fatal(err)
		}
		b.Run(l.name+"/serial", func(b *testing.B) {
			srv.resetStats(b)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(ctx, reqs[i%len(reqs)], nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportRedisMetrics(b, srv, 0)
		})
		b.Run(l.name+"/parallel", func(b *testing.B) {
			srv.resetStats(b)
			var seq atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(7919))
				for pb.Next() {
					if _, err := lim.Allow(ctx, reqs[i%len(reqs)], nil); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			reportRedisMetrics(b, srv, 0)
		})
	}
}

// TestSlidingLogCostIsOneMember: on Redis a sliding log keeps one member
// per admitted request whatever its cost, so a decision's work does not
// grow with its cost (a member per unit made one cost of 10⁶ a million
// ZADDs inside one script, Redis blocked for every tenant meanwhile); its
// budget, Remaining and the shrinking of a limit stay exact.
func TestSlidingLogCostIsOneMember(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t).Client
	lim := redisLimiter{domain.AlgorithmSlidingLog, domain.AlgorithmSlidingLog}.new(conn.NewClient(rdb, testConn), redis.Options{Timeout: 5 * time.Second})
	key := "it:{" + string(portstest.Tenant()) + "}:sliding_log"
	huge := domain.Rule{Limit: 100_000_000, Window: time.Hour}
	req := one(key, huge)
	const million = 1_000_000
	req.Limits[0].Cost = million
	for i := range 3 {
		if d := portstest.MustDecide(t, lim, req); !d.Allowed || d.Remaining != huge.Limit-int64(i+1)*million {
			t.Fatalf("request %d of a million: %+v, want allowed, remaining %d", i+1, d, huge.Limit-int64(i+1)*million)
		}
	}
	if n := rdb.ZCard(t.Context(), key).Val(); n != 3 {
		t.Errorf("ZCARD after three requests of a million = %d, want 3", n)
	}
	// The limit shrinks to 1.5 million: the newest 1.5 million units
	// count, so a unit more is denied, and the set keeps the two newest.
	small := one(key, domain.Rule{Limit: 1_500_000, Window: time.Hour})
	if d := portstest.MustDecide(t, lim, small); d.Allowed || d.Remaining != 0 || d.RetryAfter < 59*time.Minute {
		t.Errorf("a unit after the limit shrank to 1.5 million: %+v, want denied for about an hour", d)
	}
	if n := rdb.ZCard(t.Context(), key).Val(); n != 2 {
		t.Errorf("ZCARD after the limit shrank = %d, want 2", n)
	}
	if ttl := rdb.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > huge.Window {
		t.Errorf("PTTL %v, want in (0, %v]", ttl, huge.Window)
	}
	// Shrunk into the newest member alone: the set is rewritten to that
	// one member, and keeps its TTL.
	tiny := one(key, domain.Rule{Limit: 500_000, Window: time.Hour})
	if d := portstest.MustDecide(t, lim, tiny); d.Allowed {
		t.Errorf("a unit after the limit shrank to half a million: %+v, want denied", d)
	}
	if n, ttl := rdb.ZCard(t.Context(), key).Val(), rdb.PTTL(t.Context(), key).Val(); n != 1 || ttl <= 0 || ttl > huge.Window {
		t.Errorf("after the limit shrank into one member: ZCARD %d, PTTL %v; want 1 and a TTL in (0, %v]", n, ttl, huge.Window)
	}
}
