package memory

import (
	"time"

	"github.com/tollgate/tollgate/domain"
)

// The limiter's keys: one entry per key, created on first use within the
// store's bound, dropped by the sweeper once idle.

// entry returns limit i of req's entry, creating it if there is room
// ([limiter.room]); without room, it first reclaims the idle keys (at
// most once per [reclaimInterval]).
func (l *limiter[S, P]) entry(req *domain.Request, i int) (*limiterEntry[S], error) {
	lim := &req.Limits[i]
	if v, ok := l.keys.Load(lim.Key); ok {
		return v.(*limiterEntry[S]), nil
	}
	fam := l.familyOf(lim.Key)
	if !l.room(req, fam) {
		l.reclaim()
		if !l.room(req, fam) {
			return nil, ErrFull
		}
	}
	l.sweeper.saw(lim.Rule.Window)
	v, loaded := l.keys.LoadOrStore(lim.Key, new(limiterEntry[S]))
	if !loaded {
		l.n.Add(1)
		l.count(fam, 1)
	}
	return v.(*limiterEntry[S]), nil
}

// room reports whether req may add a key of family fam: while the store
// holds fewer than its bound, and the family fewer than its share (half
// the bound). Past the bound, the shared [domain.Unknown] tenant and, on
// a view of a policy's keys ([View].PolicyKeys), a request that holds
// one of them still may: clients who invent tenants cannot grow the
// store, while a tenant already held keeps its own budgets on a route it
// had not used yet (at most one key per limit of the policy more). A
// family's share holds whoever asks, so that clients who invent the
// values of one Envoy descriptor leave room for every other.
func (l *limiter[S, P]) room(req *domain.Request, fam string) bool {
	if l.maxKeys < 0 {
		return true
	}
	if fam != "" && l.familyKeys(fam) >= max(l.maxKeys/2, 1) {
		return false
	}
	return l.n.Load() < l.maxKeys || req.Tenant == domain.Unknown || (l.PolicyKeys && l.holdsAny(req))
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
		if e.idleAt != swept && e.idleAt <= now {
			e.idleAt = swept
			if l.keys.CompareAndDelete(k, e) {
				l.forget(k.(string))
			}
		}
		e.mu.Unlock()
		return true
	})
}

// reclaimInterval is the least time between two sweeps that requests
// needing a key run ([keyspace.reclaim]): a full store scans its keys at
// most once per interval, however many new keys are asked for.
const reclaimInterval = time.Second

// reclaim sweeps now, unless a reclaim ran within [reclaimInterval] or
// 20 times what the last one took (a million keys take about half a
// second), so that a key is refused only when the keys held are in use,
// not merely unswept, and reclaims take at most a twentieth of a core.
func (l *keyspace[S]) reclaim() {
	start := l.clock.nanos()
	next := l.nextReclaim.Load()
	if start < next || !l.nextReclaim.CompareAndSwap(next, start+int64(reclaimInterval)) {
		return
	}
	l.sweep()
	end := l.clock.nanos()
	l.nextReclaim.Store(end + max(int64(reclaimInterval), 20*(end-start)))
}

// familyOf returns key's family ([Options].Family), empty for none.
func (l *keyspace[S]) familyOf(key string) string {
	if l.family == nil {
		return ""
	}
	return l.family(key)
}

// familyKeys returns the keys of family fam held.
func (l *keyspace[S]) familyKeys(fam string) int64 {
	l.fmu.Lock()
	defer l.fmu.Unlock()
	return l.families[fam]
}

// count adds d to the keys of family fam held; an empty family is none.
func (l *keyspace[S]) count(fam string, d int64) {
	if fam == "" {
		return
	}
	l.fmu.Lock()
	defer l.fmu.Unlock()
	if n := l.families[fam] + d; n > 0 {
		l.families[fam] = n
	} else {
		delete(l.families, fam)
	}
}

// forget counts key as removed from the map.
func (l *keyspace[S]) forget(key string) {
	l.n.Add(-1)
	l.count(l.familyOf(key), -1)
}
