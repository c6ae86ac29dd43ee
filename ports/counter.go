package ports

import (
	"context"
	"time"
)

// Counter counts requests per key in a fixed window that starts with the
// key's first increment. It is the seam between the fixed-window policy and
// a store.
//
// Incr adds one to key's count and returns the count after the increment
// and the time left in key's current window:
//   - a key that does not exist (or whose window has ended) starts a new
//     window: the count is 1 and left is window;
//   - the first increment of a window sets its expiry; later increments
//     never extend it, even when they pass a different window;
//   - every key the Counter writes expires: none counts forever.
//
// An error means the store failed, never "over the limit"; the returned
// count and time are then meaningless. Implementations are safe for
// concurrent use by multiple goroutines.
type Counter interface {
	Incr(ctx context.Context, key string, window time.Duration) (count int64, left time.Duration, err error)
}

// CounterFunc adapts a function to a [Counter]: a fake for tests, or a
// decorator.
type CounterFunc func(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error)

// Incr calls f(ctx, key, window).
func (f CounterFunc) Incr(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	return f(ctx, key, window)
}
