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

// Admit decides the request arriving at now under rule, and logs it if it
// is admitted. An instant leaves the window once window has passed since
// it: at now = instant + window it no longer counts.
func (l *SlidingLog) Admit(now time.Time, rule Rule) Decision {
	t := now.UnixNano()
	l.trim(t-int64(rule.Window), int(rule.Limit))
	var oldest, newest time.Duration
	if l.n > 0 {
		oldest = time.Duration(t - l.at(0))
		newest = time.Duration(t - l.at(l.n-1))
	}
	d := DecideSlidingLog(int64(l.n), oldest, newest, rule)
	if d.Allowed {
		l.push(t, int(rule.Limit))
	}
	return d
}

// Len returns the number of admitted instants held, including any that
// have left the window since the last Admit.
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

// DecideSlidingLog is the sliding-log policy on a snapshot of a log: count
// instants were admitted in the window before this request, the oldest of
// them oldest ago and the newest newest ago (both zero when count is 0).
// A store that keeps the log elsewhere (Redis) decides with it, so both
// stores share the arithmetic. The request is admitted when count < limit:
//   - allowed: Remaining = limit − count − 1, ResetAfter = window (this
//     request is now the newest);
//   - denied: RetryAfter = window − oldest, when the oldest leaves;
//     ResetAfter = window − newest, when the newest leaves.
//
// count must not exceed the limit (trim the log first). It does not
// allocate.
func DecideSlidingLog(count int64, oldest, newest time.Duration, rule Rule) Decision {
	if count < rule.Limit {
		return Decision{Allowed: true, Limit: rule.Limit, Remaining: rule.Limit - count - 1, ResetAfter: rule.Window}
	}
	return Decision{
		Limit:      rule.Limit,
		ResetAfter: rule.Window - clampAge(newest, rule.Window),
		RetryAfter: max(rule.Window-clampAge(oldest, rule.Window), time.Nanosecond),
	}
}

// clampAge bounds an age to [0, window]: a clock that stepped back gives a
// negative age, which must not stretch a wait past one window.
func clampAge(age, window time.Duration) time.Duration {
	return min(max(age, 0), window)
}
