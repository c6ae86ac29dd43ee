package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/ports"
)

// generated is a key store that holds n keys, made up as they are
// loaded: key i is "tg_bench_<i>", of tenant t<i%1000>. It holds nothing
// itself, so that the memory a ring takes can be measured alone.
type generated struct {
	ports.APIKeys
	n int
}

func benchKey(i int) string { return fmt.Sprintf("tg_bench_%d", i) }

func (g generated) Load(_ context.Context, each func(ports.APIKey)) (ports.KeyCursor, error) {
	tenants := make([]domain.TenantID, 1000)
	for i := range tenants {
		tenants[i] = domain.TenantID(fmt.Sprintf("t%d", i))
	}
	var id [8]byte
	for i := range g.n {
		binary.BigEndian.PutUint64(id[:], uint64(i))
		each(ports.APIKey{ID: string(id[:]), Tenant: tenants[i%len(tenants)], Hash: sha256.Sum256([]byte(benchKey(i))), CreatedAt: time.Now()})
	}
	return ports.KeyCursor{Epoch: "bench"}, nil
}

func (g generated) Changes(_ context.Context, since ports.KeyCursor, _ int, _ time.Time) (ports.KeyChanges, error) {
	return ports.KeyChanges{Cursor: since}, nil
}

// BenchmarkDecideRuntimeKey is one decision of a request presenting a
// runtime API key, through the engine on the memory store, with 10 and
// with 1 000 000 keys in the replica's ring (and a ring that trusts its
// keys for a second, as on Redis): the cost of a key lookup among many.
// It reports the ring's memory per key (B/key), measured as it loads.
func BenchmarkDecideRuntimeKey(b *testing.B) {
	for _, n := range []int{10, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			ring := engine.NewKeyRing(engine.KeyRingOptions{Store: generated{n: n}, Trust: time.Hour})
			if err := ring.Sync(b.Context()); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perKey := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
			store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{View: memory.View{Counting: domain.CountEvery, PolicyKeys: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			policy := domain.DefaultPolicy(domain.Rule{Limit: domain.MaxLimit, Window: time.Hour}, false)
			e := engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:"}, KeyRing: ring})
			ds := make([]engine.Described, 100)
			for i := range ds {
				ds[i] = engine.Described{Credentials: engine.Credentials{APIKey: benchKey(i * (n / len(ds)) % n)}, Method: "GET", Path: "/"}
			}
			ctx := b.Context()
			if res, _ := e.Decide(ctx, ds[len(ds)-1]); res.Tenant == domain.Unknown {
				b.Fatal("the key does not resolve")
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := e.Decide(ctx, ds[i%len(ds)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(perKey, "B/key")
			runtime.KeepAlive(ring)
		})
	}
}
