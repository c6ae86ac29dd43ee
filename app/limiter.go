package app

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = FixedWindowLimiter{}

// FixedWindowLimiter is the fixed-window [ports.Limiter]: the domain's
// policy over any [ports.Counter], memory or Redis.
type FixedWindowLimiter struct {
	Counter ports.Counter
}

// Allow implements [ports.Limiter] with one Counter.Incr.
func (l FixedWindowLimiter) Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	count, left, err := l.Counter.Incr(ctx, key, rule.Window)
	if err != nil {
		return domain.Decision{}, fmt.Errorf("fixed window: %w", err)
	}
	return domain.FixedWindow{}.Decide(count, left, rule), nil
}
