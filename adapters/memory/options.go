package memory

import (
	"sync"
	"time"
)

// DefaultSweepInterval is how often a store drops expired keys when
// [Options].SweepInterval is zero.
const DefaultSweepInterval = 10 * time.Second

// Options configure a memory store. The zero value is ready to use.
type Options struct {
	// Now returns the current time. If nil, the process's monotonic clock
	// is used. Tests inject a fake clock here.
	Now func() time.Time
	// SweepInterval is how often expired keys are dropped. If zero,
	// DefaultSweepInterval is used; if negative, no sweeper runs and
	// expired keys are dropped only when touched again (for tests).
	SweepInterval time.Duration
}

// clock reads time as nanoseconds since its origin. The default reads only
// the monotonic clock, which is about twice as cheap as time.Now.
type clock struct {
	origin time.Time
	now    func() time.Time // nil: time.Since(origin)
}

func newClock(now func() time.Time) clock {
	if now == nil {
		return clock{origin: time.Now()}
	}
	return clock{origin: now(), now: now}
}

// read returns the current time, and the same instant as nanoseconds
// since c's origin. The default keeps the monotonic reading, so wall-clock
// steps never move a window.
func (c clock) read() (time.Time, int64) {
	if c.now == nil {
		d := time.Since(c.origin)
		return c.origin.Add(d), int64(d)
	}
	t := c.now()
	return t, int64(t.Sub(c.origin))
}

// nanos returns the time since c's origin, in nanoseconds.
func (c clock) nanos() int64 {
	if c.now == nil {
		return int64(time.Since(c.origin))
	}
	return int64(c.now().Sub(c.origin))
}

// sweeper runs sweep every interval in one goroutine until close.
type sweeper struct {
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startSweeper starts the goroutine; a negative interval starts none.
func startSweeper(interval time.Duration, sweep func()) *sweeper {
	s := &sweeper{stop: make(chan struct{}), done: make(chan struct{})}
	if interval == 0 {
		interval = DefaultSweepInterval
	}
	if interval < 0 {
		close(s.done)
		return s
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				sweep()
			}
		}
	}()
	return s
}

// close stops the goroutine and waits for it. It is idempotent.
func (s *sweeper) close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}
