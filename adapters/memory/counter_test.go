package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestCounterContract(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	portstest.TestCounter(t, portstest.CounterHarness{
		New: func(t *testing.T) ports.Counter {
			c := memory.NewCounter(memory.Options{Now: clk.Now, SweepInterval: -1})
			t.Cleanup(func() { c.Close() })
			return c
		},
		Clock:  clk,
		Window: time.Minute,
	})
}

func TestCounterReportsTimeLeft(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	c := memory.NewCounter(memory.Options{Now: clk.Now, SweepInterval: -1})
	defer c.Close()
	steps := []struct {
		advance   time.Duration
		wantCount int64
		wantLeft  time.Duration
	}{
		{0, 1, time.Minute},
		{20 * time.Second, 2, 40 * time.Second},
		{39 * time.Second, 3, time.Second},
		{time.Second, 1, time.Minute}, // exactly at the end: a new window
		{59*time.Second + 999*time.Millisecond, 2, time.Millisecond},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		count, left, err := c.Incr(t.Context(), "rl:acme", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if count != s.wantCount || left != s.wantLeft {
			t.Errorf("step %d: Incr at t0+%v = (%d, %v), want (%d, %v)",
				i, clk.Now().Sub(t0), count, left, s.wantCount, s.wantLeft)
		}
	}
}

// TestCounterSweepsExpiredKeys floods the counter with distinct keys and
// checks that the sweeper returns the memory once their windows end.
func TestCounterSweepsExpiredKeys(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := memory.NewCounter(memory.Options{SweepInterval: time.Second})
		defer c.Close()
		for i := range 10_000 {
			if _, _, err := c.Incr(t.Context(), "rl:flood-"+strconv.Itoa(i), 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := c.Incr(t.Context(), "rl:long", time.Hour); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Len(), 10_001; got != want {
			t.Fatalf("Len after flood = %d, want %d", got, want)
		}
		time.Sleep(3 * time.Second)
		if got, want := c.Len(), 10_001; got != want {
			t.Errorf("Len before the windows end = %d, want %d", got, want)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got, want := c.Len(), 1; got != want {
			t.Errorf("Len after the windows ended and a sweep = %d, want %d", got, want)
		}
		// A swept key starts a new window.
		if n, _, _ := c.Incr(t.Context(), "rl:flood-7", 5*time.Second); n != 1 {
			t.Errorf("Incr of a swept key = %d, want 1", n)
		}
	})
}

// TestCounterSweepRacesIncr sweeps while increments run, and checks no
// increment is lost: each key has one writer, so every count it gets is
// the previous one plus one, or 1 once the previous window has ended. An
// increment that landed in a swept entry would show as a window starting
// over early.
func TestCounterSweepRacesIncr(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	c := memory.NewCounter(memory.Options{Now: clk.Now, SweepInterval: time.Microsecond})
	defer c.Close()
	const keys, rounds, window = 8, 2000, 3 * time.Millisecond
	var increments, resets atomic.Int64
	done := make(chan struct{})
	for k := range keys {
		go func() {
			defer func() { done <- struct{}{} }()
			var prev int64
			var earliestEnd time.Time // of the current window
			for range rounds {
				before := clk.Now()
				n, _, err := c.Incr(context.Background(), "k"+strconv.Itoa(k), window)
				after := clk.Now()
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case n == prev+1:
				case n == 1 && !after.Before(earliestEnd):
					resets.Add(1)
				default:
					t.Errorf("key %d: count %d after %d, window ending no sooner than t0+%v, now t0+%v: an increment was lost",
						k, n, prev, earliestEnd.Sub(t0), after.Sub(t0))
					return
				}
				if n == 1 {
					earliestEnd = before.Add(window)
				}
				prev = n
				increments.Add(1)
				runtime.Gosched()
			}
		}()
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		}
	}()
	for range keys {
		<-done
	}
	close(stop)
	if got := increments.Load(); got != keys*rounds {
		t.Fatalf("increments checked = %d, want %d", got, keys*rounds)
	}
	if resets.Load() == 0 {
		t.Fatal("no window ended during the run: the sweeper raced nothing")
	}
	// Counting is exact within a window that does not end.
	for range 10 {
		c.Incr(t.Context(), "stable", time.Hour)
	}
	if n, _, _ := c.Incr(t.Context(), "stable", time.Hour); n != 11 {
		t.Errorf("count of a live key under sweeping = %d, want 11", n)
	}
}

func TestCounterCloseIsIdempotent(t *testing.T) {
	t.Parallel()
	c := memory.NewCounter(memory.Options{})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func ExampleCounter() {
	c := memory.NewCounter(memory.Options{})
	defer c.Close()
	for range 3 {
		n, left, _ := c.Incr(context.Background(), "rl:acme", time.Minute)
		fmt.Println(n, left <= time.Minute)
	}
	// Output:
	// 1 true
	// 2 true
	// 3 true
}

// TestSweepFollowsTheWindow: a flood of distinct tenants on a 2 s window
// is swept within a few windows (not the 10 s default interval), and the
// heap it took comes back.
func TestSweepFollowsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := memory.NewCounter(memory.Options{})
		defer c.Close()
		heap := func() uint64 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return ms.HeapInuse
		}
		before := heap()
		const tenants = 200_000
		for i := range tenants {
			c.Incr(t.Context(), "rl:{flood-"+strconv.Itoa(i)+"}", 2*time.Second)
		}
		flooded := heap()
		if c.Len() != tenants {
			t.Fatalf("Len after flood = %d, want %d", c.Len(), tenants)
		}
		time.Sleep(3 * 2 * time.Second) // three windows
		synctest.Wait()
		if got := c.Len(); got != 0 {
			t.Errorf("Len three windows after the flood = %d, want 0", got)
		}
		after := heap()
		t.Logf("heap in use: %d MB before, %d MB flooded, %d MB three windows on", before>>20, flooded>>20, after>>20)
		if grown := flooded - before; after > before+grown/4 {
			t.Errorf("heap in use %d B three windows on, want it back near %d B (flood took %d B)", after, before, grown)
		}
	})
}
