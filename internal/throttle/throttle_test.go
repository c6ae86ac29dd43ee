package throttle_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/internal/throttle"
)

// TestLog: from many goroutines, lines stamped at the end of a slow write
// are at least Interval apart, and together they stand for every event.
// (In a synctest bubble: its clock, not the machine's load, sets the
// gaps.)
func TestLog(t *testing.T) {
	t.Parallel()
	synctest.Test(t, testLog)
}

func testLog(t *testing.T) {
	l := &throttle.Log{Interval: 30 * time.Millisecond}
	var (
		mu     sync.Mutex
		stamps []time.Time
		total  int64
		wg     sync.WaitGroup
	)
	const events = 4000
	for range 8 {
		wg.Go(func() {
			for range events / 8 {
				l.Do(func(n int64) {
					time.Sleep(2 * time.Millisecond) // a slow handler: the stamp comes late
					mu.Lock()
					stamps = append(stamps, time.Now())
					total += n
					mu.Unlock()
				})
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * l.Interval)
	l.Do(func(n int64) { total += n }) // the last line, for the events suppressed since the one before
	for i := 1; i < len(stamps); i++ {
		if d := stamps[i].Sub(stamps[i-1]); d < l.Interval {
			t.Errorf("lines %d and %d stamped %v apart, want >= %v", i-1, i, d, l.Interval)
		}
	}
	if len(stamps) < 2 || total != events+1 {
		t.Errorf("%d lines standing for %d events, want %d", len(stamps)+1, total, events+1)
	}
}
