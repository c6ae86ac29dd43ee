package domain

import (
	"sort"
	"time"
)

// SlidingLog is one tenant's state under the sliding-log policy: the
// requests it ADMITTED in the trailing window, each logged once with its
// instant and its cost. A request is admitted when fewer than the limit
// units were admitted in the window that ends with it; denied requests
// are not logged. The policy is exact: no window, anywhere in time, holds
// more than the limit.
//
// The log is a ring buffer of one entry per admitted request (16 bytes
// each, at most the limit's entries, however large the costs), grown as
// requests are admitted; each entry holds the units admitted through it,
// so a decision's work does not grow with its cost. The zero value is an
// empty log. A SlidingLog is not safe for concurrent use.
type SlidingLog struct {
	ents []logEntry // ring of admitted requests, oldest at head
	head int        // index of the oldest entry in ents
	n    int        // entries held
	// base is the units admitted through the entries no longer held,
	// and through the part of the oldest entry that no longer counts
	// (the limit shrank): the units that count are newest.cum − base.
	base int64
}

// logEntry is one admitted request: its instant, Unix nanoseconds, and
// the units admitted through it since the log started (its own cost is
// its cum less the previous entry's).
type logEntry struct {
	t, cum int64
}

// Decide decides a request of cost units arriving at now under rule,
// without logging it: [SlidingLog.Spend] does, once every limit of the
// request admitted it. An entry leaves the window once window has passed
// since it: at now = instant + window it no longer counts.
func (l *SlidingLog) Decide(now time.Time, rule Rule, cost int64) Decision {
	t := now.UnixNano()
	// Dropping entries that left the window changes no decision.
	l.trim(t-int64(rule.Window), rule.Limit)
	count := l.count()
	var free, newest time.Duration
	if l.n > 0 {
		newest = time.Duration(t - l.at(l.n-1).t)
	}
	if count+cost > rule.Limit && cost <= rule.Limit {
		// The entry whose leaving makes room for cost more: the oldest
		// through which count + cost − limit units were admitted (only
		// a denial needs it).
		need := l.base + count + cost - rule.Limit
		k := sort.Search(l.n, func(i int) bool { return l.at(i).cum >= need })
		free = time.Duration(t - l.at(k).t)
	}
	return decideSlidingLog(count, free, newest, cost, rule)
}

// Spend logs cost admitted units at now as one entry, after a Decide at
// now that admitted them. Spent without one (counting every limit of an
// admitted request, [CountHits]), it fills the log at most.
func (l *SlidingLog) Spend(now time.Time, rule Rule, cost int64) {
	w := min(cost, rule.Limit-l.count())
	if w <= 0 {
		return
	}
	top := l.base
	if l.n > 0 {
		top = l.at(l.n - 1).cum
	}
	l.push(logEntry{t: now.UnixNano(), cum: top + w}, int(rule.Limit))
}

// Len returns the number of entries held (admitted requests, whatever
// their cost), including any that have left the window since the last
// Decide.
func (l *SlidingLog) Len() int { return l.n }

// count returns the units that count: admitted through the entries held,
// less what no longer counts of the oldest.
func (l *SlidingLog) count() int64 {
	if l.n == 0 {
		return 0
	}
	return l.at(l.n-1).cum - l.base
}

// at returns the i-th oldest entry held.
func (l *SlidingLog) at(i int) logEntry { return l.ents[(l.head+i)%len(l.ents)] }

// drop forgets the oldest entry.
func (l *SlidingLog) drop() {
	l.base = max(l.base, l.at(0).cum)
	l.head = (l.head + 1) % len(l.ents)
	l.n--
}

// trim drops the entries at or before cutoff, then, when more than limit
// units count (the limit shrank since they were logged), all but the
// newest limit units: the entries wholly older, and the part of the
// oldest kept that is.
func (l *SlidingLog) trim(cutoff, limit int64) {
	for l.n > 0 && l.at(0).t <= cutoff {
		l.drop()
	}
	if l.n > 0 && l.count() > limit {
		l.base = l.at(l.n-1).cum - limit
		for l.at(0).cum <= l.base {
			l.drop()
		}
	}
	if l.n == 0 {
		l.head, l.base = 0, 0
	}
}

// push logs e as the newest entry. It requires fewer than limit entries
// held (each counts at least one unit); the ring grows by doubling up to
// limit slots.
func (l *SlidingLog) push(e logEntry, limit int) {
	if l.n == len(l.ents) {
		ents := make([]logEntry, min(max(2*len(l.ents), 4), limit))
		for i := range l.n {
			ents[i] = l.at(i)
		}
		l.ents, l.head = ents, 0
	}
	l.ents[(l.head+l.n)%len(l.ents)] = e
	l.n++
}

// decideSlidingLog is the sliding-log policy on a snapshot of a log:
// count units were admitted in the window before this request (at most
// the limit), free ago is the entry whose leaving makes room for cost
// more (the one through which the (count+cost−limit)-th oldest unit was
// admitted; any when there is room) and newest ago the newest (both zero
// when count is 0). The request is admitted when count + cost ≤ limit:
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
