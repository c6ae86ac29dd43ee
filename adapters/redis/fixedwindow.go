package redis

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*FixedWindow)(nil)

// FixedWindow is the fixed-window [ports.Limiter] on Redis for requests
// of several limits or a cost: one script run (scripts/fixed_window.lua)
// reads every limit's counter, and spends the cost from all of them only
// when all admit, so a denied request counts nowhere. A limit's key is a
// string counter whose TTL is its window (set by the first spend), the
// same shape as the seed's [Counter] uses. The seed's single limit runs
// on the Counter instead, which counts first.
//
// FixedWindow is safe for concurrent use by multiple goroutines.
type FixedWindow struct{ s script }

// NewFixedWindow returns a FixedWindow on c.
func NewFixedWindow(c *Client, opts Options) *FixedWindow {
	return &FixedWindow{newScript(c, "fixed_window.lua", "fixed window", opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *FixedWindow) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	keys, args := keysAndArgs(req, func(r domain.Rule) []any { return []any{r.Limit, windowMillis(r.Window)} })
	r, err := l.s.run(ctx, keys, 1+2*len(keys), args...)
	if err != nil {
		return domain.Verdict{}, err
	}
	return settle(req, r, func(i int, cost int64) domain.Decision {
		var left time.Duration // 0: no window running
		if r[2+2*i] >= 0 {
			left = leftOf(r[2+2*i], req.Limits[i].Rule.Window)
		}
		return domain.DecideFixedWindow(r[1+2*i], left, cost, req.Limits[i].Rule)
	}, nil)
}
