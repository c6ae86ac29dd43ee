package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

func TestFixedWindowDecide(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 3, Window: time.Minute}
	tests := []struct {
		count int64
		left  time.Duration
		want  domain.Decision
	}{
		{1, time.Minute, domain.Decision{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: time.Minute}},
		{2, 30 * time.Second, domain.Decision{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 30 * time.Second}},
		{3, time.Second, domain.Decision{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: time.Second}},
		{4, time.Second, domain.Decision{Allowed: false, Limit: 3, Remaining: 0, ResetAfter: time.Second, RetryAfter: time.Second}},
		{100, 10 * time.Millisecond, domain.Decision{Allowed: false, Limit: 3, Remaining: 0, ResetAfter: 10 * time.Millisecond, RetryAfter: 10 * time.Millisecond}},
		// A store that reports no time left (an expiring key) still
		// tells a denied client to wait, never zero.
		{4, 0, domain.Decision{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: time.Millisecond}},
		{4, -time.Second, domain.Decision{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: time.Millisecond}},
	}
	for i, tt := range tests {
		if got := (domain.FixedWindow{}).Decide(tt.count, tt.left, rule); got != tt.want {
			t.Errorf("step %d: Decide(%d, %v) = %+v, want %+v", i, tt.count, tt.left, got, tt.want)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{59*time.Second + 999*time.Millisecond, 60},
		{time.Minute, 60},
	}
	for _, tt := range tests {
		if got := domain.CeilSeconds(tt.d); got != tt.want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rule domain.Rule
		ok   bool
	}{
		{domain.Rule{Limit: 1, Window: time.Millisecond}, true},
		{domain.Rule{Limit: 100, Window: time.Minute}, true},
		{domain.Rule{Limit: 0, Window: time.Minute}, false},
		{domain.Rule{Limit: -1, Window: time.Minute}, false},
		{domain.Rule{Limit: 1, Window: time.Millisecond - 1}, false},
		{domain.Rule{Limit: 1, Window: 0}, false},
		{domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}, true},
		{domain.Rule{Limit: domain.MaxLimit + 1, Window: domain.MaxWindow}, false},
		{domain.Rule{Limit: 1, Window: domain.MaxWindow + 1}, false},
		{domain.Rule{Limit: 1000, Window: time.Millisecond}, true},
		{domain.Rule{Limit: 1001, Window: time.Millisecond}, false},
	}
	for _, tt := range tests {
		err := tt.rule.Validate()
		if got := err == nil; got != tt.ok {
			t.Errorf("%+v.Validate() = %v, want ok=%v", tt.rule, err, tt.ok)
		}
	}
}

func BenchmarkFixedWindowDecide(b *testing.B) {
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	b.ReportAllocs()
	var d domain.Decision
	n := int64(0)
	for b.Loop() {
		n++
		d = domain.FixedWindow{}.Decide(n%150, time.Second, rule)
	}
	_ = d
}

// TestSettleIntoRequestDecisions: with room in req.Decisions, the
// verdict's decisions are written there, and settling allocates nothing;
// without room, Settle allocates and leaves req.Decisions alone.
func TestSettleIntoRequestDecisions(t *testing.T) {
	decide := func(i int, cost int64) domain.Decision {
		return domain.Decision{Allowed: i == 0, Limit: 10, Remaining: 10 - cost}
	}
	req := domain.Request{Limits: make([]domain.Limit, 2), Cost: 3}
	want := domain.Settle(req, decide)
	req.Decisions = make([]domain.Decision, 0, 2)
	v := domain.Settle(req, decide)
	if len(v.Decisions) != 2 || &v.Decisions[0] != &req.Decisions[:1][0] {
		t.Fatalf("Settle with room: decisions %v not in req.Decisions' array", v.Decisions)
	}
	// Denied by limit 1: limit 0 is decided again at cost 0, as without room.
	if v.Allowed || v.Outcome != want.Outcome || v.Decisions[0] != want.Decisions[0] || v.Decisions[1] != want.Decisions[1] {
		t.Errorf("Settle with room = %+v, want %+v", v, want)
	}
	small := domain.Request{Limits: req.Limits, Cost: 1, Decisions: make([]domain.Decision, 0, 1)}
	if v := domain.Settle(small, decide); len(v.Decisions) != 2 || small.Decisions[:1][0] != (domain.Decision{}) {
		t.Errorf("Settle(room for 1 of 2) = %v, or wrote into the short buffer %v", v.Decisions, small.Decisions[:1])
	}
	if n := testing.AllocsPerRun(100, func() { domain.Settle(req, decide) }); n != 0 {
		t.Errorf("Settle with room allocates %v times, want 0", n)
	}
}
