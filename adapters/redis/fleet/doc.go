// Package fleet coordinates the gateway replicas that share one Redis:
// the concurrency slots each replica holds as leases and renews
// ([Leases]), the usage API's resets carried to every replica
// ([Resets]), and the count of replicas alive ([Replicas]). It runs on
// the connection of package conn.
//
// Import go-redis as goredis.
package fleet
