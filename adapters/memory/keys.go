package memory

import (
	"github.com/tollgate/tollgate/domain"
)

// The limiter's keys: one entry per key, created on first use within the
// store's bound, dropped by the sweeper once idle.

// entry returns limit i of req's entry, creating it, unless that would
// take the store past its bound, except for the shared [domain.Unknown]
// tenant and, on a view of a policy's keys ([View].PolicyKeys), for a
// request that holds one of them: clients who invent tenants (or Envoy
// descriptor values) cannot grow the store, while a tenant already held
// keeps its own budgets on a route it had not used yet (at most one key
// per limit of the policy more).
func (l *limiter[S, P]) entry(req *domain.Request, i int) (*limiterEntry[S], error) {
	lim := req.Limits[i]
	if v, ok := l.keys.Load(lim.Key); ok {
		return v.(*limiterEntry[S]), nil
	}
	if l.maxKeys >= 0 && l.n.Load() >= l.maxKeys && req.Tenant != domain.Unknown && !(l.PolicyKeys && l.holdsAny(req)) {
		return nil, ErrFull
	}
	l.sweeper.saw(lim.Rule.Window)
	v, loaded := l.keys.LoadOrStore(lim.Key, new(limiterEntry[S]))
	if !loaded {
		l.n.Add(1)
	}
	return v.(*limiterEntry[S]), nil
}

// holdsAny reports whether the store holds a key of one of req's limits.
func (l *limiter[S, P]) holdsAny(req *domain.Request) bool {
	for _, lim := range req.Limits {
		if _, ok := l.keys.Load(lim.Key); ok {
			return true
		}
	}
	return false
}

// Len returns the number of keys held, idle ones not yet swept included.
func (l *keyspace[S]) Len() int { return int(l.n.Load()) }

// Close stops the sweeper and waits for it. It is idempotent.
func (l *keyspace[S]) Close() error {
	l.sweeper.close()
	return nil
}

// sweep drops every key whose budget is whole again.
func (l *keyspace[S]) sweep() {
	_, now := l.clock.read()
	l.keys.Range(func(k, v any) bool {
		e := v.(*limiterEntry[S])
		e.mu.Lock()
		if !e.swept && e.idleAt <= now {
			e.swept = true
			if l.keys.CompareAndDelete(k, e) {
				l.n.Add(-1)
			}
		}
		e.mu.Unlock()
		return true
	})
}
