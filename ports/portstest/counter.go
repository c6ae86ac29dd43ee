// Package portstest holds the conformance tests every implementation of a
// ports interface must pass, as testing/fstest does for fs.FS. The memory
// adapter runs them in its unit tests; the redis adapter runs them against
// a real server in integration/.
package portstest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/ports"
)

// Clock moves a store's notion of time forward. A fake clock steps; a real
// store sleeps.
type Clock interface {
	Advance(d time.Duration)
}

// Sleeper is the [Clock] of a store on real time.
type Sleeper struct{}

// Advance sleeps for d.
func (Sleeper) Advance(d time.Duration) { time.Sleep(d) }

// CounterHarness is what TestCounter needs to exercise one implementation.
type CounterHarness struct {
	// New returns the Counter under test. It may be called once per
	// subtest; the counter must start empty of the keys TestCounter uses
	// (they are unique per run).
	New func(t *testing.T) ports.Counter
	// Clock moves the counter's time.
	Clock Clock
	// Window is the window the tests use. A fake clock can take seconds;
	// a real store needs a short one, as the tests wait it out.
	Window time.Duration
	// Slack is how much a real store's reported time may run ahead of the
	// harness's clock (a round trip, TTL granularity). Zero for fakes.
	Slack time.Duration
}

var runID atomic.Int64 // makes test keys and tenants unique

// uniqueKey returns a key no other test of this process has used, and
// that another process running the same tests is unlikely to use.
func uniqueKey(t *testing.T, name string) string {
	return fmt.Sprintf("portstest:%d:%d:%s:%s", time.Now().UnixNano(), runID.Add(1),
		strings.ReplaceAll(t.Name(), "/", "."), name)
}

// TestCounter runs the [ports.Counter] contract against h.
func TestCounter(t *testing.T, h CounterHarness) {
	t.Helper()
	w := h.Window

	t.Run("counts from one and reports the window", func(t *testing.T) {
		c := h.New(t)
		key := uniqueKey(t, "a")
		for i := int64(1); i <= 5; i++ {
			got, left, err := c.Incr(t.Context(), key, w)
			if err != nil {
				t.Fatalf("Incr %d: %v", i, err)
			}
			if got != i {
				t.Errorf("Incr %d: count = %d, want %d", i, got, i)
			}
			if left <= 0 || left > w {
				t.Errorf("Incr %d: left = %v, want in (0, %v]", i, left, w)
			}
		}
	})

	t.Run("keys are independent", func(t *testing.T) {
		c := h.New(t)
		a, b := uniqueKey(t, "a"), uniqueKey(t, "b")
		for range 3 {
			mustIncr(t, c, a, w)
		}
		if got := mustIncr(t, c, b, w); got != 1 {
			t.Errorf("first Incr of b after three of a: count = %d, want 1", got)
		}
	})

	t.Run("first increment starts the clock; later ones never extend it", func(t *testing.T) {
		c := h.New(t)
		key := uniqueKey(t, "a")
		mustIncr(t, c, key, w)
		h.Clock.Advance(w / 2)
		// A longer window passed later must not move the expiry.
		_, left, err := c.Incr(t.Context(), key, 10*w)
		if err != nil {
			t.Fatal(err)
		}
		if max := w/2 + h.Slack; left > max {
			t.Errorf("left after half a window = %v, want <= %v", left, max)
		}
		h.Clock.Advance(w/2 + h.Slack + w/10)
		if got := mustIncr(t, c, key, w); got != 1 {
			t.Errorf("Incr after the window ended: count = %d, want 1 (a new window)", got)
		}
	})

	t.Run("a window ends and a new one starts at one", func(t *testing.T) {
		c := h.New(t)
		key := uniqueKey(t, "a")
		for range 4 {
			mustIncr(t, c, key, w)
		}
		h.Clock.Advance(w + h.Slack + w/10)
		got, left, err := c.Incr(t.Context(), key, w)
		if err != nil {
			t.Fatal(err)
		}
		if got != 1 {
			t.Errorf("count in the next window = %d, want 1", got)
		}
		if left <= w-h.Slack-w/10 || left > w {
			t.Errorf("left in the next window = %v, want about %v", left, w)
		}
	})

	t.Run("concurrent increments are exact", func(t *testing.T) {
		c := h.New(t)
		key := uniqueKey(t, "a")
		const goroutines, each = 16, 25
		seen := make([]atomic.Bool, goroutines*each+1)
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				for range each {
					n, _, err := c.Incr(t.Context(), key, time.Hour)
					if err != nil {
						t.Error(err)
						return
					}
					if n < 1 || n > goroutines*each || seen[n].Swap(true) {
						t.Errorf("count %d returned twice or out of range", n)
					}
				}
			})
		}
		wg.Wait()
		if got, want := mustIncr(t, c, key, time.Hour), int64(goroutines*each+1); got != want {
			t.Errorf("count after %d concurrent increments = %d, want %d", goroutines*each, got, want)
		}
	})
}

func mustIncr(t *testing.T, c ports.Counter, key string, w time.Duration) int64 {
	t.Helper()
	n, _, err := c.Incr(t.Context(), key, w)
	if err != nil {
		t.Fatalf("Incr(%q): %v", key, err)
	}
	return n
}
