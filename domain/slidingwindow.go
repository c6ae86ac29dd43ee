package domain

import (
	"math/bits"
	"time"
)

// SlidingWindow is one tenant's state under the sliding-window policy:
// the admitted counts of the current and the previous window, windows
// aligned to the Unix epoch. A request is admitted when the weighted
// estimate
//
//	previous × (1 − elapsed/window) + current
//
// is below the limit, elapsed being the time since the current window
// began. Denied requests are not counted. It is an estimate: it assumes
// the previous window's requests were spread evenly, so it may admit a
// little more or less than an exact sliding log.
//
// The zero value is a fresh state. A SlidingWindow is not safe for
// concurrent use.
type SlidingWindow struct {
	start int64 // Unix nanoseconds at which the current window began
	prev  int64 // requests admitted in the previous window
	curr  int64 // requests admitted in the current window
}

// Decide decides a request of cost units arriving at now under rule,
// without counting it: [SlidingWindow.Spend] does, once every limit of
// the request admitted it.
func (s *SlidingWindow) Decide(now time.Time, rule Rule, cost int64) Decision {
	t := s.roll(now, rule)
	// A clock that stepped back keeps the current window, from its start.
	return decideSlidingWindow(s.prev, s.curr, time.Duration(max(t-s.start, 0)), cost, rule)
}

// Spend counts cost admitted units at now, after a Decide at now that
// admitted them. Spent without one (counting every limit of an admitted
// request, [CountHits]), it fills the current window at most.
func (s *SlidingWindow) Spend(now time.Time, rule Rule, cost int64) {
	s.roll(now, rule)
	s.curr = min(s.curr+cost, max(rule.Limit, s.curr))
}

// roll moves the state to the window of now, which changes no decision,
// and returns now in Unix nanoseconds.
func (s *SlidingWindow) roll(now time.Time, rule Rule) int64 {
	t, w := now.UnixNano(), int64(rule.Window)
	ws := t - mod(t, w)
	switch {
	case ws == s.start:
	case ws == s.start+w:
		s.start, s.prev, s.curr = ws, s.curr, 0
	case ws > s.start:
		s.start, s.prev, s.curr = ws, 0, 0
	}
	return t
}

// decideSlidingWindow is the sliding-window policy on a snapshot: prev
// requests were admitted in the previous window, curr in the current one
// before this request, and elapsed has passed since the current window
// began; the request spends cost. The Decision is exact in nanoseconds:
//   - Allowed when prev × (window − elapsed)/window + curr + cost − 1 <
//     limit (for cost 1: the estimate with this request is within the
//     limit);
//   - Remaining is how many more units the estimate admits right now:
//     limit − (curr+cost) − ⌊prev × (window − elapsed)/window⌋, at least 0;
//   - RetryAfter is the first instant at which the estimate, with the
//     counts as they are, admits cost: later in this window as the
//     previous one's weight fades, or in the next one, where this
//     window's count becomes the previous (a cost above the limit is
//     never admitted: two windows);
//   - ResetAfter is when the estimate reaches zero: the end of the next
//     window if the current one has requests, else the end of this one.
//
// elapsed is clamped to [0, window). It does not allocate.
func decideSlidingWindow(prev, curr int64, elapsed time.Duration, cost int64, rule Rule) Decision {
	w := uint64(rule.Window)
	e := uint64(min(max(elapsed, 0), rule.Window-1))
	prev, curr = max(prev, 0), max(curr, 0)
	// Admitting cost units is admitting one under the limit lim.
	lim := rule.Limit - cost + 1
	// ⌊prev × (w − e)/w⌋ < lim − curr ⇔ prev × (w − e)/w < lim − curr,
	// the right side being an integer.
	weighted := int64(mulDiv(uint64(prev), w-e, w))
	d := Decision{Limit: rule.Limit}
	if curr < lim && weighted < lim-curr {
		d.Allowed = true
		curr += cost
		d.Remaining = max(rule.Limit-curr-weighted, 0)
	} else {
		// Fewer than cost: what a cheaper request could still spend.
		d.Remaining = max(rule.Limit-curr-weighted, 0)
	}
	switch {
	case curr > 0:
		d.ResetAfter = time.Duration(2*w - e)
	case prev > 0:
		d.ResetAfter = time.Duration(w - e)
	}
	if d.Allowed {
		return d
	}
	switch {
	case lim <= 0:
		d.RetryAfter = time.Duration(2*w - e)
	case curr >= lim:
		// Not in this window. In the next, curr becomes the previous
		// count: admitted u into it once curr × (w − u) < lim × w,
		// that is u > (curr − lim) × w / curr.
		u := mulDiv(uint64(curr-lim), w, uint64(curr)) + 1
		d.RetryAfter = time.Duration(w - e + u)
	default:
		// Later in this window (prev > 0 here): admitted at elapsed x
		// once prev × (w − x) < (lim − curr) × w, that is
		// x > (prev − (lim − curr)) × w / prev. Denial means x > e.
		x := mulDiv(uint64(prev-(lim-curr)), w, uint64(prev)) + 1
		d.RetryAfter = time.Duration(x - e)
	}
	return d
}

// mulDiv returns ⌊a × b / c⌋ without overflowing the product. The
// quotient must fit 64 bits (a < c or b ≤ c does it).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// mod returns t modulo w in [0, w), also for t < 0.
func mod(t, w int64) int64 {
	r := t % w
	if r < 0 {
		r += w
	}
	return r
}

// Reserve spends cost units at now as [SlidingWindow.Spend] does, and
// returns the mark of the window they counted in ([Decision.Mark]): its
// start, Unix nanoseconds.
func (s *SlidingWindow) Reserve(now time.Time, rule Rule, cost int64) int64 {
	s.Spend(now, rule, cost)
	return s.start
}

// Adjust settles delta units (negative: given back) in the window whose
// mark is mark, at now: while that window is the current one or the
// previous (its count still weighs), its count moves by delta (never
// below zero; past the limit when delta takes it there), and later
// nothing changes. A mark of 0 charges delta in the current window.
func (s *SlidingWindow) Adjust(now time.Time, rule Rule, mark, delta int64) {
	s.roll(now, rule)
	switch {
	case mark == 0:
		s.curr += max(delta, 0)
	case mark == s.start:
		s.curr = max(s.curr+delta, 0)
	case mark == s.start-int64(rule.Window):
		s.prev = max(s.prev+delta, 0)
	}
}

// Live reports whether the window whose mark is mark still weighs at
// now: it is the current window or the previous one.
func (s *SlidingWindow) Live(now time.Time, rule Rule, mark int64) bool {
	t, w := now.UnixNano(), int64(rule.Window)
	start := t - mod(t, w)
	return mark != 0 && (mark == start || mark == start-w)
}
