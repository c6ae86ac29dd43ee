package memory_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// algorithm is one row of the table of algorithms, built on the memory
// store.
type algorithm struct {
	name string
	new  func(memory.Options) *memory.Limiter
}

// algorithms are the memory limiters under test: every row of
// domain.Algorithms.
var algorithms = func() []algorithm {
	var as []algorithm
	for _, a := range domain.Algorithms {
		as = append(as, algorithm{a.Name, func(o memory.Options) *memory.Limiter {
			l, err := memory.New(a.Name, o)
			if err != nil {
				panic(err) // TestEveryAlgorithm reports it
			}
			return l
		}})
	}
	return as
}()

// TestEveryAlgorithm: the memory store builds every row of the table,
// and no other name.
func TestEveryAlgorithm(t *testing.T) {
	t.Parallel()
	for _, a := range domain.Algorithms {
		l, err := memory.New(a.Name, memory.Options{})
		if err != nil {
			t.Errorf("New(%q): %v", a.Name, err)
			continue
		}
		l.Close()
	}
	if _, err := memory.New("leaky_bucket", memory.Options{}); err == nil {
		t.Error(`New("leaky_bucket") succeeded`)
	}
}

// one is a request of cost 1 against one limit, stored under key.
func one(key string, rule domain.Rule) domain.Request {
	return domain.Request{Tenant: "acme", Route: "default",
		Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: key, Cost: 1}}}
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
		if n := testing.AllocsPerRun(1000, func() { l.Allow(ctx, req, nil) }); n > 1 {
			t.Errorf("%s: Allow of a held tenant allocates %v times, want 1 (the verdict's decision)", a.name, n)
		}
		// With room for the decision in dst, nothing.
		dst := make([]domain.Decision, 0, 1)
		if n := testing.AllocsPerRun(1000, func() { l.Allow(ctx, req, dst) }); n > 0 {
			t.Errorf("%s: Allow of a held tenant with room in dst allocates %v times, want 0", a.name, n)
		}
		if v, _ := l.Allow(ctx, req, dst); &v.Decisions[0] != &dst[:1][0] {
			t.Errorf("%s: the verdict's decisions are not in dst", a.name)
		}
		// A request and room built on the caller's stack stay there: Allow
		// lets neither escape, of one limit or of several.
		if n := testing.AllocsPerRun(1000, func() {
			var room [1]domain.Decision
			l.Allow(ctx, domain.Request{Tenant: "acme", Route: "default",
				Limits: []domain.Limit{{Name: domain.DefaultLimit, Rule: rule, Key: "rl:acme", Cost: 1}}}, room[:0])
		}); n > 0 {
			t.Errorf("%s: Allow of a request on the caller's stack allocates %v times, want 0", a.name, n)
		}
		if n := testing.AllocsPerRun(1000, func() {
			var room [2]domain.Decision
			l.Allow(ctx, domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{
				{Name: domain.DefaultLimit, Rule: rule, Key: "rl:acme", Cost: 1},
				{Name: "route", Rule: rule, Key: "rl:acme:route", Cost: 1}}}, room[:0])
		}); n > 0 {
			t.Errorf("%s: Allow of two limits on the caller's stack allocates %v times, want 0", a.name, n)
		}
		l.Close()
	}
}

// TestLimiterCloseIsIdempotent: a second Close returns at once, without
// panicking on the stopped sweeper, and decisions still work without
// it. In the synctest bubble a sweeper left running would keep the
// bubble alive, and synctest.Test would not return.
func TestLimiterCloseIsIdempotent(t *testing.T) {
	for _, a := range algorithms {
		synctest.Test(t, func(t *testing.T) {
			l := a.new(memory.Options{SweepInterval: time.Second})
			l.Close()
			l.Close()
			if d := portstest.MustDecide(t, l, one("rl:after-close", domain.Rule{Limit: 1, Window: time.Second})); !d.Allowed {
				t.Errorf("%s: a decision after Close: %+v, want allowed", a.name, d)
			}
		})
	}
}

// TestMaxKeys: a full store refuses a new key with ErrFull (a
// ports.ErrStoreFull), spends nothing, keeps deciding the keys it holds,
// and always admits the unknown tenant's; a request that holds one of its
// keys of a policy adds the others (a tenant held, on a route new to it,
// keeps its own exhausted budget, not unknown's), and one of Envoy's
// does not; a sweep makes room again.
func TestMaxKeys(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		synctest.Test(t, func(t *testing.T) {
			l := a.new(memory.Options{MaxKeys: 3, SweepInterval: time.Second})
			defer l.Close()
			rule := domain.Rule{Limit: 2, Window: time.Second}
			for i := range 3 {
				portstest.MustDecide(t, l, one("rl:{t"+strconv.Itoa(i)+"}", rule))
			}
			_, err := l.Allow(t.Context(), one("rl:{t9}", rule), nil)
			if !errors.Is(err, ports.ErrStoreFull) {
				t.Fatalf("%s: a fourth key: err %v, want ErrStoreFull", a.name, err)
			}
			if d := portstest.MustDecide(t, l, one("rl:{t0}", rule)); !d.Allowed || d.Remaining != 0 {
				t.Errorf("%s: a held key when full: %+v, want allowed, remaining 0", a.name, d)
			}
			unknown := one("rl:{unknown}", rule)
			unknown.Tenant = domain.Unknown
			if d := portstest.MustDecide(t, l, unknown); !d.Allowed {
				t.Errorf("%s: the unknown tenant when full: %+v, want decided and allowed", a.name, d)
			}
			if got := l.Len(); got != 4 {
				t.Errorf("%s: Len = %d, want 4 (3 + unknown)", a.name, got)
			}
			// t0's budget is spent; with a limit of a route new to it, it
			// is still denied by its own.
			both := one("rl:{t0}", rule)
			both.Limits = append(both.Limits, domain.Limit{Name: "route", Rule: rule, Key: "rl:{t0}:route", Cost: 1})
			// Not a policy's keys (Envoy's descriptors): none added.
			if _, err := l.Allow(t.Context(), both, nil); !errors.Is(err, ports.ErrStoreFull) {
				t.Errorf("%s: keys not a policy's, one held, when full: err %v, want ErrStoreFull", a.name, err)
			}
			// The view of a policy's keys, on the same store, adds it.
			policy, err := l.View(memory.View{PolicyKeys: true})
			if err != nil {
				t.Fatal(err)
			}
			v, err := policy.Allow(t.Context(), both, nil)
			if err != nil || v.Allowed || v.Decisions[0].Allowed || !v.Decisions[1].Allowed || l.Len() != 5 {
				t.Errorf("%s: a held tenant's new key when full: %+v, %v, %d keys; want denied by its own spent limit, the new key added", a.name, v, err, l.Len())
			}
			time.Sleep(3 * time.Second)
			synctest.Wait()
			if d := portstest.MustDecide(t, l, one("rl:{t9}", rule)); !d.Allowed {
				t.Errorf("%s: a new key after the sweep: %+v, want allowed", a.name, d)
			}
		})
	}
}

func ExampleNew() {
	l, _ := memory.New(domain.AlgorithmSlidingLog, memory.Options{})
	defer l.Close()
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	for range 3 {
		v, _ := l.Allow(context.Background(), domain.Request{
			Tenant: "acme", Route: "default",
			Limits: []domain.Limit{{Name: "default", Rule: rule, Key: "rl:{acme}:sliding_log", Cost: 1}},
		}, nil)
		d := v.Decisions[0]
		fmt.Println(v.Allowed, d.Remaining, d.RetryAfter > 59*time.Second)
	}
	// Output:
	// true 1 false
	// true 0 false
	// false 0 true
}

// TestSweepFollowsTheWindow: a flood of distinct tenants on a 2 s window
// is swept within a few windows (not the 10 s default interval), and the
// heap it took comes back.
func TestSweepFollowsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
		defer l.Close()
		heap := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapInuse
		}
		before := heap()
		const tenants = 200_000
		rule := domain.Rule{Limit: 10, Window: 2 * time.Second}
		req := one("", rule)
		dst := make([]domain.Decision, 0, 1)
		for i := range tenants {
			req.Limits[0].Key = "rl:{flood-" + strconv.Itoa(i) + "}"
			l.Allow(t.Context(), req, dst)
		}
		flooded := heap()
		if l.Len() != tenants {
			t.Fatalf("Len after flood = %d, want %d", l.Len(), tenants)
		}
		time.Sleep(3 * 2 * time.Second) // three windows
		synctest.Wait()
		if got := l.Len(); got != 0 {
			t.Errorf("Len three windows after the flood = %d, want 0", got)
		}
		after := heap()
		t.Logf("heap in use: %d MB before, %d MB flooded, %d MB three windows on", before>>20, flooded>>20, after>>20)
		if grown := flooded - before; after > before+grown/4 {
			t.Errorf("heap in use %d B three windows on, want it back near %d B (flood took %d B)", after, before, grown)
		}
	})
}

// memoryHarness runs algorithm a on the memory store with a fake clock.
func memoryHarness(a algorithm) portstest.LimiterHarness {
	clk := portstest.NewFakeClock(t0)
	return portstest.LimiterHarness{
		New: func(t *testing.T) ports.Limiter {
			l := a.new(memory.Options{Now: clk.Now, SweepInterval: -1})
			t.Cleanup(func() { l.Close() })
			return l
		},
		NewView: func(t *testing.T, v portstest.View) (ports.Limiter, error) {
			l := a.new(memory.Options{Now: clk.Now, SweepInterval: -1})
			t.Cleanup(func() { l.Close() })
			return l.View(memory.View{Counting: v.Counting, Windows: v.Windows})
		},
		Clock:     clk,
		Now:       clk.Now,
		Window:    time.Minute,
		Algorithm: a.name,
		Keys:      keys.Layout{Prefix: portstest.KeyPrefix, Algorithm: a.name},
	}
}

// TestLimiterContract runs the Limiter contract over every row of the
// table on the memory store. Redis runs the same in integration/.
func TestLimiterContract(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			portstest.TestLimiter(t, memoryHarness(a))
		})
	}
}

// TestBoundaryBurst pins what each algorithm admits around a window's
// edge, on the memory store: the docs quote these numbers.
func TestBoundaryBurst(t *testing.T) {
	t.Parallel()
	const limit = 10
	want := map[string]int64{"fixed_window": 2*limit - 1, "sliding_log": limit, "sliding_window": limit, "token_bucket": limit + 1}
	for _, a := range algorithms {
		w, ok := want[a.name]
		if !ok {
			t.Errorf("%s: no expected boundary burst: add one", a.name)
			continue
		}
		if got := portstest.BoundaryBurst(t, memoryHarness(a), limit); got != w {
			t.Errorf("%s: BoundaryBurst = %d, want %d", a.name, got, w)
		}
	}
}

// slotsOf is a request of cost 1 against one concurrency limit of n,
// stored under key.
func slotsOf(key string, n int64) domain.Request {
	return domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{{
		Name: "inflight", Rule: domain.Rule{Limit: n, Window: domain.ConcurrencyWindow}, Key: key, Cost: 1, Concurrency: true}}}
}

// TestConcurrencySlotsOutliveSweeps: a key whose slots are held is never
// swept, however long its requests run (a swept key would forget them
// and admit N more); once its last slot comes back it is swept.
func TestConcurrencySlotsOutliveSweeps(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		l, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{SweepInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		req := slotsOf("rl:{acme}:in_flight:inflight", 2)
		a, b := portstest.MustAllow(t, l, req), portstest.MustAllow(t, l, req)
		time.Sleep(time.Hour)
		synctest.Wait()
		if v := portstest.MustAllow(t, l, req); v.Allowed {
			t.Fatalf("an hour on, two slots held: %+v admitted (the key was swept)", v)
		}
		if got := l.Len(); got != 1 {
			t.Errorf("Len with slots held = %d, want 1", got)
		}
		a.Release()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := l.Len(); got != 1 {
			t.Errorf("Len with one slot held = %d, want 1", got)
		}
		b.Release()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := l.Len(); got != 0 {
			t.Errorf("Len after every slot came back and a sweep = %d, want 0", got)
		}
	})
}

// TestConcurrencyReleaseRacesAllow: releases and acquisitions of one key
// from many goroutines, with a sweeper running: the count never goes past
// the limit, and ends at zero.
func TestConcurrencyReleaseRacesAllow(t *testing.T) {
	t.Parallel()
	l, err := memory.New(domain.AlgorithmSlidingLog, memory.Options{SweepInterval: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const n = 3
	req := slotsOf("rl:{acme}:in_flight:inflight", n)
	var inFlight, most atomic.Int64
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 2000 {
				v := portstest.MustAllow(t, l, req)
				if !v.Allowed {
					continue
				}
				if now := inFlight.Add(1); now > most.Load() {
					most.Store(now)
				}
				inFlight.Add(-1)
				v.Release()
				v.Release()
			}
		}()
	}
	for range 8 {
		<-done
	}
	if got := most.Load(); got > n {
		t.Errorf("%d in flight at once, want at most %d", got, n)
	}
	for i := range n {
		if v := portstest.MustAllow(t, l, req); !v.Allowed {
			t.Fatalf("request %d after the race: %+v, want allowed (a slot leaked)", i+1, v)
		}
	}
}

// TestUsageHoldsNoKey: the usage contract's keys are counted by the
// Redis harness; here Len shows that Peek and Reset of a tenant never
// seen add nothing, and that Reset drops what was held.
func TestUsageHoldsNoKey(t *testing.T) {
	t.Parallel()
	l, err := memory.New(domain.AlgorithmTokenBucket, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	req := domain.Request{Tenant: "acme", Route: "default", Limits: []domain.Limit{
		{Name: "a", Key: "k:{acme}a", Rule: domain.Rule{Limit: 3, Window: time.Minute}, Cost: 1},
		{Name: "b", Key: "k:{acme}b", Rule: domain.Rule{Limit: 3, Window: time.Minute}, Cost: 1},
	}}
	ctx := context.Background()
	if _, err := l.Peek(ctx, req); err != nil || l.Len() != 0 {
		t.Fatalf("Peek of nothing: %v, Len %d, want 0", err, l.Len())
	}
	if err := l.Reset(ctx, req); err != nil || l.Len() != 0 {
		t.Fatalf("Reset of nothing: %v, Len %d, want 0", err, l.Len())
	}
	portstest.MustAllow(t, l, req)
	if l.Len() != 2 {
		t.Fatalf("Len after a request = %d, want 2", l.Len())
	}
	if err := l.Reset(ctx, req); err != nil || l.Len() != 0 {
		t.Fatalf("Reset: %v, Len %d, want 0", err, l.Len())
	}
}
