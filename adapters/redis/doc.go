// Package redis implements tollgate's stores on Redis, shared by every
// gateway replica: the fixed-window [Counter] and the other algorithms'
// limiters. Every decision is one round trip, every key it writes has a
// TTL, and windows run on Redis's clock, never a replica's.
//
// Keys, for a limiter given key rl:acme (TOLLGATE_KEY_PREFIX + tenant):
//
//	fixed window     rl:acme                  string counter
//	sliding log      rl:acme:sliding_log      sorted set, ≤ limit members, TTL one window
//	sliding window   rl:acme:sliding_window   hash s, p, c, TTL ≤ two windows
//	token bucket     rl:acme:token_bucket     string TAT (µs), TTL ≤ one window
//
// A tenant id holds no ':', so the shapes never meet (no WRONGTYPE when
// the algorithm changes on a live Redis). Each decision touches one key,
// so it is always within one Redis Cluster slot.
//
// Import go-redis as goredis: this package is also named redis.
package redis
