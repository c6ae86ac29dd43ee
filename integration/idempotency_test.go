package integration

import (
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
)

// TestRedisIdempotency: a spend's Idempotency-Key on Redis and on a Redis
// Cluster: claimed once across clients, its answer read back by another
// replica's client, given back by Abandon, and never a key without a TTL
// or one that holds the caller's key in the clear.
func TestRedisIdempotency(t *testing.T) {
	t.Parallel()
	for _, target := range []struct {
		name string
		rdb  goredis.UniversalClient
	}{{"redis", startRedis(t).Client}, {"cluster", sharedClusterFor(t).Client}} {
		prefix := uniquePrefix(t)
		a := redis.NewIdempotency(conn.NewClient(target.rdb, testConn), prefix)
		b := redis.NewIdempotency(conn.NewClient(target.rdb, testConn), prefix) // another replica
		ctx := t.Context()
		first, answer, err := a.Begin(ctx, "acme", "order-42", time.Hour)
		if err != nil || !first || answer != nil {
			t.Fatalf("%s: a new key: %v %q %v", target.name, first, answer, err)
		}
		if first, answer, err := b.Begin(ctx, "acme", "order-42", time.Hour); err != nil || first || answer != nil {
			t.Fatalf("%s: while the first runs: %v %q %v, want neither first nor an answer", target.name, first, answer, err)
		}
		if err := a.Done(ctx, "acme", "order-42", []byte(`{"tenant":"acme"}`), time.Hour); err != nil {
			t.Fatal(err)
		}
		if first, answer, err := b.Begin(ctx, "acme", "order-42", time.Hour); err != nil || first || string(answer) != `{"tenant":"acme"}` {
			t.Fatalf("%s: after Done: %v %q %v, want the answer", target.name, first, answer, err)
		}
		if first, _, err := b.Begin(ctx, "initech", "order-42", time.Hour); err != nil || !first {
			t.Fatalf("%s: another tenant's key of the same name: %v %v", target.name, first, err)
		}
		if err := b.Abandon(ctx, "initech", "order-42"); err != nil {
			t.Fatal(err)
		}
		if first, _, err := a.Begin(ctx, "initech", "order-42", time.Hour); err != nil || !first {
			t.Fatalf("%s: after Abandon: %v %v", target.name, first, err)
		}
		if n := checkTTLs(t, target.rdb, prefix+"*", time.Hour); n != 2 {
			t.Errorf("%s: %d keys with a TTL, want 2", target.name, n)
		}
		for _, k := range scanKeys(t, target.rdb, prefix+"*") {
			if len(k) < 64 || strings.Contains(k, "order-42") {
				t.Errorf("%s: key %q: want the key's digest, never the key", target.name, k)
			}
		}
	}
}
