package memory_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
)

var benchKeys = func() []string {
	k := make([]string, 1000)
	for i := range k {
		k[i] = "rl:tenant-" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkLimiter measures an admitted decision of a held tenant, of
// 1000 tenants, serially and from 64 goroutines, for every algorithm:
// a request of one limit (the gateway's default) and of three (a global
// limit, a route's and a second global one), with room for the verdict's
// decisions in dst, as the engine gives them. Neither allocates. A
// sliding log holds an entry per admitted request, so its budget is 100
// a minute: its decisions are nearly all denials.
func BenchmarkLimiter(b *testing.B) {
	request := func(rule domain.Rule, key string, n int) domain.Request {
		req := domain.Request{Tenant: "acme", Route: "default"}
		for i := range n {
			req.Limits = append(req.Limits, domain.Limit{Name: "l" + strconv.Itoa(i), Rule: rule, Key: key + ":" + strconv.Itoa(i), Cost: 1})
		}
		return req
	}
	for _, a := range algorithms {
		rule := domain.Rule{Limit: domain.MaxLimit, Window: time.Hour}
		if a.name == domain.AlgorithmSlidingLog {
			rule = domain.Rule{Limit: 100, Window: time.Minute}
		}
		for _, n := range []int{1, 3} {
			reqs := make([]domain.Request, len(benchKeys))
			for i, k := range benchKeys {
				reqs[i] = request(rule, k, n)
			}
			name := a.name + "/limits=" + strconv.Itoa(n)
			b.Run(name+"/serial", func(b *testing.B) {
				l := a.new(memory.Options{})
				defer l.Close()
				ctx := context.Background()
				for _, r := range reqs {
					if _, err := l.Allow(ctx, r, nil); err != nil {
						b.Fatal(err)
					}
				}
				var dst [3]domain.Decision
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					l.Allow(ctx, reqs[i%len(reqs)], dst[:0])
					i++
				}
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				l := a.new(memory.Options{})
				defer l.Close()
				ctx := context.Background()
				for _, r := range reqs {
					if _, err := l.Allow(ctx, r, nil); err != nil {
						b.Fatal(err)
					}
				}
				var seq atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(32) // 64 goroutines on 2 cores
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var dst [3]domain.Decision
					i := int(seq.Add(7919))
					for pb.Next() {
						l.Allow(ctx, reqs[i%len(reqs)], dst[:0])
						i++
					}
				})
			})
		}
	}
}
