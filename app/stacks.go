package app

import (
	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// The gateway decides with two limiters over one store: the HTTP faces'
// (the proxy and the check endpoint, deciding the policy's requests) and
// the rate limit service's (Envoy's descriptors). They differ in how the
// store counts and aligns windows, options the store takes where each
// limiter is built and refuses when it cannot honour them, and in the
// layers around them.

// keyLayout is the stores' key layout under TOLLGATE_KEY_PREFIX for
// TOLLGATE_ALGORITHM: what the engine names limits through.
func keyLayout(cfg Config) ports.Keys {
	return keys.Layout{Prefix: cfg.KeyPrefix, Algorithm: cfg.Algorithm}
}

// view is how one of the store's limiters decides.
type view struct {
	counting domain.Counting
	windows  domain.Windows
	// policyKeys: the keys are a policy's for one tenant, at most one per
	// limit (a bounded memory store may add a held tenant's others).
	policyKeys bool
	// denyCache: the chain has the deny cache (TOLLGATE_DENY_CACHE).
	denyCache bool
	// chargeEvery: a denied request is charged every limit's hits after
	// the store decided (the engine's PlannedChargeEvery), where the
	// store cannot count them itself (another algorithm than the fixed
	// window).
	chargeEvery bool
}

// views are the store's two limiters, the HTTP faces' and the rate limit
// service's (nil without TOLLGATE_RLS_ADDR), and each one's settler: the
// same view settling token reservations (HTTP) and charging denied hits
// (the rate limit service).
type views struct {
	http, rls               ports.Limiter
	httpSettler, rlsSettler ports.Settler
}

// httpView is how the HTTP faces' requests are decided: all or nothing,
// except the one limit of a gateway without a policy file on the fixed
// window, which counts every request, as a counter that increments
// before it decides.
func httpView(cfg Config) view {
	v := view{counting: domain.CountAdmitted, policyKeys: true, denyCache: cfg.DenyCache}
	if cfg.PolicyFile == "" && cfg.Algorithm == domain.AlgorithmFixedWindow {
		v.counting = domain.CountEvery
	}
	return v
}

// rlsView is how the rate limit service's requests are decided: every
// hit of an admitted request counted, as envoyproxy/ratelimit counts, and
// every hit of a denied one too with TOLLGATE_RLS_COUNT_DENIED (by the
// fixed window's store itself, by a charge after the decision on any
// other algorithm; then without the deny cache, so that every denied hit
// reaches the store), in windows aligned to the epoch.
func rlsView(cfg Config) view {
	v := view{counting: domain.CountHits, windows: domain.WindowsEpoch, denyCache: cfg.DenyCache}
	switch {
	case cfg.RLSCountDenied && cfg.Algorithm == domain.AlgorithmFixedWindow:
		v.counting, v.denyCache = domain.CountEvery, false
	case cfg.RLSCountDenied:
		v.chargeEvery, v.denyCache = true, false
	}
	return v
}

// rlsCharges returns how the engine charges what the rate limit
// service's store did not spend of a denied request: through settler,
// the limits that denied it, or with every, all of its limits. A store
// that counts every hit itself (the fixed window with
// TOLLGATE_RLS_COUNT_DENIED) is charged nothing more: settler is nil.
func rlsCharges(cfg Config, vs views) (settler ports.Settler, every bool) {
	v := rlsView(cfg)
	if v.counting == domain.CountEvery {
		return nil, false
	}
	return vs.rlsSettler, v.chargeEvery
}

// memoryViews builds cfg's views on one memory store of cfg.Algorithm
// (its keys, bound and sweeper shared), and returns the store, which
// closes them both.
func memoryViews(cfg Config) (*memory.Limiter, views, error) {
	hv := httpView(cfg)
	// A descriptor's values share half the bound at most: clients name
	// them, and one descriptor's flood must leave room for the others.
	family := keys.Layout{Prefix: cfg.KeyPrefix, Algorithm: cfg.Algorithm}.Family
	st, err := memory.New(cfg.Algorithm, memory.Options{MaxKeys: memoryMaxKeys(cfg), Family: family, View: memoryView(hv)})
	if err != nil {
		return nil, views{}, err
	}
	vs := views{http: st}
	vs.httpSettler = st
	if cfg.RLSAddr != "" {
		rl, err := st.View(memoryView(rlsView(cfg)))
		if err != nil {
			st.Close()
			return nil, views{}, err
		}
		vs.rls = rl
		vs.rlsSettler = rl
	}
	return st, vs, nil
}

// memoryView is v as the memory store takes it.
func memoryView(v view) memory.View {
	return memory.View{Counting: v.counting, Windows: v.windows, PolicyKeys: v.policyKeys}
}

// redisViews builds cfg's views on client, sharing it and leases, and
// returns the HTTP faces' limiter again as the store's usage.
func redisViews(cfg Config, client *conn.Client, leases *fleet.Leases) (views, *redis.Limiter, error) {
	build := func(v view) (*redis.Limiter, error) {
		// the client times each decision from its send
		return redis.New(client, cfg.Algorithm, redis.Options{Leases: leases, Counting: v.counting, Windows: v.windows})
	}
	h, err := build(httpView(cfg))
	if err != nil {
		return views{}, nil, err
	}
	vs := views{http: h}
	vs.httpSettler = h
	if cfg.RLSAddr != "" {
		r, err := build(rlsView(cfg))
		if err != nil {
			return views{}, nil, err
		}
		vs.rls = r
		vs.rlsSettler = r
	}
	return vs, h, nil
}

// chains wraps each of vs in its layers, in the order a request meets
// them: the deny cache (its view's), the fail mode (failModes' layer of
// the same view), the HTTP faces' leases (leased, when not nil), then
// inner (the store's breaker, shared). It returns the HTTP faces'
// limiter, the rate limit service's (nil without one), and the HTTP
// deny cache's Forget (nil without it), for resets: the rate limit
// service's subjects are never a tenant's.
//
// The rate limit service's chain takes no leases: its windows are
// aligned to the epoch, its descriptors may share a key within one
// request, and a denied hit may count (TOLLGATE_RLS_COUNT_DENIED); it
// decides at the store.
func chains(cfg Config, vs views, failHTTP, failRLS ports.Layer, leased *layers.Leases, inner []ports.Layer) (http, rls ports.Limiter, forget func(domain.TenantID)) {
	chain := func(l ports.Limiter, v view, fail ports.Layer, leased *layers.Leases) (ports.Limiter, func(domain.TenantID)) {
		var outer []ports.Layer
		var forget func(domain.TenantID)
		if v.denyCache {
			cache := layers.NewDenyCache(layers.DenyCacheOptions{Counting: v.counting})
			outer, forget = append(outer, cache.Layer()), cache.Forget
		}
		outer = append(outer, fail)
		if leased != nil {
			outer = append(outer, leased.Layer())
		}
		return ports.Chain(l, append(outer, inner...)...), forget
	}
	http, forget = chain(vs.http, httpView(cfg), failHTTP, leased)
	if vs.rls != nil {
		rls, _ = chain(vs.rls, rlsView(cfg), failRLS, nil)
	}
	return http, rls, forget
}

// leases returns the HTTP faces' lease layer's state with
// TOLLGATE_LEASES=auto on a shared store that settles (nil otherwise:
// in process, a decision costs less than a lease would save).
func leases(cfg Config, op opened, env backendEnv) *layers.Leases {
	if cfg.Leases != LeasesAuto || op.shared == nil || op.views.httpSettler == nil {
		return nil
	}
	return layers.NewLeases(layers.LeaseOptions{Settler: op.views.httpSettler, Algorithm: cfg.Algorithm, Observer: env.metrics, OnError: env.onError})
}

// failModes returns cfg's fail mode (TOLLGATE_FAIL_MODE) for the HTTP
// faces' chain and the rate limit service's: open, closed, or local, the
// same algorithm in this replica's memory with limits divided by
// replicas, on one memory store whose views count as the store's do. It
// also returns that memory store (nil unless local), which the caller
// closes and resets.
func failModes(cfg Config, replicas func() int, onError func(error)) (http, rls ports.Layer, local *memory.Limiter, err error) {
	switch cfg.FailMode {
	case FailClosed:
		return layers.FailClosed(onError), layers.FailClosed(onError), nil, nil
	case FailLocal:
		st, vs, err := memoryViews(cfg)
		if err != nil {
			return nil, nil, nil, err
		}
		localOf := func(l ports.Limiter) ports.Layer {
			if l == nil {
				return nil
			}
			return layers.FailLocal(layers.LocalOptions{Limiter: l, Replicas: replicas, OnError: onError})
		}
		return localOf(vs.http), localOf(vs.rls), st, nil
	}
	return layers.FailOpen(onError), layers.FailOpen(onError), nil, nil
}
