package memory

import (
	"sync"
	"sync/atomic"
	"time"
)

// Coarse-clock parameters. Reading the monotonic clock costs about 20 ns
// on the machines we measure, a third of a fixed-window decision; a
// cached reading costs one atomic load. The cache lags the clock by at
// most about one coarseTick (more if the process is starved of CPU), so
// it is used only for windows of at least coarseMinWindow, where that lag
// is at most 0.1% of the window.
const (
	coarseTick      = time.Millisecond
	coarseMinWindow = time.Second
	// coarseIdleTicks is how many ticks without a reader park the
	// goroutine, so an idle gateway does not wake a thousand times a
	// second.
	coarseIdleTicks = 1000
)

// coarseClock caches a clock's nanos, refreshed every coarseTick by one
// goroutine while it is being read. A nil *coarseClock (an injected test
// clock) always reads the clock itself.
type coarseClock struct {
	clock  clock
	cached atomic.Int64 // clock.nanos() as of the last tick
	parked atomic.Bool  // the goroutine sleeps; readers read the clock
	used   atomic.Bool  // read since the last tick
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// startCoarseClock starts the refreshing goroutine over c's default
// (monotonic) clock. For an injected clock it returns nil: tests read
// their clock exactly.
func startCoarseClock(c clock) *coarseClock {
	if c.now != nil {
		return nil
	}
	cc := &coarseClock{clock: c, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	cc.cached.Store(c.nanos())
	go cc.run()
	return cc
}

// nanos returns the time in clock nanos for a decision over window: the
// cached reading for long windows while the goroutine runs, an exact one
// otherwise.
func (cc *coarseClock) nanos(c clock, window time.Duration) int64 {
	if cc == nil || window < coarseMinWindow {
		return c.nanos()
	}
	if cc.parked.Load() {
		select {
		case cc.wake <- struct{}{}:
		default:
		}
		return c.nanos()
	}
	if !cc.used.Load() { // a write only once per tick, not per call
		cc.used.Store(true)
	}
	return cc.cached.Load()
}

func (cc *coarseClock) run() {
	defer close(cc.done)
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	idle := 0
	for {
		select {
		case <-cc.stop:
			return
		case <-t.C:
		}
		cc.cached.Store(cc.clock.nanos())
		if cc.used.Swap(false) {
			idle = 0
			continue
		}
		if idle++; idle < coarseIdleTicks {
			continue
		}
		// Park: readers see parked and read the clock themselves until
		// one of them wakes us.
		cc.parked.Store(true)
		t.Stop()
		select {
		case <-cc.stop:
			return
		case <-cc.wake:
		}
		cc.cached.Store(cc.clock.nanos())
		cc.parked.Store(false)
		t.Reset(coarseTick)
		idle = 0
	}
}

// close stops the goroutine and waits for it. It is idempotent and safe
// on nil.
func (cc *coarseClock) close() {
	if cc == nil {
		return
	}
	cc.once.Do(func() { close(cc.stop) })
	<-cc.done
}
