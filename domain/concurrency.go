package domain

import (
	"fmt"
	"time"
)

// Bounds of a concurrency limit ([Limit.Concurrency]).
const (
	// MaxConcurrency is the largest number of requests a concurrency
	// limit lets a tenant have in flight.
	MaxConcurrency = 1_000_000
	// ConcurrencyWindow is the Rule.Window of every concurrency limit. A
	// slot is held for as long as its request runs, not for a window:
	// the window is nominal, the wait a denial announces (Retry-After:
	// 1), since a slot may come back at any moment. How long a vanished
	// replica's slots stay taken is the store's lease, a setting of the
	// store, not of the policy.
	ConcurrencyWindow = time.Second
	// MinLease and MaxLease bound the lease of a slot on a shared store
	// (TOLLGATE_LEASE): how long a vanished holder's slot stays taken
	// after its last renewal.
	MinLease = time.Second
	MaxLease = 10 * time.Minute
)

// ConcurrencyRule returns the rule of a concurrency limit of n requests
// in flight: Rule{Limit: n, Window: [ConcurrencyWindow]}, or an error
// wrapping [ErrInvalidRule] when n is outside 1 to [MaxConcurrency].
func ConcurrencyRule(n int64) (Rule, error) {
	if n < 1 || n > MaxConcurrency {
		return Rule{}, fmt.Errorf("%w: concurrency=%d, want 1 to %d", ErrInvalidRule, n, MaxConcurrency)
	}
	return Rule{Limit: n, Window: ConcurrencyWindow}, nil
}

// DecideSlots decides a request against a concurrency limit of limit
// requests in flight, held of which are taken: a request of any cost
// above 0 wants one slot (a concurrency limit counts requests, not cost
// units), cost 0 only reads. It is the one rule every store follows:
//
//   - admitted while held < limit; Remaining is the slots free after it;
//   - denied when none is free (held ≥ limit, as after a limit lowered
//     by a reload: running requests keep their slots, new ones wait
//     until the count is below the new limit), with RetryAfter
//     [ConcurrencyWindow]: a slot may come back at any moment;
//   - ResetAfter is 0 while a slot is free, ConcurrencyWindow when none
//     is (the RateLimit header's t=0 or t=1);
//   - Held is held, and one more when the request takes a slot.
func DecideSlots(limit, held, cost int64) Decision {
	free := max(limit-held, 0)
	d := Decision{Allowed: true, Limit: limit, Remaining: free, Held: held}
	switch {
	case cost == 0:
	case free > 0:
		d.Remaining = free - 1
		d.Held++
	default:
		d.Allowed = false
		d.RetryAfter = ConcurrencyWindow
	}
	if d.Remaining == 0 {
		d.ResetAfter = ConcurrencyWindow
	}
	return d
}

// Slots is one key's state of a concurrency limit in one process: the
// slots its requests hold. The zero value holds none. A Slots is not
// safe for concurrent use.
type Slots struct {
	held int64
}

// Decide decides a request of cost against limit ([DecideSlots]),
// without taking a slot: [Slots.Acquire] does.
func (s *Slots) Decide(limit, cost int64) Decision { return DecideSlots(limit, s.held, cost) }

// Acquire takes a slot.
func (s *Slots) Acquire() { s.held++ }

// Release gives a slot back; with none held it does nothing.
func (s *Slots) Release() {
	if s.held > 0 {
		s.held--
	}
}

// Held returns the slots held.
func (s *Slots) Held() int64 { return s.held }
