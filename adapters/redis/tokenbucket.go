package redis

import (
	"context"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var _ ports.Limiter = (*TokenBucket)(nil)

// TokenBucket is the token-bucket [ports.Limiter] on Redis
// ([domain.TokenBucket], GCRA) on Redis time. A limit's key is a string
// holding the theoretical arrival time in µs, with a TTL until the
// bucket is full again (at most one window). A decision is one script
// run (EVALSHA of scripts/token_bucket.lua): GET per limit, and when
// every limit admits, SET … PX for each.
//
// The emission interval is window/limit in whole µs; a valid
// [domain.Rule] makes that at least 1µs, so the bucket holds at most one
// window of intervals and its key's TTL is at most one window.
//
// TokenBucket is safe for concurrent use by multiple goroutines.
type TokenBucket struct{ s script }

// NewTokenBucket returns a TokenBucket on c.
func NewTokenBucket(c *Client, opts Options) *TokenBucket {
	return &TokenBucket{newScript(c, "token_bucket.lua", "token bucket", opts)}
}

// Allow implements [ports.Limiter] in one round trip.
func (l *TokenBucket) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	keys, args := keysAndArgs(req, func(r domain.Rule) []any { return []any{r.Limit, interval(r)} })
	r, err := l.s.run(ctx, keys, 1+2*len(keys), args...)
	if err != nil {
		return domain.Verdict{}, err
	}
	return settle(req, r, func(i int, cost int64) domain.Decision {
		rule := req.Limits[i].Rule
		return domain.DecideTokenBucket(usDur(r[1+2*i]), usDur(interval(rule)), cost, rule)
	}, func(i int) bool { return r[2+2*i] == 1 })
}

// interval returns rule's emission interval in whole µs, at least 1: a
// valid rule admits at most one request per µs.
func interval(rule domain.Rule) int64 { return max(micros(rule.Window)/rule.Limit, 1) }
