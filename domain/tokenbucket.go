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

// Decide decides a request of cost tokens arriving at now under rule,
// without taking them: [TokenBucket.Spend] does, once every limit of the
// request admitted it.
func (b *TokenBucket) Decide(now time.Time, rule Rule, cost int64) Decision {
	return decideTokenBucket(time.Duration(max(b.tat-now.UnixNano(), 0)), TokenInterval(rule), cost, rule)
}

// Spend takes cost tokens at now, after a Decide at now that admitted
// them. Spent without one (counting every limit of an admitted request,
// [CountHits]), it empties the bucket at most.
func (b *TokenBucket) Spend(now time.Time, rule Rule, cost int64) {
	t := now.UnixNano()
	interval := int64(TokenInterval(rule))
	b.tat = max(b.tat, t) + min(cost, rule.Limit)*interval
	b.tat = min(b.tat, t+rule.Limit*interval)
}

// decideTokenBucket is GCRA on a snapshot: the bucket's TAT is ahead of
// now (zero for a full bucket), tokens come every interval, and the
// request takes cost of them. With capacity = limit × interval and TAT' =
// ahead + cost × interval:
//   - Allowed when TAT' ≤ capacity;
//   - Remaining = ⌊(capacity − TAT')/interval⌋, tokens left after this
//     request (when denied: ⌊(capacity − ahead)/interval⌋, fewer than cost);
//   - ResetAfter = TAT' (denied: ahead), when the bucket is full again;
//   - RetryAfter = TAT' − capacity, when cost tokens are there (a cost
//     above the limit is never admitted: one window).
//
// It does not allocate.
func decideTokenBucket(ahead, interval time.Duration, cost int64, rule Rule) Decision {
	ahead, interval = max(ahead, 0), max(interval, 1)
	capacity := interval * time.Duration(rule.Limit)
	d := Decision{Limit: rule.Limit, ResetAfter: ahead}
	if ahead < capacity {
		d.Remaining = int64((capacity - ahead) / interval)
	}
	if cost > rule.Limit {
		d.RetryAfter = rule.Window
		return d
	}
	// cost ≤ limit keeps the product within capacity: no overflow.
	next := ahead + time.Duration(cost)*interval
	if next <= capacity {
		d.Allowed, d.ResetAfter = true, next
		d.Remaining = int64((capacity - next) / interval)
	} else {
		d.RetryAfter = next - capacity
	}
	return d
}

// Reserve takes cost tokens at now as [TokenBucket.Spend] does, and
// returns the mark of the admission ([Decision.Mark]): the TAT it left,
// Unix nanoseconds, when the bucket has refilled what it took.
func (b *TokenBucket) Reserve(now time.Time, rule Rule, cost int64) int64 {
	b.Spend(now, rule, cost)
	return b.tat
}

// Adjust settles delta tokens (negative: given back) of the admission
// whose mark is mark, at now: TAT moves by delta intervals, never before
// now (a full bucket holds no more, and a refund of tokens that have
// refilled since gives nothing), and never more than two capacities past
// now (an empty bucket and one window's debt: an over-use makes requests
// wait up to a window longer, not for ever). A refund counts until the
// mark (the bucket has refilled what the admission took); an extra
// charge until a window after it, so that an answer that runs longer
// than its tokens take to refill is still charged what it used beyond
// them. A mark of 0 charges delta tokens at now, within the same bounds.
func (b *TokenBucket) Adjust(now time.Time, rule Rule, mark, delta int64) {
	t := now.UnixNano()
	switch {
	case mark != 0 && delta < 0 && t >= mark:
		return // the admission's tokens refilled: nothing left to give back
	case mark != 0 && delta > 0 && t >= mark+int64(rule.Window):
		return // a window after they refilled: the admission's time is over
	}
	if mark == 0 {
		delta = max(delta, 0)
	}
	interval := int64(TokenInterval(rule))
	capacity := rule.Limit * interval
	// |delta| ≤ MaxCostUnits: the product stays far from overflowing.
	tat := max(b.tat, t) + min(max(delta, -2*rule.Limit), 2*rule.Limit)*interval
	b.tat = min(max(tat, t), t+2*capacity)
}

// Live reports whether the admission whose mark is mark has tokens not
// yet refilled at now.
func (b *TokenBucket) Live(now time.Time, _ Rule, mark int64) bool {
	return mark != 0 && now.UnixNano() < mark
}
