package memory

import (
	"context"

	"github.com/tollgate/tollgate/domain"
)

// Peek implements [ports.Usage]: each limit decided at cost 0 on its
// state, or on a fresh one when the store holds none; nothing is created
// or changed. A decision's Reserved is the reservations in flight whose
// window, period or entry still counts.
func (l *limiter[S, P]) Peek(_ context.Context, req domain.Request) (domain.Verdict, error) {
	if len(req.Limits) > maxLimits {
		return domain.Verdict{}, errTooManyLimits
	}
	decide := func(i int, _ int64) domain.Decision {
		lim := req.Limits[i]
		now, _ := l.clock.read()
		v, ok := l.keys.Load(lim.Key)
		if !ok {
			var fresh limiterEntry[S]
			return l.decide(&fresh, now, &lim, 0)
		}
		e := v.(*limiterEntry[S])
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.idleAt == swept {
			var fresh limiterEntry[S]
			return l.decide(&fresh, now, &lim, 0)
		}
		d := l.decide(e, now, &lim, 0)
		d.Reserved = l.reservedOf(e, now, lim)
		return d
	}
	v := domain.Settle(req, domain.CountAdmitted, nil, decide)
	for i := range v.Decisions {
		v.Decisions[i].Spent, v.Decisions[i].Mark = 0, 0 // a read spends nothing
	}
	return v, nil
}

// Reset implements [ports.Usage]: every limit's key is dropped, so that
// its next request starts afresh; a concurrency limit's slots are not (they
// are requests running, given back as each ends: dropping them would let
// more than the limit run).
func (l *limiter[S, P]) Reset(_ context.Context, req domain.Request) error {
	for _, lim := range req.Limits {
		if lim.Concurrency {
			continue
		}
		if v, ok := l.keys.Load(lim.Key); ok {
			l.drop(lim.Key, v.(*limiterEntry[S]))
		}
	}
	return nil
}

// drop removes key's entry e, unless its slots are held (requests
// running give them back: a key named by a reset heard from elsewhere
// may be a slot's) or it is gone already.
func (l *limiter[S, P]) drop(key string, e *limiterEntry[S]) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.idleAt == swept || e.held() > 0 {
		return
	}
	e.idleAt = swept
	if l.keys.CompareAndDelete(key, e) {
		l.forget(key)
	}
}
