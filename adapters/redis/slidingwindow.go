package redis

import (
	"context"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*SlidingWindow)(nil)

// SlidingWindow is the sliding-window [ports.Limiter] on Redis
// ([domain.SlidingWindow]), windows aligned to the epoch on Redis time. A
// limit's key is a hash of its current window's start and the previous
// and current counts, with a TTL until the next window ends (at most two
// windows). A decision is one script run (EVALSHA of
// scripts/sliding_window.lua): HMGET per limit, and when every limit
// admits, HSET and PEXPIRE for each.
//
// SlidingWindow is safe for concurrent use by multiple goroutines.
type SlidingWindow struct{ s script }

// NewSlidingWindow returns a SlidingWindow on c.
func NewSlidingWindow(c *Client, opts Options) *SlidingWindow {
	return &SlidingWindow{newScript(c, "sliding_window.lua", "sliding window", opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *SlidingWindow) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	keys, args := keysAndArgs(req, func(r domain.Rule) []any { return []any{r.Limit, micros(r.Window)} })
	r, err := l.s.run(ctx, keys, 1+4*len(keys), args...)
	if err != nil {
		return domain.Verdict{}, err
	}
	return settle(req, r, func(i int, cost int64) domain.Decision {
		v := r[1+4*i:]
		return ceilMicros(domain.DecideSlidingWindow(v[0], v[1], usDur(v[2]), cost, atMicros(req.Limits[i].Rule)))
	}, func(i int) bool { return r[4+4*i] == 1 })
}
