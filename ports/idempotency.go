package ports

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// Idempotency remembers calls that must take effect once (those with an
// Idempotency-Key), per tenant, for a while: a shared store remembers
// them for every replica. Keys are the callers' own strings; a store
// keeps only a digest of them. Implementations are safe for concurrent
// use.
type Idempotency interface {
	// Begin claims tenant's key for ttl. It answers first when this
	// caller is the first to claim it (it must then call Done or
	// Abandon), else the answer recorded for it: nil while the first
	// caller has recorded none yet.
	Begin(ctx context.Context, tenant domain.TenantID, key string, ttl time.Duration) (first bool, answer []byte, err error)
	// Done records answer for a key this caller claimed, for ttl from
	// now.
	Done(ctx context.Context, tenant domain.TenantID, key string, answer []byte, ttl time.Duration) error
	// Abandon drops a claim whose call took no effect, so that a retry
	// may make it.
	Abandon(ctx context.Context, tenant domain.TenantID, key string) error
}
