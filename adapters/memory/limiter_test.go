package memory_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// memoryLimiter is a memory limiter: a ports.Limiter that can be closed
// and counts its tenants.
type memoryLimiter interface {
	ports.Limiter
	Len() int
	Close() error
}

// algorithms are the memory limiters under test, by TOLLGATE_ALGORITHM.
var algorithms = []struct {
	name string
	new  func(memory.Options) memoryLimiter
}{
	{"fixed_window", func(o memory.Options) memoryLimiter { return memory.NewFixedWindow(o) }},
	{"sliding_log", func(o memory.Options) memoryLimiter { return memory.NewSlidingLog(o) }},
	{"sliding_window", func(o memory.Options) memoryLimiter { return memory.NewSlidingWindow(o) }},
	{"token_bucket", func(o memory.Options) memoryLimiter { return memory.NewTokenBucket(o) }},
}

// one is a request of cost 1 against one limit, stored under key.
func one(key string, rule domain.Rule) domain.Request {
	return domain.Request{Tenant: "acme", Route: "default", Cost: 1,
		Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: key}}}
}

// The Limiter contract and the boundary burst run over every algorithm
// from the table, in package adapters; these are the memory store's own
// properties.

// TestLimiterSweepsIdleTenants floods every limiter with tenants and
// checks the sweeper returns the memory once their budgets are whole.
func TestLimiterSweepsIdleTenants(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				l := a.new(memory.Options{SweepInterval: time.Second})
				defer l.Close()
				// Limit 1: a token bucket is whole again a window on, too.
				short := domain.Rule{Limit: 1, Window: 5 * time.Second}
				for i := range 1000 {
					portstest.MustDecide(t, l, one("rl:flood-"+strconv.Itoa(i), short))
				}
				portstest.MustDecide(t, l, one("rl:long", domain.Rule{Limit: 3, Window: time.Hour}))
				if got, want := l.Len(), 1001; got != want {
					t.Fatalf("Len after flood = %d, want %d", got, want)
				}
				time.Sleep(3 * time.Second)
				if got, want := l.Len(), 1001; got != want {
					t.Errorf("Len before the budgets are whole = %d, want %d", got, want)
				}
				// Two windows: a sliding window's count weighs on the next.
				time.Sleep(8 * time.Second)
				synctest.Wait()
				if got, want := l.Len(), 1; got != want {
					t.Errorf("Len after the budgets are whole and a sweep = %d, want %d", got, want)
				}
				if d := portstest.MustDecide(t, l, one("rl:flood-7", short)); !d.Allowed {
					t.Errorf("a swept tenant: %+v, want a whole budget", d)
				}
			})
		})
	}
}

// TestLimiterSweepRacesAllow sweeps while decisions run: no decision may
// land in a swept entry and be lost.
func TestLimiterSweepRacesAllow(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			clk := portstest.NewFakeClock(t0)
			l := a.new(memory.Options{Now: clk.Now, SweepInterval: time.Microsecond})
			defer l.Close()
			stop := make(chan struct{})
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
						clk.Advance(time.Millisecond)
					}
				}
			}()
			rule := domain.Rule{Limit: 1000, Window: time.Millisecond}
			for range 2000 {
				portstest.MustDecide(t, l, one("churn", rule))
			}
			close(stop)
			// A budget in a window that does not end is exact.
			hour := domain.Rule{Limit: 10, Window: time.Hour}
			var admitted atomic.Int64
			for range 20 {
				if portstest.MustDecide(t, l, one("stable", hour)).Allowed {
					admitted.Add(1)
				}
			}
			if got := admitted.Load(); got != 10 {
				t.Errorf("admitted %d of a live tenant's budget under sweeping, want 10", got)
			}
		})
	}
}

func TestLimiterAllowDoesNotAllocate(t *testing.T) {
	for _, a := range algorithms {
		l := a.new(memory.Options{SweepInterval: -1})
		rule := domain.Rule{Limit: 100, Window: time.Minute}
		for range 200 { // the sliding log's ring is grown
			portstest.MustDecide(t, l, one("rl:acme", rule))
		}
		ctx := context.Background()
		req := one("rl:acme", rule)
		if n := testing.AllocsPerRun(1000, func() { l.Allow(ctx, req) }); n > 1 {
			t.Errorf("%s: Allow of a held tenant allocates %v times, want 1 (the verdict's decision)", a.name, n)
		}
		// With room for the decision in the request, nothing.
		req.Decisions = make([]domain.Decision, 0, 1)
		if n := testing.AllocsPerRun(1000, func() { l.Allow(ctx, req) }); n > 0 {
			t.Errorf("%s: Allow of a held tenant with Request.Decisions allocates %v times, want 0", a.name, n)
		}
		if v := portstest.MustAllow(t, l, req); &v.Decisions[0] != &req.Decisions[:1][0] {
			t.Errorf("%s: the verdict's decisions are not in Request.Decisions", a.name)
		}
		l.Close()
	}
}

func TestLimiterCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		l := a.new(memory.Options{})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkLimiter measures a decision for 1000 tenants, serially and
// from 64 goroutines, for every algorithm (the seed's fixed-window counter is
// BenchmarkCounterIncr).
func BenchmarkLimiter(b *testing.B) {
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	reqs := make([]domain.Request, len(benchKeys))
	for i, k := range benchKeys {
		reqs[i] = one(k, rule)
	}
	for _, a := range algorithms {
		b.Run(a.name+"/serial", func(b *testing.B) {
			l := a.new(memory.Options{})
			defer l.Close()
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(ctx, reqs[i%len(reqs)])
				i++
			}
		})
		b.Run(a.name+"/parallel", func(b *testing.B) {
			l := a.new(memory.Options{})
			defer l.Close()
			ctx := context.Background()
			var seq atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32) // 64 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(7919))
				for pb.Next() {
					l.Allow(ctx, reqs[i%len(reqs)])
					i++
				}
			})
		})
	}
}

func ExampleNewSlidingLog() {
	l := memory.NewSlidingLog(memory.Options{})
	defer l.Close()
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	for range 3 {
		v, _ := l.Allow(context.Background(), domain.Request{
			Tenant: "acme", Route: "default", Cost: 1,
			Limits: []domain.Limit{{Name: "default", Rule: rule, Key: "rl:{acme}:sliding_log"}},
		})
		d := v.Decisions[0]
		fmt.Println(v.Allowed, d.Remaining, d.RetryAfter > 59*time.Second)
	}
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
}
