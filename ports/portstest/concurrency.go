package portstest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestConcurrencyLimits runs the contract of concurrency limits
// ([domain.Limit.Concurrency]) against h, whatever its algorithm: a
// limit of N admits N requests in flight and no more, however many ask
// at once; an admitted verdict's Release gives its slots back, once
// however often it is called; a denied verdict holds nothing; slots are
// all or nothing with the request's rate limits, both ways; a shadow
// concurrency limit never denies and takes a slot only when it admits;
// and on a store with leases every key expires within two leases.
// [TestLimiter] runs it.
func TestConcurrencyLimits(t *testing.T, h LimiterHarness) {
	t.Helper()
	slots := func(n int64) NamedRule {
		return NamedRule{Name: "inflight", Rule: domain.Rule{Limit: n}, Concurrency: true}
	}
	hour := func(name string, n int64) NamedRule {
		return NamedRule{Name: name, Rule: domain.Rule{Limit: n, Window: time.Hour}}
	}

	t.Run("concurrency: N in flight, Release gives a slot back once", func(t *testing.T) {
		l := h.New(t)
		req := h.Request(Tenant(), 1, slots(3))
		var held []domain.Verdict
		for i := range 3 {
			v := MustAllow(t, l, req)
			d := v.Decisions[0]
			if !v.Allowed || d.Remaining != int64(2-i) || d.Limit != 3 || d.Held != int64(i+1) || v.Release == nil {
				t.Fatalf("request %d: %+v, want allowed with %d held, %d free and a Release", i+1, v, i+1, 2-i)
			}
			wantReset := time.Duration(0) // t=0 while a slot is free
			if i == 2 {
				wantReset = domain.ConcurrencyWindow // the last slot: t=1
			}
			if d.ResetAfter != wantReset {
				t.Errorf("request %d: ResetAfter %v, want %v", i+1, d.ResetAfter, wantReset)
			}
			held = append(held, v)
		}
		v := MustAllow(t, l, req)
		if d := v.Decisions[0]; v.Allowed || d.Allowed || d.Remaining != 0 || d.RetryAfter != domain.ConcurrencyWindow || !denial(v.Outcome) {
			t.Fatalf("fourth request with 3 in flight: %+v, want denied, none free, RetryAfter 1s", v)
		}
		if v.Release != nil {
			t.Errorf("a denied verdict has a Release")
		}
		// One release, twice: one slot back, not two.
		held[0].Release()
		held[0].Release()
		again := MustAllow(t, l, req)
		if !again.Allowed {
			t.Fatalf("after one request ended: %+v, want allowed", again)
		}
		if v := MustAllow(t, l, req); v.Allowed {
			t.Fatalf("a second Release of one verdict gave back another slot: %+v admitted", v)
		}
		again.Release()
		for _, v := range held[1:] {
			v.Release()
		}
		allFree(t, l, req, 3)
	})

	t.Run("concurrency: tenants and limits hold their own slots", func(t *testing.T) {
		l := h.New(t)
		a, b := h.Request(Tenant(), 1, slots(1)), h.Request(Tenant(), 1, slots(1))
		va := MustAllow(t, l, a)
		defer va.Release()
		if vb := MustAllow(t, l, b); !vb.Allowed {
			t.Errorf("b's first request while a holds a's only slot: %+v, want allowed", vb)
		} else {
			vb.Release()
		}
		other := h.Request(a.Tenant, 1, NamedRule{Name: "other", Rule: domain.Rule{Limit: 1}, Concurrency: true})
		if v := MustAllow(t, l, other); !v.Allowed {
			t.Errorf("a's other concurrency limit: %+v, want allowed", v)
		} else {
			v.Release()
		}
	})

	t.Run("concurrency: concurrent requests never hold more than N", func(t *testing.T) {
		l := h.New(t)
		const n = 4
		req := h.Request(Tenant(), 1, slots(n))
		var inFlight, most, admitted atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 8 {
					v, err := l.Allow(t.Context(), req, nil)
					if err != nil {
						t.Error(err)
						return
					}
					if !v.Allowed {
						continue
					}
					admitted.Add(1)
					now := inFlight.Add(1)
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					time.Sleep(time.Millisecond)
					inFlight.Add(-1)
					v.Release()
				}
			})
		}
		wg.Wait()
		if got := most.Load(); got > n {
			t.Errorf("%d requests in flight at once, want at most %d", got, n)
		}
		if admitted.Load() < n {
			t.Errorf("only %d of 128 requests admitted, want at least %d", admitted.Load(), n)
		}
		allFree(t, l, req, n)
	})

	t.Run("concurrency: no slot, no rate budget spent", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		both := h.Request(tenant, 2, hour("rate", 10), slots(1))
		first := MustAllow(t, l, both)
		if !first.Allowed || first.Decisions[0].Remaining != 8 || first.Decisions[1].Remaining != 0 {
			t.Fatalf("first request: %+v, want allowed, 8 units and no slot left", first)
		}
		for i := range 3 {
			v := MustAllow(t, l, both)
			if v.Allowed || v.Decisions[1].Allowed || !v.Decisions[0].Allowed || v.Decisions[0].Remaining != 8 {
				t.Fatalf("request %d while the slot is held: %+v, want denied for want of a slot, the rate limit untouched at 8", i+2, v)
			}
			if got := v.RetryAfter(); got != domain.ConcurrencyWindow {
				t.Errorf("request %d: RetryAfter %v, want %v", i+2, got, domain.ConcurrencyWindow)
			}
		}
		first.Release()
		if d := MustDecide(t, l, h.Request(tenant, 1, hour("rate", 10))); !d.Allowed || d.Remaining != 7 {
			t.Errorf("the rate limit alone after three denials for want of a slot: %+v, want 7 left (they spent nothing)", d)
		}
	})

	t.Run("concurrency: a rate denial takes no slot", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		both := h.Request(tenant, 1, hour("rate", 2), slots(3))
		var held []domain.Verdict
		for range 2 {
			held = append(held, MustAllow(t, l, both))
		}
		for i := range 3 {
			v := MustAllow(t, l, both)
			if v.Allowed || v.Decisions[0].Allowed || !v.Decisions[1].Allowed || v.Decisions[1].Remaining != 1 || v.Release != nil {
				t.Fatalf("request %d over the rate limit: %+v, want denied by it, one slot free and untaken, no Release", i+3, v)
			}
		}
		alone := h.Request(tenant, 1, slots(3))
		v := MustAllow(t, l, alone)
		if !v.Allowed || v.Decisions[0].Remaining != 0 {
			t.Fatalf("the concurrency limit alone with 2 held: %+v, want the third slot", v)
		}
		if over := MustAllow(t, l, alone); over.Allowed {
			t.Errorf("a fourth slot: %+v (rate denials took slots?)", over)
		}
		v.Release()
		for _, v := range held {
			v.Release()
		}
	})

	t.Run("concurrency: a slot denied takes none of the others", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		dry := NamedRule{Name: "dry", Rule: domain.Rule{Limit: 5}, Concurrency: true, Shadow: true}
		route := NamedRule{Name: "route", Rule: domain.Rule{Limit: 1}, Concurrency: true}
		both := h.Request(tenant, 1, slots(3), dry, route)
		first := MustAllow(t, l, both)
		defer first.Release()
		for i := range 3 {
			if v := MustAllow(t, l, both); v.Allowed || v.Decisions[2].Allowed || v.Release != nil {
				t.Fatalf("request %d, the one slot of route held: %+v, want denied by it, no Release", i+2, v)
			}
		}
		// The denials took no slot of inflight nor of the shadow dry: 2
		// of 3 and 4 of 5 are still free.
		for _, lim := range []NamedRule{slots(3), dry} {
			v := MustAllow(t, l, h.Request(tenant, 1, lim))
			if d := v.Decisions[0]; !d.Allowed || d.Remaining != lim.Rule.Limit-2 {
				t.Errorf("%s after three denials by route: %+v, want %d left after this one (they took none)", lim.Name, d, lim.Rule.Limit-2)
			}
			v.Release()
		}
	})

	t.Run("concurrency: a shadow limit never denies, takes only what it admits", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		dry := slots(1)
		dry.Shadow = true
		req := h.Request(tenant, 1, dry)
		first := MustAllow(t, l, req)
		if !first.Allowed || first.Outcome != domain.OutcomeAllowed || first.Release == nil {
			t.Fatalf("first: %+v, want allowed, holding a slot", first)
		}
		second := MustAllow(t, l, req)
		if !second.Allowed || second.Outcome != domain.OutcomeShadowDenied || second.Decisions[0].Allowed || second.Release != nil {
			t.Fatalf("second, the shadow slot taken: %+v, want admitted as shadow_denied, no slot taken", second)
		}
		first.Release()
		v := MustAllow(t, l, req)
		if !v.Allowed || v.Outcome != domain.OutcomeAllowed || !v.Decisions[0].Allowed {
			t.Errorf("after the first ended: %+v, want the slot (the shadow denial took none)", v)
		}
		v.Release()
	})

	t.Run("concurrency: Peek reads the free slots and takes none; Reset leaves them", func(t *testing.T) {
		l := h.New(t)
		u, ok := l.(ports.Usage)
		if !ok {
			t.Skip("the limiter reads no usage (ports.Usage)")
		}
		tenant := Tenant()
		req := h.Request(tenant, 1, slots(3))
		v := MustAllow(t, l, req)
		defer v.Release()
		keys := func() map[string]time.Duration {
			if h.TTLs == nil {
				return nil
			}
			return h.TTLs(t, KeyPrefix+"{"+string(tenant)+"}")
		}
		before := keys()
		for range 3 {
			p, err := u.Peek(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if d := p.Decisions[0]; !p.Allowed || d.Remaining != 2 || d.Limit != 3 || d.Held != 1 || p.Release != nil {
				t.Fatalf("Peek with one slot held: %+v, want 1 held, 2 free, nothing taken", p)
			}
		}
		if after := keys(); len(after) != len(before) {
			t.Errorf("keys after Peek %v, before %v", after, before)
		}
		if err := u.Reset(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		// The slot held stays held: two more fit, not three.
		for i := range 2 {
			w := MustAllow(t, l, req)
			if !w.Allowed {
				t.Fatalf("request %d after a Reset: %+v, want allowed", i+1, w)
			}
			defer w.Release()
		}
		if w := MustAllow(t, l, req); w.Allowed {
			t.Errorf("a fourth slot after a Reset: %+v (the Reset dropped a running request's slot)", w)
		}
		// The limit lowered to 2 under the 3 held: Peek says 3 held,
		// none free.
		lowered := h.Request(tenant, 1, slots(2))
		if p, err := u.Peek(t.Context(), lowered); err != nil || p.Decisions[0].Held != 3 || p.Decisions[0].Remaining != 0 {
			t.Errorf("Peek of a limit of 2 with 3 held: %+v, %v; want 3 held, none free", p, err)
		}
	})

	t.Run("concurrency: every key expires within two leases", func(t *testing.T) {
		if h.TTLs == nil || h.Lease == 0 {
			t.Skip("the store has no leases")
		}
		l := h.New(t)
		tenant := Tenant()
		v := MustAllow(t, l, h.Request(tenant, 1, hour("rate", 5), slots(2)))
		defer v.Release()
		w := MustAllow(t, l, h.Request(tenant, 1, slots(2)))
		defer w.Release()
		ttls := h.TTLs(t, h.Keys.Limit(tenant, "", "", ports.KeyConcurrency))
		if len(ttls) != 1 {
			t.Fatalf("keys of the concurrency limit: %v, want one", ttls)
		}
		for k, ttl := range ttls {
			if ttl <= 0 || ttl > 2*h.Lease {
				t.Errorf("key %q: TTL %v, want in (0, %v]", k, ttl, 2*h.Lease)
			}
		}
	})
}

// allFree checks that n requests of req, one concurrency limit of n,
// are admitted at once (every slot came back), and gives them back.
func allFree(t *testing.T, l ports.Limiter, req domain.Request, n int64) {
	t.Helper()
	for i := range n {
		v := MustAllow(t, l, req)
		if !v.Allowed {
			t.Fatalf("request %d of %d: %+v, want allowed (a slot did not come back)", i+1, n, v)
		}
		defer v.Release()
	}
}
