package memory

import (
	"sync"
	"sync/atomic"
	"time"
)

// Sweep intervals. With [Options].SweepInterval zero, a store sweeps as
// often as its shortest window, within these bounds, so that memory
// held by a flood of short-window tenants comes back within a window or
// two, and a store of long windows does not wake needlessly.
const (
	// DefaultSweepInterval is the longest time between two sweeps.
	DefaultSweepInterval = 10 * time.Second
	// MinSweepInterval is the shortest time between two sweeps.
	MinSweepInterval = 100 * time.Millisecond
)

// sweeper runs sweep in one goroutine until close: every fixed interval,
// or every shortest window seen (see [Options].SweepInterval).
type sweeper struct {
	fixed  time.Duration // > 0: the interval; 0: adaptive
	window atomic.Int64  // shortest window seen, in ns; 0 before any
	wake   chan struct{} // a shorter window was seen
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// startSweeper starts the goroutine; a negative interval starts none.
func startSweeper(interval time.Duration, sweep func()) *sweeper {
	s := &sweeper{fixed: interval, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if interval < 0 {
		close(s.done)
		return s
	}
	go s.run(sweep)
	return s
}

// saw records a window of a new key. It is called once per key created,
// not per request.
func (s *sweeper) saw(window time.Duration) {
	for {
		cur := s.window.Load()
		if cur != 0 && cur <= int64(window) {
			return
		}
		if s.window.CompareAndSwap(cur, int64(window)) {
			select {
			case s.wake <- struct{}{}:
			default:
			}
			return
		}
	}
}

// interval returns the time until the next sweep.
func (s *sweeper) interval() time.Duration {
	if s.fixed > 0 {
		return s.fixed
	}
	w := time.Duration(s.window.Load())
	if w == 0 {
		return DefaultSweepInterval
	}
	return min(max(w, MinSweepInterval), DefaultSweepInterval)
}

func (s *sweeper) run(sweep func()) {
	defer close(s.done)
	t := time.NewTimer(s.interval())
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
			t.Reset(s.interval())
		case <-t.C:
			sweep()
			t.Reset(s.interval())
		}
	}
}

// close stops the goroutine and waits for it. It is idempotent.
func (s *sweeper) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
