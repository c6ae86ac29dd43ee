package domain

import "time"

// SlidingLog is one tenant's state under the sliding-log policy: the
// instants of the requests it ADMITTED in the trailing window. A request
// is admitted when fewer than the limit were admitted in the window that
// ends with it; denied requests are not logged. The policy is exact: no
// window, anywhere in time, holds more than the limit.
//
// The log is a ring buffer that never holds more than the limit's
// instants (8 bytes each), grown as requests are admitted. The zero value
// is an empty log. A SlidingLog is not safe for concurrent use.
type SlidingLog struct {
	ts   []int64 // ring of admitted instants, Unix nanoseconds, oldest at head
	head int     // index of the oldest instant in ts
	n    int     // instants held
}

// Decide decides a request of cost units arriving at now under rule,
// without logging it: [SlidingLog.Spend] does, once every limit of the
// request admitted it. An instant leaves the window once window has
// passed since it: at now = instant + window it no longer counts.
func (l *SlidingLog) Decide(now time.Time, rule Rule, cost int64) Decision {
	t := now.UnixNano()
	// Dropping instants that left the window changes no decision.
	l.trim(t-int64(rule.Window), int(rule.Limit))
	var free, newest time.Duration
	if l.n > 0 {
		// The instant whose leaving makes room for cost more.
		k := min(max(int64(l.n)+cost-rule.Limit, 1), int64(l.n))
		free = time.Duration(t - l.at(int(k-1)))
		newest = time.Duration(t - l.at(l.n-1))
	}
	return decideSlidingLog(int64(l.n), free, newest, cost, rule)
}

// Spend logs cost admitted units at now, after a Decide at now that
// admitted them. Spent without one (counting every limit of an admitted
// request, [CountHits]), it fills the log at most.
func (l *SlidingLog) Spend(now time.Time, rule Rule, cost int64) {
	t := now.UnixNano()
	for range min(cost, rule.Limit-int64(l.n)) {
		l.push(t, int(rule.Limit))
	}
}

// Len returns the number of admitted instants held, including any that
// have left the window since the last Decide.
func (l *SlidingLog) Len() int { return l.n }

// at returns the i-th oldest instant held.
func (l *SlidingLog) at(i int) int64 { return l.ts[(l.head+i)%len(l.ts)] }

// trim drops the instants at or before cutoff, then the oldest ones until
// at most limit remain (the limit may have shrunk since they were logged).
func (l *SlidingLog) trim(cutoff int64, limit int) {
	for l.n > 0 && (l.n > limit || l.at(0) <= cutoff) {
		l.head = (l.head + 1) % len(l.ts)
		l.n--
	}
	if l.n == 0 {
		l.head = 0
	}
}

// push logs t as the newest instant. It requires l.n < limit; the ring
// grows by doubling up to limit slots.
func (l *SlidingLog) push(t int64, limit int) {
	if l.n == len(l.ts) {
		ts := make([]int64, min(max(2*len(l.ts), 4), limit))
		for i := range l.n {
			ts[i] = l.at(i)
		}
		l.ts, l.head = ts, 0
	}
	l.ts[(l.head+l.n)%len(l.ts)] = t
	l.n++
}

// decideSlidingLog is the sliding-log policy on a snapshot of a log:
// count instants were admitted in the window before this request (at
// most the limit), free ago is the instant whose leaving makes room for
// cost more (the (count+cost−limit)-th oldest; any when there is room)
// and newest ago the newest (both zero when count is 0). The request is admitted when count + cost ≤ limit:
//   - allowed: Remaining = limit − count − cost, ResetAfter = window
//     (this request is now the newest; with cost 0, when the newest
//     leaves);
//   - denied: Remaining = limit − count, RetryAfter = window − free, when enough have left;
//     ResetAfter = window − newest, when the newest leaves. A cost above
//     the limit is never admitted: RetryAfter is then one window.
//
// It does not allocate.
func decideSlidingLog(count int64, free, newest time.Duration, cost int64, rule Rule) Decision {
	count = min(max(count, 0), rule.Limit)
	d := Decision{Limit: rule.Limit}
	if count > 0 {
		d.ResetAfter = rule.Window - clampAge(newest, rule.Window)
	}
	if count+cost <= rule.Limit {
		d.Allowed, d.Remaining = true, rule.Limit-count-cost
		if cost > 0 {
			d.ResetAfter = rule.Window
		}
		return d
	}
	d.Remaining = rule.Limit - count // fewer than cost
	if cost > rule.Limit {
		d.RetryAfter = rule.Window
		return d
	}
	d.RetryAfter = max(rule.Window-clampAge(free, rule.Window), time.Nanosecond)
	return d
}

// clampAge bounds an age to [0, window]: a clock that stepped back gives a
// negative age, which must not stretch a wait past one window.
func clampAge(age, window time.Duration) time.Duration {
	return min(max(age, 0), window)
}
