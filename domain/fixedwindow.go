package domain

import "time"

// FixedWindow is the fixed-window policy. A window starts with its first
// request and lasts the rule's window; a request is admitted when the
// window's count, this request included, is at most the limit.
//
// The store keeps the count and the window's clock (the first increment
// sets the expiry, later ones leave it alone), so the policy needs no
// clock of its own. The zero value is ready to use.
//
// Fixed window admits up to twice the limit across a window boundary; the
// other algorithms exist for that.
type FixedWindow struct{}

// Decide turns count, the window's count after this request's increment,
// and left, the time left in the window, into a Decision under rule.
// It does not allocate.
func (FixedWindow) Decide(count int64, left time.Duration, rule Rule) Decision {
	if left < 0 {
		left = 0
	}
	d := Decision{
		Allowed:    count <= rule.Limit,
		Limit:      rule.Limit,
		Remaining:  max(rule.Limit-count, 0),
		ResetAfter: left,
	}
	if !d.Allowed {
		d.RetryAfter = max(left, time.Millisecond)
	}
	return d
}

// DecideFixedWindow decides a request of cost units against a window
// whose count before it is count and that has left to run; left ≤ 0
// means no window is running (count is then ignored), and one would
// start with this request. Unlike the seed's increment-first
// [FixedWindow.Decide], nothing has been counted yet: a denied request
// reports what is left (Remaining = limit − count), and is not to be
// counted. A store that keeps the count elsewhere (Redis) decides with
// it, so both stores share the arithmetic. It does not allocate.
func DecideFixedWindow(count int64, left time.Duration, cost int64, rule Rule) Decision {
	if left <= 0 {
		if cost == 0 {
			return Decision{Allowed: true, Limit: rule.Limit, Remaining: rule.Limit}
		}
		count, left = 0, rule.Window
	}
	d := FixedWindow{}.Decide(count+cost, left, rule)
	if !d.Allowed {
		d.Remaining = max(rule.Limit-count, 0) // nothing was spent
	}
	return d
}

// FixedWindowCount is one key's state under the fixed-window policy, for
// a store that keeps it in process and must decide several limits at
// once (check every limit, then spend from all): the count of the
// current window and the instant it ends. The first spend in a window
// starts it. The zero value holds no window. A FixedWindowCount is not
// safe for concurrent use.
type FixedWindowCount struct {
	end   int64 // Unix nanoseconds at which the window ends
	count int64
}

// Decide decides a request of cost units arriving at now under rule,
// without counting it: [FixedWindowCount.Spend] does.
func (f *FixedWindowCount) Decide(now time.Time, rule Rule, cost int64) Decision {
	return DecideFixedWindow(f.count, time.Duration(f.end-now.UnixNano()), cost, rule)
}

// Spend counts cost units at now, starting a window if none is running.
func (f *FixedWindowCount) Spend(now time.Time, rule Rule, cost int64) {
	if t := now.UnixNano(); t >= f.end {
		f.end, f.count = t+int64(rule.Window), 0
	}
	f.count += cost
}

// Admit decides a request of cost 1 at now, and counts it if admitted.
func (f *FixedWindowCount) Admit(now time.Time, rule Rule) Decision {
	d := f.Decide(now, rule, 1)
	if d.Allowed {
		f.Spend(now, rule, 1)
	}
	return d
}
