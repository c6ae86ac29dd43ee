package redis

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*SlidingLog)(nil)

// SlidingLog is the sliding-log [ports.Limiter] on Redis
// ([domain.SlidingLog]): exact. A limit's key is a sorted set of at most
// limit admitted units (µs of Redis time), with a TTL of one window. A
// decision is one script run (EVALSHA of scripts/sliding_log.lua): per
// limit ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZCARD and two ZRANGE, and when
// every limit admits, ZADD NX and PEXPIRE for each.
//
// SlidingLog is safe for concurrent use by multiple goroutines.
type SlidingLog struct{ s script }

// NewSlidingLog returns a SlidingLog on c.
func NewSlidingLog(c *Client, opts Options) *SlidingLog {
	return &SlidingLog{newScript(c, "sliding_log.lua", "sliding log", opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *SlidingLog) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	keys, args := keysAndArgs(req, func(r domain.Rule) []any {
		ttl := (r.Window + time.Millisecond - 1) / time.Millisecond
		return []any{r.Limit, micros(r.Window), int64(ttl)}
	})
	r, err := l.s.run(ctx, keys, 1+3*len(keys), args...)
	if err != nil {
		return domain.Verdict{}, err
	}
	return settle(req, r, func(i int, cost int64) domain.Decision {
		v := r[1+3*i:]
		return domain.DecideSlidingLog(v[0], usDur(v[1]), usDur(v[2]), cost, atMicros(req.Limits[i].Rule))
	}, nil)
}
