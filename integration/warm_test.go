package integration

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// scriptSHAs are the SHA-1s of every script the Redis store runs, read
// from its sources: each algorithm's between the shared prelude and the
// general path (lua/run.lua), and the replicas' alone.
func scriptSHAs(t *testing.T) []string {
	t.Helper()
	const dir = "../adapters/redis/lua/"
	prelude, err := os.ReadFile(dir + "prelude.lua")
	if err != nil {
		t.Fatal(err)
	}
	general, err := os.ReadFile(dir + "run.lua")
	if err != nil {
		t.Fatal(err)
	}
	var shas []string
	for _, name := range append(domain.AlgorithmNames(), "replicas") {
		file := dir + name + ".lua"
		if name == "replicas" {
			file = "../adapters/redis/fleet/lua/replicas.lua"
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if name != "replicas" {
			src = slices.Concat(prelude, []byte("\n"), src, []byte("\n"), general)
		}
		sum := sha1.Sum(src)
		shas = append(shas, hex.EncodeToString(sum[:]))
	}
	return shas
}

// checkScriptsCached fails t unless every script is in node's cache.
func checkScriptsCached(t *testing.T, name string, node *goredis.Client, shas []string) {
	t.Helper()
	exists, err := node.ScriptExists(t.Context(), shas...).Result()
	if err != nil {
		t.Fatalf("%s: SCRIPT EXISTS: %v", name, err)
	}
	for i, ok := range exists {
		if !ok {
			t.Errorf("%s: script %s not cached after Warm", name, shas[i])
		}
	}
}

// TestWarmLoadsScriptsOnEveryMaster: Warm leaves every master of a
// cluster (and a single Redis) with the store's scripts cached, so a
// fresh gateway's first decisions on any master are one EVALSHA, not a
// dial, a NOSCRIPT and an EVAL under a 50 ms deadline (what made the
// compose cluster smoke test answer 503 on its first tenants). Not
// parallel: it flushes the shared cluster's script caches, and no
// parallel test runs while a sequential one does.
func TestWarmLoadsScriptsOnEveryMaster(t *testing.T) {
	shas := scriptSHAs(t)
	t.Run("cluster", func(t *testing.T) {
		cl := sharedClusterFor(t)
		if err := cl.Client.ForEachMaster(t.Context(), func(ctx context.Context, n *goredis.Client) error {
			return n.ScriptFlush(ctx).Err()
		}); err != nil {
			t.Fatal(err)
		}
		c, err := conn.Open(cl.Seed, conn.Options{Timeout: time.Second, Cluster: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Warm(t.Context()); err != nil {
			t.Fatal(err)
		}
		var masters atomic.Int32 // ForEachMaster calls in parallel
		if err := cl.Client.ForEachMaster(t.Context(), func(ctx context.Context, n *goredis.Client) error {
			masters.Add(1)
			checkScriptsCached(t, n.Options().Addr, n, shas)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n := masters.Load(); n != 3 {
			t.Errorf("checked %d masters, want 3", n)
		}
	})
	t.Run("single", func(t *testing.T) {
		srv := startRedis(t)
		if err := srv.Client.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		c, err := conn.Open(srv.URL, conn.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Warm(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkScriptsCached(t, "redis", srv.Client, shas)
	})
}
