package memory_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// TestCalendarBoundary runs the calendar boundary contract on the memory
// store, under every algorithm (a calendar quota is a fixed window
// whatever it is), with a fake clock: exact to the nanosecond. Redis
// runs the same in adapters/redis against a real server.
func TestCalendarBoundary(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			clk := portstest.NewFakeClock(t0)
			portstest.TestCalendarBoundary(t, portstest.CalendarHarness{
				New: func(t *testing.T) ports.Limiter {
					l := a.new(memory.Options{Now: clk.Now, SweepInterval: -1})
					t.Cleanup(func() { l.Close() })
					return l
				},
				Now:   clk.Now,
				Until: func(at time.Time) { clk.Advance(at.Sub(clk.Now())) },
				Keys:  keys.Layout{Prefix: portstest.KeyPrefix, Algorithm: a.name},
			})
		})
	}
}
