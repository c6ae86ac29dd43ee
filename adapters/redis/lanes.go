package redis

import "time"

// The coalescer's lanes: tokens for the round trips in flight, opened
// with demand and closed when idle (see coalescer's doc).

// armSpawn arms, unless one is armed, a check spawnAfter from now: if
// callers are still queued and no lane is free, another lane opens. The
// check re-arms itself while that holds.
func (c *coalescer) armSpawn() {
	if c.opts.spawnAfter <= 0 || c.opts.maxLanes <= c.opts.lanes || !c.spawning.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(c.opts.spawnAfter, func() {
		c.spawning.Store(false)
		if len(c.queue) == 0 || len(c.free) > 0 {
			return
		}
		if n := c.open.Load(); n < int32(c.opts.maxLanes) && c.open.CompareAndSwap(n, n+1) {
			c.kick <- struct{}{} // a new lane, to a flusher; at most maxLanes tokens exist: never blocks
		}
		c.armSpawn()
	})
}

// claim hands a free lane, if there is one, to a flusher.
func (c *coalescer) claim() {
	select {
	case <-c.free:
		c.kick <- struct{}{} // at most lanes tokens exist: never blocks
	default:
	}
}

// release gives back a lane, then hands one to a flusher if callers are
// queued: whoever frees a lane looks at the queue after, so a queued
// caller is never left without one. A lane beyond the base closes when
// nobody is queued.
func (c *coalescer) release() {
	if len(c.queue) == 0 {
		if n := c.open.Load(); n > int32(c.opts.lanes) && c.open.CompareAndSwap(n, n-1) {
			if len(c.queue) > 0 {
				c.armSpawn() // a caller queued as the lane closed
			}
			return
		}
	}
	c.free <- struct{}{}
	if len(c.queue) > 0 {
		c.claim()
	}
}
