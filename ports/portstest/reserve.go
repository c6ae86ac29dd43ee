package portstest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// testReserve is [TestLimiter]'s part on Reserve limits
// ([domain.Limit.Reserve]): a reservation is clamped to what remains, a
// limit with nothing left denies, and it spends all or nothing with the
// request's other limits; on a limiter that settles ([ports.Settler]),
// a settlement refunds or charges in the admission's window, does
// nothing once that has ended, charges now without an admission, keeps
// concurrent requests within the budget, shows in a usage read while in
// flight, and leaves no key without a TTL. The budgets are a day long,
// so that a real store refills nothing while the tests run, but for the
// tests that wait for a window to end.
func testReserve(t *testing.T, h LimiterHarness) {
	t.Helper()
	long := domain.Rule{Limit: 100, Window: 24 * time.Hour}
	tok := NamedRule{Name: "tokens", Rule: long}
	month := domain.Limit{Name: "monthly-tokens", Calendar: &domain.Calendar{Unit: domain.PeriodMonth},
		Rule: domain.Rule{Limit: 100, Window: domain.NominalWindow(domain.PeriodMonth)}, Reserve: true}
	// reserving returns req with every limit a Reserve limit.
	reserving := func(req domain.Request) domain.Request {
		limits := append([]domain.Limit(nil), req.Limits...)
		for i := range limits {
			limits[i].Reserve = true
		}
		req.Limits = limits
		return req
	}
	// withMonth returns req with a monthly calendar Reserve limit of cost
	// cost after its limits.
	withMonth := func(req domain.Request, cost int64) domain.Request {
		m := month
		m.Key, m.Cost = h.Keys.Limit(req.Tenant, "", m.Name, ports.KeyCalendar), cost
		req.Limits = append(append([]domain.Limit(nil), req.Limits...), m)
		return req
	}
	reserve := func(t *testing.T, l ports.Limiter, req domain.Request, allowed bool, spent ...int64) domain.Verdict {
		t.Helper()
		v := MustAllow(t, l, req)
		if v.Allowed != allowed {
			t.Fatalf("reserve %v: %+v, want allowed=%v", costs(req), v, allowed)
		}
		for i, d := range v.Decisions {
			if !req.Limits[i].Reserve {
				continue
			}
			if d.Spent != spent[i] {
				t.Errorf("reserve %v: limit %q spent %d, want %d (%+v)", costs(req), req.Limits[i].Name, d.Spent, spent[i], d)
			}
			if (d.Spent == 0) != (d.Mark == domain.NoMark) {
				t.Errorf("reserve %v: limit %q spent %d with mark %d; want NoMark exactly when it spent nothing", costs(req), req.Limits[i].Name, d.Spent, d.Mark)
			}
		}
		return v
	}
	settler := func(t *testing.T, l ports.Limiter) ports.Settler {
		t.Helper()
		s, ok := l.(ports.Settler)
		if !ok {
			t.Skip("the limiter settles nothing (ports.Settler)")
		}
		return s
	}
	settle := func(t *testing.T, s ports.Settler, req domain.Request, adm []domain.Decision, used int64) {
		t.Helper()
		if err := s.Settle(context.Background(), req, adm, used); err != nil {
			t.Fatalf("Settle(used %d): %v", used, err)
		}
	}

	t.Run("reserve: clamped to what remains, denied when nothing does", func(t *testing.T) {
		l := h.New(t)
		req := withMonth(reserving(h.Request(Tenant(), 30, tok)), 30)
		for i, want := range []int64{30, 30, 30, 10} {
			v := reserve(t, l, req, true, want, want)
			if d := v.Decisions[0]; d.Remaining != 100-30*int64(i)-want || !d.Allowed {
				t.Errorf("reservation %d: %+v, want allowed, remaining %d", i+1, d, 100-30*int64(i)-want)
			}
		}
		v := reserve(t, l, req, false, 0, 0)
		if d := v.Decisions[0]; d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
			t.Errorf("with nothing left: %+v, want denied, remaining 0, RetryAfter > 0", d)
		}
		// A plain limit is not clamped: 30 of 10 left denies.
		plain := h.Request(Tenant(), 95, tok)
		MustAllow(t, l, plain)
		if v := MustAllow(t, l, Costs(plain, 30)); v.Allowed || v.Decisions[0].Spent != 0 {
			t.Errorf("a plain limit with 5 left, cost 30: %+v, want denied", v)
		}
	})

	t.Run("reserve: all or nothing with the request's other limits", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		rpm := NamedRule{Name: "requests", Rule: domain.Rule{Limit: 1, Window: 24 * time.Hour}}
		both := h.Request(tenant, 30, rpm, tok)
		both.Limits[0].Cost = 1
		both.Limits[1].Reserve = true
		reserve(t, l, both, true, 0, 30)
		v := reserve(t, l, both, false, 0, 0)
		if d := v.Decisions[1]; !d.Allowed || d.Remaining != 70 {
			t.Errorf("denied by the request limit: tokens %+v, want admitting with 70 left, nothing spent", d)
		}
		// Exactly 70 are left: a reservation of 100 spends them.
		reserve(t, l, reserving(h.Request(tenant, 100, tok)), true, 70)
	})

	t.Run("reserve: less left than its least denies, all or nothing", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		rpm := NamedRule{Name: "requests", Rule: domain.Rule{Limit: 10, Window: 24 * time.Hour}}
		reserve(t, l, reserving(h.Request(tenant, 90, tok)), true, 90) // 10 tokens left
		both := h.Request(tenant, 50, rpm, tok)
		both.Limits[0].Cost = 1
		both.Limits[1].Reserve, both.Limits[1].Least = true, 20
		v := reserve(t, l, both, false, 0, 0)
		if d := v.Decisions[1]; d.Allowed || d.Remaining != 10 {
			t.Errorf("10 left, least 20: %+v, want denied with 10 left", d)
		}
		if d := v.Decisions[0]; d.Remaining != 10 {
			t.Errorf("the request limit beside it: %+v, want nothing spent (10 left)", d)
		}
		// A least that fits: what remains is reserved.
		both.Limits[1].Least = 10
		reserve(t, l, both, true, 0, 10)
	})

	t.Run("settle: a refund and an extra charge in the admission's window", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		tenant := Tenant()
		req := withMonth(reserving(h.Request(tenant, 60, tok)), 60)
		v := reserve(t, l, req, true, 60, 60)
		settle(t, s, req, v.Decisions, 10) // 50 back
		v = reserve(t, l, Costs(req, 100, 100), true, 90, 90)
		settle(t, s, Costs(req, 100, 100), v.Decisions, 120) // 30 more: 130 of 100
		if v := reserve(t, l, Costs(req, 1, 1), false, 0, 0); v.Decisions[0].Remaining != 0 || v.Decisions[1].Remaining != 0 {
			t.Errorf("after 10 + 120 of 100 used: %+v, want nothing left", v)
		}
		// A settlement of a limit that spent nothing, or a plain limit, changes nothing.
		other := reserving(h.Request(Tenant(), 10, tok))
		v = reserve(t, l, other, true, 10)
		plain := other
		plain.Limits = []domain.Limit{other.Limits[0]}
		plain.Limits[0].Reserve = false
		settle(t, s, plain, v.Decisions, 100)
		settle(t, s, other, []domain.Decision{{Mark: domain.NoMark}}, 100)
		reserve(t, l, Costs(other, 100), true, 90)
	})

	t.Run("settle: never below zero", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		req := reserving(h.Request(Tenant(), 20, tok))
		v := reserve(t, l, req, true, 20)
		adm := append([]domain.Decision(nil), v.Decisions...)
		adm[0].Spent = 90 // more than was spent: the refund stops at zero
		settle(t, s, req, adm, 0)
		if d := reserve(t, l, Costs(req, 100), true, 100).Decisions[0]; d.Remaining != 0 {
			t.Errorf("a reservation of the whole budget after the refund: %+v, want nothing left", d)
		}
	})

	t.Run("settle: after the admission's window ended, nothing", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		short := NamedRule{Name: "tokens", Rule: domain.Rule{Limit: 10, Window: h.Window}}
		req := reserving(h.Request(Tenant(), 5, short))
		h.startOfWindow(h.Window)
		a := reserve(t, l, req, true, 5)
		b := reserve(t, l, Costs(req, 3), true, 3)
		wait := h.Window
		switch h.Algorithm {
		case domain.AlgorithmSlidingWindow:
			wait = 2 * h.Window // the previous window still weighs
		case domain.AlgorithmTokenBucket:
			wait = 2 * h.Window // an extra charge counts a window after the refill
		}
		h.Clock.Advance(wait + h.Slack)
		reserve(t, l, Costs(req, 1), true, 1)       // a window of its own
		settle(t, s, req, a.Decisions, 10)          // 5 more, in the window that ended
		settle(t, s, Costs(req, 3), b.Decisions, 0) // 3 back, there too
		v := MustAllow(t, l, Costs(req, 10))
		// A real store's bucket may refill the one meanwhile, or its
		// window end.
		if got := v.Decisions[0].Spent; got != 9 && (h.Slack == 0 || got != 10) {
			t.Errorf("after settling a window that ended: %+v, want 9 left", v.Decisions[0])
		}
	})

	t.Run("settle: without an admission, charges now", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		tenant := Tenant()
		rpm := NamedRule{Name: "requests", Rule: domain.Rule{Limit: 5, Window: 24 * time.Hour}}
		req := withMonth(h.Request(tenant, 1, rpm, tok), 1)
		req.Limits[1].Reserve = true
		settle(t, s, req, nil, 40)
		settle(t, s, req, make([]domain.Decision, len(req.Limits)), 20)
		v := MustAllow(t, l, Costs(req, 1, 100, 100))
		if !v.Allowed || v.Decisions[0].Remaining != 4 || v.Decisions[1].Spent != 40 || v.Decisions[2].Spent != 40 {
			t.Errorf("after reports of 40 and 20: %+v, want the request limit untouched (4 left), 40 tokens left of each", v)
		}
	})

	t.Run("settle: an extra charge keeps the later requests' units", func(t *testing.T) {
		if h.Algorithm != domain.AlgorithmSlidingLog {
			t.Skip("the sliding log's entries: each request's units leave the window with it")
		}
		l := h.New(t)
		s := settler(t, l)
		rule := NamedRule{Name: "tokens", Rule: domain.Rule{Limit: 1000, Window: h.Window}}
		req := reserving(h.Request(Tenant(), 100, rule))
		a := reserve(t, l, req, true, 100)
		h.Clock.Advance(h.Window / 4)
		reserve(t, l, req, true, 100)
		reserve(t, l, req, true, 100)
		settle(t, s, req, a.Decisions, 200) // the first used 100 more
		// The first request leaves the window; the two later ones, 200
		// units, stay in it.
		h.Clock.Advance(h.Window*3/4 + h.Slack)
		if v := MustAllow(t, l, Costs(req, 1000)); v.Decisions[0].Spent != 800 {
			t.Errorf("after the first request left the window: %+v, want 800 left (the later requests' 200 still count)", v.Decisions[0])
		}
	})

	t.Run("settle: concurrent requests stay within the budget", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		budget := domain.Rule{Limit: 1000, Window: 24 * time.Hour}
		req := reserving(h.Request(Tenant(), 50, NamedRule{Name: "tokens", Rule: budget}))
		const goroutines = 16
		var used, admitted atomic.Int64
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for k := 0; ; k++ {
					v, err := l.Allow(t.Context(), req, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if !v.Allowed {
						return
					}
					admitted.Add(1)
					u := min(v.Decisions[0].Spent, int64(10+(g+k)%40))
					if err := s.Settle(t.Context(), req, v.Decisions, u); err != nil {
						t.Error(err)
						return
					}
					used.Add(u)
				}
			})
		}
		wg.Wait()
		// The last request denied found every reservation settled and
		// nothing left: the budget was used exactly, but for a token a
		// real store's bucket may refill or hold in part meanwhile.
		slack := b2i(h.Slack > 0)
		if got := used.Load(); got > budget.Limit+slack || got < budget.Limit-slack {
			t.Errorf("%d requests used %d of a budget of %d, want all of it, no more", admitted.Load(), got, budget.Limit)
		}
	})

	t.Run("usage: Reserved shows reservations in flight until settled", func(t *testing.T) {
		l := h.New(t)
		s := settler(t, l)
		u, ok := l.(ports.Usage)
		if !ok {
			t.Skip("the limiter reads no usage (ports.Usage)")
		}
		req := withMonth(reserving(h.Request(Tenant(), 30, tok)), 30)
		peek := func(reserved, remaining int64) {
			t.Helper()
			v, err := u.Peek(context.Background(), req)
			if err != nil {
				t.Fatalf("Peek: %v", err)
			}
			for i, d := range v.Decisions {
				if d.Reserved != reserved || d.Remaining != remaining || d.Spent != 0 {
					t.Errorf("Peek, limit %q: %+v, want reserved %d, remaining %d, nothing spent", req.Limits[i].Name, d, reserved, remaining)
				}
			}
		}
		peek(0, 100)
		a := reserve(t, l, req, true, 30, 30)
		b := reserve(t, l, Costs(req, 20, 20), true, 20, 20)
		peek(50, 50)
		settle(t, s, req, a.Decisions, 5)
		peek(20, 75)
		settle(t, s, req, b.Decisions, 20)
		peek(0, 75)
	})

	t.Run("reserve and settle: every key expires within two windows", func(t *testing.T) {
		if h.TTLs == nil {
			t.Skip("the store reports no TTLs")
		}
		l := h.New(t)
		s := settler(t, l)
		tenant := Tenant()
		short := NamedRule{Name: "tokens", Rule: domain.Rule{Limit: 10, Window: h.Window}}
		req := reserving(h.Request(tenant, 4, short))
		reserve(t, l, req, true, 4) // in flight
		for _, used := range []int64{0, 4} {
			v := reserve(t, l, req, true, 4)
			settle(t, s, req, v.Decisions, used)
		}
		settle(t, s, req, nil, 3)
		ttls := h.TTLs(t, KeyPrefix+"{"+string(tenant)+"}")
		// The limit's key, and the reservations in flight where the
		// store keeps them apart.
		if len(ttls) == 0 {
			t.Fatalf("no keys for tenant %s", tenant)
		}
		for k, ttl := range ttls {
			if ttl <= 0 || ttl > 2*h.Window+h.Slack {
				t.Errorf("key %q: TTL %v, want in (0, %v]", k, ttl, 2*h.Window)
			}
		}
	})
}

// costs returns what req's limits cost, for messages.
func costs(req domain.Request) []int64 {
	c := make([]int64, len(req.Limits))
	for i, l := range req.Limits {
		c[i] = l.Cost
	}
	return c
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
