// Package redis implements tollgate's stores on Redis, shared by every
// gateway replica: the fixed-window [Counter] and the other algorithms'
// limiters. Every decision is one round trip, every key it writes has a
// TTL, and windows run on Redis's clock, never a replica's.
//
// Import go-redis as goredis: this package is also named redis.
package redis
