package domain

import "time"

// TokenBucket is one tenant's state under the token-bucket policy, in
// its GCRA form (generic cell rate algorithm): a bucket of limit tokens,
// one refilled every emission interval window/limit, held as a single
// instant, the theoretical arrival time (TAT) at which the bucket would be
// full again. A request is admitted when the bucket holds a token, that
// is when TAT − now + interval ≤ limit × interval; admitting it moves TAT
// one interval on.
//
// limit × interval is the window rounded down to a multiple of the
// interval (at most limit−1 ns shorter), so a full bucket admits exactly
// limit requests at once. The zero value is a full bucket. A TokenBucket
// is not safe for concurrent use.
type TokenBucket struct {
	tat int64 // Unix nanoseconds; at or before now means full
}

// TokenInterval returns rule's emission interval: window/limit, rounded
// down, at least 1ns.
func TokenInterval(rule Rule) time.Duration {
	return max(rule.Window/time.Duration(rule.Limit), 1)
}

// Admit decides the request arriving at now under rule, and takes its
// token if it is admitted.
func (b *TokenBucket) Admit(now time.Time, rule Rule) Decision {
	t := now.UnixNano()
	interval := TokenInterval(rule)
	ahead := max(b.tat-t, 0)
	d := DecideTokenBucket(time.Duration(ahead), interval, rule)
	if d.Allowed {
		b.tat = t + ahead + int64(interval)
	}
	return d
}

// DecideTokenBucket is GCRA on a snapshot: the bucket's TAT is ahead of
// now (zero for a full bucket) and tokens come every interval. A store
// that keeps TAT elsewhere (Redis) decides with it, with its own interval
// resolution, so both stores share the arithmetic. With capacity =
// limit × interval:
//   - Allowed when ahead + interval ≤ capacity;
//   - Remaining = ⌊(capacity − TAT')/interval⌋, tokens left after this
//     request, TAT' being ahead after it;
//   - ResetAfter = TAT', when the bucket is full again;
//   - RetryAfter = ahead + interval − capacity, when the next token comes.
//
// It does not allocate.
func DecideTokenBucket(ahead, interval time.Duration, rule Rule) Decision {
	ahead, interval = max(ahead, 0), max(interval, 1)
	capacity := interval * time.Duration(rule.Limit)
	d := Decision{Limit: rule.Limit, ResetAfter: ahead}
	if next := ahead + interval; next <= capacity {
		d.Allowed, d.ResetAfter = true, next
		d.Remaining = int64((capacity - next) / interval)
	} else {
		d.RetryAfter = next - capacity
	}
	return d
}
