package ports

import (
	"context"
	"time"
)

// Board is where the replicas sharing a store post what each has seen
// of the traffic, so that any replica can answer for the whole fleet
// (who is being limited). A post is opaque bytes under the replica's
// name; it replaces the replica's previous one and lives ttl unless
// posted again, so a replica that stops drops out by itself.
//
// Implementations are safe for concurrent use by multiple goroutines.
// Errors mean the store failed.
type Board interface {
	// Post records data as replica's post for ttl.
	Post(ctx context.Context, replica string, data []byte, ttl time.Duration) error
	// Posts returns every replica's post alive, in no order.
	Posts(ctx context.Context) (map[string][]byte, error)
}
