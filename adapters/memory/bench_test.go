package memory_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
)

var benchKeys = func() []string {
	k := make([]string, 1000)
	for i := range k {
		k[i] = "rl:tenant-" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkCounterIncr: serial on one hot key, and 64 goroutines over
// 1000 tenants, for a long window (cached clock) and a short one (exact).
func BenchmarkCounterIncr(b *testing.B) {
	for _, window := range []time.Duration{time.Minute, 100 * time.Millisecond} {
		b.Run("serial/window="+window.String(), func(b *testing.B) {
			c := memory.NewCounter(memory.Options{})
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.Incr(ctx, "rl:hot", window)
			}
		})
		b.Run("parallel/window="+window.String(), func(b *testing.B) {
			c := memory.NewCounter(memory.Options{})
			defer c.Close()
			ctx := context.Background()
			var seed atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(7919))
				for pb.Next() {
					i++
					c.Incr(ctx, benchKeys[i%len(benchKeys)], window)
				}
			})
		})
	}
}
