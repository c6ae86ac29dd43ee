package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// TestSettleReserve: a Reserve limit that its cost would deny while
// something remains admits at what remains; it spends only when the
// whole request is admitted, and says what it spent.
func TestSettleReserve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		count     map[string]int64 // spent so far per key
		limits    []domain.Limit
		counting  domain.Counting
		allowed   bool
		spent     []int64
		remaining []int64
		marks     []int64
	}{
		{"whole cost fits", map[string]int64{}, []domain.Limit{{Key: "tok", Cost: 30, Reserve: true}},
			domain.CountAdmitted, true, []int64{30}, []int64{70}, []int64{0}},
		{"clamped to what remains", map[string]int64{"tok": 90}, []domain.Limit{{Key: "tok", Cost: 30, Reserve: true}},
			domain.CountAdmitted, true, []int64{10}, []int64{0}, []int64{0}},
		{"a reservation of nothing", map[string]int64{}, []domain.Limit{{Key: "tok", Cost: 0, Reserve: true}},
			domain.CountAdmitted, true, []int64{0}, []int64{100}, []int64{domain.NoMark}},
		{"one unit left", map[string]int64{"tok": 99}, []domain.Limit{{Key: "tok", Cost: 30, Reserve: true}},
			domain.CountAdmitted, true, []int64{1}, []int64{0}, []int64{0}},
		{"nothing left denies", map[string]int64{"tok": 100}, []domain.Limit{{Key: "tok", Cost: 30, Reserve: true}},
			domain.CountAdmitted, false, []int64{0}, []int64{0}, []int64{domain.NoMark}},
		{"a plain limit is not clamped", map[string]int64{"req": 90}, []domain.Limit{{Key: "req", Cost: 30}},
			domain.CountAdmitted, false, []int64{0}, []int64{10}, []int64{0}},
		{"denied by another limit: spends nothing", map[string]int64{"req": 100, "tok": 50},
			[]domain.Limit{{Key: "req", Cost: 1}, {Key: "tok", Cost: 80, Reserve: true}},
			domain.CountAdmitted, false, []int64{0, 0}, []int64{0, 50}, []int64{0, domain.NoMark}},
		{"admitted with another limit", map[string]int64{"req": 10, "tok": 50},
			[]domain.Limit{{Key: "req", Cost: 1}, {Key: "tok", Cost: 80, Reserve: true}},
			domain.CountAdmitted, true, []int64{0, 50}, []int64{89, 0}, []int64{0, 0}},
		{"shadow with nothing left spends nothing", map[string]int64{"tok": 100},
			[]domain.Limit{{Key: "req", Cost: 1}, {Key: "tok", Cost: 5, Reserve: true, Shadow: true}},
			domain.CountAdmitted, true, []int64{0, 0}, []int64{99, 0}, []int64{0, domain.NoMark}},
		{"shadow with nothing left, counting hits", map[string]int64{"tok": 100},
			[]domain.Limit{{Key: "req", Cost: 1}, {Key: "tok", Cost: 5, Reserve: true, Shadow: true}},
			domain.CountHits, true, []int64{0, 5}, []int64{99, 0}, []int64{0, 0}},
	}
	for _, tt := range tests {
		c := counters{count: tt.count, limit: map[string]int64{"req": 100, "tok": 100}}
		req := domain.Request{Limits: tt.limits}
		v := domain.Settle(req, tt.counting, nil, c.decide(req))
		if v.Allowed != tt.allowed {
			t.Errorf("%s: allowed %v, want %v (%+v)", tt.name, v.Allowed, tt.allowed, v)
		}
		for i, d := range v.Decisions {
			if d.Spent != tt.spent[i] || d.Remaining != tt.remaining[i] || d.Mark != tt.marks[i] {
				t.Errorf("%s: limit %d: %+v, want spent %d, remaining %d, mark %d", tt.name, i, d, tt.spent[i], tt.remaining[i], tt.marks[i])
			}
			if spends := domain.Spends(req, tt.counting, v, i); req.Limits[i].Reserve && !spends && d.Spent > 0 {
				t.Errorf("%s: limit %d spends %v with Spent %d", tt.name, i, spends, d.Spent)
			}
		}
	}
}

// adjustable is an algorithm's state as a settlement sees it.
type adjustable interface {
	Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision
	Reserve(now time.Time, rule domain.Rule, cost int64) int64
	Adjust(now time.Time, rule domain.Rule, mark, delta int64)
	Live(now time.Time, rule domain.Rule, mark int64) bool
}

// fixedAdjust is a FixedWindow of windows that start with their first
// request, deciding by its rule alone.
type fixedAdjust struct{ w domain.FixedWindow }

func (f *fixedAdjust) Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision {
	return f.w.Decide(now, rule, domain.WindowsFromFirst, cost)
}
func (f *fixedAdjust) Reserve(now time.Time, rule domain.Rule, cost int64) int64 {
	return f.w.Reserve(now, rule, domain.WindowsFromFirst, cost)
}
func (f *fixedAdjust) Adjust(now time.Time, rule domain.Rule, mark, delta int64) {
	f.w.Adjust(now, rule, domain.WindowsFromFirst, mark, delta)
}
func (f *fixedAdjust) Live(now time.Time, rule domain.Rule, mark int64) bool {
	return f.w.Live(now, rule, domain.WindowsFromFirst, mark)
}

// periodAdjust is a PeriodWindow of calendar days in UTC.
type periodAdjust struct{ p domain.PeriodWindow }

var utcDay = domain.Calendar{Unit: domain.PeriodDay}

func (p *periodAdjust) Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision {
	return p.p.Decide(now, utcDay, rule.Limit, cost)
}
func (p *periodAdjust) Reserve(now time.Time, _ domain.Rule, cost int64) int64 {
	return p.p.Reserve(now, utcDay, cost)
}
func (p *periodAdjust) Adjust(now time.Time, _ domain.Rule, mark, delta int64) {
	p.p.Adjust(now, utcDay, mark, delta)
}
func (p *periodAdjust) Live(now time.Time, _ domain.Rule, mark int64) bool {
	return p.p.Live(now, utcDay, mark)
}

// TestAdjust: a settlement moves the count of the window, entry or
// admission its mark names, and nothing once that has ended, for every
// algorithm. Each case reserves at t0, then settles at t0+at and reads
// what remains at t0+at (and, for "later", at t0+at+later).
func TestAdjust(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	states := map[string]func() adjustable{
		"fixed_window":   func() adjustable { return new(fixedAdjust) },
		"calendar":       func() adjustable { return new(periodAdjust) },
		"sliding_log":    func() adjustable { return new(domain.SlidingLog) },
		"sliding_window": func() adjustable { return new(domain.SlidingWindow) },
		"token_bucket":   func() adjustable { return new(domain.TokenBucket) },
	}
	tests := []struct {
		name      string
		reserve   int64
		at        time.Duration
		delta     int64
		remaining map[string]int64 // by state; "" for every state not named
	}{
		{"refund in the same window", 60, 10 * s, -45, map[string]int64{"": 85,
			// The bucket refilled 10 s (16 tokens) meanwhile: the refund fills it.
			"token_bucket": 100}},
		{"extra in the same window", 60, 1 * s, 30, map[string]int64{"": 10,
			"token_bucket": 11}},
		{"extra past the limit", 60, 1 * s, 70, map[string]int64{"": 0}},
		{"never below zero", 60, 1 * s, -500, map[string]int64{"": 100}},
		// After the window: the fixed window and the period are new
		// (a day's period is not over: it keeps the refund), the log's
		// entry has left, the bucket has refilled; the sliding window
		// still weighs its previous window.
		{"refund after the window ended", 60, 61 * s, -60, map[string]int64{"": 100, "calendar": 100, "sliding_window": 100}},
		{"extra after the window ended", 60, 61 * s, 40, map[string]int64{"": 100, "calendar": 0,
			// previous 100 weighted ⌊100 × 59/60⌋ = 98.
			"sliding_window": 2,
			// The bucket refilled the 60 at t0+36s; an extra charge
			// counts a window after that, until t0+1m36s: at t0+1m1s the
			// 40 are owed (100 − 40).
			"token_bucket": 60}},
		{"extra a window after the bucket refilled", 60, 97 * s, 40, map[string]int64{"": 100, "calendar": 0,
			// the admission's window is the previous one: 100 weighted ⌊100 × 23/60⌋ = 38.
			"sliding_window": 62}},
	}
	for name, fresh := range states {
		for _, tt := range tests {
			st := fresh()
			mark := st.Reserve(t0, rule, tt.reserve)
			if mark == 0 || mark == domain.NoMark {
				t.Fatalf("%s: Reserve gave mark %d", name, mark)
			}
			now := t0.Add(tt.at)
			st.Adjust(now, rule, mark, tt.delta)
			want, ok := tt.remaining[name]
			if !ok {
				want = tt.remaining[""]
			}
			if got := st.Decide(now, rule, 0).Remaining; got != want {
				t.Errorf("%s, %s: reserve %d, settle %+d at t0+%v: remaining %d, want %d", name, tt.name, tt.reserve, tt.delta, tt.at, got, want)
			}
		}
	}
}

// TestAdjustZeroMark: a mark of 0 charges in the window of now, a
// report of work done elsewhere; a refund there does nothing.
func TestAdjustZeroMark(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	for name, st := range map[string]adjustable{
		"fixed_window": new(fixedAdjust), "calendar": new(periodAdjust), "sliding_log": new(domain.SlidingLog),
		"sliding_window": new(domain.SlidingWindow), "token_bucket": new(domain.TokenBucket),
	} {
		st.Adjust(t0, rule, 0, -20)
		st.Adjust(t0, rule, 0, 30)
		if got := st.Decide(t0, rule, 0).Remaining; got != 70 {
			t.Errorf("%s: charged 30 (and refunded 20 without a mark): remaining %d, want 70", name, got)
		}
	}
}

// TestSlidingLogAdjustKeepsSums: settling one entry of several keeps the
// units that count the sum of the entries: a later entry's leaving frees
// exactly its own units, and a mark finds its entry among others at the
// same instant.
func TestSlidingLogAdjustKeepsSums(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	var l domain.SlidingLog
	l.Spend(t0, rule, 10)                  // a plain entry at t0
	a := l.Reserve(t0, rule, 20)           // t0+1ns
	b := l.Reserve(t0, rule, 30)           // t0+2ns
	c := l.Reserve(t0.Add(10*s), rule, 15) // t0+10s
	if a == b || !l.Live(t0, rule, a) || l.Len() != 4 {
		t.Fatalf("marks %d, %d: want distinct and live, 4 entries (have %d)", a, b, l.Len())
	}
	l.Adjust(t0.Add(20*s), rule, b, -25) // b used 5
	l.Adjust(t0.Add(20*s), rule, a, -20) // a used nothing: its entry goes
	if got := l.Decide(t0.Add(20*s), rule, 0).Remaining; got != 100-10-5-15 {
		t.Fatalf("after the refunds: remaining %d, want %d", got, 100-10-5-15)
	}
	if l.Len() != 3 || l.Live(t0, rule, a) {
		t.Errorf("an entry settled to nothing: Len %d, live %v, want 3 entries, not live", l.Len(), l.Live(t0, rule, a))
	}
	// At t0+60s+2ns the first two (10 and b's 5) have left: only c's 15 count.
	if got := l.Decide(t0.Add(time.Minute+2), rule, 0).Remaining; got != 85 {
		t.Errorf("after t0's entries left: remaining %d, want 85", got)
	}
	l.Adjust(t0.Add(time.Minute+2), rule, c, 5)
	if got := l.Decide(t0.Add(time.Minute+2), rule, 0).Remaining; got != 80 {
		t.Errorf("c charged 5 more: remaining %d, want 80", got)
	}
	l.Adjust(t0.Add(time.Minute+2), rule, b, 50) // left the window: nothing
	if got := l.Decide(t0.Add(time.Minute+2), rule, 0).Remaining; got != 80 {
		t.Errorf("b settled after it left: remaining %d, want 80", got)
	}
	if got := l.Decide(t0.Add(70*s), rule, 0).Remaining; got != 100 {
		t.Errorf("after c left: remaining %d, want 100", got)
	}
}

// TestSlidingLogAdjustPastTheLimit: an extra charge fills the log at
// most (the newest limit units count), and a report fills it too.
func TestSlidingLogAdjustPastTheLimit(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 5, Window: time.Minute}
	var l domain.SlidingLog
	l.Spend(t0, rule, 1)
	mark := l.Reserve(t0.Add(s), rule, 2)
	l.Spend(t0.Add(2*s), rule, 1)
	l.Adjust(t0.Add(3*s), rule, mark, 10) // 12 units: the newest 5 count
	d := l.Decide(t0.Add(3*s), rule, 1)
	if d.Allowed || d.Remaining != 0 || l.Len() > 5 {
		t.Fatalf("charged 10 more: %+v, Len %d; want denied, nothing left, at most 5 entries", d, l.Len())
	}
	// 4 of the reservation's units and t0+2s's count: room at t0+61s.
	if d := l.Decide(t0.Add(61*s+1), rule, 4); !d.Allowed {
		t.Errorf("at t0+61s: %+v, want 4 allowed", d)
	}
	var full domain.SlidingLog
	full.Spend(t0, rule, 4)
	full.Adjust(t0, rule, 0, 3)
	if d := full.Decide(t0, rule, 0); d.Remaining != 0 {
		t.Errorf("reported 3 with 1 left: %+v, want the log full", d)
	}
}

// TestSlidingWindowAdjustPrevious: a settlement in the previous window
// moves its weighted count.
func TestSlidingWindowAdjustPrevious(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	var sw domain.SlidingWindow
	mark := sw.Reserve(t0.Add(50*s), rule, 60)
	sw.Adjust(t0.Add(90*s), rule, mark, -60)
	if got := sw.Decide(t0.Add(90*s), rule, 0).Remaining; got != 100 {
		t.Errorf("the previous window refunded: remaining %d, want 100", got)
	}
	if !sw.Live(t0.Add(90*s), rule, mark) || sw.Live(t0.Add(120*s), rule, mark) {
		t.Error("the previous window's mark: want live in the next window, not after")
	}
}

// TestTokenBucketAdjustBounds: a refund never fills past full, an extra
// charge never owes more than a window past an empty bucket.
func TestTokenBucketAdjustBounds(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 60, Window: time.Minute} // a token a second
	var b domain.TokenBucket
	mark := b.Reserve(t0, rule, 60)
	b.Adjust(t0.Add(s), rule, mark, 1000)
	d := b.Decide(t0.Add(s), rule, 1)
	if d.Allowed || d.RetryAfter != 60*s+s || d.ResetAfter != 2*time.Minute {
		t.Errorf("charged 1000 more: %+v, want denied for a window and a token, full in two windows", d)
	}
	if !b.Live(t0.Add(s), rule, mark) || b.Live(t0.Add(time.Minute), rule, mark) {
		t.Error("the admission's mark: want live until its tokens are back")
	}
}
