package portstest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestLimiter runs the [ports.Limiter] contract against h, for any
// algorithm: the budget, tenant isolation, honest Remaining, ResetAfter
// and RetryAfter, exactness under concurrency, several limits decided
// all or nothing, cost, shadow limits (they never deny, and spend only
// what they admit), expiring keys, and concurrency limits (see
// [TestConcurrencyLimits]), and Reserve limits, settled when the
// limiter is a [ports.Settler]. How an algorithm treats a window's edge
// differs between algorithms; see [BoundaryBurst]. A limiter that reads
// usage ([ports.Usage]) runs that contract too.
func TestLimiter(t *testing.T, h LimiterHarness) {
	t.Helper()
	rule := domain.Rule{Limit: 5, Window: h.Window}

	t.Run("a burst admits exactly the limit", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), rule)
		h.startOfWindow(rule.Window)
		for i := range rule.Limit {
			d := MustDecide(t, l, req)
			if !d.Allowed || d.Remaining != rule.Limit-i-1 || d.RetryAfter != 0 {
				t.Errorf("request %d: %+v, want allowed with remaining %d", i+1, d, rule.Limit-i-1)
			}
			checkDecision(t, d, rule, h.Slack)
		}
		v := MustAllow(t, l, req)
		if d := v.Decisions[0]; v.Allowed || d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
			t.Errorf("request %d: %+v, want denied, remaining 0, RetryAfter > 0", rule.Limit+1, v)
		}
		if !denial(v.Outcome) {
			t.Errorf("denied verdict's outcome %v, want denied", v.Outcome)
		}
		checkDecision(t, v.Decisions[0], rule, h.Slack)
	})

	t.Run("tenants are independent", func(t *testing.T) {
		l := h.New(t)
		a, b := h.single(Tenant(), rule), h.single(Tenant(), rule)
		for range rule.Limit + 2 {
			MustAllow(t, l, a)
		}
		if d := MustDecide(t, l, b); !d.Allowed || d.Remaining != rule.Limit-1 {
			t.Errorf("first request of b after a's budget was spent: %+v, want allowed, remaining %d", d, rule.Limit-1)
		}
	})

	t.Run("Remaining is what a burst then gets", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), rule)
		for range 3 {
			MustAllow(t, l, req)
		}
		h.Clock.Advance(h.Window / 2)
		d := MustDecide(t, l, req)
		n := int64(0)
		for MustAllow(t, l, req).Allowed && n <= rule.Limit {
			n++
		}
		// A real store's time moves during the burst, and some
		// algorithms refill as it does.
		if n < d.Remaining || (h.Slack == 0 && n != d.Remaining) {
			t.Errorf("decision said remaining %d; the burst after it got %d", d.Remaining, n)
		}
	})

	t.Run("the budget is whole again after ResetAfter", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), rule)
		var d domain.Decision
		for range rule.Limit + 1 {
			d = MustDecide(t, l, req)
		}
		h.Clock.Advance(d.ResetAfter + h.Slack)
		for i := range rule.Limit {
			if d := MustDecide(t, l, req); !d.Allowed {
				t.Fatalf("request %d after ResetAfter %v: %+v, want allowed", i+1, d.ResetAfter, d)
			}
		}
	})

	t.Run("RetryAfter is honest", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), rule)
		for range rule.Limit {
			MustAllow(t, l, req)
		}
		d := MustDecide(t, l, req)
		if d.Allowed {
			t.Fatalf("request after the budget was spent: %+v, want denied", d)
		}
		if half := d.RetryAfter / 2; half > 2*h.Slack {
			h.Clock.Advance(half)
			if early := MustDecide(t, l, req); early.Allowed {
				t.Errorf("admitted halfway through RetryAfter %v", d.RetryAfter)
			}
			h.Clock.Advance(d.RetryAfter - half + h.Slack)
		} else {
			h.Clock.Advance(d.RetryAfter + h.Slack)
		}
		if again := MustDecide(t, l, req); !again.Allowed {
			t.Errorf("denied after waiting RetryAfter %v: %+v", d.RetryAfter, again)
		}
		// Waiting the whole seconds that the HTTP layer rounds up to
		// admits too (a fresh tenant: the budget is spent again first).
		sec := domain.Rule{Limit: 2, Window: max(h.Window, 2*time.Second)}
		req = h.single(Tenant(), sec)
		for range sec.Limit {
			MustAllow(t, l, req)
		}
		d = MustDecide(t, l, req)
		h.Clock.Advance(time.Duration(domain.CeilSeconds(d.RetryAfter)) * time.Second)
		if again := MustDecide(t, l, req); !again.Allowed {
			t.Errorf("denied after waiting Retry-After %ds: %+v", domain.CeilSeconds(d.RetryAfter), again)
		}
	})

	t.Run("concurrent requests admit exactly the limit", func(t *testing.T) {
		l := h.New(t)
		// A long window: nothing refills while the goroutines run.
		long := domain.Rule{Limit: 50, Window: time.Hour}
		req := h.single(Tenant(), long)
		const goroutines, each = 16, 10
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range each {
					v, err := l.Allow(t.Context(), req, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if v.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if got := admitted.Load(); got != long.Limit {
			t.Errorf("%d concurrent requests admitted %d, want %d", goroutines*each, got, long.Limit)
		}
	})

	testSeveralLimits(t, h)

	testReserve(t, h)

	testRate(t, h)

	testEnvoy(t, h)

	t.Run("usage", func(t *testing.T) {
		l := h.New(t)
		u, ok := l.(ports.Usage)
		if !ok {
			t.Skip("the limiter reads no usage (ports.Usage)")
		}
		testUsage(t, h, l, u)
	})

	t.Run("every key expires within two windows", func(t *testing.T) {
		if h.TTLs == nil {
			t.Skip("the store reports no TTLs")
		}
		l := h.New(t)
		tenant := Tenant()
		// Counting every request where the algorithm can, every hit
		// elsewhere.
		every := domain.CountHits
		if h.Algorithm == "" || h.Algorithm == domain.AlgorithmFixedWindow {
			every = domain.CountEvery
		}
		counting := h.view(t, View{Counting: every})
		counted := h.single(tenant, rule)
		// Envoy's: aligned windows, per-limit costs, a shared key, every
		// limit of an admitted request counted.
		envoyView := h.view(t, View{Counting: every, Windows: domain.WindowsEpoch})
		envoy := Costs(h.Request(tenant, 1, NamedRule{Name: "e", Rule: rule}, NamedRule{Name: "f", Rule: rule, Shadow: true},
			NamedRule{Name: "e", Rule: rule}), 1, 3, 0)
		type step struct {
			l   ports.Limiter
			req domain.Request
		}
		steps := []step{{l, h.single(tenant, rule)}, {l, h.Request(tenant, 2,
			NamedRule{Name: "a", Rule: rule}, NamedRule{Name: "b", Rule: domain.Rule{Limit: 3, Window: h.Window / 2}},
			NamedRule{Name: "c", Rule: domain.Rule{Limit: 3, Window: h.Window}, Shadow: true})}, {counting, counted}, {envoyView, envoy}}
		reqs := steps
		for _, s := range steps {
			for range rule.Limit + 2 {
				MustAllow(t, s.l, s.req)
			}
		}
		ttls := h.TTLs(t, KeyPrefix+"{"+string(tenant)+"}")
		if len(ttls) < len(reqs) {
			t.Fatalf("found keys %v for tenant %s, want at least %d", ttls, tenant, len(reqs))
		}
		for k, ttl := range ttls {
			if ttl <= 0 || ttl > 2*h.Window {
				t.Errorf("key %q: TTL %v, want in (0, %v]", k, ttl, 2*h.Window)
			}
		}
	})

	TestConcurrencyLimits(t, h)
}

// BoundaryBurst returns how many requests h's limiter admits in the span
// of 2×Window/20 around a window's edge, limit per window, when a tenant
// spends nothing but one request until just before the edge and then
// bursts: one request at T, limit requests at T + Window − Window/20 and
// limit more at T + Window + Window/20. A fixed window admits 2×limit − 1
// there, a sliding log exactly limit; the others lie near limit.
func BoundaryBurst(t *testing.T, h LimiterHarness, limit int64) int64 {
	t.Helper()
	l := h.New(t)
	req := h.single(Tenant(), domain.Rule{Limit: limit, Window: h.Window})
	delta := h.Window / 20
	MustAllow(t, l, req)
	h.Clock.Advance(h.Window - delta)
	admitted := int64(0)
	for range 2 {
		for range limit {
			if MustAllow(t, l, req).Allowed {
				admitted++
			}
		}
		h.Clock.Advance(2 * delta)
	}
	return admitted
}

// denial reports whether o is a limit's denial: by the store, or a deny
// cache in front of it repeating one.
func denial(o domain.Outcome) bool {
	return o == domain.OutcomeDenied || o == domain.OutcomeCachedDenied
}

// checkDecision checks the invariants of every decision.
func checkDecision(t *testing.T, d domain.Decision, rule domain.Rule, slack time.Duration) {
	t.Helper()
	if d.Limit != rule.Limit {
		t.Errorf("%+v: Limit %d, want %d", d, d.Limit, rule.Limit)
	}
	if d.Remaining < 0 || d.Remaining >= rule.Limit {
		t.Errorf("%+v: Remaining out of [0, %d)", d, rule.Limit)
	}
	if d.ResetAfter < 0 || d.ResetAfter > 2*rule.Window+slack {
		t.Errorf("%+v: ResetAfter out of [0, %v]", d, 2*rule.Window)
	}
	if d.RetryAfter < 0 || d.RetryAfter > 2*rule.Window+slack {
		t.Errorf("%+v: RetryAfter out of [0, %v]", d, 2*rule.Window)
	}
}

// MustAllow calls l.Allow and fails t on an error or a verdict without
// one decision per limit.
func MustAllow(t *testing.T, l ports.Limiter, req domain.Request) domain.Verdict {
	t.Helper()
	v, err := l.Allow(t.Context(), req, nil)
	if err != nil {
		t.Fatalf("Allow(%s): %v", req.Limits[0].Key, err)
	}
	if len(v.Decisions) != len(req.Limits) {
		t.Fatalf("Allow(%s): %d decisions for %d limits", req.Limits[0].Key, len(v.Decisions), len(req.Limits))
	}
	for i, d := range v.Decisions {
		if d.Shadow != req.Limits[i].Shadow || d.Quota != req.Limits[i].Quota {
			t.Fatalf("Allow(%s): decision %d has Shadow %v, Quota %v, its limit %v, %v", req.Limits[0].Key, i, d.Shadow, d.Quota, req.Limits[i].Shadow, req.Limits[i].Quota)
		}
	}
	if v.Allowed != domain.Admits(v.Decisions) {
		t.Fatalf("Allow(%s): verdict %v disagrees with its decisions %+v", req.Limits[0].Key, v.Allowed, v.Decisions)
	}
	return v
}

// MustDecide calls l.Allow on a request of one limit and returns its
// decision.
func MustDecide(t *testing.T, l ports.Limiter, req domain.Request) domain.Decision {
	t.Helper()
	return MustAllow(t, l, req).Decisions[0]
}
