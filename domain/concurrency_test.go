package domain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

func TestDecideSlots(t *testing.T) {
	t.Parallel()
	const s = domain.ConcurrencyWindow
	tests := []struct {
		limit, held, cost int64
		want              domain.Decision
	}{
		{5, 0, 1, domain.Decision{Allowed: true, Limit: 5, Remaining: 4, Held: 1}},
		{5, 3, 1, domain.Decision{Allowed: true, Limit: 5, Remaining: 1, Held: 4}},
		{5, 4, 1, domain.Decision{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: s, Held: 5}}, // the last slot: none free now
		{5, 5, 1, domain.Decision{Limit: 5, ResetAfter: s, RetryAfter: s, Held: 5}},
		{5, 4, 7, domain.Decision{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: s, Held: 5}}, // a cost of 7 takes one slot
		{5, 5, 7, domain.Decision{Limit: 5, ResetAfter: s, RetryAfter: s, Held: 5}},
		// A limit lowered below the slots held: nothing is evicted, and
		// nothing admitted until the count is below it.
		{2, 4, 1, domain.Decision{Limit: 2, ResetAfter: s, RetryAfter: s, Held: 4}},
		{2, 1, 1, domain.Decision{Allowed: true, Limit: 2, Remaining: 0, ResetAfter: s, Held: 2}},
		// Cost 0 reads: what is free, nothing taken.
		{5, 2, 0, domain.Decision{Allowed: true, Limit: 5, Remaining: 3, Held: 2}},
		{5, 5, 0, domain.Decision{Allowed: true, Limit: 5, ResetAfter: s, Held: 5}},
		{2, 4, 0, domain.Decision{Allowed: true, Limit: 2, ResetAfter: s, Held: 4}}, // more held than the limit: Held says so,
	}
	for _, tt := range tests {
		if got := domain.DecideSlots(tt.limit, tt.held, tt.cost); got != tt.want {
			t.Errorf("DecideSlots(%d, %d, %d) = %+v, want %+v", tt.limit, tt.held, tt.cost, got, tt.want)
		}
	}
}

// TestSlots: one key's slots in a process, taken and given back.
func TestSlots(t *testing.T) {
	t.Parallel()
	var s domain.Slots
	for i := range 3 {
		d := s.Decide(3, 1)
		if !d.Allowed || d.Remaining != int64(2-i) {
			t.Fatalf("request %d: %+v, want allowed with %d left", i+1, d, 2-i)
		}
		s.Acquire()
	}
	if d := s.Decide(3, 1); d.Allowed || d.RetryAfter != domain.ConcurrencyWindow {
		t.Errorf("fourth request with 3 held: %+v, want denied, RetryAfter 1s", d)
	}
	s.Release()
	if got := s.Held(); got != 2 {
		t.Errorf("Held after a release = %d, want 2", got)
	}
	if d := s.Decide(3, 1); !d.Allowed {
		t.Errorf("after a release: %+v, want allowed", d)
	}
	s.Release()
	s.Release()
	s.Release() // one too many: nothing held, nothing below 0
	if got := s.Held(); got != 0 {
		t.Errorf("Held after releasing more than held = %d, want 0", got)
	}
}

func TestConcurrencyRule(t *testing.T) {
	t.Parallel()
	for _, n := range []int64{1, 5, domain.MaxConcurrency} {
		r, err := domain.ConcurrencyRule(n)
		if err != nil || r != (domain.Rule{Limit: n, Window: domain.ConcurrencyWindow}) {
			t.Errorf("ConcurrencyRule(%d) = %+v, %v", n, r, err)
		}
	}
	for _, n := range []int64{0, -1, domain.MaxConcurrency + 1} {
		if _, err := domain.ConcurrencyRule(n); !errors.Is(err, domain.ErrInvalidRule) {
			t.Errorf("ConcurrencyRule(%d): error %v, want ErrInvalidRule", n, err)
		}
	}
}

func inflight(n int64) domain.PolicyLimit {
	return domain.PolicyLimit{Name: "inflight", Rule: domain.Rule{Limit: n, Window: domain.ConcurrencyWindow}, Concurrency: true}
}

// TestNewPolicyConcurrency: a concurrency limit's bounds, and a route's
// cost does not apply to it (a request takes one slot).
func TestNewPolicyConcurrency(t *testing.T) {
	t.Parallel()
	day := domain.Calendar{Unit: domain.PeriodDay, Location: time.UTC}
	tests := []struct {
		name   string
		limits []domain.PolicyLimit
		routes []domain.Route
		want   string // "" valid
	}{
		{"global", []domain.PolicyLimit{inflight(5)}, nil, ""},
		{"a route's own, its cost above the cap", nil,
			[]domain.Route{{Name: "r", Path: "/r", Cost: 50, Limits: []domain.PolicyLimit{inflight(5)}}}, ""},
		{"with a rate limit", []domain.PolicyLimit{perSecond, inflight(domain.MaxConcurrency)}, nil, ""},
		{"zero", []domain.PolicyLimit{inflight(0)}, nil, "concurrency=0, want 1 to 1000000"},
		{"too many", []domain.PolicyLimit{inflight(domain.MaxConcurrency + 1)}, nil, "concurrency=1000001"},
		{"a window", []domain.PolicyLimit{{Name: "inflight", Rule: domain.Rule{Limit: 5, Window: time.Minute}, Concurrency: true}}, nil,
			"a concurrency limit's window is 1s, not 1m0s"},
		{"a calendar", []domain.PolicyLimit{{Name: "inflight", Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow}, Concurrency: true, Calendar: &day}}, nil,
			"a concurrency limit has no calendar period"},
	}
	for _, tt := range tests {
		_, err := domain.NewPolicy(tt.limits, tt.routes)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.name, err)
		case tt.want != "" && (!errors.Is(err, domain.ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one with %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckOverrideConcurrency(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{inflight(5)}, []domain.Route{{Name: "r", Path: "/r", Cost: 40}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CheckOverride("inflight", domain.Rule{Limit: 2, Window: domain.ConcurrencyWindow}); err != nil {
		t.Errorf("concurrency 2 on a route of cost 40: %v, want accepted (a request takes one slot)", err)
	}
	for _, r := range []domain.Rule{{Limit: 0, Window: domain.ConcurrencyWindow}, {Limit: 2, Window: time.Minute}} {
		if err := p.CheckOverride("inflight", r); !errors.Is(err, domain.ErrInvalidPolicy) {
			t.Errorf("CheckOverride(inflight, %+v) = %v, want ErrInvalidPolicy", r, err)
		}
	}
}

// TestSettleConcurrency: a concurrency limit is all or nothing with the
// others, also when denied requests count (the fixed window's option):
// a request denied for want of a slot takes none, and a request another
// limit denies takes no slot.
func TestSettleConcurrency(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		countDenied         bool
		rateOK, slotOK      bool
		allowed             bool
		rateSpends, slotted bool
	}{
		{"both admit", false, true, true, true, true, true},
		{"no slot", false, true, false, false, false, false},
		{"rate denies", false, false, true, false, false, false},
		{"counting denials, no slot", true, true, false, false, true, false},
		{"counting denials, rate denies", true, false, true, false, true, false},
	}
	for _, tt := range tests {
		req := domain.Request{Limits: []domain.Limit{{Name: "rate", Cost: 3}, {Name: "inflight", Cost: 3, Concurrency: true}}}
		counting := domain.CountAdmitted
		if tt.countDenied {
			counting = domain.CountEvery
		}
		v := domain.Settle(req, counting, nil, func(i int, cost int64) domain.Decision {
			if i == 0 {
				return domain.Decision{Allowed: tt.rateOK || cost == 0}
			}
			held := int64(0)
			if !tt.slotOK {
				held = 1
			}
			return domain.DecideSlots(1, held, cost)
		})
		if v.Allowed != tt.allowed {
			t.Errorf("%s: allowed %v, want %v", tt.name, v.Allowed, tt.allowed)
		}
		if got := domain.Spends(req, counting, v, 0); got != tt.rateSpends {
			t.Errorf("%s: the rate limit spends %v, want %v", tt.name, got, tt.rateSpends)
		}
		if got := domain.Spends(req, counting, v, 1); got != tt.slotted {
			t.Errorf("%s: the concurrency limit takes a slot %v, want %v", tt.name, got, tt.slotted)
		}
		if !tt.slotOK && tt.countDenied && v.Decisions[1].Remaining != 0 {
			t.Errorf("%s: concurrency decision %+v, want none free", tt.name, v.Decisions[1])
		}
	}
}

func ExampleSlots() {
	// A concurrency limit of 2: two requests run, a third waits for one
	// of them to end.
	var s domain.Slots
	take := func(name string) {
		d := s.Decide(2, 1)
		if d.Allowed {
			s.Acquire()
		}
		fmt.Printf("%s: allowed=%v free=%d retry after %v\n", name, d.Allowed, d.Remaining, d.RetryAfter)
	}
	take("a")
	take("b")
	take("c")
	s.Release() // a's response ended
	take("c again")
	// Output:
	// a: allowed=true free=1 retry after 0s
	// b: allowed=true free=0 retry after 0s
	// c: allowed=false free=0 retry after 1s
	// c again: allowed=true free=0 retry after 0s
}
