package portstest

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// testSeveralLimits is [TestLimiter]'s part on requests of several
// limits: all or nothing, cost spent from every limit, shadow limits
// (they never deny, and spend only what they admit), and what counting
// denials changes.
func testSeveralLimits(t *testing.T, h LimiterHarness) {
	t.Helper()
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

	t.Run("a denial creates no key for the limits that admitted", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		tiny := NamedRule{Name: "tiny", Rule: domain.Rule{Limit: 1, Window: time.Hour}}
		fresh := NamedRule{Name: "fresh", Rule: domain.Rule{Limit: 5, Window: time.Hour}}
		MustAllow(t, l, h.Request(tenant, 1, tiny)) // tiny is spent
		both := h.Request(tenant, 1, fresh, tiny)   // fresh first: decided before the denial
		for i := range 2 {
			v := MustAllow(t, l, both)
			if v.Allowed || !v.Decisions[0].Allowed || v.Decisions[1].Allowed {
				t.Fatalf("request %d: %+v, want denied by tiny, fresh admitting", i+1, v)
			}
			if d := v.Decisions[0]; d.Remaining != 5 {
				t.Errorf("request %d: fresh says %+v, want remaining 5 (nothing spent)", i+1, d)
			}
		}
		if h.TTLs != nil {
			key := both.Limits[0].Key
			if ttl, ok := h.TTLs(t, KeyPrefix+"{"+string(tenant)+"}")[key]; ok {
				t.Errorf("after denials only: %s exists (TTL %v), want no key", key, ttl)
			}
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

	t.Run("CountEvery: the fixed window counts denials, the others refuse to", func(t *testing.T) {
		fixed := h.Algorithm == "" || h.Algorithm == domain.AlgorithmFixedWindow
		if !fixed {
			if _, err := h.NewView(t, View{Counting: domain.CountEvery}); err == nil {
				t.Fatalf("%s built a limiter counting every request; want it refused", h.Algorithm)
			}
			return
		}
		l := h.view(t, View{Counting: domain.CountEvery})
		tenant := Tenant()
		long := time.Hour
		small := NamedRule{Name: "small", Rule: domain.Rule{Limit: 2, Window: long}}
		big := NamedRule{Name: "big", Rule: domain.Rule{Limit: 10, Window: long}}
		// Costs 1, 1, 1, 2: two admitted, two denied by small (of
		// different costs, so that no deny cache in front answers one).
		for i, cost := range []int64{1, 1, 1, 2} {
			req := h.Request(tenant, cost, small, big)
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
}
