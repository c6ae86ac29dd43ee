package domain_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// t0 is aligned to the minute, so sliding windows of a minute start at it.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// admitStep is one step of a policy test: n requests arrive at t0+at (the
// last one is checked).
type admitStep struct {
	at   time.Duration
	n    int
	want domain.Decision
}

// admitter returns st's admission of one request at a time: decide at
// cost 1 and, when admitted, spend it, as a store of one limit does.
func admitter(st state) func(time.Time, domain.Rule) domain.Decision {
	return func(now time.Time, rule domain.Rule) domain.Decision {
		d := st.Decide(now, rule, 1)
		if d.Allowed {
			st.Spend(now, rule, 1)
		}
		return d
	}
}

// runAdmit drives admit through steps, as rate's run does.
func runAdmit(t *testing.T, name string, admit func(time.Time, domain.Rule) domain.Decision, rule domain.Rule, steps []admitStep) {
	t.Helper()
	for i, s := range steps {
		var got domain.Decision
		for range max(s.n, 1) {
			got = admit(t0.Add(s.at), rule)
		}
		if got != s.want {
			t.Errorf("step %d: %s(t0+%v) = %+v, want %+v", i, name, s.at, got, s.want)
		}
	}
}

func allowed(limit, remaining int64, reset time.Duration) domain.Decision {
	return domain.Decision{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func denied(limit int64, reset, retry time.Duration) domain.Decision {
	return domain.Decision{Limit: limit, ResetAfter: reset, RetryAfter: retry}
}

const ms, s = time.Millisecond, time.Second

func TestSlidingLogAdmit(t *testing.T) {
	t.Parallel()
	var l domain.SlidingLog
	rule := domain.Rule{Limit: 3, Window: time.Minute}
	runAdmit(t, "Admit", admitter(&l), rule, []admitStep{
		{at: 0, want: allowed(3, 2, 60*s)},
		{at: 10 * s, want: allowed(3, 1, 60*s)},
		{at: 20 * s, want: allowed(3, 0, 60*s)},
		// Full: the oldest (t0) leaves at t0+60s, the newest at t0+80s.
		{at: 30 * s, want: denied(3, 50*s, 30*s)},
		{at: 59*s + 999*ms, want: denied(3, 20*s+1*ms, 1*ms)},
		// Denied requests were not logged: t0 has left, one slot.
		{at: 60 * s, want: allowed(3, 0, 60*s)},
		{at: 60 * s, want: denied(3, 60*s, 10*s)},
		{at: 70 * s, want: allowed(3, 0, 60*s)},
		{at: 200 * s, want: allowed(3, 2, 60*s)},
	})
	if got, want := l.Len(), 1; got != want {
		t.Errorf("Len = %d, want %d", got, want)
	}
}

func TestSlidingLogKeepsAtMostLimit(t *testing.T) {
	t.Parallel()
	var l domain.SlidingLog
	big := domain.Rule{Limit: 100, Window: time.Minute}
	for i := range 1000 {
		admitter(&l)(t0.Add(time.Duration(i)*ms), big)
		if l.Len() > 100 {
			t.Fatalf("request %d: Len = %d, want <= 100", i, l.Len())
		}
	}
	// t0 .. t0+99ms were admitted. The limit shrinks to 5: only the
	// newest 5 count, and the oldest of them (t0+95ms) must leave before
	// another is admitted.
	small := domain.Rule{Limit: 5, Window: time.Minute}
	runAdmit(t, "Admit", admitter(&l), small, []admitStep{
		{at: time.Second, want: denied(5, 59*s+99*ms, 59*s+95*ms)},
	})
	if got, want := l.Len(), 5; got != want {
		t.Errorf("Len after the limit shrank to 5 = %d, want %d", got, want)
	}
}

// TestSlidingLogCosts: a request of any cost is one entry, and the
// entry whose leaving makes room is found by the units admitted through
// it, also after the limit shrank into an entry.
func TestSlidingLogCosts(t *testing.T) {
	t.Parallel()
	var l domain.SlidingLog
	rule := domain.Rule{Limit: 5, Window: time.Minute}
	steps := []struct {
		at   time.Duration
		cost int64
		want domain.Decision
	}{
		{at: 0, cost: 3, want: allowed(5, 2, 60*s)},
		{at: 10 * s, cost: 2, want: allowed(5, 0, 60*s)},
		// 2 more need the first entry's 3 units gone (at 60 s), 4 more
		// the second's too (at 70 s).
		{at: 20 * s, cost: 2, want: denied(5, 50*s, 40*s)},
		{at: 20 * s, cost: 4, want: denied(5, 50*s, 50*s)},
		{at: 20 * s, cost: 6, want: denied(5, 50*s, 60*s)},
		{at: 60 * s, cost: 3, want: allowed(5, 0, 60*s)},
	}
	for i, st := range steps {
		now := t0.Add(st.at)
		d := l.Decide(now, rule, st.cost)
		if d.Allowed {
			l.Spend(now, rule, st.cost)
		}
		if d != st.want {
			t.Errorf("step %d: cost %d at t0+%v = %+v, want %+v", i, st.cost, st.at, d, st.want)
		}
	}
	if got := l.Len(); got != 2 {
		t.Errorf("Len = %d, want 2 (one entry a request)", got)
	}
	// The limit shrinks to 2 inside the newest entry (3 units): only its
	// newest 2 count, so 1 more waits for it to leave.
	small := domain.Rule{Limit: 2, Window: time.Minute}
	if d := l.Decide(t0.Add(61*s), small, 1); d != denied(2, 59*s, 59*s) {
		t.Errorf("after the limit shrank to 2: %+v, want %+v", d, denied(2, 59*s, 59*s))
	}
	// A cost of a million on a limit of a hundred million is one entry.
	var big domain.SlidingLog
	huge := domain.Rule{Limit: 100_000_000, Window: time.Hour}
	for i := range 3 {
		now := t0.Add(time.Duration(i) * s)
		if d := big.Decide(now, huge, 1_000_000); !d.Allowed {
			t.Fatalf("request %d of a million: %+v, want allowed", i, d)
		}
		big.Spend(now, huge, 1_000_000)
	}
	if d := big.Decide(t0.Add(3*s), huge, 0); big.Len() != 3 || d.Remaining != 97_000_000 {
		t.Errorf("three requests of a million: Len %d, remaining %d, want 3 and 97000000", big.Len(), d.Remaining)
	}
}

func TestSlidingWindowAdmit(t *testing.T) {
	t.Parallel()
	var sw domain.SlidingWindow
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	runAdmit(t, "Admit", admitter(&sw), rule, []admitStep{
		{at: 30 * s, n: 10, want: allowed(10, 0, 90*s)},
		// Full this window; in the next, 10×(1 − u/60s) < 10 once u > 0.
		{at: 45 * s, want: denied(10, 75*s, 15*s+1)},
		// Next window: previous = 10, current = 0, estimate exactly 10.
		{at: 60 * s, want: denied(10, 60*s, 1)},
		{at: 60*s + 1, want: allowed(10, 0, 120*s-1)},
		// elapsed 15s: weighted ⌊10 × 45/60⌋ = 7 (7.5), current 1:
		// estimate 8.5 admits, then 9.5 admits, then 10.5 does not.
		{at: 75 * s, want: allowed(10, 1, 105*s)},
		{at: 75 * s, want: allowed(10, 0, 105*s)},
		// Now 10×(60s − x)/60s + 3 < 10 once x > 18s.
		{at: 75 * s, want: denied(10, 105*s, 3*s+1)},
		{at: 78 * s, want: denied(10, 102*s, 1)},
		{at: 78*s + 1, want: allowed(10, 0, 102*s-1)},
		// Two windows on, both counts are gone.
		{at: 180 * s, want: allowed(10, 9, 120*s)},
	})
}

func TestTokenBucketAdmit(t *testing.T) {
	t.Parallel()
	var b domain.TokenBucket
	rule := domain.Rule{Limit: 3, Window: time.Minute} // a token every 20s
	runAdmit(t, "Admit", admitter(&b), rule, []admitStep{
		{at: 0, want: allowed(3, 2, 20*s)},
		{at: 0, want: allowed(3, 1, 40*s)},
		{at: 0, want: allowed(3, 0, 60*s)},
		{at: 0, want: denied(3, 60*s, 20*s)},
		{at: 19*s + 999*ms, want: denied(3, 40*s+1*ms, 1*ms)},
		{at: 20 * s, want: allowed(3, 0, 60*s)},
		// TAT is t0+80s: 1.5 tokens; one is taken, half is left.
		{at: 50 * s, want: allowed(3, 0, 50*s)},
		{at: 50 * s, want: denied(3, 50*s, 10*s)},
		{at: 300 * s, want: allowed(3, 2, 20*s)},
	})
}

func TestTokenBucketBurstIsExactlyLimit(t *testing.T) {
	t.Parallel()
	for _, rule := range []domain.Rule{
		{Limit: 7, Window: time.Minute}, // interval does not divide the window
		{Limit: 1, Window: time.Millisecond},
		{Limit: 1000, Window: time.Millisecond},
	} {
		var b domain.TokenBucket
		n := 0
		for admitter(&b)(t0, rule).Allowed {
			n++
		}
		if int64(n) != rule.Limit {
			t.Errorf("%+v: burst admitted %d, want %d", rule, n, rule.Limit)
		}
		// The denied decision's RetryAfter is exact: admitted then, not before.
		d := admitter(&b)(t0, rule)
		if b2 := b; admitter(&b2)(t0.Add(d.RetryAfter-1), rule).Allowed {
			t.Errorf("%+v: admitted 1ns before RetryAfter %v", rule, d.RetryAfter)
		}
		if !admitter(&b)(t0.Add(d.RetryAfter), rule).Allowed {
			t.Errorf("%+v: denied at RetryAfter %v", rule, d.RetryAfter)
		}
	}
}

// TestRetryAfterIsHonest drives every policy with a client that, when
// denied, waits exactly RetryAfter and retries: it must be admitted then,
// and not 1ns earlier.
func TestRetryAfterIsHonest(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 7, Window: 10 * time.Second}
	for name, newState := range newStates() {
		if name == "fixed_window" {
			continue // its windows end on their own clock: TestCostRetryAfterIsHonest
		}
		admit := admitter(newState())
		now := t0.Add(3 * time.Second)
		for i := range 200 {
			d := admit(now, rule)
			if !d.Allowed {
				if d.RetryAfter <= 0 {
					t.Fatalf("%s: request %d at t0+%v: denied with RetryAfter %v", name, i, now.Sub(t0), d.RetryAfter)
				}
				if early := admit(now.Add(d.RetryAfter-1), rule); early.Allowed {
					t.Fatalf("%s: request %d: admitted 1ns before RetryAfter %v", name, i, d.RetryAfter)
				}
				now = now.Add(d.RetryAfter)
				if again := admit(now, rule); !again.Allowed {
					t.Fatalf("%s: request %d: denied after waiting RetryAfter %v: %+v", name, i, d.RetryAfter, again)
				}
			}
			now = now.Add(time.Duration(i%5) * 300 * time.Millisecond)
		}
	}
}

// state is what every in-process policy state offers a store.
type state interface {
	Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision
	Spend(now time.Time, rule domain.Rule, cost int64)
}

// fixedWindow is a FixedWindow deciding by its rule alone: windows that
// start with their first request.
type fixedWindow struct{ w domain.FixedWindow }

func (f *fixedWindow) Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision {
	return f.w.Decide(now, rule, domain.WindowsFromFirst, cost)
}

func (f *fixedWindow) Spend(now time.Time, rule domain.Rule, cost int64) {
	f.w.Spend(now, rule, domain.WindowsFromFirst, cost)
}

func newStates() map[string]func() state {
	return map[string]func() state{
		"fixed_window":   func() state { return new(fixedWindow) },
		"sliding_log":    func() state { return new(domain.SlidingLog) },
		"sliding_window": func() state { return new(domain.SlidingWindow) },
		"token_bucket":   func() state { return new(domain.TokenBucket) },
	}
}

// TestCost: a request of cost n spends n units; a denied one spends
// nothing and says what is left; a cost above the limit is never
// admitted; Decide alone never spends.
func TestCost(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	for name, newState := range newStates() {
		st := newState()
		for i := range 3 {
			d := st.Decide(t0, rule, 3)
			if !d.Allowed || d.Remaining != int64(7-3*i) {
				t.Errorf("%s: request %d of cost 3: %+v, want allowed, remaining %d", name, i+1, d, 7-3*i)
			}
			st.Spend(t0, rule, 3)
		}
		d := st.Decide(t0, rule, 3)
		if d.Allowed || d.Remaining != 1 || d.RetryAfter <= 0 {
			t.Errorf("%s: cost 3 with 1 left: %+v, want denied, remaining 1, RetryAfter > 0", name, d)
		}
		for range 5 { // Decide alone spends nothing
			if d := st.Decide(t0, rule, 1); !d.Allowed || d.Remaining != 0 {
				t.Errorf("%s: cost 1 with 1 left: %+v, want allowed, remaining 0", name, d)
			}
		}
		if d := st.Decide(t0, rule, 0); !d.Allowed || d.Remaining != 1 {
			t.Errorf("%s: peek (cost 0) with 1 left: %+v, want allowed, remaining 1", name, d)
		}
		fresh := newState()
		if d := fresh.Decide(t0, rule, 11); d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 2*rule.Window {
			t.Errorf("%s: cost 11 over limit 10: %+v, want denied with RetryAfter in (0, 2 windows]", name, d)
		}
		if d := fresh.Decide(t0, rule, 10); !d.Allowed || d.Remaining != 0 {
			t.Errorf("%s: cost 10 = limit on a fresh state: %+v, want allowed, remaining 0", name, d)
		}
	}
}

// TestCostRetryAfterIsHonest: a request of cost n denied and retried
// exactly after its RetryAfter is admitted then, and not 1ns earlier.
func TestCostRetryAfterIsHonest(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 9, Window: 10 * time.Second}
	for name, newState := range newStates() {
		st := newState()
		now := t0.Add(3 * time.Second)
		for i := range 200 {
			cost := int64(1 + i%4)
			d := st.Decide(now, rule, cost)
			if !d.Allowed {
				if d.RetryAfter <= 0 {
					t.Fatalf("%s: request %d: denied with RetryAfter %v", name, i, d.RetryAfter)
				}
				if early := st.Decide(now.Add(d.RetryAfter-1), rule, cost); early.Allowed && name != "fixed_window" {
					// A fixed window ends on its own clock: a fresh window
					// 1ns early is impossible, checked below.
					t.Fatalf("%s: request %d of cost %d: admitted 1ns before RetryAfter %v", name, i, cost, d.RetryAfter)
				}
				now = now.Add(d.RetryAfter)
				if d = st.Decide(now, rule, cost); !d.Allowed {
					t.Fatalf("%s: request %d of cost %d: denied after waiting RetryAfter: %+v", name, i, cost, d)
				}
			}
			st.Spend(now, rule, cost)
			now = now.Add(time.Duration(i%5) * 300 * time.Millisecond)
		}
	}
}

func BenchmarkAdmit(b *testing.B) {
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	for name, newState := range newStates() {
		admit := admitter(newState())
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			now := t0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				admit(now, rule)
			}
		})
	}
}

func ExampleSlidingLog() {
	var log domain.SlidingLog
	rule := domain.Rule{Limit: 2, Window: time.Minute}
	for _, at := range []time.Duration{0, 10 * time.Second, 30 * time.Second, 60 * time.Second} {
		now := t0.Add(at)
		d := log.Decide(now, rule, 1)
		if d.Allowed {
			log.Spend(now, rule, 1)
		}
		fmt.Printf("t0+%v: allowed=%v remaining=%d retry after %v\n", at, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t0+0s: allowed=true remaining=1 retry after 0s
	// t0+10s: allowed=true remaining=0 retry after 0s
	// t0+30s: allowed=false remaining=0 retry after 30s
	// t0+1m0s: allowed=true remaining=0 retry after 0s
}
