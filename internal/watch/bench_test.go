package watch_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/internal/watch"
)

// BenchmarkDenied is a denied decision through the engine on the memory
// store, without a watch (off) and with one (on), over 1 000 tenants
// all over their budget: what the sketches add to a denial's cost.
// Serial and parallel, with a reader of the feed in the parallel runs.
func BenchmarkDenied(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		e, ds, stop := deniedEngine(b, on)
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if res, _ := e.Decide(ctx, ds[i%len(ds)]); res.Verdict.Allowed {
					b.Fatal("admitted")
				}
				i++
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if res, _ := e.Decide(ctx, ds[i%len(ds)]); res.Verdict.Allowed {
						b.Fatal("admitted")
					}
					i++
				}
			})
		})
		stop()
	}
}

func deniedEngine(b *testing.B, on bool) (*engine.Engine, []engine.Described, func()) {
	rule := domain.Rule{Limit: 1, Window: time.Hour}
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{View: memory.View{Counting: domain.CountAdmitted, PolicyKeys: true}})
	if err != nil {
		b.Fatal(err)
	}
	opts := engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:"}}
	var w *watch.Watch
	if on {
		w = watch.New(watch.Options{Top: 20})
		opts.Watcher = w
	}
	e := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(rule, false)}, opts)
	ds := make([]engine.Described, 1000)
	for i := range ds {
		ds[i] = engine.Described{Credentials: engine.Credentials{Header: "t" + strconv.Itoa(i)}, Method: "GET", Path: "/"}
		e.Decide(b.Context(), ds[i]) // spends the budget
	}
	return e, ds, func() {
		store.Close()
		if w != nil {
			w.Close()
		}
	}
}

// BenchmarkWatched is the watch's own cost per decision: a denial of
// one of 1000 tenants in turn (flood: each replaces a counter), of one
// of 10 (hot: each is counted already), and an admission of a tenant
// counted (watched) and of one never denied (others, most admissions).
func BenchmarkWatched(b *testing.B) {
	w := watch.New(watch.Options{Top: 20})
	defer w.Close()
	tenants := make([]domain.TenantID, 1000)
	quiet := make([]domain.TenantID, 1000)
	for i := range tenants {
		tenants[i] = domain.TenantID("tenant-" + strconv.Itoa(i))
		quiet[i] = domain.TenantID("quiet-" + strconv.Itoa(i))
	}
	for _, tt := range []struct {
		name    string
		tenants []domain.TenantID
		n       int
		v       domain.Verdict
	}{
		{"denied/flood", tenants, 1000, denied()},
		{"denied/hot", tenants, 10, denied()},
		{"allowed/watched", tenants, 10, allowed()},
		{"allowed/others", quiet, 1000, allowed()},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				w.Watched(tt.tenants[i%tt.n], "", client, limits, tt.v)
				i++
			}
		})
	}
}
