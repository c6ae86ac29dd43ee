package layers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

func newFakeClock() *portstest.FakeClock {
	return portstest.NewFakeClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
}

// scripted is a limiter whose answer tests set, counting its calls.
type scripted struct {
	mu     sync.Mutex
	answer func(domain.Request) (domain.Verdict, error)
	calls  atomic.Int64
}

func (s *scripted) Allow(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
	s.calls.Add(1)
	s.mu.Lock()
	a := s.answer
	s.mu.Unlock()
	return a(req)
}

func (s *scripted) set(a func(domain.Request) (domain.Verdict, error)) {
	s.mu.Lock()
	s.answer = a
	s.mu.Unlock()
}

// deny answers every request denied by its one limit, with retry to wait
// and reset until the budget is whole, with outcome o.
func deny(o domain.Outcome, retry, reset time.Duration) func(domain.Request) (domain.Verdict, error) {
	return func(req domain.Request) (domain.Verdict, error) {
		return domain.Verdict{Outcome: o, Decisions: []domain.Decision{{Limit: req.Limits[0].Rule.Limit, ResetAfter: reset, RetryAfter: retry}}}, nil
	}
}

func admit(req domain.Request) (domain.Verdict, error) {
	return domain.Verdict{Allowed: true, Decisions: []domain.Decision{{Allowed: true, Limit: req.Limits[0].Rule.Limit, Remaining: 1}}}, nil
}

func requestFor(tenant, route string) domain.Request {
	r := request()
	r.Tenant, r.Route = domain.TenantID(tenant), route
	r.Limits = []domain.Limit{{Name: "default", Rule: domain.Rule{Limit: 1, Window: time.Minute}, Key: "rl:{" + tenant + "}:" + route, Cost: 1}}
	return r
}

func TestDenyCacheServesUntilRetryAfter(t *testing.T) {
	t.Parallel()
	for _, first := range []domain.Outcome{domain.OutcomeDenied, domain.OutcomeLocalDenied} {
		clk := newFakeClock()
		store := &scripted{answer: deny(first, 10*time.Second, 40*time.Second)}
		l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{MaxAge: time.Hour, Now: clk.Now}).Layer())
		req := request()

		if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != first || store.calls.Load() != 1 {
			t.Fatalf("%v: first denial: %+v, %d calls; want the limiter's own", first, v, store.calls.Load())
		}
		for _, step := range []time.Duration{0, 3 * time.Second, 6*time.Second + 999*time.Millisecond} {
			clk.Advance(step)
			v, err := l.Allow(t.Context(), req, nil)
			if err != nil || v.Allowed || v.Outcome != domain.OutcomeCachedDenied || len(v.Decisions) != 1 {
				t.Fatalf("%v: cached answer: %+v, %v; want cached_denied with one decision", first, v, err)
			}
		}
		// 9.999s after the denial: the waits are counted down.
		v, _ := l.Allow(t.Context(), req, nil)
		if d := v.Decisions[0]; d.RetryAfter != time.Millisecond || d.ResetAfter != 30*time.Second+time.Millisecond || d.Limit != 1 {
			t.Errorf("%v: cached decision 9.999s on: %+v, want RetryAfter 1ms, ResetAfter 30.001s", first, d)
		}
		if n := store.calls.Load(); n != 1 {
			t.Errorf("%v: limiter called %d times while the denial stood, want 1", first, n)
		}
		// At the Retry-After, the limiter decides again.
		clk.Advance(time.Millisecond)
		store.set(admit)
		if v, _ := l.Allow(t.Context(), req, nil); !v.Allowed || store.calls.Load() != 2 {
			t.Errorf("%v: at the Retry-After: %+v after %d calls, want the limiter's admission", first, v, store.calls.Load())
		}
	}
}

func TestDenyCacheNeverAdmitsNorCachesWhatIsNoDenial(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	for name, answer := range map[string]func(domain.Request) (domain.Verdict, error){
		"allowed": admit,
		"fail closed": func(domain.Request) (domain.Verdict, error) {
			return domain.Verdict{Outcome: domain.OutcomeError, Unavailable: true}, nil
		},
		"fail open": func(domain.Request) (domain.Verdict, error) {
			return domain.Verdict{Allowed: true, Outcome: domain.OutcomeError}, nil
		},
		"error": func(domain.Request) (domain.Verdict, error) { return domain.Verdict{}, errStore },
		"shadow": func(req domain.Request) (domain.Verdict, error) {
			return domain.Verdict{Allowed: true, Outcome: domain.OutcomeShadowDenied, Decisions: []domain.Decision{{RetryAfter: time.Second}}}, nil
		},
	} {
		store := &scripted{answer: answer}
		l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer())
		for range 3 {
			want, wantErr := answer(request())
			v, err := l.Allow(t.Context(), request(), nil)
			if v.Allowed != want.Allowed || v.Outcome != want.Outcome || (err == nil) != (wantErr == nil) {
				t.Errorf("%s: %+v, %v; want the limiter's %+v, %v", name, v, err, want, wantErr)
			}
		}
		if n := store.calls.Load(); n != 3 {
			t.Errorf("%s: limiter called %d times for 3 requests, want 3 (nothing cached)", name, n)
		}
	}
}

// TestDenyCacheSkipsLongKeys: a denial whose keys are over 4 KiB
// together (an Envoy descriptor's values are a client's) is never held:
// the limiter decides every such request, and the cache's memory stays
// bounded.
func TestDenyCacheSkipsLongKeys(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	store := &scripted{answer: deny(domain.OutcomeDenied, 10*time.Second, 40*time.Second)}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{MaxAge: time.Hour, Now: clk.Now}).Layer())
	for _, tt := range []struct {
		keyLen int
		calls  int64
	}{{4 << 10, 1}, {4<<10 + 1, 3}} {
		store.calls.Store(0)
		req := request()
		req.Route = fmt.Sprint("r", tt.keyLen)
		req.Limits[0].Key = strings.Repeat("k", tt.keyLen)
		for range 3 {
			if v, err := l.Allow(t.Context(), req, nil); err != nil || v.Allowed {
				t.Fatalf("keys of %d bytes: %+v, %v; want denied", tt.keyLen, v, err)
			}
		}
		if n := store.calls.Load(); n != tt.calls {
			t.Errorf("keys of %d bytes: the limiter decided %d of 3 denials, want %d", tt.keyLen, n, tt.calls)
		}
	}
}

func TestDenyCacheKeysByTenantRouteCostAndLimits(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	store := &scripted{answer: deny(domain.OutcomeDenied, time.Minute, time.Minute)}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer())
	base := requestFor("acme", "search")
	l.Allow(t.Context(), base, nil)

	raised := requestFor("acme", "search")
	raised.Limits[0].Rule.Limit = 1000 // a SIGHUP raised the budget
	cost := requestFor("acme", "search")
	cost.Limits[0].Cost = 2
	more := requestFor("acme", "search")
	more.Limits = append(more.Limits, domain.Limit{Name: "per-day", Rule: domain.Rule{Limit: 9, Window: time.Hour}, Key: "rl:{acme}:per-day", Cost: 1})
	for name, req := range map[string]domain.Request{
		"another tenant": requestFor("globex", "search"),
		"another route":  requestFor("acme", "export"),
		"a raised limit": raised,
		"another cost":   cost,
		"another limit":  more,
	} {
		before := store.calls.Load()
		if v, _ := l.Allow(t.Context(), req, nil); v.Outcome == domain.OutcomeCachedDenied || store.calls.Load() != before+1 {
			t.Errorf("%s: answered %v from the cache of acme's denial on search, want the limiter", name, v.Outcome)
		}
	}
	// The route and tenant concatenate without colliding.
	a, b := requestFor("ab", "c"), requestFor("a", "bc")
	b.Limits = a.Limits
	l.Allow(t.Context(), a, nil)
	if v, _ := l.Allow(t.Context(), b, nil); v.Outcome == domain.OutcomeCachedDenied {
		t.Errorf(`tenant "a" on route "bc" was answered from the denial of "ab" on "c"`)
	}
}

// TestDenyCacheMaxAge: a denial with a month to wait is served for
// MaxAge (one second by default), then the limiter is asked again, and
// its new denial cached afresh.
func TestDenyCacheMaxAge(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	const month = 30 * 24 * time.Hour
	store := &scripted{answer: deny(domain.OutcomeDenied, month, month)}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer())
	req := request()
	l.Allow(t.Context(), req, nil)
	clk.Advance(layers.DefaultDenyCacheMaxAge - time.Millisecond)
	if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeCachedDenied || store.calls.Load() != 1 {
		t.Fatalf("within MaxAge: %v after %d calls, want cached_denied after 1", v.Outcome, store.calls.Load())
	}
	if d := mustDecision(t, l, req); d.RetryAfter != month-layers.DefaultDenyCacheMaxAge+time.Millisecond {
		t.Errorf("cached RetryAfter %v, want the month counted down", d.RetryAfter)
	}
	clk.Advance(time.Millisecond)
	if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeDenied || store.calls.Load() != 2 {
		t.Fatalf("at MaxAge: %v after %d calls, want the limiter's denial after 2", v.Outcome, store.calls.Load())
	}
	if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeCachedDenied || store.calls.Load() != 2 {
		t.Errorf("after the second denial: %v after %d calls, want cached_denied", v.Outcome, store.calls.Load())
	}
}

// TestDenyCacheRefreshesOnce: past MaxAge, one request asks the limiter
// again while the others are still answered from the denial; when the
// limiter then admits (a reset elsewhere), the denial is gone for all.
func TestDenyCacheRefreshesOnce(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	const hour = time.Hour
	store := &scripted{answer: deny(domain.OutcomeDenied, hour, hour)}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer())
	req := request()
	l.Allow(t.Context(), req, nil)
	clk.Advance(layers.DefaultDenyCacheMaxAge)

	release := make(chan struct{})
	store.set(func(r domain.Request) (domain.Verdict, error) {
		<-release // the refresh's round trip
		return admit(r)
	})
	refreshed := make(chan domain.Verdict)
	go func() {
		v, _ := l.Allow(t.Context(), req, nil)
		refreshed <- v
	}()
	for store.calls.Load() != 2 {
		time.Sleep(time.Millisecond) // until the refresh is with the limiter
	}
	for range 20 {
		if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeCachedDenied {
			t.Fatalf("during the refresh: %v, want cached_denied", v.Outcome)
		}
	}
	if n := store.calls.Load(); n != 2 {
		t.Errorf("limiter called %d times during one refresh, want 2 (the first denial, the refresh)", n)
	}
	close(release)
	if v := <-refreshed; !v.Allowed {
		t.Fatalf("the refresh: %+v, want the limiter's admission", v)
	}
	if v, _ := l.Allow(t.Context(), req, nil); !v.Allowed || store.calls.Load() != 3 {
		t.Errorf("after the limiter admitted: %v after %d calls, want the limiter's admission (the denial gone)", v.Outcome, store.calls.Load())
	}
}

// TestDenyCacheForget: Forget drops a tenant's denials on every route,
// and no other tenant's.
func TestDenyCacheForget(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	store := &scripted{answer: deny(domain.OutcomeDenied, time.Minute, time.Minute)}
	cache := layers.NewDenyCache(layers.DenyCacheOptions{MaxAge: time.Hour, Now: clk.Now})
	l := ports.Chain(store, cache.Layer())
	reqs := []domain.Request{requestFor("acme", "a"), requestFor("acme", "b"), requestFor("other", "a")}
	for i := range 40 { // and other tenants around them in the shards' heaps
		reqs = append(reqs, requestFor(fmt.Sprint("t", i), "a"))
	}
	for _, req := range reqs {
		l.Allow(t.Context(), req, nil)
	}
	cache.Forget("acme")
	for _, req := range reqs {
		before := store.calls.Load()
		v, _ := l.Allow(t.Context(), req, nil)
		asked := store.calls.Load() != before
		if forgotten := req.Tenant == "acme"; asked != forgotten {
			t.Errorf("%s on %s after Forget(acme): limiter asked %v, want %v (%v)", req.Tenant, req.Route, asked, forgotten, v.Outcome)
		}
	}
}

// mustDecision returns the one decision of l's verdict on req.
func mustDecision(t *testing.T, l ports.Limiter, req domain.Request) domain.Decision {
	t.Helper()
	v, err := l.Allow(t.Context(), req, nil)
	if err != nil || len(v.Decisions) != 1 {
		t.Fatalf("Allow: %+v, %v; want one decision", v, err)
	}
	return v.Decisions[0]
}

// TestDenyCacheIsBounded: a flood of distinct denied tenants keeps at
// most Capacity denials, and evicts those ending soonest first.
func TestDenyCacheIsBounded(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	store := &scripted{answer: deny(domain.OutcomeDenied, time.Hour, time.Hour)}
	const capacity = 64
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Capacity: capacity, MaxAge: 2 * time.Hour, Now: clk.Now}).Layer())
	long := requestFor("long", "default")
	l.Allow(t.Context(), long, nil) // ends in an hour; the flood's end sooner
	store.set(deny(domain.OutcomeDenied, time.Minute, time.Minute))
	const flood = 5000
	for i := range flood {
		l.Allow(t.Context(), requestFor(fmt.Sprint("t", i), "default"), nil)
	}
	before := store.calls.Load()
	for i := range flood {
		l.Allow(t.Context(), requestFor(fmt.Sprint("t", i), "default"), nil)
	}
	if cached := flood - (store.calls.Load() - before); cached > capacity {
		t.Errorf("%d of %d flooding tenants answered from the cache, want at most the capacity %d", cached, flood, capacity)
	}
	before = store.calls.Load()
	if v, _ := l.Allow(t.Context(), long, nil); v.Outcome != domain.OutcomeCachedDenied || store.calls.Load() != before {
		t.Errorf("the denial ending last was evicted by denials ending sooner: %v", v.Outcome)
	}
}

// TestDenyCacheConcurrent runs denials, expiries and lookups at once
// (for -race); every answer is a denial.
func TestDenyCacheConcurrent(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	store := &scripted{answer: deny(domain.OutcomeDenied, time.Second, time.Second)}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{Capacity: 32, Now: clk.Now}).Layer())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if g == 0 && i%100 == 0 {
					clk.Advance(300 * time.Millisecond)
				}
				if v, err := l.Allow(context.Background(), requestFor(fmt.Sprint("t", (g*7+i)%100), "default"), nil); err != nil || v.Allowed {
					t.Errorf("an admission or error from a limiter that only denies: %+v, %v", v, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkDenyCache compares a denial answered from the cache with one
// the memory store makes itself (the fastest store), in parallel over one
// denied tenant and over 1000.
func BenchmarkDenyCache(b *testing.B) {
	for _, tenants := range []int{1, 1000} {
		reqs := make([]domain.Request, tenants)
		for i := range reqs {
			reqs[i] = requestFor(fmt.Sprint("t", i), "default")
		}
		for _, c := range []struct {
			name  string
			layer bool
		}{{"memory-store", false}, {"deny-cache-over-memory", true}} {
			b.Run(fmt.Sprintf("%s/tenants=%d", c.name, tenants), func(b *testing.B) {
				store := newMemory(b, memory.Options{SweepInterval: -1})
				defer store.Close()
				var l ports.Limiter = store
				if c.layer {
					l = ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{}).Layer())
				}
				for _, r := range reqs { // spend every budget of 1
					l.Allow(context.Background(), r, nil)
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						if v, _ := l.Allow(context.Background(), reqs[i%tenants], nil); v.Allowed {
							b.Error("admitted over the budget")
							return
						}
						i++
					}
				})
			})
		}
	}
}

// TestDenyCacheSlots: a denial for want of a concurrency slot is never
// cached (the slot may come back at once); a rate limit's denial beside a
// concurrency limit is, for the rate limit's wait, not the slot's.
func TestDenyCacheSlots(t *testing.T) {
	t.Parallel()
	clk := newFakeClock()
	slot := domain.Decision{Limit: 1, ResetAfter: time.Second, RetryAfter: time.Second}
	rate := domain.Decision{Allowed: true, Limit: 5, Remaining: 4}
	store := &scripted{answer: func(domain.Request) (domain.Verdict, error) {
		return domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{rate, slot}}, nil
	}}
	l := ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{MaxAge: time.Hour, Now: clk.Now}).Layer())
	req := requestFor("acme", "default")
	req.Limits = append(req.Limits, domain.Limit{Name: "inflight", Rule: domain.Rule{Limit: 1, Window: domain.ConcurrencyWindow},
		Key: "rl:{acme}:in_flight:inflight", Cost: 1, Concurrency: true})
	for i := range 3 {
		if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeDenied {
			t.Fatalf("denial %d for want of a slot: %+v, want the store's (never cached)", i+1, v)
		}
	}
	if got := store.calls.Load(); got != 3 {
		t.Errorf("store calls = %d, want 3", got)
	}
	// The rate limit denies for a minute, the slot too: cached for the minute.
	rate = domain.Decision{Limit: 5, ResetAfter: time.Minute, RetryAfter: time.Minute}
	store.set(func(domain.Request) (domain.Verdict, error) {
		return domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{rate, slot}}, nil
	})
	l.Allow(t.Context(), req, nil)
	clk.Advance(30 * time.Second)
	if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeCachedDenied {
		t.Errorf("30s into a rate limit's minute: %+v, want cached_denied", v)
	}
	clk.Advance(30 * time.Second)
	if v, _ := l.Allow(t.Context(), req, nil); v.Outcome != domain.OutcomeDenied {
		t.Errorf("after the rate limit's minute: %+v, want the store's", v)
	}
}
