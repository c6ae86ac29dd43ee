// Package fixedwindow is the seed's fixed-window limiter: the domain's
// policy over any [ports.Counter], memory or Redis. It increments first
// and decides on the count, as the seed's design does, so a denied
// request that reaches the store is counted in its window.
package fixedwindow

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = Limiter{}

// ErrOneLimit is a request this limiter cannot decide: it counts one
// limit at cost 1. Requests of several limits or a cost go to a store's
// all-or-nothing fixed window.
var ErrOneLimit = errors.New("fixedwindow: the counter decides one limit of cost 1")

// Limiter is the seed's fixed-window [ports.Limiter] over Counter: one
// Counter.Incr per decision, then [domain.FixedWindow].
type Limiter struct {
	Counter ports.Counter
}

// Allow implements [ports.Limiter] with one Counter.Incr. req must hold
// one limit of cost 1, else Allow returns [ErrOneLimit].
func (l Limiter) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	if len(req.Limits) != 1 || req.Cost != 1 {
		return domain.Verdict{}, ErrOneLimit
	}
	lim := req.Limits[0]
	count, left, err := l.Counter.Incr(ctx, lim.Key, lim.Rule.Window)
	if err != nil {
		return domain.Verdict{}, fmt.Errorf("fixed window: %w", err)
	}
	// Counted already: a denied request has nothing to give back, and a
	// shadow limit counts every request that reaches it, as it would
	// enforced.
	return domain.Settle(req, func(int, int64) domain.Decision {
		return domain.FixedWindow{}.Decide(count, left, lim.Rule)
	}), nil
}
