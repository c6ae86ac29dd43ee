package engine

import (
	"sync/atomic"

	"github.com/tollgate/tollgate/domain"
)

// Release gives back the concurrency slots the request took, if any, on
// the store that took them (Redis, or the local fail mode's memory). The
// face calls it once the request has ended, however it ended (its last
// byte written, the client gone, the upstream failed, a panic): a
// deferred call. It is idempotent, safe for concurrent use, and does
// nothing for a request that holds no slot.
func (r Result) Release() {
	if r.Verdict.Release != nil {
		r.Verdict.Release()
	}
}

// applies reports whether limit l of route applies to a request on it:
// not a concurrency limit when the face skips them, and a token limit
// only on a route that names a token source.
func applies(route *domain.Route, l domain.PolicyLimit, skipSlots bool) bool {
	return !(skipSlots && l.Concurrency) && (!l.Tokens || route.Tokens != "")
}

// metered reports whether any limit of route applies to its requests.
func metered(route *domain.Route, skipSlots bool) bool {
	for _, l := range route.Applied() {
		if applies(route, l, skipSlots) {
			return true
		}
	}
	return false
}

// holding counts the slots verdict v of limits took into the observer's
// InFlight, and returns v's Release that counts them out again, once.
func (e *Engine) holding(limits []domain.Limit, v domain.Verdict) func() {
	e.inFlight(limits, v, 1)
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			v.Release()
			e.inFlight(limits, v, -1)
		}
	}
}

// inFlight tells the observer of delta slots of each concurrency limit
// that took one under v (an admitted verdict: every limit that admitted
// it took one, as [domain.Spends] says).
func (e *Engine) inFlight(limits []domain.Limit, v domain.Verdict, delta int) {
	for i, l := range limits {
		if l.Concurrency && v.Decisions[i].Allowed {
			e.observer.InFlight(l.Name, delta)
		}
	}
}
