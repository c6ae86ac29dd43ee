package domain

import "time"

// FixedWindow is one key's state under the fixed-window policy: the
// count of the current window and the instant it ends. A window starts
// with its first spend and lasts the rule's window; a request of cost
// units is admitted when the window's count plus the cost is at most the
// limit.
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
// without counting it: [FixedWindow.Spend] does, once every limit of the
// request admitted it (or, for a request that counts denials, always).
// A denied request reports what is left (Remaining = limit − count) and
// RetryAfter the end of the window; a cost above the limit is never
// admitted, and waits for the end of the window it would start. It does
// not allocate.
func (f *FixedWindow) Decide(now time.Time, rule Rule, cost int64) Decision {
	count, left := f.count, time.Duration(f.end-now.UnixNano())
	if left <= 0 {
		if cost == 0 {
			return Decision{Allowed: true, Limit: rule.Limit, Remaining: rule.Limit}
		}
		count, left = 0, rule.Window
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
func (f *FixedWindow) Spend(now time.Time, rule Rule, cost int64) {
	if t := now.UnixNano(); t >= f.end {
		f.end, f.count = t+int64(rule.Window), 0
	}
	f.count += cost
}
