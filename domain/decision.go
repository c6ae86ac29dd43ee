package domain

import "time"

// Decision is a limiter's answer for one request.
type Decision struct {
	// Allowed reports whether the request is admitted.
	Allowed bool
	// Limit is the rule's budget: requests per window.
	Limit int64
	// Remaining is how many more requests would be admitted right now,
	// at least 0.
	Remaining int64
	// ResetAfter is the time until the budget is whole again (fixed
	// window: until the window ends), at least 0.
	ResetAfter time.Duration
	// RetryAfter is the time until a request would be admitted again:
	// zero when Allowed, positive when denied.
	RetryAfter time.Duration
	// Shadow reports whether the limit is in shadow mode: a denial here
	// denies nothing ([Settle] sets it).
	Shadow bool
	// Quota reports whether the limit is in quota mode: its denial denies
	// only with every other quota limit's ([Settle] sets it).
	Quota bool
	// Window is the length of the window the decision counted in, when
	// it is not the rule's: a calendar limit's current period (23 h to
	// 25 h for a day, 28 to 31 days for a month). Zero means the rule's.
	Window time.Duration
	// Held is a concurrency limit's requests holding a slot, this one's
	// included when it took one: more than Limit after a limit lowered
	// under running requests (Remaining is 0 then). 0 for a rate limit.
	Held int64
	// Spent is what a Reserve limit ([Limit.Reserve]) spent: its Cost,
	// or less when less remained; 0 when it spent nothing, and for any
	// other limit.
	Spent int64
	// Mark is where a Reserve limit's spend was counted (its window,
	// period or entry), in a form only the store that decided reads: a
	// settlement lands there or nowhere. [NoMark] when the limit spent
	// nothing; 0 for any other limit.
	Mark int64
	// Reserved is, in a usage read ([ports.Usage]), how much of a token
	// limit's spend is reservations of requests still in flight (not
	// yet settled), as far as the store knows; 0 otherwise.
	Reserved int64
}

// CeilSeconds returns d in whole seconds, rounded up: a client told to
// wait that long is never early. Negative durations give 0.
func CeilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
