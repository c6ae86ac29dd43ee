package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/ports"
)

var _ ports.Counter = (*Counter)(nil)

// Counter is the seed's fixed-window [ports.Counter] on Redis: the count
// of a key lives under the key, and the key's TTL is the window's clock,
// so every replica shares one budget and Redis's clock, not a replica's,
// ends the window. One increment is one run of scripts/counter.lua:
// INCR, PTTL and, for a key without a TTL (a new window, or one written
// by something else), PEXPIRE, atomically.
//
// A script, not the INCR + PEXPIRE NX + PTTL pipeline in MULTI/EXEC that
// Redis ≥ 7 allows: measured on one Redis 7.0.15 over loopback, 64
// goroutines over 1000 keys, the script took 29 µs per increment and
// the pipeline 38 µs (medians of 4), with 21 allocations against 37;
// serially both took one round trip. The script also works on every
// Redis version, so no version detection is needed.
//
// Counter is safe for concurrent use by multiple goroutines. It does not
// own the client.
type Counter struct {
	s script
}

// NewCounter returns a Counter on c. It does no I/O.
func NewCounter(c *Client, opts Options) *Counter {
	return &Counter{newScript(c, "counter.lua", "incr", opts)}
}

// Incr implements [ports.Counter] with one round trip to Redis, bounded by
// opts.Timeout.
func (c *Counter) Incr(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	r, err := c.s.run(ctx, []string{key}, 2, windowMillis(window))
	if err != nil {
		return 0, 0, err
	}
	return r[0], leftOf(r[1], window), nil
}

// leftOf returns the time left in a window from its key's PTTL in ms. A
// key outlives its PTTL by up to a millisecond (Redis expires it once
// its clock in ms is past the expiry), so a client told PTTL could come
// back a millisecond early: one is added, within the window.
func leftOf(pttl int64, window time.Duration) time.Duration {
	return min(time.Duration(max(pttl, 0)+1)*time.Millisecond, window)
}

// windowMillis returns window in whole milliseconds, rounded up, at least 1.
func windowMillis(window time.Duration) int64 {
	return max(int64((window+time.Millisecond-1)/time.Millisecond), 1)
}

// errReply is a script reply of the wrong shape.
func errReply(got, want int) error {
	return fmt.Errorf("script returned %d values, want %d", got, want)
}
