package memory

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// The limiter's keys: one entry per key, created on first use within the
// store's bound, dropped by the sweeper once idle.

// entry returns limit i of req's entry, creating it if there is room
// ([limiter.room]); without room, it first reclaims the idle keys (at
// most once per [reclaimInterval]).
func (l *limiter[S, P]) entry(req *domain.Request, i int) (*limiterEntry[S], error) {
	lim := req.Limits[i]
	if e, ok := l.keys.load(lim.Key); ok {
		return e, nil
	}
	fam := l.familyOf(lim.Key)
	if !l.room(req, fam) {
		l.reclaim()
		if !l.room(req, fam) {
			return nil, ErrFull
		}
	}
	l.sweeper.saw(lim.Rule.Window)
	e, loaded := l.keys.loadOrStore(lim.Key)
	if !loaded {
		l.n.Add(1)
		l.count(fam, 1)
	}
	return e, nil
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

// sweep drops every key whose budget is whole again. It reads each
// shard under its read lock, so that decisions go on while it does, and
// marks the idle entries swept; then it deletes them under the write
// lock. An entry locked by a decision is in use, and left for the next
// sweep: a decision locks entries before it looks a key up, so waiting
// for one under a shard's lock could wait forever.
func (l *keyspace[S]) sweep() {
	_, now := l.clock.read()
	type idleEntry struct {
		key string
		e   *limiterEntry[S]
	}
	var idle []idleEntry
	for i := range l.keys.shards {
		sh := &l.keys.shards[i]
		idle = idle[:0]
		sh.mu.RLock()
		for k, e := range sh.m {
			if !e.mu.TryLock() {
				continue
			}
			if e.idleAt <= now {
				e.idleAt = swept
				idle = append(idle, idleEntry{k, e})
			}
			e.mu.Unlock()
		}
		sh.mu.RUnlock()
		if len(idle) == 0 {
			continue
		}
		sh.mu.Lock()
		for _, ie := range idle {
			// A decision that met the entry swept may have deleted it,
			// and added a fresh one.
			if sh.m[ie.key] == ie.e {
				delete(sh.m, ie.key)
				l.forget(ie.key)
			}
		}
		sh.shrink()
		sh.mu.Unlock()
	}
}

// reclaimInterval is the least time between two sweeps that requests
// needing a key run ([keyspace.reclaim]): a full store scans its keys at
// most once per interval, however many new keys are asked for.
const reclaimInterval = time.Second

// reclaim sweeps now, unless a reclaim ran within [reclaimInterval] or
// 20 times what the last one took (a million keys take about 0.1 s), so
// that a key is refused only when the keys held are in use, not merely
// unswept, and reclaims take at most a twentieth of a core.
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
