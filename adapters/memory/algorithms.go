package memory

import (
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var (
	_ ports.Limiter = (*FixedWindow)(nil)
	_ ports.Limiter = (*SlidingLog)(nil)
	_ ports.Limiter = (*SlidingWindow)(nil)
	_ ports.Limiter = (*TokenBucket)(nil)
)

// FixedWindow is the in-memory fixed-window [ports.Limiter]
// ([domain.FixedWindowCount]) for requests of several limits or a cost:
// it decides every limit before it counts, so a denied request counts
// nowhere. The seed's single limit runs on the lock-free [Counter]
// instead, which counts first.
//
// FixedWindow is safe for concurrent use by multiple goroutines; a key's
// decisions are serialized by its own mutex. Len counts the keys held;
// Close stops the sweeper, which drops keys whose window has ended.
type FixedWindow struct {
	*limiter[domain.FixedWindowCount, *domain.FixedWindowCount]
}

// NewFixedWindow returns a FixedWindow and starts its sweeper.
func NewFixedWindow(opts Options) *FixedWindow {
	return &FixedWindow{newLimiter[domain.FixedWindowCount](opts)}
}

// SlidingLog is the in-memory sliding-log [ports.Limiter]
// ([domain.SlidingLog]): exact, at most limit admitted instants
// (8 bytes each) per key, in a ring buffer.
//
// SlidingLog is safe for concurrent use by multiple goroutines; a key's
// decisions are serialized by its own mutex. Allow does not allocate for
// a key it holds (except to grow the ring). Len counts the keys held;
// Close stops the sweeper, which drops keys whose log has emptied.
type SlidingLog struct {
	*limiter[domain.SlidingLog, *domain.SlidingLog]
}

// NewSlidingLog returns a SlidingLog and starts its sweeper.
func NewSlidingLog(opts Options) *SlidingLog {
	return &SlidingLog{newLimiter[domain.SlidingLog](opts)}
}

// SlidingWindow is the in-memory sliding-window [ports.Limiter]
// ([domain.SlidingWindow]): two counts per key, windows aligned to the
// Unix epoch.
//
// SlidingWindow is safe for concurrent use by multiple goroutines. Len
// counts the keys held; Close stops the sweeper, which drops keys idle
// for two windows.
type SlidingWindow struct {
	*limiter[domain.SlidingWindow, *domain.SlidingWindow]
}

// NewSlidingWindow returns a SlidingWindow and starts its sweeper.
func NewSlidingWindow(opts Options) *SlidingWindow {
	return &SlidingWindow{newLimiter[domain.SlidingWindow](opts)}
}

// TokenBucket is the in-memory token-bucket [ports.Limiter]
// ([domain.TokenBucket], GCRA): one instant per key.
//
// TokenBucket is safe for concurrent use by multiple goroutines. Len
// counts the keys held; Close stops the sweeper, which drops keys whose
// bucket is full again.
type TokenBucket struct {
	*limiter[domain.TokenBucket, *domain.TokenBucket]
}

// NewTokenBucket returns a TokenBucket and starts its sweeper.
func NewTokenBucket(opts Options) *TokenBucket {
	return &TokenBucket{newLimiter[domain.TokenBucket](opts)}
}
