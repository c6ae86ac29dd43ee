// Package bench compares tollgate's in-memory fixed window with the
// fastest in-process Go rate limiters, in one run and the same shapes. It
// is its own module, so the peers stay out of tollgate's go.mod.
//
//	bench/peers.sh 5    # 5 interleaved rounds, benchstat's medians
package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/memorystore"
	"golang.org/x/time/rate"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

const (
	tenants     = 1000
	parallelism = 32 // × GOMAXPROCS (2 here) = 64 goroutines
	// The budget is large enough that every decision is an admission:
	// the peers' deny paths are cheaper than their allow paths.
	limit  = 1 << 40
	window = time.Hour
)

var keys = func() []string {
	k := make([]string, tenants)
	for i := range k {
		k[i] = "rl:tenant-" + strconv.Itoa(i)
	}
	return k
}()

// allowFunc is one decision for key; each peer is wrapped as one.
type allowFunc func(key string) bool

func tollgate(b *testing.B) allowFunc {
	// As the gateway's default limit: counting denials.
	lim, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{View: memory.View{Counting: domain.CountEvery}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lim.Close() })
	rule := domain.Rule{Limit: limit, Window: window}
	ctx := context.Background()
	return func(key string) bool {
		var decisions [1]domain.Decision // the verdict's, on the stack
		v, _ := lim.Allow(ctx, domain.Request{Tenant: "bench", Route: "default",
			Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: key, Cost: 1}}}, decisions[:0])
		return v.Allowed
	}
}

// tollgateStack is the memory store under the layers the gateway puts
// around it by default (the deny cache, the open fail mode), called
// through the port as the engine calls it: the request and the verdict's
// room cross an interface, so they are on the heap.
func tollgateStack(b *testing.B) allowFunc {
	lim, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{View: memory.View{Counting: domain.CountEvery, PolicyKeys: true}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { lim.Close() })
	cache := layers.NewDenyCache(layers.DenyCacheOptions{Counting: domain.CountEvery})
	stack := ports.Chain(lim, cache.Layer(), layers.FailOpen(nil))
	rule := domain.Rule{Limit: limit, Window: window}
	ctx := context.Background()
	return func(key string) bool {
		var decisions [1]domain.Decision
		v, _ := stack.Allow(ctx, domain.Request{Tenant: domain.TenantID(key), Route: "default",
			Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: key, Cost: 1}}}, decisions[:0])
		return v.Allowed
	}
}

// xrate is golang.org/x/time/rate with one Limiter per key in a sync.Map.
func xrate(b *testing.B) allowFunc {
	var m sync.Map
	every := rate.Limit(float64(limit) / window.Seconds())
	return func(key string) bool {
		v, ok := m.Load(key)
		if !ok {
			v, _ = m.LoadOrStore(key, rate.NewLimiter(every, limit))
		}
		return v.(*rate.Limiter).Allow()
	}
}

func goLimiter(b *testing.B) allowFunc {
	store, err := memorystore.New(&memorystore.Config{Tokens: limit, Interval: window})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Cleanup(func() { store.Close(ctx) })
	return func(key string) bool {
		_, _, _, ok, _ := store.Take(ctx, key)
		return ok
	}
}

var limiters = []struct {
	name string
	new  func(*testing.B) allowFunc
}{
	{"tollgate", tollgate},
	{"tollgate-stack", tollgateStack},
	{"x-time-rate", xrate},
	{"go-limiter", goLimiter},
}

// BenchmarkSerial is one goroutine on one hot key.
func BenchmarkSerial(b *testing.B) {
	for _, l := range limiters {
		b.Run("impl="+l.name, func(b *testing.B) {
			allow := l.new(b)
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				if !allow("rl:hot") {
					b.Fatal("denied")
				}
			}
			reportCPU(b, start)
		})
	}
}

// BenchmarkParallel is 64 goroutines over 1000 tenants.
func BenchmarkParallel(b *testing.B) {
	for _, l := range limiters {
		b.Run("impl="+l.name, func(b *testing.B) {
			allow := l.new(b)
			for _, k := range keys { // warm: measure existing keys
				allow(k)
			}
			var seed atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(parallelism)
			b.ResetTimer()
			start := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919))
				for pb.Next() {
					i++
					if !allow(keys[i%tenants]) {
						b.Fatal("denied")
					}
				}
			})
			reportCPU(b, start)
		})
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time a decision took since start, as
// cpu-ns/op: on a machine that other work shares, it counts the time
// the contender computed (its goroutines, its sweeper, its garbage
// collection), not the time it waited for a core, so it moves far less
// with the load than ns/op does.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
