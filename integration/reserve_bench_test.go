package integration

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// BenchmarkTokenDecision measures a token decision (a request limit and
// a token limit reserved, then settled: two script runs) against a plain
// decision of the same two limits (costs known in advance: one run), on
// Redis, every algorithm, 64 goroutines over 1000 tenants, every request
// admitted (the limits are far away). kind=token ÷ kind=plain of one
// algorithm is what reserving and settling cost; kind=reserve is the
// reservation alone (never settled). With
// TOLLGATE_BENCH_REDIS_URL it runs against that Redis (see
// BenchmarkPolicyLimits).
func BenchmarkTokenDecision(b *testing.B) {
	srv := benchRedis(b)
	client := conn.NewClient(benchClient(b, srv), conn.Options{})
	rule := domain.Rule{Limit: domain.MaxLimit, Window: time.Hour}
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	requests := func(algorithm string, reserve bool) []domain.Request {
		reqs := make([]domain.Request, benchTenants)
		for i := range reqs {
			tenant := domain.TenantID(fmt.Sprintf("tenant-%d", i))
			reqs[i] = domain.Request{Tenant: tenant, Route: domain.DefaultRoute, Limits: []domain.Limit{
				{Name: "requests", Rule: rule, Cost: 1, Key: keylayout.Key(prefix, tenant, algorithm, "", "requests")},
				{Name: "tokens", Rule: rule, Cost: 1024, Reserve: reserve, Key: keylayout.Key(prefix, tenant, algorithm, "", "tokens")},
			}}
		}
		return reqs
	}
	for _, a := range domain.Algorithms {
		lim := redisLimiter{algorithm: a.Name}.new(client, redis.Options{Timeout: time.Second})
		settler := lim.(ports.Settler)
		for _, kind := range []string{"plain", "reserve", "token"} {
			reqs := requests(a.Name, kind != "plain")
			b.Run(fmt.Sprintf("algorithm=%s/kind=%s", a.Name, kind), func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				srv.resetStats(b)
				b.ResetTimer()
				var seq atomic.Int64
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					dst := make([]domain.Decision, 0, 2)
					for pb.Next() {
						req := reqs[i%benchTenants]
						i++
						v, err := lim.Allow(context.Background(), req, dst)
						if err != nil {
							b.Error(err)
							return
						}
						if kind == "token" {
							if err := settler.Settle(context.Background(), req, v.Decisions, 700); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
				b.StopTimer()
				reportRedisMetrics(b, srv, 0)
				reportScriptTime(b, srv)
			})
		}
	}
}
