// Package conn is tollgate's connection to Redis, Valkey or a Redis
// Cluster, tuned for a gateway: a [Client] whose concurrent decisions
// share round trips (a coalescer over a few lanes), that follows a
// cluster's slots, bounds every decision by Redis's silence rather than
// this process's queue, and runs [Script]s as EVALSHA with a
// transparent EVAL when Redis lost them. The limiter (package redis)
// and the fleet's coordination (package fleet) run on it.
//
// Import go-redis as goredis.
package conn
