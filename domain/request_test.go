package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// TestSettleShadow pins Settle's rule: enforced limits decide the
// verdict, shadow limits only mark it, and the decisions say who spends
// (allowed && verdict allowed).
func TestSettleShadow(t *testing.T) {
	t.Parallel()
	type lim struct {
		shadow, admits bool
	}
	tests := []struct {
		name    string
		limits  []lim
		allowed bool
		outcome domain.Outcome
		retry   time.Duration
	}{
		{"all admit", []lim{{false, true}, {true, true}}, true, domain.OutcomeAllowed, 0},
		{"shadow denies", []lim{{false, true}, {true, false}}, true, domain.OutcomeShadowDenied, 0},
		{"only shadow, denies", []lim{{true, false}}, true, domain.OutcomeShadowDenied, 0},
		{"enforced denies", []lim{{false, false}, {true, true}}, false, domain.OutcomeDenied, time.Second},
		{"both deny", []lim{{false, false}, {true, false}}, false, domain.OutcomeDenied, time.Second},
	}
	for _, tt := range tests {
		req := domain.Request{}
		for _, l := range tt.limits {
			req.Limits = append(req.Limits, domain.Limit{Shadow: l.shadow, Cost: 3})
		}
		var recosted []int
		v := domain.Settle(req, domain.CountAdmitted, nil, func(i int, cost int64) domain.Decision {
			if cost == 0 {
				recosted = append(recosted, i)
				return domain.Decision{Allowed: true, Remaining: 7}
			}
			d := domain.Decision{Allowed: tt.limits[i].admits}
			if !d.Allowed {
				d.RetryAfter = time.Duration(i+1) * time.Second // the shadow one waits longer
			}
			return d
		})
		if v.Allowed != tt.allowed || v.Outcome != tt.outcome || v.RetryAfter() != tt.retry {
			t.Errorf("%s: %+v (RetryAfter %v), want allowed %v, outcome %v, RetryAfter %v", tt.name, v, v.RetryAfter(), tt.allowed, tt.outcome, tt.retry)
		}
		for i, d := range v.Decisions {
			if d.Shadow != tt.limits[i].shadow {
				t.Errorf("%s: decision %d Shadow %v, want %v", tt.name, i, d.Shadow, tt.limits[i].shadow)
			}
			if d.Allowed != tt.limits[i].admits {
				t.Errorf("%s: decision %d Allowed %v, want %v", tt.name, i, d.Allowed, tt.limits[i].admits)
			}
		}
		// Denied: the admitting limits are re-read at cost 0 (nothing spent).
		for _, i := range recosted {
			if v.Allowed || !tt.limits[i].admits {
				t.Errorf("%s: limit %d re-decided at cost 0", tt.name, i)
			}
		}
	}
}

// TestTightestIgnoresShadow: the X-RateLimit-* headers and Retry-After
// describe enforced limits; a shadow limit steers them only when every
// limit is in shadow mode.
func TestTightestIgnoresShadow(t *testing.T) {
	t.Parallel()
	enforced := domain.Decision{Allowed: true, Limit: 20, Remaining: 15, ResetAfter: time.Minute}
	shadow := domain.Decision{Limit: 5, Remaining: 0, ResetAfter: 10 * time.Minute, RetryAfter: time.Minute, Shadow: true}
	tests := []struct {
		name string
		ds   []domain.Decision
		want int
	}{
		{"none", nil, -1},
		{"shadow first", []domain.Decision{shadow, enforced}, 1},
		{"shadow last", []domain.Decision{enforced, shadow}, 0},
		{"all shadow", []domain.Decision{shadow, {Limit: 9, Remaining: 3, Shadow: true}}, 0},
		{"enforced tie, later reset", []domain.Decision{enforced, shadow, {Limit: 30, Remaining: 15, ResetAfter: time.Hour}}, 2},
	}
	for _, tt := range tests {
		if got := (domain.Verdict{Decisions: tt.ds}).Tightest(); got != tt.want {
			t.Errorf("%s: Tightest = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// counters decides limits on shared counters, as a store would:
// counts[key] units spent so far, limit per key in limits.
type counters struct {
	count map[string]int64
	limit map[string]int64
}

func (c counters) decide(req domain.Request) func(i int, cost int64) domain.Decision {
	return func(i int, cost int64) domain.Decision {
		key := req.Limits[i].Key
		n, l := c.count[key], c.limit[key]
		if n+cost <= l {
			return domain.Decision{Allowed: true, Limit: l, Remaining: l - n - cost}
		}
		return domain.Decision{Limit: l, Remaining: max(l-n, 0), RetryAfter: time.Duration(l) * time.Second}
	}
}

// settle settles req on c counting by n and spends by Spends, returning
// the verdict.
func (c counters) settle(req domain.Request, n domain.Counting) domain.Verdict {
	v := domain.Settle(req, n, nil, c.decide(req))
	for i, lim := range req.Limits {
		if domain.Spends(req, n, v, i) {
			c.count[lim.Key] += lim.Cost
		}
	}
	return v
}

// costed returns limits, copied, each spending costs[i] (or costs[0]
// when there is one).
func costed(limits []domain.Limit, costs ...int64) []domain.Limit {
	out := append([]domain.Limit(nil), limits...)
	for i := range out {
		out[i].Cost = costs[min(i, len(costs)-1)]
	}
	return out
}

// TestSettleCostsAndSharedKeys: each limit spends its own cost (0 is a
// check), and limits that share a key are decided one after the other,
// as envoyproxy/ratelimit's INCRBY of one counter twice.
func TestSettleCostsAndSharedKeys(t *testing.T) {
	t.Parallel()
	c := counters{count: map[string]int64{"a": 17}, limit: map[string]int64{"a": 20, "b": 5}}
	lims := []domain.Limit{{Key: "a"}, {Key: "b"}, {Key: "a"}}
	// a: 17 + 2 = 19 (remaining 1), then + 1 = 20 (remaining 0); b checked.
	req := domain.Request{Limits: costed(lims, 2, 0, 1)}
	v := c.settle(req, domain.CountAdmitted)
	if !v.Allowed || v.Decisions[0].Remaining != 1 || v.Decisions[1].Remaining != 5 || v.Decisions[2].Remaining != 0 {
		t.Fatalf("costs 2, 0, 1: %+v, want allowed with remaining 1, 5, 0", v)
	}
	if c.count["a"] != 20 || c.count["b"] != 0 {
		t.Errorf("after costs 2, 0, 1: counts %v, want a=20 b=0", c.count)
	}
	// One more on a denies the second use of a; nothing is spent.
	req.Limits = costed(lims, 0, 1, 1)
	if v := c.settle(req, domain.CountAdmitted); v.Allowed || !v.Decisions[0].Allowed || v.Decisions[2].Allowed || v.Decisions[1].Remaining != 5 {
		t.Errorf("a full, cost 1 on its second use: %+v, want denied by limit 2 only, b untouched (5)", v)
	}
	if c.count["a"] != 20 || c.count["b"] != 0 {
		t.Errorf("after a denied request: counts %v, want a=20 b=0", c.count)
	}
	// Counting denials, each use of a counts, and decides after the one before.
	c.count["a"] = 18
	req = domain.Request{Limits: costed(lims, 2)}
	v = c.settle(req, domain.CountEvery)
	if v.Allowed || !v.Decisions[0].Allowed || v.Decisions[0].Remaining != 0 || v.Decisions[2].Allowed || v.Decisions[2].Remaining != 0 {
		t.Errorf("count denied, a at 18, cost 2 twice: %+v, want the first use allowed (0 left), the second denied", v)
	}
	if c.count["a"] != 22 || c.count["b"] != 2 {
		t.Errorf("count denied: counts %v, want a=22 b=2", c.count)
	}
}

// TestSettleQuota: quota limits deny the request only together; a shadow
// quota limit never denies, so it keeps the others from denying.
func TestSettleQuota(t *testing.T) {
	t.Parallel()
	type lim struct {
		quota, shadow, admits bool
	}
	q, qs, e := lim{quota: true}, lim{quota: true, shadow: true}, lim{}
	ok := func(l lim) lim { l.admits = true; return l }
	tests := []struct {
		name    string
		limits  []lim
		allowed bool
		retry   time.Duration
	}{
		{"the only quota over", []lim{q}, false, 1 * time.Second},
		{"one quota of two over", []lim{q, ok(q)}, true, 0},
		{"both quotas over: the first to admit", []lim{q, q}, false, 1 * time.Second},
		{"quotas over beside an enforced within", []lim{q, ok(e)}, false, 1 * time.Second},
		{"quota within beside an enforced over", []lim{ok(q), e}, false, 2 * time.Second},
		{"a shadow quota keeps the quota from denying", []lim{qs, q}, true, 0},
		{"quota and enforced over: the longer", []lim{q, e, q}, false, 2 * time.Second},
	}
	for _, tt := range tests {
		var req domain.Request
		for _, l := range tt.limits {
			req.Limits = append(req.Limits, domain.Limit{Quota: l.quota, Shadow: l.shadow, Cost: 1})
		}
		v := domain.Settle(req, domain.CountAdmitted, nil, func(i int, cost int64) domain.Decision {
			if cost == 0 || tt.limits[i].admits {
				return domain.Decision{Allowed: true}
			}
			return domain.Decision{RetryAfter: time.Duration(i+1) * time.Second}
		})
		if v.Allowed != tt.allowed || v.RetryAfter() != tt.retry {
			t.Errorf("%s: allowed %v, RetryAfter %v; want %v, %v", tt.name, v.Allowed, v.RetryAfter(), tt.allowed, tt.retry)
		}
		for i, d := range v.Decisions {
			if d.Quota != tt.limits[i].quota || d.Shadow != tt.limits[i].shadow {
				t.Errorf("%s: decision %d flags quota=%v shadow=%v, want its limit's", tt.name, i, d.Quota, d.Shadow)
			}
		}
	}
}

// TestSettleCountHits: counting hits, an admitted request spends from a
// shadow or quota limit that would deny it too (reporting nothing left);
// a denied request still spends nothing.
func TestSettleCountHits(t *testing.T) {
	t.Parallel()
	c := counters{count: map[string]int64{"s": 20}, limit: map[string]int64{"s": 20, "e": 30, "q": 1, "r": 5}}
	lims := []domain.Limit{{Key: "s", Shadow: true}, {Key: "e"}}
	req := domain.Request{Limits: costed(lims, 1)}
	v := c.settle(req, domain.CountHits)
	if !v.Allowed || v.Outcome != domain.OutcomeShadowDenied || v.Decisions[0].Remaining != 0 || v.Decisions[1].Remaining != 29 {
		t.Errorf("shadow over beside enforced within: %+v, want admitted (shadow denied), remaining 0 and 29", v)
	}
	if c.count["s"] != 21 || c.count["e"] != 1 {
		t.Errorf("CountHits: counts %v, want s=21 e=1", c.count)
	}
	c.settle(req, domain.CountAdmitted)
	if c.count["s"] != 21 || c.count["e"] != 2 {
		t.Errorf("CountAdmitted: counts %v, want s=21 (unspent), e=2", c.count)
	}
	// A quota limit over beside one within: admitted, both counted.
	c.count["q"] = 1
	req = domain.Request{Limits: []domain.Limit{{Key: "q", Quota: true, Cost: 1}, {Key: "r", Quota: true, Cost: 1}}}
	if v := c.settle(req, domain.CountHits); !v.Allowed || c.count["q"] != 2 || c.count["r"] != 1 {
		t.Errorf("one quota of two over, CountHits: %+v, counts %v; want admitted, q=2 r=1", v, c.count)
	}
	// Denied (the only quota over): nothing spent, even counting hits.
	req = domain.Request{Limits: []domain.Limit{{Key: "q", Quota: true, Cost: 1}, {Key: "e", Cost: 1}}}
	if v := c.settle(req, domain.CountHits); v.Allowed || c.count["q"] != 2 || c.count["e"] != 2 {
		t.Errorf("quota over alone, CountHits: %+v, counts %v; want denied, nothing spent", v, c.count)
	}
}

// TestCountingHonouredBy: every algorithm counts admitted requests and
// hits; only the fixed window counts every request; a mode no store
// knows is honoured by none.
func TestCountingHonouredBy(t *testing.T) {
	t.Parallel()
	for _, a := range domain.Algorithms {
		for c, want := range map[domain.Counting]bool{
			domain.CountAdmitted:  true,
			domain.CountHits:      true,
			domain.CountEvery:     a.Name == domain.AlgorithmFixedWindow,
			domain.CountEvery + 1: false,
		} {
			if got := c.HonouredBy(a.Name); got != want {
				t.Errorf("%v.HonouredBy(%s) = %v, want %v", c, a.Name, got, want)
			}
		}
	}
}
