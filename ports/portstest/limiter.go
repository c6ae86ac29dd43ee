package portstest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// LimiterHarness is what TestLimiter needs to exercise one
// implementation of one algorithm.
type LimiterHarness struct {
	// New returns the Limiter under test. It may be called once per
	// subtest; the limiter must start empty of the keys TestLimiter uses
	// (they are unique per run).
	New func(t *testing.T) ports.Limiter
	// Clock moves the limiter's time.
	Clock Clock
	// Window is the window of the rules the tests use. A fake clock can
	// take minutes; a real store needs a short one, as the tests wait.
	Window time.Duration
	// Slack is how far a real store's time may drift from the harness's
	// clock between two steps (round trips, scheduling). Zero for fakes,
	// which makes the checks exact.
	Slack time.Duration
	// Algorithm names the algorithm, for the shape of the keys the tests
	// build ([domain.Key]). Empty means fixed window.
	Algorithm string
	// Now, if set, reads the limiter's clock: the fake clock's Now. Nil
	// means time.Now (a real store on this host's clock). The tests of
	// windows aligned to the epoch read it.
	Now func() time.Time
	// TTLs, if set, returns every storage key the limiter wrote for the
	// tenant whose keys start with prefix, with its time to live
	// (negative: none). A store that keeps keys elsewhere (Redis) sets
	// it; TestLimiter then checks every key expires within two windows.
	TTLs func(t *testing.T, prefix string) map[string]time.Duration
	// Lease is how long a concurrency slot of a vanished holder stays
	// taken on the store (Redis: TOLLGATE_LEASE); zero for a store
	// without leases (memory). With TTLs, the concurrency tests check
	// that every key of a concurrency limit expires within two leases.
	Lease time.Duration
}

// Clock moves a store's notion of time forward. A fake clock steps; a real
// store sleeps.
type Clock interface {
	Advance(d time.Duration)
}

// Sleeper is the [Clock] of a store on real time.
type Sleeper struct{}

// Advance sleeps for d.
func (Sleeper) Advance(d time.Duration) { time.Sleep(d) }

var runID atomic.Int64 // makes test tenants unique

// Tenant returns a tenant id no other test of this process has used, and
// that another process running the same tests is unlikely to use.
func Tenant() domain.TenantID {
	return domain.TenantID(fmt.Sprintf("t%x-%d", time.Now().UnixNano(), runID.Add(1)))
}

// KeyPrefix is the prefix of every key the conformance tests build.
const KeyPrefix = "portstest:"

// Request returns a request of tenant on route "default" that spends cost
// from each of limits, named name[i] with rule rules[i]. The keys are
// built with [domain.Key] under [KeyPrefix] for h's algorithm.
func (h LimiterHarness) Request(tenant domain.TenantID, cost int64, limits ...NamedRule) domain.Request {
	algorithm := h.Algorithm
	if algorithm == "" {
		algorithm = domain.AlgorithmFixedWindow
	}
	req := domain.Request{Tenant: tenant, Route: "default", Cost: cost}
	for _, l := range limits {
		lim := domain.Limit{
			Name: l.Name, Rule: l.Rule, Key: domain.Key(KeyPrefix, tenant, algorithm, "", l.Name), Shadow: l.Shadow,
		}
		if l.Concurrency {
			lim.Concurrency = true
			lim.Rule = domain.Rule{Limit: l.Rule.Limit, Window: domain.ConcurrencyWindow}
			lim.Key = domain.Key(KeyPrefix, tenant, domain.KeyInFlight, "", l.Name)
		}
		req.Limits = append(req.Limits, lim)
	}
	return req
}

// NamedRule is a limit's name and rule, and whether it is in shadow
// mode, for [LimiterHarness.Request].
type NamedRule struct {
	Name   string
	Rule   domain.Rule
	Shadow bool
	// Concurrency makes it a concurrency limit of Rule.Limit requests in
	// flight ([domain.Limit.Concurrency]; the window is ignored).
	Concurrency bool
}

// single returns a request of cost 1 against the one limit "default".
func (h LimiterHarness) single(tenant domain.TenantID, rule domain.Rule) domain.Request {
	return h.Request(tenant, 1, NamedRule{Name: domain.DefaultLimit, Rule: rule})
}

// TestLimiter runs the [ports.Limiter] contract against h, for any
// algorithm: the budget, tenant isolation, honest Remaining, ResetAfter
// and RetryAfter, exactness under concurrency, several limits decided
// all or nothing, cost, shadow limits (they never deny, and spend only
// what they admit), expiring keys, and concurrency limits (see
// [TestConcurrencyLimits]). How an algorithm treats a window's edge
// differs between algorithms; see [BoundaryBurst]. A limiter that reads
// usage ([ports.Usage]) runs that contract too.
func TestLimiter(t *testing.T, h LimiterHarness) {
	t.Helper()
	rule := domain.Rule{Limit: 5, Window: h.Window}

	t.Run("a burst admits exactly the limit", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), rule)
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
					v, err := l.Allow(t.Context(), req)
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

	t.Run("several limits: all or nothing", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		long := time.Hour
		small := NamedRule{Name: "small", Rule: domain.Rule{Limit: 3, Window: long}}
		big := NamedRule{Name: "big", Rule: domain.Rule{Limit: 5, Window: long}}
		both := h.Request(tenant, 1, small, big)
		for i := range 3 {
			v := MustAllow(t, l, both)
			if !v.Allowed || len(v.Decisions) != 2 || v.Decisions[0].Remaining != int64(2-i) || v.Decisions[1].Remaining != int64(4-i) {
				t.Fatalf("request %d: %+v, want allowed, remaining %d and %d", i+1, v, 2-i, 4-i)
			}
		}
		for i := range 4 {
			v := MustAllow(t, l, both)
			if v.Allowed || v.Decisions[0].Allowed {
				t.Fatalf("request %d over the small limit: %+v, want denied by it", 4+i, v)
			}
			// The big limit admitted but spent nothing.
			if d := v.Decisions[1]; d.Remaining != 2 {
				t.Errorf("request %d denied by small: big says %+v, want remaining 2 (nothing spent)", 4+i, d)
			}
			if got := v.RetryAfter(); got <= 0 || got > 2*long {
				t.Errorf("request %d: verdict RetryAfter %v, want in (0, 2h]", 4+i, got)
			}
		}
		// The denials spent nothing from the big limit: two more fit.
		alone := h.Request(tenant, 1, big)
		for i := range 2 {
			if v := MustAllow(t, l, alone); !v.Allowed {
				t.Fatalf("big alone, request %d: %+v, want allowed (denials must not spend)", i+1, v)
			}
		}
		if v := MustAllow(t, l, alone); v.Allowed {
			t.Errorf("big alone past its limit: %+v, want denied", v)
		}
		if i := (domain.Verdict{Decisions: []domain.Decision{{Remaining: 1}, {Remaining: 0}}}).Tightest(); i != 1 {
			t.Errorf("Tightest = %d, want 1", i)
		}
	})

	t.Run("cost spends units from every limit", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		ten := NamedRule{Name: domain.DefaultLimit, Rule: domain.Rule{Limit: 10, Window: time.Hour}}
		for i := range 2 {
			v := MustAllow(t, l, h.Request(tenant, 4, ten))
			if d := v.Decisions[0]; !v.Allowed || d.Remaining != int64(6-4*i) {
				t.Fatalf("cost 4, request %d: %+v, want allowed, remaining %d", i+1, v, 6-4*i)
			}
		}
		v := MustAllow(t, l, h.Request(tenant, 4, ten))
		if d := v.Decisions[0]; v.Allowed || d.Remaining != 2 || d.RetryAfter <= 0 {
			t.Errorf("cost 4 with 2 left: %+v, want denied, remaining 2", v)
		}
		v = MustAllow(t, l, h.Request(tenant, 2, ten))
		if d := v.Decisions[0]; !v.Allowed || d.Remaining != 0 {
			t.Errorf("cost 2 with 2 left: %+v, want allowed, remaining 0", v)
		}
		if v := MustAllow(t, l, h.Request(Tenant(), 11, ten)); v.Allowed {
			t.Errorf("cost 11 over a limit of 10: %+v, want denied", v)
		}
	})

	t.Run("a shadow limit never denies", func(t *testing.T) {
		l := h.New(t)
		req := h.single(Tenant(), domain.Rule{Limit: 3, Window: time.Hour})
		req.Limits[0].Shadow = true
		for i := range 6 {
			v := MustAllow(t, l, req)
			d := v.Decisions[0]
			over := i >= 3
			switch {
			case !v.Allowed:
				t.Fatalf("request %d: %+v, want admitted (the only limit is in shadow mode)", i+1, v)
			case d.Allowed == over:
				t.Errorf("request %d: the shadow limit says allowed=%v, want %v", i+1, d.Allowed, !over)
			case over && (v.Outcome != domain.OutcomeShadowDenied || d.RetryAfter <= 0 || d.Remaining != 0):
				t.Errorf("request %d: %+v, want outcome shadow_denied, remaining 0, RetryAfter > 0", i+1, v)
			case !over && v.Outcome != domain.OutcomeAllowed:
				t.Errorf("request %d: outcome %v, want allowed", i+1, v.Outcome)
			}
			if got := v.RetryAfter(); got != 0 {
				t.Errorf("request %d: verdict RetryAfter %v, want 0 (shadow limits deny nothing)", i+1, got)
			}
		}
	})

	t.Run("a shadow denial spends nothing from the shadow limit", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		long := time.Hour
		enforced := NamedRule{Name: "enforced", Rule: domain.Rule{Limit: 10, Window: long}}
		dry := NamedRule{Name: "dry", Rule: domain.Rule{Limit: 3, Window: long}, Shadow: true}
		// Cost 2: the first spends 2 from both; the second finds 1 left in
		// the shadow limit, which would deny and spends nothing; the
		// enforced limit spends, since the request is admitted.
		v := MustAllow(t, l, h.Request(tenant, 2, enforced, dry))
		if !v.Allowed || v.Outcome != domain.OutcomeAllowed || v.Decisions[0].Remaining != 8 || v.Decisions[1].Remaining != 1 {
			t.Fatalf("first request: %+v, want allowed, remaining 8 and 1", v)
		}
		v = MustAllow(t, l, h.Request(tenant, 2, enforced, dry))
		if !v.Allowed || v.Outcome != domain.OutcomeShadowDenied || v.Decisions[1].Allowed || v.Decisions[1].Remaining != 1 {
			t.Fatalf("second request: %+v, want admitted as shadow_denied, the shadow limit denying with 1 left", v)
		}
		if d := v.Decisions[0]; !d.Allowed || d.Remaining != 6 {
			t.Errorf("second request: enforced limit %+v, want allowed, remaining 6 (admitted requests spend)", d)
		}
		// The shadow limit still has its unit: a request of cost 1 spends it.
		v = MustAllow(t, l, h.Request(tenant, 1, enforced, dry))
		if !v.Allowed || v.Outcome != domain.OutcomeAllowed || v.Decisions[1].Remaining != 0 || v.Decisions[0].Remaining != 5 {
			t.Errorf("third request, cost 1: %+v, want allowed, remaining 5 and 0", v)
		}
	})

	t.Run("an enforced denial spends nothing from shadow limits", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		long := time.Hour
		small := NamedRule{Name: "small", Rule: domain.Rule{Limit: 1, Window: long}}
		dry := NamedRule{Name: "dry", Rule: domain.Rule{Limit: 2, Window: long}, Shadow: true}
		both := h.Request(tenant, 1, small, dry)
		if v := MustAllow(t, l, both); !v.Allowed || v.Decisions[1].Remaining != 1 {
			t.Fatalf("first request: %+v, want allowed, shadow remaining 1", v)
		}
		for i := range 3 {
			v := MustAllow(t, l, both)
			if v.Allowed || !denial(v.Outcome) {
				t.Fatalf("request %d over the enforced limit: %+v, want denied", i+2, v)
			}
			if d := v.Decisions[1]; !d.Allowed || d.Remaining != 1 {
				t.Errorf("request %d: shadow limit %+v, want allowed with 1 left (nothing spent)", i+2, d)
			}
			if got, want := v.RetryAfter(), v.Decisions[0].RetryAfter; got != want {
				t.Errorf("request %d: verdict RetryAfter %v, want the enforced limit's %v", i+2, got, want)
			}
		}
		// A shadow denial beside an enforced one: RetryAfter is the
		// enforced limit's alone.
		tiny := NamedRule{Name: "tiny", Rule: domain.Rule{Limit: 1, Window: 2 * long}, Shadow: true}
		v := MustAllow(t, l, h.Request(Tenant(), 2, small, tiny))
		if v.Allowed || !denial(v.Outcome) || v.Decisions[1].Allowed {
			t.Fatalf("cost 2 over both: %+v, want denied by both", v)
		}
		if got, want := v.RetryAfter(), v.Decisions[0].RetryAfter; got != want || got > 2*long+h.Slack {
			t.Errorf("verdict RetryAfter %v, want the enforced limit's %v, not the shadow limit's %v", got, want, v.Decisions[1].RetryAfter)
		}
	})

	t.Run("CountDenied: the fixed window counts denials, the others ignore it", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		long := time.Hour
		small := NamedRule{Name: "small", Rule: domain.Rule{Limit: 2, Window: long}}
		big := NamedRule{Name: "big", Rule: domain.Rule{Limit: 10, Window: long}}
		fixed := h.Algorithm == "" || h.Algorithm == domain.AlgorithmFixedWindow
		// Costs 1, 1, 1, 2: two admitted, two denied by small (of
		// different costs, so that no deny cache in front answers one).
		for i, cost := range []int64{1, 1, 1, 2} {
			req := h.Request(tenant, cost, small, big)
			req.CountDenied = true
			v := MustAllow(t, l, req)
			if v.Allowed != (i < 2) {
				t.Fatalf("request %d of cost %d: %+v, want allowed=%v", i+1, cost, v, i < 2)
			}
			if d := v.Decisions[0]; i >= 2 && fixed && (d.Remaining != 0 || d.RetryAfter <= 0 || d.RetryAfter > long+h.Slack) {
				t.Errorf("request %d, a counted denial: %+v, want remaining 0, RetryAfter in (0, %v]", i+1, d, long)
			}
		}
		// Counting denials, big spent all five units; otherwise two.
		wantBig := int64(10 - 2 - 1)
		if fixed {
			wantBig = 10 - 5 - 1
		}
		if d := MustDecide(t, l, h.Request(tenant, 1, big)); !d.Allowed || d.Remaining != wantBig {
			t.Errorf("after 4 requests counting denials (2 over small), big alone: %+v, want allowed, remaining %d", d, wantBig)
		}
	})

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
		counted := h.single(tenant, rule)
		counted.CountDenied = true
		// Envoy's: aligned windows, per-limit costs, a shared key, every
		// limit of an admitted request counted.
		envoy := h.Request(tenant, 1, NamedRule{Name: "e", Rule: rule}, NamedRule{Name: "f", Rule: rule, Shadow: true},
			NamedRule{Name: "e", Rule: rule})
		envoy.Costs, envoy.CountOver, envoy.CountDenied = []int64{1, 3, 0}, true, true
		for i := range envoy.Limits {
			envoy.Limits[i].Epoch = true
		}
		reqs := []domain.Request{h.single(tenant, rule), h.Request(tenant, 2,
			NamedRule{Name: "a", Rule: rule}, NamedRule{Name: "b", Rule: domain.Rule{Limit: 3, Window: h.Window / 2}},
			NamedRule{Name: "c", Rule: domain.Rule{Limit: 3, Window: h.Window}, Shadow: true}), counted, envoy}
		for _, req := range reqs {
			for range rule.Limit + 2 {
				MustAllow(t, l, req)
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
	v, err := l.Allow(t.Context(), req)
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
