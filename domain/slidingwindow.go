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

// Admit decides the request arriving at now under rule, and counts it if
// it is admitted.
func (s *SlidingWindow) Admit(now time.Time, rule Rule) Decision {
	t, w := now.UnixNano(), int64(rule.Window)
	ws := t - mod(t, w)
	switch {
	case ws == s.start:
	case ws == s.start+w:
		s.start, s.prev, s.curr = ws, s.curr, 0
	case ws > s.start:
		s.start, s.prev, s.curr = ws, 0, 0
	}
	// A clock that stepped back keeps the current window, from its start.
	d := DecideSlidingWindow(s.prev, s.curr, time.Duration(max(t-s.start, 0)), rule)
	if d.Allowed {
		s.curr++
	}
	return d
}

// DecideSlidingWindow is the sliding-window policy on a snapshot: prev
// requests were admitted in the previous window, curr in the current one
// before this request, and elapsed has passed since the current window
// began. A store that keeps the counts elsewhere (Redis) decides with it,
// so both stores share the arithmetic. The Decision is exact in
// nanoseconds:
//   - Allowed when prev × (window − elapsed)/window + curr < limit;
//   - Remaining is how many more requests the estimate admits right now:
//     limit − (curr+1) − ⌊prev × (window − elapsed)/window⌋, at least 0;
//   - RetryAfter is the first instant at which the estimate, with the
//     counts as they are, falls below the limit: later in this window as
//     the previous one's weight fades, or in the next one, where this
//     window's count becomes the previous;
//   - ResetAfter is when the estimate reaches zero: the end of the next
//     window if the current one has requests, else the end of this one.
//
// elapsed is clamped to [0, window). It does not allocate.
func DecideSlidingWindow(prev, curr int64, elapsed time.Duration, rule Rule) Decision {
	w, limit := uint64(rule.Window), rule.Limit
	e := uint64(min(max(elapsed, 0), rule.Window-1))
	prev, curr = max(prev, 0), max(curr, 0)
	// ⌊prev × (w − e)/w⌋ < limit − curr ⇔ prev × (w − e)/w < limit − curr,
	// the right side being an integer.
	weighted := int64(mulDiv(uint64(prev), w-e, w))
	d := Decision{Limit: limit}
	if curr < limit && weighted < limit-curr {
		d.Allowed = true
		curr++
		d.Remaining = max(limit-curr-weighted, 0)
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
	if curr >= limit {
		// Not in this window. In the next, curr becomes the previous
		// count: admitted u into it once curr × (w − u) < limit × w,
		// that is u > (curr − limit) × w / curr.
		u := mulDiv(uint64(curr-limit), w, uint64(curr)) + 1
		d.RetryAfter = time.Duration(w - e + u)
		return d
	}
	// Later in this window (prev > 0 here): admitted at elapsed x once
	// prev × (w − x) < (limit − curr) × w, that is
	// x > (prev − (limit − curr)) × w / prev. Denial means x > e.
	x := mulDiv(uint64(prev-(limit-curr)), w, uint64(prev)) + 1
	d.RetryAfter = time.Duration(x - e)
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
