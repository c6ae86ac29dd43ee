package memory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/ports"
)

var _ ports.Counter = (*Counter)(nil)

// Counter is the in-memory fixed-window [ports.Counter]. An increment of
// an existing key takes no lock and does not allocate: a lock-free map
// lookup, one clock read and one atomic add.
//
// Counter is safe for concurrent use by multiple goroutines. Close stops
// its sweeper.
type Counter struct {
	clock   clock
	keys    sync.Map // string → *counterEntry
	sweeper *sweeper
}

// counterEntry is one key. Its current window is replaced wholesale
// (compare-and-swap) when it ends, so count and expiry always agree.
type counterEntry struct {
	win atomic.Pointer[fixedWindow]
}

// fixedWindow is one window of one key.
type fixedWindow struct {
	end   int64 // clock nanos at which the window ends
	count atomic.Int64
}

// swept marks an entry the sweeper has removed from the map. An Incr that
// finds it retries on a fresh entry, so no increment lands in a removed
// entry and is lost.
var swept = new(fixedWindow)

// NewCounter returns a Counter and starts its sweeper.
func NewCounter(opts Options) *Counter {
	c := &Counter{clock: newClock(opts.Now)}
	c.sweeper = startSweeper(opts.SweepInterval, c.sweep)
	return c
}

// Incr implements [ports.Counter]. It never fails.
func (c *Counter) Incr(_ context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	now := c.clock.nanos()
	for {
		v, ok := c.keys.Load(key)
		if !ok {
			c.sweeper.saw(window)
			e := &counterEntry{}
			e.win.Store(newFixedWindow(now, window))
			if v, ok = c.keys.LoadOrStore(key, e); !ok {
				return 1, window, nil
			}
		}
		e := v.(*counterEntry)
		w := e.win.Load()
		switch {
		case w == swept:
			c.keys.CompareAndDelete(key, e)
		case now < w.end:
			// A request whose clock read falls in this window counts in
			// it, even if a concurrent one has just rolled the window.
			return w.count.Add(1), time.Duration(w.end - now), nil
		case e.win.CompareAndSwap(w, newFixedWindow(now, window)):
			return 1, window, nil
		}
	}
}

func newFixedWindow(now int64, window time.Duration) *fixedWindow {
	w := &fixedWindow{end: now + int64(window)}
	w.count.Store(1)
	return w
}

// Len returns the number of keys held, expired ones not yet swept
// included.
func (c *Counter) Len() int {
	n := 0
	c.keys.Range(func(_, _ any) bool { n++; return true })
	return n
}

// sweep drops every key whose window has ended.
func (c *Counter) sweep() {
	now := c.clock.nanos()
	c.keys.Range(func(k, v any) bool {
		e := v.(*counterEntry)
		if w := e.win.Load(); w != swept && w.end <= now && e.win.CompareAndSwap(w, swept) {
			c.keys.CompareAndDelete(k, e)
		}
		return true
	})
}

// Close stops the sweeper. It is idempotent and always returns nil.
func (c *Counter) Close() error {
	c.sweeper.close()
	return nil
}
