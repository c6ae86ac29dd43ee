package integration

import (
	"sync"
	"time"
)

// The stall meter: a goroutine that asks to wake every stallTick and
// notes how much later than asked it woke. On a loaded machine (a CPU
// hog, the other parallel tests, the race detector) the process waits
// for a CPU, and every goroutine in it with the meter: a test that bounds
// how long the code under test took adds the stall seen meanwhile to its
// bound, so that the wait the process could not help is not held against
// the code, and on an idle machine the bound stays as tight as written.
// A bound broken by the code itself (a deadline not applied, a retry)
// still fails, unless the process stalled for all of it.
const stallTick = 2 * time.Millisecond

var stallMeter = struct {
	once sync.Once
	mu   sync.Mutex
	late []lateWake // in order of wake
}{}

// lateWake is one wake of the meter later than asked: the process
// stalled during (at-by, at].
type lateWake struct {
	at time.Time
	by time.Duration
}

// startStallMeter starts the meter once per process (TestMain); it runs
// until the process ends.
func startStallMeter() {
	stallMeter.once.Do(func() {
		go func() {
			for {
				asked := time.Now().Add(stallTick)
				time.Sleep(stallTick)
				now := time.Now()
				// Timers are coarse: a millisecond late is not a stall.
				if by := now.Sub(asked); by > time.Millisecond {
					stallMeter.mu.Lock()
					stallMeter.late = append(stallMeter.late, lateWake{now, by})
					stallMeter.mu.Unlock()
				}
			}
		}()
	})
}

// stallWithin returns how long the process stalled between start and end:
// the parts of the meter's late wakes that fall within them.
func stallWithin(start, end time.Time) time.Duration {
	sum, _ := stalls(start, end)
	return sum
}

// stalls returns how long the process stalled between start and end, in
// all and at most at once.
func stalls(start, end time.Time) (sum, longest time.Duration) {
	stallMeter.mu.Lock()
	defer stallMeter.mu.Unlock()
	for i := len(stallMeter.late) - 1; i >= 0; i-- {
		w := stallMeter.late[i]
		from := w.at.Add(-w.by)
		if !w.at.After(start) {
			break
		}
		lo, hi := from, w.at
		if lo.Before(start) {
			lo = start
		}
		if hi.After(end) {
			hi = end
		}
		if hi.After(lo) {
			sum += hi.Sub(lo)
			longest = max(longest, hi.Sub(lo))
		}
	}
	return sum, longest
}
