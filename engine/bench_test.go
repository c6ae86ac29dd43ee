package engine_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// BenchmarkDecide is one decision of a tenant the store holds, through
// the engine, on the memory store: the default policy (one limit,
// counting every request) and a policy of a global limit and a route's.
// Its allocations are the engine's one for the request's limits and
// decisions.
func BenchmarkDecide(b *testing.B) {
	rule := domain.Rule{Limit: domain.MaxLimit, Window: time.Hour}
	route, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "per-hour", Rule: rule}},
		[]domain.Route{{Name: "search", Path: "/search", Cost: 1, Limits: []domain.PolicyLimit{{Name: "searches", Rule: rule}}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		policy   *domain.Policy
		counting domain.Counting
	}{
		{"default", domain.DefaultPolicy(rule, false), domain.CountEvery},
		{"route", route, domain.CountAdmitted},
	} {
		b.Run(tt.name, func(b *testing.B) {
			store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{View: memory.View{Counting: tt.counting, PolicyKeys: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			e := engine.New(&engine.Snapshot{Policy: tt.policy}, engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:"}})
			ds := make([]engine.Described, 100)
			for i := range ds {
				ds[i] = engine.Described{Credentials: engine.Credentials{Header: "t" + strconv.Itoa(i)}, Method: "GET", Path: "/search"}
			}
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := e.Decide(ctx, ds[i%len(ds)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
