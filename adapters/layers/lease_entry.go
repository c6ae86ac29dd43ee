package layers

import (
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// A lease layer's table of keys: each key's rate, its slices, and what
// the store last said of it.

// leaseShard is one locked part of the table of keys.
type leaseShard struct {
	mu sync.RWMutex // guards m
	m  map[string]*leaseEntry
}

// leaseEntry is one key's rate and slices.
type leaseEntry struct {
	mu sync.Mutex // guards everything below

	tenant domain.TenantID
	limit  domain.Limit // as last leased or seen (Cost 0)

	binStart, binHits int64   // the rate's current bin: start (nanos), units
	rate              float64 // units a second, estimated
	born, lastHit     int64   // nanos

	slices []*slice // live slices, oldest first, at most 2
	taking bool     // a take is in flight
	dead   bool     // dropped from the table: it takes no slice
	gen    uint64   // bumped by Forget: a take started before it is void

	remaining int64         // what the store last said remains; -1: unknown
	resetAt   int64         // nanos: when the store's window ends, as last known; 0: unknown
	window    time.Duration // the store's last Decision.Window (a calendar period's length)
	lowUntil  int64         // nanos: no slice is taken before then (what remains is low)
}

// slice is units of one key taken from the store.
type slice struct {
	units, used int64
	until       int64           // nanos: the slice's end
	adm         domain.Decision // the take's decision: its Spent and Mark
}

// ended is a slice to give back: its unused part, in its window.
type ended struct {
	e      *leaseEntry
	s      *slice
	limit  domain.Limit
	tenant domain.TenantID
	used   int64
}

// entry returns the entry of lim's key, made for tenant when new; nil
// when the table is full.
func (l *Leases) entry(tenant domain.TenantID, lim domain.Limit, now int64) *leaseEntry {
	sh := &l.shards[shardOf(lim.Key)]
	sh.mu.RLock()
	e := sh.m[lim.Key]
	sh.mu.RUnlock()
	if e != nil {
		return e
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e = sh.m[lim.Key]; e != nil {
		return e
	}
	if len(sh.m) >= l.perKeys {
		return nil
	}
	lim.Cost = 0
	e = &leaseEntry{tenant: tenant, limit: lim, binStart: now, born: now, remaining: -1}
	sh.m[lim.Key] = e
	return e
}

// shardOf returns the shard of key: FNV-1a.
func shardOf(key string) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return int(h & (leaseShards - 1))
}

// hit counts a request of cost units of lim at now in e's rate, and
// follows a change of lim's rule (a reload): the slices of the old rule
// are no longer used, and end. Requires e.mu held.
func (e *leaseEntry) hit(tenant domain.TenantID, lim domain.Limit, now int64) {
	if !same(e.limit, lim) || e.limit.Name != lim.Name {
		lim.Cost = 0
		e.limit, e.tenant = lim, tenant
		e.remaining, e.resetAt, e.lowUntil = -1, 0, 0
		for _, s := range e.slices {
			s.until = min(s.until, now) // ends; the sweeper gives it back
		}
	}
	e.lastHit = now
	if span := now - e.binStart; span >= int64(rateBin) || (span >= int64(minRateBin) && e.binHits >= rateBinHits) {
		r := float64(e.binHits) / time.Duration(span).Seconds()
		if span > int64(time.Second) || e.rate == 0 {
			e.rate = r
		} else {
			e.rate = (e.rate + r) / 2
		}
		e.binStart, e.binHits = now, 0
	}
	e.binHits += lim.Cost
}

// room returns e's live slice with room for cost at now, nil when none
// has. Requires e.mu held.
func (e *leaseEntry) room(now, cost int64) *slice {
	for _, s := range e.slices {
		if now < s.until && s.units-s.used >= cost {
			return s
		}
	}
	return nil
}

// spend takes lim's cost from e's slice with room at now (room found
// one) and returns the decision it makes; a slice spent whole is
// retired. Requires e.mu held.
func (e *leaseEntry) spend(now int64, lim domain.Limit, l *Leases) domain.Decision {
	s := e.room(now, lim.Cost)
	s.used += lim.Cost
	left := int64(0)
	for _, t := range e.slices {
		if now < t.until {
			left += t.units - t.used
		}
	}
	if s.used == s.units {
		e.retire(s, l)
	}
	d := domain.Decision{Allowed: true, Limit: lim.Rule.Limit, Remaining: max(e.remaining, 0) + left, Window: e.window}
	if e.resetAt > now {
		d.ResetAfter = time.Duration(e.resetAt - now)
	}
	return d
}

// retire takes s out of e's live slices and queues its return.
// Requires e.mu held.
func (e *leaseEntry) retire(s *slice, l *Leases) {
	for i, t := range e.slices {
		if t == s {
			e.slices = append(e.slices[:i], e.slices[i+1:]...)
			break
		}
	}
	l.retMu.Lock()
	l.retired = append(l.retired, ended{e: e, s: s, limit: e.limit, tenant: e.tenant, used: s.used})
	l.retMu.Unlock()
}

// wants returns the units of a slice e should take now, 0 for none: e is
// hot, has no take in flight, what remains is not low, and its slices
// are missing or half spent. Requires e.mu held.
func (l *Leases) wants(e *leaseEntry, now int64, lim domain.Limit) int64 {
	if e.taking || e.dead || now < e.lowUntil || !same(e.limit, lim) {
		return 0
	}
	live, left, units := 0, int64(0), int64(0)
	for _, s := range e.slices {
		if now < s.until {
			live++
			left += s.units - s.used
			units += s.units
		}
	}
	if live >= 2 || (live == 1 && 2*left > units) {
		return 0
	}
	size := e.rate * l.opts.Ahead.Seconds()
	if e.resetAt > now && l.windowed(lim) {
		size = min(size, e.rate*time.Duration(e.resetAt-now).Seconds())
	}
	rem := lim.Rule.Limit
	if e.remaining >= 0 && (e.resetAt == 0 || now < e.resetAt) {
		rem = e.remaining
	}
	if float64(rem) < l.opts.LowWater*float64(lim.Rule.Limit) {
		return 0
	}
	size = min(size, float64(rem/4))
	if size < minSlice {
		return 0
	}
	return int64(size)
}

// heard learns from the store's decision d of e's limit lim, asked at
// sent and answered at now, what remains and when its window ends; what
// remains below LowWater stops the slices for a slice's life. Requires
// e.mu held.
func (e *leaseEntry) heard(l *Leases, lim domain.Limit, d domain.Decision, sent, now int64) {
	if !same(e.limit, lim) {
		return
	}
	e.remaining, e.window = d.Remaining, d.Window
	e.resetAt = sent + int64(d.ResetAfter)
	if l.windowed(lim) {
		e.resetAt -= int64(windowMargin)
	}
	if float64(d.Remaining) < l.opts.LowWater*float64(lim.Rule.Limit) {
		// For a slice's life: by then the slices out have gone back,
		// and what they return may be leased again.
		e.lowUntil = now + int64(l.life(lim))
	}
}
