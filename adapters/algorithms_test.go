package adapters_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// TestMemoryAlgorithms runs the Limiter contract over every row of the
// table on the memory store, and the seed's counter limiter where a row
// has one. Redis runs the same from the same table in integration/.
func TestMemoryAlgorithms(t *testing.T) {
	t.Parallel()
	for _, a := range adapters.Algorithms {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			portstest.TestLimiter(t, memoryHarness(a.Name, func(o memory.Options) (ports.Limiter, func() error) {
				l := a.Memory(o)
				return l, l.Close
			}, false))
		})
		if a.MemoryCounter == nil {
			continue
		}
		t.Run(a.Name+"/seed", func(t *testing.T) {
			t.Parallel()
			portstest.TestLimiter(t, memoryHarness(a.Name, func(o memory.Options) (ports.Limiter, func() error) {
				c := a.MemoryCounter(o)
				return adapters.SeedLimiter(c), c.Close
			}, true))
		})
	}
}

func memoryHarness(name string, build func(memory.Options) (ports.Limiter, func() error), seed bool) portstest.LimiterHarness {
	clk := portstest.NewFakeClock(t0)
	return portstest.LimiterHarness{
		New: func(t *testing.T) ports.Limiter {
			l, closeFn := build(memory.Options{Now: clk.Now, SweepInterval: -1})
			t.Cleanup(func() { closeFn() })
			return l
		},
		Clock:        clk,
		Window:       time.Minute,
		Algorithm:    name,
		CountsDenied: seed,
	}
}

// TestBoundaryBurst pins what each algorithm admits around a window's
// edge, on the memory store: README quotes these numbers.
func TestBoundaryBurst(t *testing.T) {
	t.Parallel()
	const limit = 10
	want := map[string]int64{"fixed_window": 2*limit - 1, "sliding_log": limit, "sliding_window": limit, "token_bucket": limit + 1}
	for _, a := range adapters.Algorithms {
		w, ok := want[a.Name]
		if !ok {
			t.Errorf("%s: no expected boundary burst: add one", a.Name)
			continue
		}
		got := portstest.BoundaryBurst(t, memoryHarness(a.Name, func(o memory.Options) (ports.Limiter, func() error) {
			l := a.Memory(o)
			return l, l.Close
		}, false), limit)
		if got != w {
			t.Errorf("%s: BoundaryBurst = %d, want %d", a.Name, got, w)
		}
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for _, name := range adapters.Names() {
		if a, ok := adapters.Lookup(name); !ok || a.Name != name || a.Memory == nil || a.Redis == nil {
			t.Errorf("Lookup(%q) = %+v, %v: every row needs both stores", name, a, ok)
		}
	}
	if _, ok := adapters.Lookup("leaky_bucket"); ok {
		t.Error("Lookup of an unknown name succeeded")
	}
}
