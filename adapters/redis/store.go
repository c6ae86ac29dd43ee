package redis

import (
	"context"
	"time"
)

// Options configure a Redis store. The zero value is usable.
type Options struct {
	// Timeout is the deadline for the store work of one decision, on top
	// of the caller's context. Zero means the context's deadline only.
	Timeout time.Duration
}

// withTimeout returns ctx bounded by o.Timeout. Every call into Redis
// goes through it, so a stalled Redis costs a request at most Timeout.
func (o Options) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if o.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, o.Timeout)
}
