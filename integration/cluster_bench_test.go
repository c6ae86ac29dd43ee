package integration

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// BenchmarkClusterVsSingle measures every algorithm's decisions with 64
// goroutines over 1000 tenants on one Redis and on a 3-master Redis
// Cluster in the same run, each through the gateway's own client (Open,
// as TOLLGATE_REDIS_MODE=single|cluster builds it). Besides decisions/s
// it reports, on the cluster:
//
//   - busiest/mean: store commands on the busiest master over the mean of
//     the three (1.00 = perfectly even);
//   - master-<i>-%: each master's share of the commands.
//
// On a 2-core machine the three masters, their replicas and the
// benchmark share the cores: compare the load per master, not speed-up.
func BenchmarkClusterVsSingle(b *testing.B) {
	srv := startRedis(b)
	cl := startCluster(b)
	single, err := conn.Open(srv.URL, conn.Options{Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { single.Close() })
	cluster, err := conn.Open(cl.Seed, conn.Options{Timeout: time.Second, Cluster: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cluster.Close() })
	masters := cl.Nodes[:clusterMasters]

	rule := domain.Rule{Limit: 1 << 29, Window: time.Minute}
	for _, a := range domain.Algorithms {
		reqs := make([]domain.Request, benchTenants)
		for i := range reqs {
			reqs[i] = one(keys.Key("bench:", domain.TenantID(fmt.Sprintf("tenant-%d", i)), a.Name, "", domain.DefaultLimit), rule)
		}
		for _, store := range []struct {
			name   string
			client *conn.Client
		}{{"single", single}, {"cluster", cluster}} {
			lim := redisLimiter{algorithm: a.Name}.new(store.client, redis.Options{Timeout: time.Second})
			for _, r := range reqs { // keys and scripts in place
				if _, err := lim.Allow(context.Background(), r, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.Run(a.Name+"/"+store.name, func(b *testing.B) {
				if store.name == "cluster" {
					resetStats(b, cl.Client)
				}
				var seq atomic.Int64
				b.ReportAllocs()
				b.SetParallelism((benchGoroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := int(seq.Add(7919))
					for pb.Next() {
						if _, err := lim.Allow(context.Background(), reqs[i%len(reqs)], nil); err != nil {
							b.Error(err)
							return
						}
						i++
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
				if store.name == "cluster" {
					reportMasterLoad(b, masters)
				}
			})
		}
	}
}

// reportMasterLoad reports the busiest master's share of the store
// commands over the mean, and each master's share.
func reportMasterLoad(b *testing.B, masters []*clusterNode) {
	b.Helper()
	counts := make([]int64, len(masters))
	var total, busiest int64
	for i, m := range masters {
		calls, err := nodeCommandCalls(context.Background(), m.Client)
		if err != nil {
			b.Fatal(err)
		}
		for name, n := range calls {
			if storeCommand(name) {
				counts[i] += n
			}
		}
		total += counts[i]
		busiest = max(busiest, counts[i])
	}
	if total == 0 {
		b.Fatal("no store commands on any master")
	}
	b.ReportMetric(float64(busiest)/(float64(total)/float64(len(masters))), "busiest/mean")
	for i, n := range counts {
		b.ReportMetric(100*float64(n)/float64(total), fmt.Sprintf("master-%d-%%", i+1))
	}
}

// storeCommand reports whether name, from INFO commandstats, is a command
// the limiters run, not the harness's or a client's housekeeping.
func storeCommand(name string) bool {
	switch {
	case strings.HasPrefix(name, "cluster|"), strings.HasPrefix(name, "client|"), strings.HasPrefix(name, "config|"),
		strings.HasPrefix(name, "command"):
		return false
	}
	switch name {
	case "info", "hello", "ping", "readonly", "asking":
		return false
	}
	return true
}
