// Package redis implements tollgate's limiter on Redis, shared by every
// gateway replica: a [Limiter] of every algorithm of [domain.Algorithms]
// ([New]). Every decision is one Lua script over the keys of one request
// (which share a tenant's hash tag and so a Redis Cluster slot): a
// shared prelude (lua/prelude.lua: Redis time, arguments, the
// all-or-nothing skeleton) and the algorithm's rule (lua/<algorithm>.lua),
// which decides every limit and returns the verdict. It is sent in one
// round trip at most: concurrent decisions share round trips (package
// conn's client). Every key it writes has a TTL, and windows run on
// Redis's clock, never a replica's. Concurrency limits hold their slots
// as leases of package fleet.
//
// Keys are built by keys.Key; for tenant acme under the prefix rl:
//
//	fixed window     rl:{acme}                  string counter, TTL its window
//	sliding log      rl:{acme}:sliding_log_w    sorted set, a member per request, TTL one window
//	sliding window   rl:{acme}:sliding_window   hash s, p, c, TTL ≤ two windows
//	token bucket     rl:{acme}:token_bucket     string TAT ("<µs>.<ns>"), TTL ≤ one window
//
// Other limits and routes append their names after these (see
// keys.Key), so no two shapes ever share a key: no WRONGTYPE when the
// algorithm changes on a live Redis. A Reserve limit (a token limit)
// keeps its reservations in flight beside its key, in a hash of a field
// per window they counted in (keys.Reserved, "<key>~reserved"), which
// expires when its newest window ends: a replica that crashed holding a
// reservation shows it in usage reads until then.
//
// It runs on Redis 7 and on Valkey 8 alike (both tested).
//
// Import go-redis as goredis: this package is also named redis.
package redis
