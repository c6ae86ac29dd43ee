package integration

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
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
	client := goredis.NewClient(&goredis.Options{
		Addr:                  redisAddr(b, srv.URL),
		PoolSize:              2 * benchGoroutines,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
	})
	b.Cleanup(func() { client.Close() })
	incrPerSec := redisBenchmarkIncr(b, srv.URL)

	rule := domain.Rule{Limit: 1 << 29, Window: time.Minute}
	keys := make([]domain.Request, benchTenants)
	for i := range keys {
		keys[i] = one(domain.Key("bench:", domain.TenantID(fmt.Sprintf("tenant-%d", i)), domain.AlgorithmFixedWindow, "", domain.DefaultLimit), rule)
	}
	{
		mode := "seed"
		lim := adapters.SeedLimiter(redis.NewCounter(redis.NewClient(client), redis.Options{Timeout: time.Second}))

		b.Run(mode+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			srv.resetStats(b)
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(context.Background(), keys[i%benchTenants]); err != nil {
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
					if _, err := lim.Allow(context.Background(), keys[i%benchTenants]); err != nil {
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
