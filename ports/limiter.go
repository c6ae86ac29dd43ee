package ports

import (
	"context"

	"github.com/tollgate/tollgate/domain"
)

// Limiter decides one request against every limit that applies to it.
// It is the seam the rate-limit middleware sees; the stores implement it
// once per algorithm, and layers ([Layer]) wrap it.
//
// Allow decides req and, when every limit not in shadow mode admits it,
// spends req.Cost from each limit that admits it: all or nothing, by
// [domain.Settle]'s rule (a limit spends iff the verdict is allowed and
// that limit's decision is). The Verdict holds one Decision per limit,
// in req.Limits' order. A request that any enforced limit denies spends
// nothing from any limit, and a shadow limit that would deny an admitted
// request spends nothing from itself; with one exception kept from the
// seed's design: a fixed-window limiter over a [Counter] (one limit,
// INCR first) counts every request that reaches the store in its window.
//
// req.Limits is not empty, every rule is valid, req.Cost is at least 1,
// and the keys of one request share a tenant (and so a Redis Cluster
// slot); a limiter may treat a new rule for a key as a change of budget.
// An error means the store failed, never "over the limit"; the Verdict is
// then the zero value. Implementations are safe for concurrent use by
// multiple goroutines, make at most one round trip to their store per
// call, and neither keep nor modify req.
type Limiter interface {
	Allow(ctx context.Context, req domain.Request) (domain.Verdict, error)
}

// LimiterFunc adapts a function to a [Limiter]: a fake for tests, or a
// layer.
type LimiterFunc func(ctx context.Context, req domain.Request) (domain.Verdict, error)

// Allow calls f(ctx, req).
func (f LimiterFunc) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	return f(ctx, req)
}

// Layer wraps a Limiter in one concern of a decision (a fail mode, a deny
// cache, a breaker, a local fallback), as net/http middleware wraps a
// Handler. A layer knows the port, never the store under it.
type Layer func(Limiter) Limiter

// Chain returns l wrapped in layers, the first of them outermost: a
// request meets the layers in the order given, then l.
func Chain(l Limiter, layers ...Layer) Limiter {
	for i := len(layers) - 1; i >= 0; i-- {
		l = layers[i](l)
	}
	return l
}

// Pinger reports whether a store answers. Admin readiness checks use it.
type Pinger interface {
	Ping(ctx context.Context) error
}
