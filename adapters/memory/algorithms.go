package memory

import (
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var (
	_ ports.Limiter = (*SlidingLog)(nil)
	_ ports.Limiter = (*SlidingWindow)(nil)
	_ ports.Limiter = (*TokenBucket)(nil)
)

// SlidingLog is the in-memory sliding-log [ports.Limiter]
// ([domain.SlidingLog]): exact, at most limit admitted instants
// (8 bytes each) per tenant, in a ring buffer.
//
// SlidingLog is safe for concurrent use by multiple goroutines; one
// tenant's decisions are serialized by its own mutex. Allow never fails
// and does not allocate for a tenant it holds (except to grow the ring).
// Len counts the tenants held; Close stops the sweeper, which drops
// tenants whose log has emptied.
type SlidingLog struct {
	*limiter[domain.SlidingLog, *domain.SlidingLog]
}

// NewSlidingLog returns a SlidingLog and starts its sweeper.
func NewSlidingLog(opts Options) *SlidingLog {
	return &SlidingLog{newLimiter[domain.SlidingLog](opts)}
}

// SlidingWindow is the in-memory sliding-window [ports.Limiter]
// ([domain.SlidingWindow]): two counts per tenant, windows aligned to the
// Unix epoch.
//
// SlidingWindow is safe for concurrent use by multiple goroutines. Allow
// never fails and does not allocate for a tenant it holds. Len counts the
// tenants held; Close stops the sweeper, which drops tenants idle for two
// windows.
type SlidingWindow struct {
	*limiter[domain.SlidingWindow, *domain.SlidingWindow]
}

// NewSlidingWindow returns a SlidingWindow and starts its sweeper.
func NewSlidingWindow(opts Options) *SlidingWindow {
	return &SlidingWindow{newLimiter[domain.SlidingWindow](opts)}
}

// TokenBucket is the in-memory token-bucket [ports.Limiter]
// ([domain.TokenBucket], GCRA): one instant per tenant.
//
// TokenBucket is safe for concurrent use by multiple goroutines. Allow
// never fails and does not allocate for a tenant it holds. Len counts the
// tenants held; Close stops the sweeper, which drops tenants whose bucket
// is full again.
type TokenBucket struct {
	*limiter[domain.TokenBucket, *domain.TokenBucket]
}

// NewTokenBucket returns a TokenBucket and starts its sweeper.
func NewTokenBucket(opts Options) *TokenBucket {
	return &TokenBucket{newLimiter[domain.TokenBucket](opts)}
}
