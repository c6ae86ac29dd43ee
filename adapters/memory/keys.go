package memory

import (
	"hash/maphash"
	"sync"

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
	if e, ok := l.keys.load(lim.Key); ok {
		return e, nil
	}
	if l.maxKeys >= 0 && l.n.Load() >= l.maxKeys && req.Tenant != domain.Unknown && !(l.PolicyKeys && l.holdsAny(req)) {
		return nil, ErrFull
	}
	l.sweeper.saw(lim.Rule.Window)
	e, loaded := l.keys.loadOrStore(lim.Key)
	if !loaded {
		l.n.Add(1)
	}
	return e, nil
}

// holdsAny reports whether the store holds a key of one of req's limits.
func (l *limiter[S, P]) holdsAny(req *domain.Request) bool {
	for _, lim := range req.Limits {
		if _, ok := l.keys.load(lim.Key); ok {
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

// sweep drops every key whose budget is whole again. An entry locked by
// a decision is in use, and left for the next sweep: a decision locks
// entries before it looks a key up, so waiting for one under a shard's
// lock could wait forever.
func (l *keyspace[S]) sweep() {
	_, now := l.clock.read()
	for i := range l.keys.shards {
		sh := &l.keys.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			if !e.mu.TryLock() {
				continue
			}
			if e.idleAt <= now {
				e.idleAt = swept
				delete(sh.m, k)
				l.n.Add(-1)
			}
			e.mu.Unlock()
		}
		sh.shrink()
		sh.mu.Unlock()
	}
}

// shards is how many maps the keys are spread over, each under its own
// lock, so that decisions creating keys on two cores rarely wait on each
// other, and a sweep holds one shard at a time.
const shards = 64

// shardedMap maps keys to entries: [shards] Go maps of the keys,
// spread by a hash of the key. It is smaller than a sync.Map (no boxed
// key, no node per key) and as fast to read for a store that decides
// keys it holds.
type shardedMap[S any] struct {
	seed   maphash.Seed
	shards [shards]shard[S]
}

// shard is one map of a shardedMap, alone on its cache line.
type shard[S any] struct {
	mu   sync.RWMutex // guards m, peak
	m    map[string]*limiterEntry[S]
	peak int // the most keys m has held since it was made
	_    [64 - 24 - 8 - 8]byte
}

// shrink copies s's keys into a new map once it holds under a quarter of
// its peak, since a Go map keeps the room of its peak: the memory a
// flood of keys took comes back when they are swept. It requires s.mu
// held.
func (s *shard[S]) shrink() {
	if len(s.m) >= s.peak/4 || s.peak < 64 {
		return
	}
	m := make(map[string]*limiterEntry[S], len(s.m))
	for k, e := range s.m {
		m[k] = e
	}
	s.m, s.peak = m, len(m)
}

// init makes m's maps.
func (m *shardedMap[S]) init() {
	m.seed = maphash.MakeSeed()
	for i := range m.shards {
		m.shards[i].m = make(map[string]*limiterEntry[S])
	}
}

func (m *shardedMap[S]) shard(key string) *shard[S] {
	return &m.shards[maphash.String(m.seed, key)%shards]
}

// load returns key's entry.
func (m *shardedMap[S]) load(key string) (*limiterEntry[S], bool) {
	sh := m.shard(key)
	sh.mu.RLock()
	e, ok := sh.m[key]
	sh.mu.RUnlock()
	return e, ok
}

// loadOrStore returns key's entry, adding a new one if there is none,
// and reports whether it was there.
func (m *shardedMap[S]) loadOrStore(key string) (*limiterEntry[S], bool) {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e, ok := sh.m[key]; ok {
		return e, true
	}
	e := new(limiterEntry[S])
	sh.m[key] = e
	sh.peak = max(sh.peak, len(sh.m))
	return e, false
}

// compareAndDelete removes key if its entry is e, and reports whether it
// did.
func (m *shardedMap[S]) compareAndDelete(key string, e *limiterEntry[S]) bool {
	sh := m.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[key] != e {
		return false
	}
	delete(sh.m, key)
	return true
}
