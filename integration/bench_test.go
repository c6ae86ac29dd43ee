package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

const (
	benchTenants     = 1000
	benchGoroutines  = 64
	benchRedisClient = 64 // redis-benchmark -c, to match the goroutines
)

// BenchmarkRedisFixedWindow measures fixed-window decisions on a real
// Redis over loopback (the seed's counter), serial and with 64 goroutines over
// 1000 tenants. Besides ns/op and allocs it reports:
//
//   - decisions/s;
//   - redis-cmds/op: commands Redis ran per decision, from INFO
//     commandstats (commands inside the script included);
//   - vs-redis-benchmark (parallel only): decisions/s over the INCR/s that
//     `redis-benchmark -t incr -c 64` reaches on the same server, a floor
//     for one round trip per operation.
func BenchmarkRedisFixedWindow(b *testing.B) {
	srv := startRedis(b)
	client := benchClient(b, srv)
	incrPerSec := redisBenchmarkIncr(b, srv.URL)

	rule := domain.Rule{Limit: 1 << 29, Window: time.Minute}
	keys := make([]domain.Request, benchTenants)
	for i := range keys {
		keys[i] = one(keylayout.Key("bench:", domain.TenantID(fmt.Sprintf("tenant-%d", i)), domain.AlgorithmFixedWindow, "", domain.DefaultLimit), rule)
	}
	{
		// Counting denials, as the gateway's one limit without a policy file does.
		mode := "count-denied"
		lim := redisLimiter{algorithm: domain.AlgorithmFixedWindow}.new(conn.NewClient(client, conn.Options{}), redis.Options{Timeout: time.Second, Counting: domain.CountEvery})

		b.Run(mode+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			srv.resetStats(b)
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(context.Background(), keys[i%benchTenants], nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			reportRedisMetrics(b, srv, 0)
		})

		b.Run(mode+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			srv.resetStats(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, err := lim.Allow(context.Background(), keys[i%benchTenants], nil); err != nil {
						b.Error(err)
						return
					}
					i += 7
				}
			})
			b.StopTimer()
			reportRedisMetrics(b, srv, incrPerSec)
		})
	}
}

// benchRedis returns the Redis of a benchmark: TOLLGATE_BENCH_REDIS_URL's
// when set, else a container for the rest of b.
func benchRedis(b *testing.B) *redisServer {
	u := os.Getenv("TOLLGATE_BENCH_REDIS_URL")
	if u == "" {
		return startRedis(b)
	}
	opts, err := goredis.ParseURL(u)
	if err != nil {
		b.Fatalf("TOLLGATE_BENCH_REDIS_URL: %v", err)
	}
	c := goredis.NewClient(opts)
	b.Cleanup(func() { c.Close() })
	return &redisServer{URL: u, Client: c}
}

// benchClient returns a go-redis client to srv for benchmarks, closed
// at the end of b: a pool for every goroutine, the store's deadline
// semantics, no retries.
func benchClient(b *testing.B, srv *redisServer) *goredis.Client {
	client := goredis.NewClient(&goredis.Options{
		Addr:                  redisAddr(b, srv.URL),
		PoolSize:              2 * benchGoroutines,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	b.Cleanup(func() { client.Close() })
	return client
}

// reportRedisMetrics reports decisions/s, redis-cmds/op and, when
// incrPerSec > 0, the ratio of decisions/s to it.
func reportRedisMetrics(b *testing.B, srv *redisServer, incrPerSec float64) {
	b.Helper()
	cmds := srv.decisionCommands(b)
	perSec := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perSec, "decisions/s")
	b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds/op")
	if incrPerSec > 0 {
		b.ReportMetric(perSec/incrPerSec, "vs-redis-benchmark")
	}
}

var rpsRE = regexp.MustCompile(`INCR: ([0-9.]+) requests per second`)

// redisBenchmarkIncr runs `redis-benchmark -t incr -c 64` against the
// server and returns its INCR/s, or 0 (and a log line) when
// redis-benchmark is not installed.
func redisBenchmarkIncr(b *testing.B, redisURL string) float64 {
	b.Helper()
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Log("redis-benchmark not found (Debian package redis-tools): no vs-redis-benchmark metric")
		return 0
	}
	u, err := url.Parse(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command(bin, "-h", u.Hostname(), "-p", u.Port(),
		"-t", "incr", "-c", strconv.Itoa(benchRedisClient), "-n", "200000", "-q").CombinedOutput()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	m := rpsRE.FindSubmatch(out)
	if m == nil {
		b.Fatalf("redis-benchmark: no INCR rate in %q", out)
	}
	rps, _ := strconv.ParseFloat(string(m[1]), 64)
	b.Logf("redis-benchmark -t incr -c %d on the same server: %.0f INCR/s", benchRedisClient, rps)
	return rps
}

// redisAddr returns host:port of a redis:// URL.
func redisAddr(b *testing.B, redisURL string) string {
	b.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		b.Fatal(err)
	}
	return u.Host
}

// BenchmarkPolicyLimits measures a decision over three limits against
// one over one limit, on every algorithm, in process memory and on a
// real Redis, in one run: the policy file's cost. Every decision is
// admitted (the limits are far away), the path that writes. 64
// goroutines over 1000 tenants; on Redis it also reports the commands
// per decision. Compare limits=3 with limits=1 of the same store and
// algorithm (benchstat -col /limits). Serial is one goroutine: the
// latency of one decision, its round trip included.
//
// TOLLGATE_BENCH_REDIS_URL=redis://127.0.0.1:port runs it against that
// Redis instead of a container: a dedicated redis-server on loopback
// skips Docker's port proxy, whose CPU is otherwise in every round trip.
// The benchmark resets that server's statistics.
func BenchmarkPolicyLimits(b *testing.B) {
	srv := benchRedis(b)
	client := benchClient(b, srv)
	rule := domain.Rule{Limit: domain.MaxLimit, Window: time.Hour}
	names := []string{"per-second", "per-minute", "per-day"}
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	requests := func(algorithm string, n int) []domain.Request {
		reqs := make([]domain.Request, benchTenants)
		for i := range reqs {
			tenant := domain.TenantID(fmt.Sprintf("tenant-%d", i))
			req := domain.Request{Tenant: tenant, Route: domain.DefaultRoute}
			for _, name := range names[:n] {
				req.Limits = append(req.Limits, domain.Limit{Name: name, Rule: rule, Cost: 1,
					Key: keylayout.Key(prefix, tenant, algorithm, "", name)})
			}
			reqs[i] = req
		}
		return reqs
	}
	for _, a := range domain.Algorithms {
		mem, err := memory.New(a.Name, memory.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { mem.Close() })
		stores := []struct {
			name string
			lim  ports.Limiter
		}{{"memory", mem}, {"redis", redisLimiter{algorithm: a.Name}.new(conn.NewClient(client, conn.Options{}), redis.Options{Timeout: time.Second})}}
		for _, s := range stores {
			for _, n := range []int{1, 3} {
				reqs := requests(a.Name, n)
				b.Run(fmt.Sprintf("store=%s/algorithm=%s/mode=serial/limits=%d", s.name, a.Name, n), func(b *testing.B) {
					b.ReportAllocs()
					if s.name == "redis" {
						srv.resetStats(b)
					}
					i := 0
					for b.Loop() {
						if _, err := s.lim.Allow(context.Background(), reqs[i%benchTenants], nil); err != nil {
							b.Fatal(err)
						}
						i++
					}
					if s.name == "redis" {
						reportRedisMetrics(b, srv, 0)
						reportScriptTime(b, srv)
					}
				})
			}
			for _, n := range []int{1, 3} {
				reqs := requests(a.Name, n)
				b.Run(fmt.Sprintf("store=%s/algorithm=%s/mode=parallel/limits=%d", s.name, a.Name, n), func(b *testing.B) {
					b.ReportAllocs()
					b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
					if s.name == "redis" {
						srv.resetStats(b)
					}
					b.ResetTimer()
					var seq atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(seq.Add(7919))
						for pb.Next() {
							if _, err := s.lim.Allow(context.Background(), reqs[i%benchTenants], nil); err != nil {
								b.Error(err)
								return
							}
							i++
						}
					})
					b.StopTimer()
					if s.name == "redis" {
						reportRedisMetrics(b, srv, 0)
						reportScriptTime(b, srv)
					}
				})
			}
		}
	}
}

// reportScriptTime reports redis-script-us/op: the µs Redis spent running
// EVALSHA per decision, from INFO commandstats. It is the server's share
// of a decision, free of the client's scheduling noise.
func reportScriptTime(b *testing.B, srv *redisServer) {
	b.Helper()
	info, err := srv.Client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	for line := range strings.Lines(info) {
		// cmdstat_evalsha:calls=3,usec=27,usec_per_call=9.00,...
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(field, "usec="); ok {
				usec, _ := strconv.ParseFloat(v, 64)
				b.ReportMetric(usec/float64(b.N), "redis-script-us/op")
			}
		}
	}
}
