package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

func TestFixedWindowAdmit(t *testing.T) {
	t.Parallel()
	var f fixedWindow
	rule := domain.Rule{Limit: 3, Window: time.Minute}
	runAdmit(t, "Admit", admitter(&f), rule, []admitStep{
		// The first request starts the window: it ends at t0+60s.
		{at: 10 * s, want: allowed(3, 2, 60*s)},
		{at: 40 * s, want: allowed(3, 1, 30*s)},
		{at: 69 * s, want: allowed(3, 0, 1*s)},
		{at: 69*s + 999*ms, want: denied(3, 1*ms, 1*ms)},
		// At the window's end a new one starts with this request.
		{at: 70 * s, want: allowed(3, 2, 60*s)},
		{at: 70 * s, n: 2, want: allowed(3, 0, 60*s)},
		{at: 100 * s, want: denied(3, 30*s, 30*s)},
	})
}

// TestFixedWindowCountDenied: a request that counts denials (the
// default limit without a policy file) spends its cost whatever the
// verdict, so a flood keeps its window full, and the next window starts
// afresh.
func TestFixedWindowCountDenied(t *testing.T) {
	t.Parallel()
	var f domain.FixedWindow
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	lim := domain.Limit{Name: "default", Rule: rule, Cost: 1}
	req := domain.Request{Limits: []domain.Limit{lim}}
	want := []domain.Decision{allowed(2, 1, 60*s), allowed(2, 0, 60*s), denied(2, 60*s, 60*s), denied(2, 60*s, 60*s)}
	for i, w := range want {
		v := domain.Settle(req, domain.CountEvery, nil, func(_ int, cost int64) domain.Decision { return f.Decide(t0, rule, 0, cost) })
		for j := range req.Limits {
			if domain.Spends(req, domain.CountEvery, v, j) {
				f.Spend(t0, rule, 0, lim.Cost)
			}
		}
		if got := v.Decisions[0]; got != w {
			t.Errorf("request %d: %+v, want %+v", i+1, got, w)
		}
	}
	// Four counted: a cheaper request still finds nothing left.
	if d := f.Decide(t0, rule, 0, 0); d.Remaining != 0 {
		t.Errorf("after 4 counted requests: %+v, want remaining 0", d)
	}
	if d := f.Decide(t0.Add(time.Minute), rule, 0, 1); !d.Allowed || d.Remaining != 1 {
		t.Errorf("next window: %+v, want allowed, remaining 1", d)
	}
}

// TestFixedWindowEpoch: a limit aligned to the epoch counts in the
// multiple of its window that holds now, whenever its first request came,
// and reports the time to that window's end even for a check (cost 0) on
// a fresh state; its count starts again at the next multiple.
func TestFixedWindowEpoch(t *testing.T) {
	t.Parallel()
	rule, epoch := domain.Rule{Limit: 3, Window: time.Minute}, domain.WindowsEpoch
	var f domain.FixedWindow
	// t0 is on a minute: the windows are [t0, t0+60s), [t0+60s, t0+120s), ...
	steps := []struct {
		at   time.Duration
		cost int64
		want domain.Decision
	}{
		{at: 10 * s, cost: 0, want: allowed(3, 3, 50*s)}, // a check on a fresh state: the window's end
		{at: 10 * s, cost: 1, want: allowed(3, 2, 50*s)},
		{at: 40 * s, cost: 2, want: allowed(3, 0, 20*s)},
		{at: 59*s + 999*ms, cost: 1, want: denied(3, 1*ms, 1*ms)},
		{at: 59*s + 999*ms, cost: 0, want: allowed(3, 0, 1*ms)},
		// The window ends at t0+60s, not 60 s after its first request.
		{at: 60 * s, cost: 1, want: allowed(3, 2, 60*s)},
		{at: 61 * s, cost: 5, want: decision(false, 3, 2, 59*s, 59*s)},
		// A clock that steps back stays in the stored window.
		{at: 59 * s, cost: 0, want: allowed(3, 2, 61*s)},
		// Skipping windows starts afresh.
		{at: 10*time.Minute + 30*s, cost: 3, want: allowed(3, 0, 30*s)},
	}
	for i, st := range steps {
		now := t0.Add(st.at)
		got := f.Decide(now, rule, epoch, st.cost)
		if got != st.want {
			t.Errorf("step %d: Decide(t0+%v, cost %d) = %+v, want %+v", i, st.at, st.cost, got, st.want)
		}
		if got.Allowed && st.cost > 0 {
			f.Spend(now, rule, epoch, st.cost)
		}
	}
	// Not aligned, the same first request at t0+10s ends its window at t0+70s.
	var g domain.FixedWindow
	g.Spend(t0.Add(10*s), rule, domain.WindowsFromFirst, 1)
	if d := g.Decide(t0.Add(60*s), rule, domain.WindowsFromFirst, 1); d != allowed(3, 1, 10*s) {
		t.Errorf("first-request window at t0+60s: %+v, want allowed, remaining 1, reset 10s", d)
	}
}

func decision(ok bool, limit, remaining int64, reset, retry time.Duration) domain.Decision {
	return domain.Decision{Allowed: ok, Limit: limit, Remaining: remaining, ResetAfter: reset, RetryAfter: retry}
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
	var (
		f domain.FixedWindow
		d domain.Decision
	)
	now := t0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		d = f.Decide(now, rule, domain.WindowsFromFirst, 1)
		f.Spend(now, rule, domain.WindowsFromFirst, 1)
	}
	_ = d
}

// TestSettleIntoDst: with room in dst, the verdict's decisions are
// written there, and settling allocates nothing; without room, Settle
// allocates and leaves dst alone.
func TestSettleIntoDst(t *testing.T) {
	decide := func(i int, cost int64) domain.Decision {
		return domain.Decision{Allowed: i == 0, Limit: 10, Remaining: 10 - cost}
	}
	req := domain.Request{Limits: []domain.Limit{{Cost: 3}, {Cost: 3}}}
	want := domain.Settle(req, domain.CountAdmitted, nil, decide)
	dst := make([]domain.Decision, 0, 2)
	v := domain.Settle(req, domain.CountAdmitted, dst, decide)
	if len(v.Decisions) != 2 || &v.Decisions[0] != &dst[:1][0] {
		t.Fatalf("Settle with room: decisions %v not in dst's array", v.Decisions)
	}
	// Denied by limit 1: limit 0 is decided again at cost 0, as without room.
	if v.Allowed || v.Outcome != want.Outcome || v.Decisions[0] != want.Decisions[0] || v.Decisions[1] != want.Decisions[1] {
		t.Errorf("Settle with room = %+v, want %+v", v, want)
	}
	small := make([]domain.Decision, 0, 1)
	if v := domain.Settle(req, domain.CountAdmitted, small, decide); len(v.Decisions) != 2 || small[:1][0] != (domain.Decision{}) {
		t.Errorf("Settle(room for 1 of 2) = %v, or wrote into the short buffer %v", v.Decisions, small[:1])
	}
	if n := testing.AllocsPerRun(100, func() { domain.Settle(req, domain.CountAdmitted, dst, decide) }); n != 0 {
		t.Errorf("Settle with room allocates %v times, want 0", n)
	}
}
