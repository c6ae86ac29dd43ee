package integration

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/keyring"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/ports"
)

// keyReadsOK is the series of a replica's reads of the key store that
// succeeded.
const keyReadsOK = `tollgate_api_key_reads_total{result="ok"}`

// keysTenants writes a tenants file of one tenant, acme, whose file key
// is k-acme.
func keysTenants(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(p, []byte(`{"tenants": [{"id": "acme", "api_keys": ["k-acme"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keyCall sends method path with body to g's admin listener with the
// admin token, and returns the status and body.
func keyCall(t testing.TB, g *apptest.Gateway, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.Admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+usageToken)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// createKey issues a key of tenant acme through g.
func createKey(t testing.TB, g *apptest.Gateway) admin.CreatedKeyBody {
	t.Helper()
	code, body := keyCall(t, g, "POST", "/v1/tenants/acme/keys", "")
	var k admin.CreatedKeyBody
	if code != http.StatusCreated || json.Unmarshal([]byte(body), &k) != nil {
		t.Fatalf("create a key: %d %s", code, body)
	}
	return k
}

// withKey sends a request with key in X-API-Key to g's proxy and returns
// the status (0 when the request failed).
func withKey(g *apptest.Gateway, key string) int {
	req, err := http.NewRequest(http.MethodGet, g.Public+"/anything", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("X-API-Key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// untilStatus polls g with key every 10ms until it answers want, and
// returns how long that took; t fails after 10s.
func untilStatus(t testing.TB, g *apptest.Gateway, key string, want int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if withKey(g, key) == want {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("%s: the key is not answered %d after 10s", g.Public, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// keyReplicas starts n gateways on the store at url, with the key API
// and unresolved traffic refused.
func keyReplicas(t testing.TB, n int, url, prefix string, environ ...string) []*apptest.Gateway {
	t.Helper()
	env := append([]string{"TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_TENANTS_FILE=" + keysTenants(t),
		"TOLLGATE_ADMIN_TOKEN=" + usageToken, "TOLLGATE_ANONYMOUS=reject", "TOLLGATE_LIMIT=1000000"}, environ...)
	gs := make([]*apptest.Gateway, n)
	for i := range gs {
		gs[i] = apptest.Start(t, append([]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=" + url}, env...)...)
	}
	return gs
}

func TestRedisKeysAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	keysAcrossReplicas(t, srv.Client, srv.URL)
}

func TestClusterKeysAcrossReplicas(t *testing.T) {
	t.Parallel()
	c := sharedClusterFor(t)
	keysAcrossReplicas(t, c.Client, c.Seed, "TOLLGATE_REDIS_MODE=cluster")
}

// keysAcrossReplicas: a key issued on one of three replicas resolves on
// the others, and a key revoked on one is refused by the others (each
// polled every 10ms), at the latest once each has read the store's
// changes once after the revocation (a read that began after it):
// whatever the machine's load, what bounds the delay is the replicas'
// reads, ten a second. Afterwards no key is in the clear in Redis, in
// any replica's logs or in its /metrics, and every key of the key store
// has a TTL.
func keysAcrossReplicas(t *testing.T, rdb goredis.UniversalClient, url string, environ ...string) {
	prefix := uniquePrefix(t)
	gs := keyReplicas(t, 3, url, prefix, environ...)
	var secrets []string
	for round := range 3 {
		k := createKey(t, gs[round])
		secrets = append(secrets, k.Key[len(k.Prefix):])
		for _, g := range gs {
			took := untilStatus(t, g, k.Key, http.StatusOK)
			t.Logf("round %d: created on replica %d, resolves on %s after %v", round, round, g.Public, took)
		}
		if code, body := keyCall(t, gs[(round+1)%3], "DELETE", "/v1/tenants/acme/keys/"+k.ID, ""); code != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", code, body)
		}
		start := time.Now()
		var reads [3]float64
		for i, g := range gs {
			reads[i] = metric(t, g, keyReadsOK)
		}
		for i, g := range gs {
			// The read under way now may have begun before the revocation;
			// the one after it cannot have.
			for metric(t, g, keyReadsOK) < reads[i]+2 {
				if time.Since(start) > 10*time.Second {
					t.Fatalf("%s: no read of the key store for 10s", g.Public)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if code := withKey(g, k.Key); code != http.StatusUnauthorized {
				t.Errorf("round %d: %s answers %d to a key revoked before its last read, want 401", round, g.Public, code)
			}
			t.Logf("round %d: revoked on replica %d; %s has read the store since, and refuses the key, %v after", round, (round+1)%3, g.Public, time.Since(start))
		}
	}
	if code := withKey(gs[0], "k-acme"); code != http.StatusOK {
		t.Errorf("the tenants file's key: %d, want 200", code)
	}
	checkTTLs(t, rdb, prefix+"*", keyring.TTL)
	if n := len(scanKeys(t, rdb, prefix+"{apikeys}*")); n == 0 {
		t.Error("no key of the key store in Redis")
	}
	noSecretIn(t, rdb, gs, secrets)
}

// noSecretIn fails t when one of secrets (keys less their shown prefix)
// is in any value Redis holds, or in a replica's logs or /metrics.
func noSecretIn(t *testing.T, rdb goredis.UniversalClient, gs []*apptest.Gateway, secrets []string) {
	t.Helper()
	var mu sync.Mutex
	var all strings.Builder
	err := eachMaster(context.Background(), rdb, func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			var vals []string
			switch c.Type(ctx, k).Val() {
			case "string":
				vals = []string{c.Get(ctx, k).Val()}
			case "hash":
				for f, v := range c.HGetAll(ctx, k).Val() {
					vals = append(vals, f, v)
				}
			case "set":
				vals = c.SMembers(ctx, k).Val()
			case "zset":
				vals = c.ZRange(ctx, k, 0, -1).Val()
			case "list":
				vals = c.LRange(ctx, k, 0, -1).Val()
			}
			mu.Lock()
			all.WriteString(k + "\n" + strings.Join(vals, "\n") + "\n")
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		all.WriteString(g.Logs())
		resp, err := httpClient.Get(g.Admin + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		all.WriteString(string(b))
	}
	for _, s := range secrets {
		if strings.Contains(all.String(), s) {
			t.Errorf("a key is in the clear in Redis, a log or /metrics")
		}
	}
}

// TestRedisKeysOutage: while Redis does not answer, each replica stops
// resolving the runtime keys it holds (it cannot hear a revocation) and
// refuses them, while the tenants file's key is admitted by the open fail
// mode; once Redis answers again, the runtime key resolves again.
func TestRedisKeysOutage(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	gs := keyReplicas(t, 2, srv.URL, uniquePrefix(t), "TOLLGATE_REDIS_TIMEOUT=200ms", "TOLLGATE_FAIL_MODE=open")
	k := createKey(t, gs[0])
	for _, g := range gs {
		untilStatus(t, g, k.Key, http.StatusOK)
	}
	srv.pause(t)
	paused := true
	defer func() {
		if paused {
			srv.unpause(t)
		}
	}()
	for _, g := range gs {
		took := untilStatus(t, g, k.Key, http.StatusUnauthorized)
		t.Logf("Redis paused: %s refuses the runtime key after %v", g.Public, took)
		if code := withKey(g, "k-acme"); code != http.StatusOK {
			t.Errorf("Redis paused: %s answers the tenants file's key %d, want 200 (fail mode open)", g.Public, code)
		}
	}
	srv.unpause(t)
	paused = false
	for _, g := range gs {
		took := untilStatus(t, g, k.Key, http.StatusOK)
		t.Logf("Redis back: %s resolves the runtime key after %v", g.Public, took)
	}
}

// BenchmarkKeyRevocation measures revoke-to-refused across a fleet of 3
// replicas on one Redis and on a 3-master Redis Cluster: each round
// issues a key, waits until every replica admits it, revokes it through
// one replica, and polls every replica every 10ms with the key until it
// is refused (401). A sample is the time from the revocation's request
// to a replica's first 401, its poll interval included; it reports the
// median, the 99th percentile and the worst over every replica and
// round (b.N rounds: -benchtime 100x).
func BenchmarkKeyRevocation(b *testing.B) {
	for _, target := range []struct {
		name    string
		url     func(b *testing.B) string
		environ []string
	}{
		{"redis", func(b *testing.B) string { return startRedis(b).URL }, nil},
		{"cluster", func(b *testing.B) string { return sharedClusterFor(b).Seed }, []string{"TOLLGATE_REDIS_MODE=cluster"}},
	} {
		b.Run(target.name, func(b *testing.B) {
			gs := keyReplicas(b, 3, target.url(b), uniquePrefix(b), target.environ...)
			var samples []time.Duration
			round := 0
			for b.Loop() {
				k := createKey(b, gs[round%3])
				for _, g := range gs {
					untilStatus(b, g, k.Key, http.StatusOK)
				}
				start := time.Now()
				if code, body := keyCall(b, gs[(round+1)%3], "DELETE", "/v1/tenants/acme/keys/"+k.ID, ""); code != http.StatusNoContent {
					b.Fatalf("revoke: %d %s", code, body)
				}
				var wg sync.WaitGroup
				var mu sync.Mutex
				for _, g := range gs {
					wg.Go(func() {
						for {
							if withKey(g, k.Key) == http.StatusUnauthorized {
								mu.Lock()
								samples = append(samples, time.Since(start))
								mu.Unlock()
								return
							}
							if time.Since(start) > 10*time.Second {
								b.Errorf("%s admits a key revoked 10s ago", g.Public)
								return
							}
							time.Sleep(10 * time.Millisecond)
						}
					})
				}
				wg.Wait()
				round++
			}
			slices.Sort(samples)
			at := func(q float64) float64 {
				return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))].Microseconds()) / 1000
			}
			b.ReportMetric(at(0.5), "p50-ms")
			b.ReportMetric(at(0.99), "p99-ms")
			b.ReportMetric(float64(samples[len(samples)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(0, "ns/op")
			fmt.Fprintf(os.Stderr, "%s: %d samples over %d rounds\n", target.name, len(samples), round)
		})
	}
}

// BenchmarkKeyStoreMemory reports what a runtime API key costs Redis
// (bytes/key: used_memory grown by 20 000 keys of 200 tenants, created
// through the store as the key API creates them, 16 at a time), on one
// Redis and on a Cluster (the one master holding the key store's slot).
func BenchmarkKeyStoreMemory(b *testing.B) {
	for _, target := range []struct {
		name string
		rdb  func(b *testing.B) goredis.UniversalClient
	}{
		{"redis", func(b *testing.B) goredis.UniversalClient { return startRedis(b).Client }},
		{"cluster", func(b *testing.B) goredis.UniversalClient { return startCluster(b).Client }},
	} {
		b.Run(target.name, func(b *testing.B) {
			rdb := target.rdb(b)
			const n, tenants = 20000, 200
			used := func() int64 {
				var total int64
				var mu sync.Mutex
				err := eachMaster(context.Background(), rdb, func(ctx context.Context, c *goredis.Client) error {
					info, err := c.Info(ctx, "memory").Result()
					if err != nil {
						return err
					}
					for _, line := range strings.Split(info, "\r\n") {
						if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
							var x int64
							fmt.Sscan(v, &x)
							mu.Lock()
							total += x
							mu.Unlock()
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				return total
			}
			for b.Loop() {
				s := keyring.New(rdb, uniquePrefix(b))
				before := used()
				now := time.Now()
				sem := make(chan struct{}, 16)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						sem <- struct{}{}
						defer func() { <-sem }()
						k := ports.APIKey{ID: fmt.Sprintf("key_%016x", i), Tenant: domain.TenantID(fmt.Sprintf("tenant-%d", i%tenants)),
							Hash: sha256.Sum256(fmt.Appendf(nil, "tg_%d", i)), Prefix: "tg_abc", CreatedAt: now}
						if err := s.Create(context.Background(), k, n, now); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(used()-before)/n, "bytes/key")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
