package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*SlidingWindow)(nil)

// SlidingWindow is the sliding-window [ports.Limiter] on Redis
// ([domain.SlidingWindow]), windows aligned to the epoch on Redis time. A
// tenant's key is key + [SlidingWindowSuffix], a hash of the current
// window's start and the previous and current counts, with a TTL until
// the next window ends (at most two windows). A decision is one script
// run (EVALSHA): HMGET, and when admitted HSET and PEXPIRE.
//
// SlidingWindow is safe for concurrent use by multiple goroutines.
type SlidingWindow struct{ s script }

// NewSlidingWindow returns a SlidingWindow over client.
func NewSlidingWindow(client goredis.Scripter, opts Options) *SlidingWindow {
	return &SlidingWindow{newScript(client, "sliding_window.lua", "sliding window", SlidingWindowSuffix, 4, opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *SlidingWindow) Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	r, err := l.s.run(ctx, key, rule.Limit, micros(rule.Window))
	if err != nil {
		return domain.Decision{}, err
	}
	// The script decided (r[3]) with the same arithmetic, in µs.
	d := domain.DecideSlidingWindow(r[0], r[1], usDur(r[2]), atMicros(rule))
	return ceilMicros(scriptVerdict(d, r[3])), nil
}
