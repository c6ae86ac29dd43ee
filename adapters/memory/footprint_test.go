package memory_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
)

// footprintKeys is how many keys the footprint is measured over: enough
// that the map's growth averages out.
const footprintKeys = 200_000

// heapPerKey fills a store of algorithm a with n keys of one request
// each and returns the heap it holds per key (key strings included),
// measured after a GC on each side.
func heapPerKey(t testing.TB, a algorithm, n int) float64 {
	l := a.new(memory.Options{SweepInterval: -1})
	defer l.Close()
	rule := domain.Rule{Limit: 100, Window: time.Minute}
	req := one("", rule)
	dst := make([]domain.Decision, 0, 1)
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		req.Limits[0].Key = "rl:{tenant-" + strconv.Itoa(1_000_000+i) + "}"
		if _, err := l.Allow(ctx, req, dst); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if l.Len() != n {
		t.Fatalf("%s: Len = %d, want %d", a.name, l.Len(), n)
	}
	runtime.KeepAlive(l)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// TestFootprint pins the heap a key costs, per algorithm, with a key of
// 19 bytes (its bytes included): docs/tenants.md and DefaultMaxKeys
// quote these figures, and the bound's memory is DefaultMaxKeys of them.
// A sliding log holds one entry.
func TestFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 200000 keys per algorithm")
	}
	most := map[string]float64{
		domain.AlgorithmFixedWindow:   210,
		domain.AlgorithmSlidingLog:    300,
		domain.AlgorithmSlidingWindow: 210,
		domain.AlgorithmTokenBucket:   190,
	}
	for _, a := range algorithms {
		got := heapPerKey(t, a, footprintKeys)
		t.Logf("%s: %.0f B of heap per key", a.name, got)
		if w, ok := most[a.name]; !ok {
			t.Errorf("%s: no expected footprint: add one", a.name)
		} else if got > w {
			t.Errorf("%s: %.0f B of heap per key, want at most %.0f", a.name, got, w)
		}
	}
}
