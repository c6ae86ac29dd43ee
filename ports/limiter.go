package ports

import (
	"context"

	"github.com/tollgate/tollgate/domain"
)

// Limiter decides whether the request metered under key is admitted by
// rule. Each call is one request: a decision that admits it also spends
// from the budget.
//
// key is the full storage key (prefix included). rule must be valid; a
// limiter may treat different rules for one key as a change of budget.
// An error means the store failed, never "over the limit"; the returned
// Decision is then the zero value. Implementations are safe for concurrent
// use by multiple goroutines and make at most one round trip to their
// store per call.
type Limiter interface {
	Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error)
}

// LimiterFunc adapts a function to a [Limiter].
type LimiterFunc func(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error)

// Allow calls f(ctx, key, rule).
func (f LimiterFunc) Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	return f(ctx, key, rule)
}

// Pinger reports whether a store answers. Admin readiness checks use it.
type Pinger interface {
	Ping(ctx context.Context) error
}
