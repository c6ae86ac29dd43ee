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
	l.spend(now.UnixNano(), rule, cost)
}

// spend logs up to cost units at t, never before the newest entry (the
// log stays in the order of time), and returns the entry's instant: 0
// when it logged nothing.
func (l *SlidingLog) spend(t int64, rule Rule, cost int64) int64 {
	w := min(cost, rule.Limit-l.count())
	if w <= 0 {
		return 0
	}
	top := l.base
	if l.n > 0 {
		top = l.at(l.n - 1).cum
		t = max(t, l.at(l.n-1).t)
	}
	l.push(logEntry{t: t, cum: top + w}, int(rule.Limit))
	return t
}

// Reserve logs cost units at now as [SlidingLog.Spend] does, and returns
// the mark of their entry ([Decision.Mark]): its instant, Unix
// nanoseconds, a nanosecond after the newest entry when that is at now
// or later, so that the entry is the first one at its instant and the
// mark finds it (it leaves the window that nanosecond later). It
// returns 0 when it logged nothing.
func (l *SlidingLog) Reserve(now time.Time, rule Rule, cost int64) int64 {
	t := now.UnixNano()
	if l.n > 0 {
		t = max(t, l.at(l.n-1).t+1)
	}
	return l.spend(t, rule, cost)
}

// Adjust settles delta units (negative: given back) of the entry whose
// mark is mark, at now: while the entry is in the window, its units move
// by delta (never below zero: an entry left with none is dropped), and
// every later entry's sum with them, so that the units that count stay
// the sum of the entries; once it has left, nothing changes. The log
// holds at most the limit: a delta that takes it past keeps the newest
// limit units, as a limit that shrank does (the log is full). A mark of
// 0 logs delta units at now as [SlidingLog.Spend] does: the log full at
// most.
func (l *SlidingLog) Adjust(now time.Time, rule Rule, mark, delta int64) {
	t := now.UnixNano()
	cutoff := t - int64(rule.Window)
	l.trim(cutoff, rule.Limit)
	if mark == 0 {
		l.spend(t, rule, delta)
		return
	}
	k := l.find(mark)
	if k < 0 {
		return
	}
	prev := l.base
	if k > 0 {
		prev = l.at(k - 1).cum
	}
	w := l.at(k).cum - prev
	d := max(w+delta, 0) - w
	for i := k; i < l.n; i++ {
		l.ents[(l.head+i)%len(l.ents)].cum += d
	}
	if w+d == 0 {
		l.remove(k)
	}
	l.trim(cutoff, rule.Limit)
}

// Live reports whether the entry whose mark is mark is in the window at
// now.
func (l *SlidingLog) Live(now time.Time, rule Rule, mark int64) bool {
	return mark > now.UnixNano()-int64(rule.Window) && l.find(mark) >= 0
}

// find returns the index of the first entry held at instant mark, or -1.
func (l *SlidingLog) find(mark int64) int {
	if mark == 0 {
		return -1
	}
	k := sort.Search(l.n, func(i int) bool { return l.at(i).t >= mark })
	if k == l.n || l.at(k).t != mark {
		return -1
	}
	return k
}

// remove forgets entry k, which holds no unit (its cum is the one
// before it).
func (l *SlidingLog) remove(k int) {
	if k == 0 {
		l.drop()
		return
	}
	for i := k; i < l.n-1; i++ {
		l.ents[(l.head+i)%len(l.ents)] = l.at(i + 1)
	}
	l.n--
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
