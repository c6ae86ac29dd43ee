package portstest

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// testEnvoy runs the parts of the [ports.Limiter] contract that Envoy's
// rate limit service relies on: per-limit costs (0 is a check), limits
// that share a key, quota limits, counting every limit of an admitted
// request, and windows aligned to the epoch.
func testEnvoy(t *testing.T, h LimiterHarness) {
	t.Helper()
	long := time.Hour
	fixed := h.Algorithm == "" || h.Algorithm == domain.AlgorithmFixedWindow

	t.Run("each limit spends its own cost; 0 checks", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		a := NamedRule{Name: "a", Rule: domain.Rule{Limit: 5, Window: long}}
		b := NamedRule{Name: "b", Rule: domain.Rule{Limit: 5, Window: long}}
		req := Costs(h.Request(tenant, 1, a, b), 2, 0)
		v := MustAllow(t, l, req)
		if !v.Allowed || v.Decisions[0].Remaining != 3 || v.Decisions[1].Remaining != 5 {
			t.Fatalf("costs 2 and 0: %+v, want allowed, remaining 3 and 5", v)
		}
		// b was checked, not spent; a check past a's budget denies it and
		// spends nothing from b.
		req = Costs(req, 4, 1)
		if v := MustAllow(t, l, req); v.Allowed || v.Decisions[0].Allowed || v.Decisions[1].Remaining != 5 {
			t.Errorf("cost 4 with 3 left beside cost 1: %+v, want denied by a, b untouched (5)", v)
		}
		if d := MustDecide(t, l, h.Request(tenant, 1, b)); !d.Allowed || d.Remaining != 4 {
			t.Errorf("b alone: %+v, want allowed, remaining 4", d)
		}
	})

	t.Run("limits that share a key are decided one after the other", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		a := NamedRule{Name: "a", Rule: domain.Rule{Limit: 5, Window: long}}
		twice := h.Request(tenant, 2, a, a)
		v := MustAllow(t, l, twice)
		if !v.Allowed || v.Decisions[0].Remaining != 3 || v.Decisions[1].Remaining != 1 {
			t.Fatalf("one key twice, cost 2: %+v, want allowed, remaining 3 then 1", v)
		}
		// 1 left: the first use fits, the second does not; nothing spent.
		if v := MustAllow(t, l, h.Request(tenant, 1, a, a)); v.Allowed || !v.Decisions[0].Allowed || v.Decisions[1].Allowed {
			t.Errorf("one key twice, cost 1, with 1 left: %+v, want the second use denying", v)
		}
		if d := MustDecide(t, l, h.Request(tenant, 1, a)); !d.Allowed || d.Remaining != 0 {
			t.Errorf("after a denial, the key alone: %+v, want allowed, remaining 0", d)
		}
	})

	t.Run("quota limits deny together", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		q := NamedRule{Name: "q", Rule: domain.Rule{Limit: 1, Window: long}}
		r := NamedRule{Name: "r", Rule: domain.Rule{Limit: 5, Window: long}}
		quota := func(req domain.Request) domain.Request {
			for i := range req.Limits {
				req.Limits[i].Quota = true
			}
			return req
		}
		if v := MustAllow(t, l, quota(h.Request(tenant, 1, q))); !v.Allowed {
			t.Fatalf("a quota limit within: %+v, want allowed", v)
		}
		v := MustAllow(t, l, quota(h.Request(tenant, 1, q, r)))
		if !v.Allowed || v.Decisions[0].Allowed || !v.Decisions[1].Allowed || v.Decisions[1].Remaining != 4 {
			t.Errorf("one quota limit of two over: %+v, want admitted, r spent (4 left)", v)
		}
		if v := MustAllow(t, l, quota(h.Request(tenant, 1, q))); v.Allowed || v.RetryAfter() <= 0 {
			t.Errorf("the only quota limit over: %+v, want denied with a RetryAfter", v)
		}
	})

	t.Run("CountHits spends an admitted request's every limit", func(t *testing.T) {
		hits := h.view(t, View{Counting: domain.CountHits})
		tenant := Tenant()
		s := NamedRule{Name: "s", Rule: domain.Rule{Limit: 2, Window: long}, Shadow: true}
		e := NamedRule{Name: "e", Rule: domain.Rule{Limit: 10, Window: long}}
		req := h.Request(tenant, 3, s, e)
		v := MustAllow(t, hits, req)
		if !v.Allowed || v.Outcome != domain.OutcomeShadowDenied || v.Decisions[0].Remaining != 0 || v.Decisions[1].Remaining != 7 {
			t.Fatalf("cost 3, shadow limit of 2, counting every limit: %+v, want admitted, remaining 0 and 7", v)
		}
		// The shadow limit was spent although it denied: it is full.
		enforced := NamedRule{Name: "s", Rule: s.Rule}
		if d := MustDecide(t, hits, h.Request(tenant, 1, enforced)); d.Allowed || d.Remaining != 0 {
			t.Errorf("the shadow limit's key after CountHits: %+v, want denied, remaining 0", d)
		}
		// Counting admitted requests, it keeps the state it had.
		l := h.New(t)
		other := Tenant()
		req = h.Request(other, 3, s, e)
		MustAllow(t, l, req)
		if d := MustDecide(t, l, h.Request(other, 1, enforced)); !d.Allowed || d.Remaining != 1 {
			t.Errorf("the shadow limit's key under CountAdmitted: %+v, want allowed, remaining 1", d)
		}
	})

	t.Run("WindowsEpoch: windows aligned to the epoch (fixed window; the others have no other)", func(t *testing.T) {
		l := h.view(t, View{Windows: domain.WindowsEpoch})
		w := h.Window
		rule := domain.Rule{Limit: 3, Window: w}
		epoch := func(tenant domain.TenantID, cost int64) domain.Request {
			return h.Request(tenant, cost, NamedRule{Name: "e", Rule: rule})
		}
		// decide decides req and returns its decision and the time left
		// in the aligned window before and after the call: a real store's
		// answer lies between them, whatever the machine's load.
		decide := func(req domain.Request) (domain.Verdict, time.Duration, time.Duration) {
			before := w - phase(h.now(), w)
			v := MustAllow(t, l, req)
			return v, before, w - phase(h.now(), w)
		}
		within := func(d, early, late time.Duration) bool {
			return late <= early && d >= late-h.Slack-2*time.Millisecond && d <= early+h.Slack+2*time.Millisecond
		}
		// Start a third into a window, so that its end is two thirds
		// away, not one window as for a window that starts now.
		h.Clock.Advance(w + w/3 - phase(h.now(), w))
		tenant := Tenant()
		first := time.Now()
		v, early, late := decide(epoch(tenant, 1))
		d := v.Decisions[0]
		if !fixed {
			plain := MustDecide(t, h.New(t), h.Request(tenant, 1, NamedRule{Name: "p", Rule: rule}))
			// The two decisions lie apart by at most the time they took.
			apart := time.Since(first)
			if d.Allowed != plain.Allowed || d.Remaining != plain.Remaining || !near(d.ResetAfter, plain.ResetAfter, h.Slack+apart) {
				t.Errorf("%s with WindowsEpoch: %+v, without: %+v, want the same", h.Algorithm, d, plain)
			}
			return
		}
		if !d.Allowed || d.Remaining != 2 || !within(d.ResetAfter, early, late) {
			t.Fatalf("first request a third into a window of %v: %+v, want allowed, remaining 2, ResetAfter in [%v, %v] (the window's end)", w, d, late, early)
		}
		if v, early, late := decide(epoch(Tenant(), 0)); !v.Decisions[0].Allowed || v.Decisions[0].Remaining != 3 || !within(v.Decisions[0].ResetAfter, early, late) {
			t.Errorf("a check (cost 0) on a fresh key: %+v, want allowed, remaining 3, ResetAfter in [%v, %v]", v, late, early)
		}
		MustAllow(t, l, epoch(tenant, 2))
		if v, early, late := decide(epoch(tenant, 1)); v.Allowed || !within(v.Decisions[0].RetryAfter, early, late) {
			t.Errorf("over the limit: %+v, want denied, RetryAfter in [%v, %v] (the window's end)", v, late, early)
		}
		// Just past the window's end the count starts again, for a window.
		h.Clock.Advance(w - phase(h.now(), w) + w/10)
		if v, early, late := decide(epoch(tenant, 1)); !v.Decisions[0].Allowed || v.Decisions[0].Remaining != 2 || !within(v.Decisions[0].ResetAfter, early, late) {
			t.Errorf("just into the next window: %+v, want allowed, remaining 2, ResetAfter in [%v, %v]", v, late, early)
		}
	})
}

// now reads h's clock.
func (h LimiterHarness) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// phase returns how far t is into its window of length w aligned to the
// Unix epoch.
func phase(t time.Time, w time.Duration) time.Duration {
	n := t.UnixNano() % int64(w)
	if n < 0 {
		n += int64(w)
	}
	return time.Duration(n)
}

// near reports whether got is want within slack (and a few ms of
// rounding: stores keep time in ms or µs).
func near(got, want, slack time.Duration) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return d <= slack+2*time.Millisecond
}
