package memory

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestCoarseClockLagsByAtMostATick(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClock(nil)
		cc := startCoarseClock(c)
		defer cc.close()
		for range 50 {
			time.Sleep(coarseTick / 3)
			synctest.Wait()
			exact, cached := c.nanos(), cc.nanos(c, time.Minute)
			if lag := time.Duration(exact - cached); lag < 0 || lag > coarseTick {
				t.Fatalf("cached clock lags %v, want within [0, %v]", lag, coarseTick)
			}
		}
	})
}

func TestCoarseClockShortWindowsReadTheClock(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClock(nil)
		cc := startCoarseClock(c)
		defer cc.close()
		time.Sleep(coarseTick / 2)
		if got, want := cc.nanos(c, coarseMinWindow-1), c.nanos(); got != want {
			t.Errorf("nanos for a short window = %d, want the exact %d", got, want)
		}
	})
}

func TestCoarseClockParksWhenIdleAndWakes(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newClock(nil)
		cc := startCoarseClock(c)
		defer cc.close()
		time.Sleep(2 * coarseIdleTicks * coarseTick)
		synctest.Wait()
		if !cc.parked.Load() {
			t.Fatal("clock did not park after idling")
		}
		// A parked clock reads exactly and wakes the goroutine.
		time.Sleep(time.Hour)
		if got, want := cc.nanos(c, time.Minute), c.nanos(); got != want {
			t.Errorf("parked nanos = %d, want the exact %d", got, want)
		}
		synctest.Wait()
		if cc.parked.Load() {
			t.Fatal("clock still parked after a read")
		}
		time.Sleep(coarseTick)
		synctest.Wait()
		if lag := time.Duration(c.nanos() - cc.nanos(c, time.Minute)); lag > coarseTick {
			t.Errorf("lag after waking = %v, want <= %v", lag, coarseTick)
		}
	})
}

func TestCoarseClockNilForInjectedClock(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newClock(func() time.Time { return now })
	if cc := startCoarseClock(c); cc != nil {
		t.Fatal("startCoarseClock over an injected clock != nil")
	}
	var cc *coarseClock
	cc.close() // safe on nil
	if got := cc.nanos(c, time.Hour); got != 0 {
		t.Errorf("nil coarse clock nanos = %d, want the injected clock's 0", got)
	}
}
