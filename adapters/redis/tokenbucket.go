package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*TokenBucket)(nil)

// TokenBucket is the token-bucket [ports.Limiter] on Redis
// ([domain.TokenBucket], GCRA) on Redis time. A tenant's key is
// key + [TokenBucketSuffix], a string holding the theoretical arrival
// time in µs, with a TTL until the bucket is full again (at most one
// window). A decision is one script run (EVALSHA): GET, and when admitted
// SET … PX.
//
// The emission interval is window/limit in whole µs; a valid
// [domain.Rule] makes that at least 1µs, so the bucket holds at most one
// window of intervals and its key's TTL is at most one window.
//
// TokenBucket is safe for concurrent use by multiple goroutines.
type TokenBucket struct{ s script }

// NewTokenBucket returns a TokenBucket over client.
func NewTokenBucket(client goredis.Scripter, opts Options) *TokenBucket {
	return &TokenBucket{newScript(client, "token_bucket.lua", "token bucket", TokenBucketSuffix, 2, opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *TokenBucket) Allow(ctx context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	// At least 1µs: a valid rule admits at most one request per µs.
	interval := max(micros(rule.Window)/rule.Limit, 1)
	r, err := l.s.run(ctx, key, rule.Limit, interval)
	if err != nil {
		return domain.Decision{}, err
	}
	return scriptVerdict(domain.DecideTokenBucket(usDur(r[0]), usDur(interval), rule), r[1]), nil
}
