package layers

import (
	"container/heap"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// DefaultDenyCacheCapacity is how many denials a deny cache holds when
// [DenyCacheOptions].Capacity is zero: about 4 MB for one-limit requests.
const DefaultDenyCacheCapacity = 16384

// denyCacheShards is the number of independently locked parts of a deny
// cache. A power of two.
const denyCacheShards = 16

// DefaultDenyCacheMaxAge is how long a deny cache serves one denial at
// most when [DenyCacheOptions].MaxAge is zero.
const DefaultDenyCacheMaxAge = time.Second

// DenyCacheOptions configure [NewDenyCache]. The zero value is ready to
// use.
type DenyCacheOptions struct {
	// Capacity bounds the denials held. When the cache is full, a new
	// denial evicts the one that expires soonest (an expired one first),
	// so a flood of distinct denied tenants never grows it. Zero means
	// DefaultDenyCacheCapacity.
	Capacity int
	// MaxAge bounds how long one denial is served alone: after it, one
	// request asks the limiter again (the others keep the denial for
	// that round trip), and its answer replaces the denial or ends it,
	// so that what changed the budget elsewhere (a reset on another
	// replica, a raised limit) is seen within MaxAge and a round trip.
	// Zero means DefaultDenyCacheMaxAge.
	MaxAge time.Duration
	// Now returns the current time. If nil, the process's monotonic clock
	// is used. Tests inject a fake clock here.
	Now func() time.Time
	// Counting is the counting mode of the limiter under the cache
	// ([domain.Counting]). Under [domain.CountEvery] a denial is cached
	// only when every limit denied it: answering from memory spends
	// nothing, and a limit that admitted would have counted. (A chain
	// whose denied hits must all reach the store has no deny cache.)
	Counting domain.Counting
}

// DenyCache remembers denials: when the limiter under its layer denies a
// tenant's request on a route (with decisions: a store, memory or local
// denial, not the closed fail mode's), the tenant's next requests on
// that route are denied from memory, without a call to the limiter,
// until the Retry-After that denial gave has passed; every MaxAge one of
// them asks the limiter again. It never admits.
// A denial for want of a concurrency slot is not remembered (a slot may
// come back at any moment); one that a rate limit made is, for as long as
// the rate limits deny.
//
// A cached answer is the first denial's decisions with their times
// counted down, and outcome [domain.OutcomeCachedDenied]. It is served
// only to a request with the same limits (names, rules, keys, costs and
// modes) as the one denied: a budget changed by a reload, or another
// cost, goes to the limiter at once. Time runs from before the first
// denial's call, so a cached denial never outlasts the limiter's own.
// Under [domain.CountEvery] ([DenyCacheOptions].Counting) a denial is
// cached only when every limit denied it.
//
// The cache is sharded and bounded (see [DenyCacheOptions].Capacity).
// It is safe for concurrent use by multiple goroutines.
type DenyCache struct {
	nanos    func() int64 // the time since an origin
	maxAge   int64
	counting domain.Counting
	shards   [denyCacheShards]denyShard
}

// NewDenyCache returns an empty deny cache.
func NewDenyCache(opts DenyCacheOptions) *DenyCache {
	capacity := opts.Capacity
	if capacity <= 0 {
		capacity = DefaultDenyCacheCapacity
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultDenyCacheMaxAge
	}
	perShard := max(1, (capacity+denyCacheShards-1)/denyCacheShards)
	now := opts.Now
	if now == nil {
		now = time.Now // with its monotonic reading
	}
	origin := now()
	c := &DenyCache{nanos: func() int64 { return int64(now().Sub(origin)) }, maxAge: int64(opts.MaxAge), counting: opts.Counting}
	for i := range c.shards {
		c.shards[i] = denyShard{m: make(map[denyKey]*denial), capacity: perShard}
	}
	return c
}

// Layer returns the layer that answers from c. It is meant for one
// chain: two limiters under one cache would share their denials.
func (c *DenyCache) Layer() ports.Layer {
	return func(next ports.Limiter) ports.Limiter { return &denyLimiter{c, next} }
}

// Forget drops every denial of tenant, on every route: its next requests
// go to the limiter (the usage API's reset).
func (c *DenyCache) Forget(tenant domain.TenantID) {
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		for k, d := range sh.m {
			if k.tenant == tenant {
				heap.Remove(&sh.byEnd, d.index)
				delete(sh.m, k)
			}
		}
		sh.mu.Unlock()
	}
}

// denyLimiter is the limiter [DenyCache.Layer] builds.
type denyLimiter struct {
	*DenyCache
	next ports.Limiter
}

// denyKey is what a denial is remembered by.
type denyKey struct {
	tenant domain.TenantID
	route  string
}

// denial is one remembered denial. Its fields but index never change
// after it is stored; index belongs to the shard's heap, under its lock.
type denial struct {
	key       denyKey
	limits    []domain.Limit    // a copy of the denied request's
	decisions []domain.Decision // as the limiter gave them at at
	at, until int64             // nanos since the origin: when decided, when it ends
	fresh     int64             // at + MaxAge: from then on one request asks the limiter again
	// refreshing is set by the request that asks the limiter again.
	refreshing atomic.Bool
	index      int
}

// Allow implements [ports.Limiter].
func (c *denyLimiter) Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	k := denyKey{tenant: req.Tenant, route: req.Route}
	sh := &c.shards[k.shard()]
	now := c.nanos()
	sh.mu.RLock()
	d := sh.m[k]
	sh.mu.RUnlock()
	var stale *denial // a denial this request asks the limiter about again
	if d != nil && now < d.until && d.matches(req) {
		// Past MaxAge one request asks the limiter again; the others
		// keep the denial meanwhile (a flood costs the store one call a
		// second, not one per request in flight).
		if now < d.fresh || !d.refreshing.CompareAndSwap(false, true) {
			return d.verdict(now), nil
		}
		stale = d
	}
	v, err := c.next.Allow(ctx, req, dst)
	retry := rateRetry(req, v)
	if err != nil || v.Allowed || v.Unavailable || len(v.Decisions) == 0 || retry <= 0 || (c.counting == domain.CountEvery && countsSome(req, v)) || keyBytes(req) > maxCachedKeyBytes {
		if stale != nil {
			sh.remove(stale) // the limiter no longer denies (a reset, a raised limit), or could not say
		}
		return v, err
	}
	sh.put(&denial{
		key:       k,
		limits:    append([]domain.Limit(nil), req.Limits...),
		decisions: append([]domain.Decision(nil), v.Decisions...),
		at:        now,
		fresh:     now + c.maxAge,
		until:     now + int64(retry),
	}, now)
	return v, nil
}

// maxCachedKeyBytes bounds the keys of a denial the cache holds: a
// request whose keys are longer (an Envoy descriptor's values are a
// client's) is decided by the limiter every time, so that the cache's
// memory stays about Capacity × this at most.
const maxCachedKeyBytes = 4 << 10

// keyBytes is the length of req's keys together.
func keyBytes(req domain.Request) int {
	n := 0
	for _, l := range req.Limits {
		n += len(l.Key)
	}
	return n
}

// rateRetry is how long the rate limits that denied v deny: the longest
// RetryAfter of its enforced limits that are not concurrency limits. A
// denial for want of a slot is never cached: a slot may come back at any
// moment, and the next request must find it.
func rateRetry(req domain.Request, v domain.Verdict) time.Duration {
	if !slices.ContainsFunc(req.Limits, func(l domain.Limit) bool { return l.Concurrency }) {
		return v.RetryAfter() // quota limits' rule included
	}
	var r time.Duration
	for i, d := range v.Decisions {
		if !d.Allowed && !d.Shadow && !req.Limits[i].Concurrency {
			r = max(r, d.RetryAfter)
		}
	}
	return r
}

// shard returns the shard of k: FNV-1a over the tenant and the route.
func (k denyKey) shard() int {
	h := uint32(2166136261)
	for i := 0; i < len(k.tenant); i++ {
		h = (h ^ uint32(k.tenant[i])) * 16777619
	}
	h = (h ^ 0xff) * 16777619 // a separator: ("ab","c") is not ("a","bc")
	for i := 0; i < len(k.route); i++ {
		h = (h ^ uint32(k.route[i])) * 16777619
	}
	return int(h & (denyCacheShards - 1))
}

// countsSome reports whether a limit of req admitted it under v, and so
// counts the cost it was asked for.
func countsSome(req domain.Request, v domain.Verdict) bool {
	for i, d := range v.Decisions {
		if d.Allowed && req.Limits[i].Cost > 0 {
			return true
		}
	}
	return false
}

// matches reports whether req is what d denied: the same limits, costs
// included.
func (d *denial) matches(req domain.Request) bool {
	if len(req.Limits) != len(d.limits) {
		return false
	}
	for i, l := range req.Limits {
		if l != d.limits[i] {
			return false
		}
	}
	return true
}

// verdict returns d's answer at now (before d.until): its decisions with
// the time since d was decided taken off their waits. A limit that denied
// keeps a positive wait.
func (d *denial) verdict(now int64) domain.Verdict {
	elapsed := time.Duration(now - d.at)
	ds := make([]domain.Decision, len(d.decisions))
	for i, dec := range d.decisions {
		dec.ResetAfter = max(dec.ResetAfter-elapsed, 0)
		if !dec.Allowed {
			dec.RetryAfter = max(dec.RetryAfter-elapsed, 1)
		}
		ds[i] = dec
	}
	return domain.Verdict{Allowed: false, Outcome: domain.OutcomeCachedDenied, Decisions: ds}
}
