package integration

import (
	"context"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/apptest"
)

// TestCheckAnonymousPerIP: the check listener (docs/edge.md) with
// anonymous traffic metered per client address, on Redis and on a
// Redis Cluster, across two replicas: a client address read from a
// trusted proxy's X-Forwarded-For has one budget whichever replica
// decides, an IPv6 /64 is one client, another address has its own, and
// each budget is one key {ip:<addr>} with a TTL (a hash tag: one slot).
func TestCheckAnonymousPerIP(t *testing.T) {
	t.Parallel()
	env := func(prefix string) []string {
		return []string{"TOLLGATE_CHECK_ADDR=127.0.0.1:0", "TOLLGATE_ANONYMOUS=ip", "TOLLGATE_TRUSTED_PROXIES=127.0.0.0/8",
			"TOLLGATE_LIMIT=3", "TOLLGATE_WINDOW=1h", "TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_REDIS_TIMEOUT=2s"}
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		srv := startRedis(t)
		prefix := uniquePrefix(t)
		a, b := startReplica(t, srv.URL, env(prefix)...), startReplica(t, srv.URL, env(prefix)...)
		checkPerIP(t, a, b, prefix, srv.Client)
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		c := sharedClusterFor(t)
		prefix := uniquePrefix(t)
		a, b := startClusterReplica(t, c, env(prefix)...), startClusterReplica(t, c, env(prefix)...)
		checkPerIP(t, a, b, prefix, c.Client)
	})
}

func checkPerIP(t *testing.T, a, b *apptest.Gateway, prefix string, rdb goredis.Cmdable) {
	t.Helper()
	ask := func(g *apptest.Gateway, client string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, g.Check+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", client)
		req.Header.Set("X-Forwarded-Method", "GET")
		req.Header.Set("X-Forwarded-Uri", "/v1/items")
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatalf("check as %s: %v", client, err)
		}
		resp.Body.Close()
		return resp
	}
	for i, step := range []struct {
		g      *apptest.Gateway
		client string
		status int
	}{
		{a, "203.0.113.7", 200}, {b, "203.0.113.7", 200}, {a, "203.0.113.7", 200},
		{b, "203.0.113.7", 429},  // its budget, spent on both replicas
		{b, "198.51.100.1", 200}, // another client
		{a, "2001:db8:1:2::5", 200}, {b, "2001:db8:1:2::9", 200}, {a, "2001:db8:1:2:ffff::1", 200},
		{b, "2001:db8:1:2::5", 429}, // one /64, one client
		{a, "2001:db8:1:3::5", 200}, // the next /64
	} {
		resp := ask(step.g, step.client)
		if resp.StatusCode != step.status {
			t.Errorf("step %d, %s: %d, want %d", i+1, step.client, resp.StatusCode, step.status)
		}
		if step.status == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("step %d, %s: a denial without Retry-After", i+1, step.client)
		}
		if got := resp.Header.Get("X-Tenant-ID"); step.status == 200 && got != "unknown" {
			t.Errorf("step %d, %s: X-Tenant-ID %q, want unknown", i+1, step.client, got)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, subject := range []string{"ip:203.0.113.7", "ip:198.51.100.1", "ip:2001:db8:1:2::/64", "ip:2001:db8:1:3::/64"} {
		key := prefix + "{" + subject + "}"
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("key %s: PTTL %v (%v), want a TTL of at most the window", key, ttl, err)
		}
	}
	if n, err := rdb.Exists(ctx, prefix+"{unknown}").Result(); err != nil || n != 0 {
		t.Errorf("the shared unknown budget was spent (%d, %v): anonymous traffic is metered per address", n, err)
	}
}
