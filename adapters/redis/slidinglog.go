package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*SlidingLog)(nil)

// SlidingLog is the sliding-log [ports.Limiter] on Redis
// ([domain.SlidingLog]): exact. A tenant's key is key + [SlidingLogSuffix],
// a sorted set of at most limit admitted instants (µs of Redis time),
// with a TTL of one window. A decision is one script run (EVALSHA):
// ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZCARD, two ZRANGE, and when admitted
// ZADD NX and PEXPIRE.
//
// SlidingLog is safe for concurrent use by multiple goroutines.
type SlidingLog struct{ s script }

// NewSlidingLog returns a SlidingLog over client.
func NewSlidingLog(client goredis.Scripter, opts Options) *SlidingLog {
	return &SlidingLog{newScript(client, "sliding_log.lua", "sliding log", SlidingLogSuffix, 3, opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *SlidingLog) Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	ttl := (rule.Window + time.Millisecond - 1) / time.Millisecond
	r, err := l.s.run(ctx, key, rule.Limit, micros(rule.Window), int64(ttl))
	if err != nil {
		return domain.Decision{}, err
	}
	return domain.DecideSlidingLog(r[0], usDur(r[1]), usDur(r[2]), atMicros(rule)), nil
}
