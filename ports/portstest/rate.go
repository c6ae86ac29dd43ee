package portstest

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// fastest is a rule at the fastest rate a rule may have bar a little:
// 600 000 a second, an emission interval of 1.67 µs, which a store that
// counts in whole microseconds would round to 1 µs.
var fastest = domain.Rule{Limit: 600_000, Window: time.Second}

// testRate checks that h's algorithm admits at its rule's rate on the
// fastest rules, to the unit: a token bucket emptied at once refills one
// token per emission interval ([domain.TokenInterval]), no faster and no
// slower. On a real store the time between the two decisions is known
// only within the wall-clock spans around them, so the bounds are those
// spans' (they widen under load and stay true); on a fake clock they are
// exact.
func testRate(t *testing.T, h LimiterHarness) {
	if h.Algorithm != domain.AlgorithmTokenBucket {
		return
	}
	t.Run("a fast rule refills at its rate", func(t *testing.T) {
		l := h.New(t)
		tenant := Tenant()
		all := h.Request(tenant, fastest.Limit, NamedRule{Name: domain.DefaultLimit, Rule: fastest})
		check := h.Request(tenant, 1, NamedRule{Name: domain.DefaultLimit, Rule: fastest})
		check.Limits[0].Cost = 0
		const wait = 60 * time.Millisecond
		start := time.Now()
		if d := MustDecide(t, l, all); !d.Allowed || d.Remaining != 0 {
			t.Fatalf("a full bucket's whole limit at once: %+v, want allowed, remaining 0", d)
		}
		spent := time.Now()
		h.Clock.Advance(wait)
		asked := time.Now()
		d := MustDecide(t, l, check)
		done := time.Now()
		lo, hi := wait, wait
		if h.Slack > 0 {
			lo, hi = asked.Sub(spent), done.Sub(start)
		}
		interval := domain.TokenInterval(fastest)
		if least, most := int64(lo/interval)-1, int64(hi/interval)+1; d.Remaining < least || d.Remaining > most {
			t.Errorf("%v to %v after the bucket was emptied: %d tokens, want %d to %d (one per %v)",
				lo, hi, d.Remaining, least, most, interval)
		}
	})
}
