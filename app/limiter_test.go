package app_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// fixedWindowHarness runs FixedWindowLimiter over a memory Counter on a
// fake clock. The limiter lives in app, so its memory conformance runs
// here; the Redis one runs in integration/.
func fixedWindowHarness() portstest.LimiterHarness {
	clk := portstest.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	return portstest.LimiterHarness{
		New: func(t *testing.T) ports.Limiter {
			c := memory.NewCounter(memory.Options{Now: clk.Now, SweepInterval: -1})
			t.Cleanup(func() { c.Close() })
			return app.FixedWindowLimiter{Counter: c}
		},
		Clock:  clk,
		Window: time.Minute,
	}
}

func TestFixedWindowLimiterContract(t *testing.T) {
	t.Parallel()
	portstest.TestLimiter(t, fixedWindowHarness())
}

// TestFixedWindowBoundaryBurst pins the fixed window's weakness that the
// other algorithms exist for: about twice the limit across an edge.
func TestFixedWindowBoundaryBurst(t *testing.T) {
	t.Parallel()
	const limit = 10
	got := portstest.BoundaryBurst(t, fixedWindowHarness(), limit)
	t.Logf("fixed_window: %d admitted across the edge, limit %d", got, limit)
	if want := int64(2*limit - 1); got != want {
		t.Errorf("BoundaryBurst = %d, want %d", got, want)
	}
}
