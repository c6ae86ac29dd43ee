package domain

import "time"

// FixedWindow is one key's state under the fixed-window policy: the
// count of the current window and the instant it ends. A window starts
// with its first spend and lasts the rule's window, or, aligned to the
// epoch ([WindowsEpoch]), is the multiple of the window
// that holds now ([now − now mod window, … + window)), as
// envoyproxy/ratelimit's are. A request of cost units is admitted when
// the window's count plus the cost is at most the limit.
//
// Fixed window admits up to twice the limit across a window boundary; the
// other algorithms exist for that.
//
// The zero value holds no window. A FixedWindow is not safe for
// concurrent use.
type FixedWindow struct {
	end   int64 // Unix nanoseconds at which the window ends
	count int64
}

// Decide decides a request of cost units arriving at now under rule,
// with windows w, without counting it: [FixedWindow.Spend] does, once every limit
// of the request admitted it (or, for a request that counts denials,
// always). A denied request reports what is left (Remaining = limit −
// count) and RetryAfter the end of the window; a cost above the limit is
// never admitted, and waits for the end of the window it would start.
// ResetAfter is the time to the window's end; with no window running, 0
// for a check (cost 0) of a window that starts with its first request.
// It does not allocate.
func (f *FixedWindow) Decide(now time.Time, rule Rule, w Windows, cost int64) Decision {
	count, end := f.window(now.UnixNano(), rule, w)
	left := time.Duration(end - now.UnixNano())
	if end == 0 {
		if cost == 0 {
			return Decision{Allowed: true, Limit: rule.Limit, Remaining: rule.Limit}
		}
		left = rule.Window
	}
	d := Decision{Limit: rule.Limit, Remaining: max(rule.Limit-count, 0), ResetAfter: left}
	if count+cost <= rule.Limit {
		d.Allowed, d.Remaining = true, rule.Limit-count-cost
	} else {
		d.RetryAfter = left
	}
	return d
}

// Spend counts cost units at now, starting a window if none is running.
func (f *FixedWindow) Spend(now time.Time, rule Rule, w Windows, cost int64) {
	t := now.UnixNano()
	count, end := f.window(t, rule, w)
	if end == 0 {
		end = t + int64(rule.Window)
	}
	f.end, f.count = end, count+cost
}

// window returns the count and end of the window that holds t (Unix
// nanoseconds) for rule and w: the state's, while it runs; else a count of 0
// and, aligned to the epoch, that window's end, or 0 for a window that
// starts with its first spend. A clock that stepped back stays in the
// stored window (a later end than the aligned one), so it never counts
// afresh early.
func (f *FixedWindow) window(t int64, rule Rule, w Windows) (count, end int64) {
	if w != WindowsEpoch {
		if t < f.end {
			return f.count, f.end
		}
		return 0, 0
	}
	n := int64(rule.Window)
	if aligned := t - mod(t, n) + n; f.end < aligned {
		return 0, aligned
	}
	return f.count, f.end
}

// Reserve spends cost units at now as [FixedWindow.Spend] does, and
// returns the mark of the window they counted in ([Decision.Mark]): its
// end, Unix nanoseconds.
func (f *FixedWindow) Reserve(now time.Time, rule Rule, w Windows, cost int64) int64 {
	f.Spend(now, rule, w, cost)
	return f.end
}

// Adjust settles delta units (negative: given back) in the window whose
// mark is mark, at now: while that window runs, its count moves by delta
// (never below zero; past the limit when delta takes it there), and once
// it has ended, nothing changes. A mark of 0 charges delta in the window
// of now, starting one if none runs.
func (f *FixedWindow) Adjust(now time.Time, rule Rule, w Windows, mark, delta int64) {
	if mark == 0 {
		if delta > 0 {
			f.Spend(now, rule, w, delta)
		}
		return
	}
	if f.Live(now, rule, w, mark) {
		f.count = max(f.count+delta, 0)
	}
}

// Live reports whether the window whose mark is mark still runs at now.
func (f *FixedWindow) Live(now time.Time, rule Rule, w Windows, mark int64) bool {
	_, end := f.window(now.UnixNano(), rule, w)
	return mark > 0 && end == mark && f.end == mark
}
