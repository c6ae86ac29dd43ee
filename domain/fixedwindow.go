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
