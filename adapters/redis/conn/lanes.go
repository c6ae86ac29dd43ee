package conn

import "time"

// The coalescer's lanes: tokens for the round trips in flight, opened
// with demand and closed when idle (see coalescer's doc).

// armSpawn arms, unless one is armed, a check spawnAfter from now: if
// callers are still queued, no lane is free, and Redis is far (the floor
// of recent round trips is spawnAfter at least: the wait is the
// network's), another lane opens. The check re-arms itself while that
// holds. On loopback the floor is shorter: a wait there is the CPU's,
// which more round trips in flight would only share out in smaller
// batches.
func (c *coalescer) armSpawn() {
	if c.opts.spawnAfter <= 0 || c.opts.maxLanes <= c.opts.lanes || !c.spawning.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(c.opts.spawnAfter, func() {
		c.spawning.Store(false)
		if len(c.queue) == 0 || len(c.free) > 0 || c.rttFloor.Load() < int64(c.opts.spawnAfter) {
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

// rttWindow is how long the floor of round trips looks back: a floor
// rises only when a whole window's round trips were all longer.
const rttWindow = 5 * time.Second

// observeRTT records a round trip that carried little (a PING, a batch of
// one or two): what the network and an idle Redis take. A faster one
// lowers the floor at once; the floor rises to a window's fastest when
// that window ends.
func (c *coalescer) observeRTT(rtt time.Duration) {
	d := int64(max(rtt, 1))
	w := c.nanos() / int64(rttWindow)
	if old := c.rttWin.Load(); w != old && c.rttWin.CompareAndSwap(old, w) {
		if m := c.rttMin.Swap(0); m > 0 {
			c.rttFloor.Store(m)
		}
	}
	for {
		m := c.rttMin.Load()
		if (m != 0 && m <= d) || c.rttMin.CompareAndSwap(m, d) {
			break
		}
	}
	for {
		f := c.rttFloor.Load()
		if (f != 0 && f <= d) || c.rttFloor.CompareAndSwap(f, d) {
			break
		}
	}
}
