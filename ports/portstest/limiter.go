package portstest

import (
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
	// TTLs, if set, returns every storage key the limiter wrote for key,
	// with its time to live (negative: none). A store that keeps keys
	// elsewhere (Redis) sets it; TestLimiter then checks every key
	// expires within two windows.
	TTLs func(t *testing.T, key string) map[string]time.Duration
}

// TestLimiter runs the [ports.Limiter] contract against h, for any
// algorithm: the budget, tenant isolation, honest Remaining, ResetAfter
// and RetryAfter, exactness under concurrency, and expiring keys. How an
// algorithm treats a window's edge differs between algorithms; see
// [BoundaryBurst].
func TestLimiter(t *testing.T, h LimiterHarness) {
	t.Helper()
	rule := domain.Rule{Limit: 5, Window: h.Window}

	t.Run("a burst admits exactly the limit", func(t *testing.T) {
		l := h.New(t)
		key := uniqueKey(t, "a")
		for i := range rule.Limit {
			d := MustAllow(t, l, key, rule)
			if !d.Allowed || d.Remaining != rule.Limit-i-1 || d.RetryAfter != 0 {
				t.Errorf("request %d: %+v, want allowed with remaining %d", i+1, d, rule.Limit-i-1)
			}
			checkDecision(t, d, rule, h.Slack)
		}
		d := MustAllow(t, l, key, rule)
		if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
			t.Errorf("request %d: %+v, want denied, remaining 0, RetryAfter > 0", rule.Limit+1, d)
		}
		checkDecision(t, d, rule, h.Slack)
	})

	t.Run("tenants are independent", func(t *testing.T) {
		l := h.New(t)
		a, b := uniqueKey(t, "a"), uniqueKey(t, "b")
		for range rule.Limit + 2 {
			MustAllow(t, l, a, rule)
		}
		if d := MustAllow(t, l, b, rule); !d.Allowed || d.Remaining != rule.Limit-1 {
			t.Errorf("first request of b after a's budget was spent: %+v, want allowed, remaining %d", d, rule.Limit-1)
		}
	})

	t.Run("Remaining is what a burst then gets", func(t *testing.T) {
		l := h.New(t)
		key := uniqueKey(t, "a")
		for range 3 {
			MustAllow(t, l, key, rule)
		}
		h.Clock.Advance(h.Window / 2)
		d := MustAllow(t, l, key, rule)
		n := int64(0)
		for MustAllow(t, l, key, rule).Allowed && n <= rule.Limit {
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
		key := uniqueKey(t, "a")
		var d domain.Decision
		for range rule.Limit + 1 {
			d = MustAllow(t, l, key, rule)
		}
		h.Clock.Advance(d.ResetAfter + h.Slack)
		for i := range rule.Limit {
			if d := MustAllow(t, l, key, rule); !d.Allowed {
				t.Fatalf("request %d after ResetAfter %v: %+v, want allowed", i+1, d.ResetAfter, d)
			}
		}
	})

	t.Run("RetryAfter is honest", func(t *testing.T) {
		l := h.New(t)
		key := uniqueKey(t, "a")
		for range rule.Limit {
			MustAllow(t, l, key, rule)
		}
		d := MustAllow(t, l, key, rule)
		if d.Allowed {
			t.Fatalf("request after the budget was spent: %+v, want denied", d)
		}
		if half := d.RetryAfter / 2; half > 2*h.Slack {
			h.Clock.Advance(half)
			if early := MustAllow(t, l, key, rule); early.Allowed {
				t.Errorf("admitted halfway through RetryAfter %v", d.RetryAfter)
			}
			h.Clock.Advance(d.RetryAfter - half + h.Slack)
		} else {
			h.Clock.Advance(d.RetryAfter + h.Slack)
		}
		if again := MustAllow(t, l, key, rule); !again.Allowed {
			t.Errorf("denied after waiting RetryAfter %v: %+v", d.RetryAfter, again)
		}
		// Waiting the whole seconds that the HTTP layer rounds up to
		// admits too (a fresh key: the budget is spent again first).
		key = uniqueKey(t, "b")
		sec := domain.Rule{Limit: 2, Window: max(h.Window, 2*time.Second)}
		for range sec.Limit {
			MustAllow(t, l, key, sec)
		}
		d = MustAllow(t, l, key, sec)
		h.Clock.Advance(time.Duration(domain.CeilSeconds(d.RetryAfter)) * time.Second)
		if again := MustAllow(t, l, key, sec); !again.Allowed {
			t.Errorf("denied after waiting Retry-After %ds: %+v", domain.CeilSeconds(d.RetryAfter), again)
		}
	})

	t.Run("concurrent requests admit exactly the limit", func(t *testing.T) {
		l := h.New(t)
		key := uniqueKey(t, "a")
		// A long window: nothing refills while the goroutines run.
		long := domain.Rule{Limit: 50, Window: time.Hour}
		const goroutines, each = 16, 10
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range each {
					d, err := l.Allow(t.Context(), key, long)
					if err != nil {
						t.Error(err)
						return
					}
					if d.Allowed {
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

	t.Run("every key expires within two windows", func(t *testing.T) {
		if h.TTLs == nil {
			t.Skip("the store reports no TTLs")
		}
		l := h.New(t)
		key := uniqueKey(t, "a")
		for range rule.Limit + 2 {
			MustAllow(t, l, key, rule)
		}
		ttls := h.TTLs(t, key)
		if len(ttls) == 0 {
			t.Fatalf("no keys found for %q", key)
		}
		for k, ttl := range ttls {
			if ttl <= 0 || ttl > 2*h.Window {
				t.Errorf("key %q: TTL %v, want in (0, %v]", k, ttl, 2*h.Window)
			}
		}
	})
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
	key := uniqueKey(t, "edge")
	rule := domain.Rule{Limit: limit, Window: h.Window}
	delta := h.Window / 20
	MustAllow(t, l, key, rule)
	h.Clock.Advance(h.Window - delta)
	admitted := int64(0)
	for range 2 {
		for range limit {
			if MustAllow(t, l, key, rule).Allowed {
				admitted++
			}
		}
		h.Clock.Advance(2 * delta)
	}
	return admitted
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

// MustAllow calls l.Allow and fails t on an error.
func MustAllow(t *testing.T, l ports.Limiter, key string, rule domain.Rule) domain.Decision {
	t.Helper()
	d, err := l.Allow(t.Context(), key, rule)
	if err != nil {
		t.Fatalf("Allow(%q): %v", key, err)
	}
	return d
}
