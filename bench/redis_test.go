package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
)

// The Redis benchmarks run against one local redis-server on loopback,
// named by TOLLGATE_BENCH_REDIS (host:port); `make bench` starts one and
// sets it. Without it they skip.
//
//	BenchmarkRedis/g=64/impl=tollgate-fixed_window
//
// is 64 goroutines over 1000 tenants deciding on tollgate's fixed
// window (the gateway's default: the one limit without a policy file, counting denials). Besides ns/op and
// allocations each reports decisions/s (those that came back without an
// error), p50-µs and p99-µs (the latency of one decision, as its caller
// sees it, failed ones included) and errors/op.

// redisGoroutines are the concurrent callers of BenchmarkRedis.
var redisGoroutines = []int{1, 64, 512}

// redisTimeout is the per-decision deadline: the gateway's default
// (TOLLGATE_REDIS_TIMEOUT).
const redisTimeout = 250 * time.Millisecond

func redisAddr(b *testing.B) string {
	addr := os.Getenv("TOLLGATE_BENCH_REDIS")
	if addr == "" {
		b.Skip("TOLLGATE_BENCH_REDIS (host:port of a local redis-server) not set: `make bench` starts one")
	}
	return addr
}

// decideFunc is one decision for tenant i; each limiter is wrapped as one.
type decideFunc func(ctx context.Context, i int) error

// peerClient is a plain go-redis client for the peers and the INCR
// floor, with a connection per goroutine: each in-flight call holds one.
func peerClient(b *testing.B, addr string, goroutines int) *goredis.Client {
	rdb := goredis.NewClient(&goredis.Options{
		Addr:                  addr,
		PoolSize:              goroutines + 8,
		MinIdleConns:          min(goroutines, 64),
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

// tollgateRedis returns tollgate's algo on a client opened as the
// gateway opens it (conn.Open), with batching.
func tollgateRedis(algo string, batching batching) func(*testing.B, string, int) decideFunc {
	return tollgateLanes(algo, batching, 0)
}

// tollgateLanes is tollgateRedis with lanes concurrent round trips (0:
// the default).
func tollgateLanes(algo string, batching batching, lanes int) func(*testing.B, string, int) decideFunc {
	return tollgateLimits(algo, batching, lanes, oneLimit)
}

// limitsFunc builds the limits of tenant t's request on algo.
type limitsFunc func(t domain.TenantID, algo string) []domain.Limit

// oneLimit is the gateway's default: the one limit without a policy
// file.
func oneLimit(t domain.TenantID, algo string) []domain.Limit {
	return []domain.Limit{{Name: domain.DefaultLimit, Rule: domain.Rule{Limit: limit, Window: window},
		Key: keylayout.Key("bench:", t, algo, "", domain.DefaultLimit)}}
}

// threeLimits is a policy's usual shape: per second, per minute and per
// hour, decided together in one script.
func threeLimits(t domain.TenantID, algo string) []domain.Limit {
	var ls []domain.Limit
	for i, name := range []string{"per-second", "per-minute", "per-hour"} {
		w := []time.Duration{time.Second, time.Minute, time.Hour}[i]
		ls = append(ls, domain.Limit{Name: name, Rule: domain.Rule{Limit: limit * int64(w/time.Second), Window: w},
			Key: keylayout.Key("bench:", t, algo, "", name)})
	}
	return ls
}

// paris is the zone of the monthly quota, loaded once as the gateway
// loads each zone once.
var paris = func() *time.Location {
	loc, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		panic(err)
	}
	return loc
}()

// monthly is one calendar quota, a month in Europe/Paris: a fixed window
// over the period, whatever the algorithm.
func monthly(t domain.TenantID, _ string) []domain.Limit {
	return []domain.Limit{{Name: "monthly", Rule: domain.Rule{Limit: 1 << 40, Window: domain.NominalWindow(domain.PeriodMonth)},
		Calendar: &domain.Calendar{Unit: domain.PeriodMonth, Location: paris},
		Key:      keylayout.Key("bench:", t, domain.AlgorithmFixedWindow, "", "monthly")}}
}

// tollgateLimits is tollgateLanes with each tenant's limits built by
// limits.
func tollgateLimits(algo string, batching batching, lanes int, limits limitsFunc) func(*testing.B, string, int) decideFunc {
	return func(b *testing.B, addr string, _ int) decideFunc {
		// As the gateway: its default limit on the fixed window counts
		// denials, a policy's limits (several, a calendar quota) are all
		// or nothing.
		counting := domain.CountAdmitted
		if ls := limits("tenant-0", algo); len(ls) == 1 && ls[0].Name == domain.DefaultLimit && algo == domain.AlgorithmFixedWindow {
			counting = domain.CountEvery
		}
		lim := openTollgate(b, addr, algo, batching, lanes, counting)
		reqs := make([]domain.Request, tenants)
		for i := range reqs {
			t := domain.TenantID("tenant-" + strconv.Itoa(i))
			ls := limits(t, algo)
			for j := range ls {
				ls[j].Cost = 1
			}
			reqs[i] = domain.Request{Tenant: t, Route: "default", Limits: ls}
		}
		return func(ctx context.Context, i int) error {
			v, err := lim.Allow(ctx, reqs[i], nil)
			if err == nil && !v.Allowed {
				err = fmt.Errorf("tenant %d denied", i)
			}
			return err
		}
	}
}

// tollgatePeek is a usage read of each tenant's limits: the script in
// peek mode, nothing written.
func tollgatePeek(algo string, limits limitsFunc) func(*testing.B, string, int) decideFunc {
	return func(b *testing.B, addr string, _ int) decideFunc {
		lim := openTollgate(b, addr, algo, coalesce, 0, domain.CountAdmitted)
		reqs := make([]domain.Request, tenants)
		for i := range reqs {
			t := domain.TenantID("tenant-" + strconv.Itoa(i))
			reqs[i] = domain.Request{Tenant: t, Route: "default", Limits: limits(t, algo)}
		}
		return func(ctx context.Context, i int) error {
			_, err := lim.Peek(ctx, reqs[i])
			return err
		}
	}
}

// tollgateSlots is one concurrency limit per tenant, as a request
// through the proxy uses it: its slot taken (the decision's script) and
// given back (the release's round trip), both in one call. The limit is
// high enough that no request is denied.
func tollgateSlots(b *testing.B, addr string, _ int) decideFunc {
	lim := openTollgate(b, addr, domain.AlgorithmFixedWindow, coalesce, 0, domain.CountAdmitted)
	reqs := make([]domain.Request, tenants)
	for i := range reqs {
		t := domain.TenantID("tenant-" + strconv.Itoa(i))
		reqs[i] = domain.Request{Tenant: t, Route: "default", Limits: []domain.Limit{{Name: "inflight", Cost: 1,
			Rule: domain.Rule{Limit: domain.MaxConcurrency, Window: domain.ConcurrencyWindow}, Concurrency: true,
			Key: keylayout.Key("bench:", t, keylayout.KeyInFlight, "", "inflight")}}}
	}
	return func(ctx context.Context, i int) error {
		v, err := lim.Allow(ctx, reqs[i], nil)
		switch {
		case err != nil:
			return err
		case !v.Allowed || v.Release == nil:
			return fmt.Errorf("tenant %d denied", i)
		}
		v.Release()
		return nil
	}
}

// batching is how tollgate's client sends decisions: nil, its coalescer
// (the gateway's only way); else a conn.Options.Send, made for one
// benchmark, to compare designs.
type batching func(b *testing.B) func(ctx context.Context, rdb goredis.UniversalClient, cmd goredis.Cmder) error

// coalesce is the gateway's batching: concurrent decisions share round
// trips through the client's coalescer.
var coalesce batching

// autoPipeline hands every decision to go-redis's experimental blocking
// AutoPipeline, made on the client's first command. It does not honour
// a caller's deadline once a command is queued.
func autoPipeline(b *testing.B) func(context.Context, goredis.UniversalClient, goredis.Cmder) error {
	var (
		once sync.Once
		ap   *goredis.AutoPipeliner
		err  error
	)
	b.Cleanup(func() {
		if ap != nil {
			_ = ap.Close()
		}
	})
	return func(ctx context.Context, rdb goredis.UniversalClient, cmd goredis.Cmder) error {
		once.Do(func() {
			p, ok := rdb.(interface {
				AutoPipeline() (*goredis.AutoPipeliner, error)
			})
			if !ok {
				err = fmt.Errorf("%T has no AutoPipeline", rdb)
				return
			}
			ap, err = p.AutoPipeline()
		})
		if err != nil {
			cmd.SetErr(err)
			return err
		}
		return ap.Process(ctx, cmd)
	}
}

// unbatched sends every decision on its own round trip, holding a
// pooled connection for it.
func unbatched(*testing.B) func(context.Context, goredis.UniversalClient, goredis.Cmder) error {
	return func(ctx context.Context, rdb goredis.UniversalClient, cmd goredis.Cmder) error {
		return rdb.Process(ctx, cmd)
	}
}

// openTollgate opens tollgate's algo on addr as the gateway does, with
// the leases of concurrency limits (renewed every lease/3, 10 s),
// counting by counting.
func openTollgate(b *testing.B, addr, algo string, batching batching, lanes int, counting domain.Counting) *redis.Limiter {
	opts := conn.Options{Timeout: redisTimeout, Lanes: lanes}
	if batching != nil {
		opts.Send = batching(b)
	}
	c, err := conn.Open("redis://"+addr+"/0", opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	if err := c.Warm(context.Background()); err != nil {
		b.Fatal(err)
	}
	leases := fleet.NewLeases(c, fleet.LeaseOptions{Lease: 10 * time.Second, Replica: "bench"})
	b.Cleanup(func() { leases.Close() })
	// As the gateway: the client times each decision from its send.
	lim, err := redis.New(c, algo, redis.Options{Leases: leases, Counting: counting})
	if err != nil {
		b.Fatal(err)
	}
	return lim
}

// ulule is github.com/ulule/limiter/v3 on its Redis store: fixed window,
// one Lua script per decision.
func ulule(b *testing.B, addr string, goroutines int) decideFunc {
	store, err := sredis.NewStoreWithOptions(peerClient(b, addr, goroutines), limiter.StoreOptions{Prefix: "bench-ulule"})
	if err != nil {
		b.Fatal(err)
	}
	lim := limiter.New(store, limiter.Rate{Period: window, Limit: limit})
	return func(ctx context.Context, i int) error {
		c, err := lim.Get(ctx, keys[i])
		if err == nil && c.Reached {
			err = fmt.Errorf("tenant %d denied", i)
		}
		return err
	}
}

// redisRate is github.com/go-redis/redis_rate/v10: GCRA, one Lua script
// per decision. Its script keeps time in seconds as a double (about
// 3·10⁸ since 2017, so steps below about 10⁻⁷ s vanish): the rate must
// give each request an emission interval far above that, or the new TAT
// rounds back to now and the script never writes (at 2³⁰ a second it
// did not, and decided with a GET alone). 2²⁰ an hour is 3.4 ms a
// request, and a burst of 2²⁰ is never spent here.
func redisRate(b *testing.B, addr string, goroutines int) decideFunc {
	lim := redis_rate.NewLimiter(peerClient(b, addr, goroutines))
	l := redis_rate.Limit{Rate: 1 << 20, Burst: 1 << 20, Period: time.Hour}
	return func(ctx context.Context, i int) error {
		r, err := lim.Allow(ctx, keys[i], l)
		if err == nil && r.Allowed == 0 {
			err = fmt.Errorf("tenant %d denied", i)
		}
		return err
	}
}

// bareIncr is one INCR per decision on a plain go-redis client: no TTL,
// no decision, the floor of one round trip each.
func bareIncr(b *testing.B, addr string, goroutines int) decideFunc {
	rdb := peerClient(b, addr, goroutines)
	return func(ctx context.Context, i int) error { return rdb.Incr(ctx, keys[i]).Err() }
}

var redisLimiters = []struct {
	name string
	new  func(*testing.B, string, int) decideFunc
}{
	{"tollgate-fixed_window", tollgateRedis(domain.AlgorithmFixedWindow, coalesce)},
	{"tollgate-sliding_log", tollgateRedis(domain.AlgorithmSlidingLog, coalesce)},
	{"tollgate-sliding_window", tollgateRedis(domain.AlgorithmSlidingWindow, coalesce)},
	{"tollgate-token_bucket", tollgateRedis(domain.AlgorithmTokenBucket, coalesce)},
	{"tollgate-fixed_window-3limits", tollgateLimits(domain.AlgorithmFixedWindow, coalesce, 0, threeLimits)},
	{"tollgate-sliding_window-3limits", tollgateLimits(domain.AlgorithmSlidingWindow, coalesce, 0, threeLimits)},
	{"tollgate-calendar_month", tollgateLimits(domain.AlgorithmFixedWindow, coalesce, 0, monthly)},
	{"tollgate-usage_peek", tollgatePeek(domain.AlgorithmFixedWindow, threeLimits)},
	// A concurrency limit's acquire and release together (two round
	// trips), beside one fixed-window decision (one).
	{"tollgate-concurrency", tollgateSlots},
	{"tollgate-fixed_window-lanes1", tollgateLanes(domain.AlgorithmFixedWindow, coalesce, 1)},
	{"tollgate-fixed_window-autopipeline", tollgateRedis(domain.AlgorithmFixedWindow, autoPipeline)},
	{"tollgate-fixed_window-unbatched", tollgateRedis(domain.AlgorithmFixedWindow, unbatched)},
	{"ulule-limiter", ulule},
	{"redis_rate", redisRate},
	{"go-redis-incr", bareIncr},
}

// BenchmarkRedis is every Redis limiter at 1, 64 and 512 goroutines over
// 1000 tenants, on one local Redis. In round r of R
// (TOLLGATE_BENCH_ROUND=r/R, which scripts/bench.sh sets) each goroutine
// count's limiters start (r−1)/R of the way down the list, wrapping: over
// a run's rounds the start moves through the list, so what a run leaves
// behind for the next (a Redis grown by it, a busier machine) falls on
// tollgate's limiters and the peers alike.
func BenchmarkRedis(b *testing.B) {
	addr := redisAddr(b)
	shift := 0
	if r, n, ok := strings.Cut(os.Getenv("TOLLGATE_BENCH_ROUND"), "/"); ok {
		r, _ := strconv.Atoi(r)
		n, _ := strconv.Atoi(n)
		if r >= 1 && n >= r {
			shift = (r - 1) * len(redisLimiters) / n
		}
	}
	for _, g := range redisGoroutines {
		for k := range redisLimiters {
			l := redisLimiters[(k+shift)%len(redisLimiters)]
			b.Run(fmt.Sprintf("g=%d/impl=%s", g, l.name), func(b *testing.B) {
				decide := l.new(b, addr, g)
				runRedis(b, g, decide)
			})
		}
	}
}

// BenchmarkHarness is runRedis around a decision that does nothing: what
// the harness itself costs each decision of BenchmarkRedis (its
// per-decision deadline, the latency records), to take off a limiter's
// allocs/op and B/op for what the limiter allocates.
func BenchmarkHarness(b *testing.B) {
	for _, g := range redisGoroutines {
		b.Run(fmt.Sprintf("g=%d", g), func(b *testing.B) {
			runRedis(b, g, func(ctx context.Context, _ int) error {
				_ = ctx.Done() // as a limiter's wait does: its channel is made
				return nil
			})
		})
	}
}

// runRedis runs decide from g goroutines for b.N decisions in all, each
// under the per-decision timeout, and reports decisions/s, the p50 and
// p99 of one decision's latency, and errors per decision.
func runRedis(b *testing.B, g int, decide decideFunc) {
	ctx := context.Background()
	for i := range tenants { // warm: the keys exist, the scripts are loaded
		if err := decide(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		lats    []time.Duration
		errs    atomic.Int64
		seed    atomic.Int64
		lastErr atomic.Value
	)
	one := func(i int, lat *[]time.Duration) {
		t0 := time.Now()
		dctx, cancel := context.WithTimeout(ctx, redisTimeout)
		err := decide(dctx, i)
		cancel()
		*lat = append(*lat, time.Since(t0))
		if err != nil {
			errs.Add(1)
			lastErr.Store(err.Error())
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if g == 1 {
		lat := make([]time.Duration, 0, b.N)
		i := 0
		for range b.N {
			one(i%tenants, &lat)
			i += 7
		}
		lats = lat
	} else {
		b.SetParallelism((g + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			lat := make([]time.Duration, 0, 1024)
			for pb.Next() {
				i++
				one(i%tenants, &lat)
			}
			mu.Lock()
			lats = append(lats, lat...)
			mu.Unlock()
		})
	}
	b.StopTimer()
	slices.Sort(lats)
	// Decisions that failed (the caller would take its fail mode) are
	// not decisions: only the ones that came back count.
	b.ReportMetric(float64(int64(b.N)-errs.Load())/b.Elapsed().Seconds(), "decisions/s")
	if len(lats) > 0 {
		b.ReportMetric(float64(lats[len(lats)/2])/1e3, "p50-µs")
		b.ReportMetric(float64(lats[len(lats)*99/100])/1e3, "p99-µs")
	}
	b.ReportMetric(float64(errs.Load())/float64(b.N), "errors/op")
	if n := errs.Load(); n > 0 {
		b.Logf("%d of %d decisions failed; last: %v", n, b.N, lastErr.Load())
	}
}

// BenchmarkShapeCost is what each shape of decision costs on Redis
// beside the gateway's default one (one fixed-window limit): three
// limits at once, a calendar month, a concurrency limit's acquire and
// release together, and the other algorithms' one limit, at 64
// goroutines over 1000 tenants, in interleaved rounds of one run (so
// that all see the same machine). It logs, per shape, the ratio of the
// medians of ns/op to the fixed window's, and of the CPU each spends
// per decision, this process's and Redis's together (cpu-µs/op: less
// sensitive than ns/op to what else the machine runs), and Redis's own
// (redis-µs/op: what a Redis shared by every replica spends).
//
//	TOLLGATE_BENCH_REDIS=127.0.0.1:6379 go test -run '^$' -bench BenchmarkShapeCost .
func BenchmarkShapeCost(b *testing.B) {
	addr := redisAddr(b)
	const rounds, g = 7, 64
	impls := []struct {
		name string
		new  func(*testing.B, string, int) decideFunc
	}{
		{"tollgate-fixed_window", tollgateRedis(domain.AlgorithmFixedWindow, coalesce)},
		{"tollgate-fixed_window-3limits", tollgateLimits(domain.AlgorithmFixedWindow, coalesce, 0, threeLimits)},
		{"tollgate-calendar_month", tollgateLimits(domain.AlgorithmFixedWindow, coalesce, 0, monthly)},
		{"tollgate-concurrency", tollgateSlots},
		{"tollgate-token_bucket", tollgateRedis(domain.AlgorithmTokenBucket, coalesce)},
		{"tollgate-sliding_window", tollgateRedis(domain.AlgorithmSlidingWindow, coalesce)},
		{"tollgate-sliding_log", tollgateRedis(domain.AlgorithmSlidingLog, coalesce)},
	}
	info := peerClient(b, addr, 1)
	// ns/op, CPU µs/op and Redis µs/op by impl, one per round: the last
	// measured run's.
	ns, cpu, srv := make([][]float64, len(impls)), make([][]float64, len(impls)), make([][]float64, len(impls))
	for round := range rounds {
		for k, impl := range impls {
			b.Run(fmt.Sprintf("round=%d/g=%d/impl=%s", round+1, g, impl.name), func(b *testing.B) {
				decide := impl.new(b, addr, g)
				self0, redis0 := cpuSeconds(b, info)
				runRedis(b, g, decide)
				self1, redis1 := cpuSeconds(b, info)
				used := (self1 - self0) + (redis1 - redis0)
				b.ReportMetric(used*1e6/float64(b.N), "cpu-µs/op")
				b.ReportMetric((redis1-redis0)*1e6/float64(b.N), "redis-µs/op")
				ns[k] = setRound(ns[k], round, float64(b.Elapsed().Nanoseconds())/float64(b.N))
				cpu[k] = setRound(cpu[k], round, used*1e6/float64(b.N))
				srv[k] = setRound(srv[k], round, (redis1-redis0)*1e6/float64(b.N))
			})
		}
	}
	median := func(xs []float64) float64 {
		s := slices.Clone(xs)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for k, impl := range impls {
		if len(ns[k]) != rounds || len(ns[0]) != rounds {
			return // a -bench filter left some out
		}
		b.Logf("medians of %d rounds at %d goroutines: %s %.0f ns/op, %.1f cpu-µs/op, %.1f redis-µs/op: ÷ fixed window %.2f (ns/op), %.2f (CPU), %.2f (Redis)",
			rounds, g, impl.name, median(ns[k]), median(cpu[k]), median(srv[k]),
			median(ns[k])/median(ns[0]), median(cpu[k])/median(cpu[0]), median(srv[k])/median(srv[0]))
	}
}

// setRound sets xs[round] to x, appending it for a new round.
func setRound(xs []float64, round int, x float64) []float64 {
	if len(xs) == round {
		return append(xs, x)
	}
	xs[round] = x
	return xs
}

// cpuSeconds returns the CPU this process and the Redis server at rdb
// have used so far, user and system, in seconds.
func cpuSeconds(b *testing.B, rdb *goredis.Client) (self, server float64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	text, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(text, "\n") {
		for _, field := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), field); ok {
				f, _ := strconv.ParseFloat(v, 64)
				server += f
			}
		}
	}
	return self, server
}
