package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/admin"
)

const usageToken = "usage-token-0123456789abcdef"

// usagePolicy writes a policy of a per-minute limit, a monthly quota
// and a route with a limit of its own.
func usagePolicy(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.json")
	err := os.WriteFile(p, []byte(`{"limits": [
	  {"name": "per-minute", "limit": 1000, "window": "1m"},
	  {"name": "monthly", "limit": 3, "period": "month", "timezone": "Europe/Paris"}],
	 "routes": [{"name": "search", "path": "/search", "limits": [{"name": "searches", "limit": 50, "window": "1h"}]}]}`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// adminCall sends method path to g's admin listener with the usage
// token and decodes the usage it answers.
func adminCall(t *testing.T, g *apptest.Gateway, method, path string) (int, admin.UsageBody) {
	t.Helper()
	req, err := http.NewRequest(method, g.Admin+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+usageToken)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var b admin.UsageBody
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode, b
}

func TestRedisUsageAPI(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	usageAPI(t, srv.Client, srv.URL)
}

func TestClusterUsageAPI(t *testing.T) {
	t.Parallel()
	c := sharedClusterFor(t)
	usageAPI(t, c.Client, c.Seed, "TOLLGATE_REDIS_MODE=cluster")
}

// usageAPI: on a shared store, a usage read is one store command on the
// tenant's master, creates no key and leaves every TTL as it was; a
// reset on one replica reaches the other's deny cache within a second.
func usageAPI(t *testing.T, rdb goredis.UniversalClient, url string, environ ...string) {
	prefix := uniquePrefix(t)
	// No top tenants: their posts, once a second, would add scripts to
	// the windows in which a read's commands are counted.
	env := append([]string{"TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_POLICY_FILE=" + usagePolicy(t),
		"TOLLGATE_ADMIN_TOKEN=" + usageToken, "TOLLGATE_ALGORITHM=sliding_log", "TOLLGATE_TOP_TENANTS=0"}, environ...)
	a, b := startReplica(t, url, env...), startReplica(t, url, env...)
	ctx := context.Background()

	// Reading a tenant never seen: nothing used, no key written.
	if code, u := adminCall(t, a, "GET", "/v1/tenants/fresh/usage"); code != 200 || len(u.Limits) != 3 || u.Limits[0].Used+u.Limits[1].Used+u.Limits[2].Used != 0 {
		t.Fatalf("usage of a tenant never seen: %d %+v", code, u)
	}
	if keys := scanKeys(t, rdb, prefix+"{fresh}*"); len(keys) != 0 {
		t.Errorf("reading a tenant never seen wrote keys %v", keys)
	}

	// acme spends its monthly quota through b, which then caches denials.
	for range 3 {
		if code, _ := get(t, b, "acme"); code != 200 {
			t.Fatalf("acme within its quota: %d", code)
		}
	}
	for range 3 {
		if code, _ := get(t, b, "acme"); code != 429 {
			t.Fatalf("acme over its quota: %d, want 429", code)
		}
	}
	if cached := metric(t, b, `tollgate_decisions_total{algorithm="sliding_log",outcome="cached_denied"}`); cached < 1 {
		t.Fatalf("b cached no denial of acme (%v): the reset below would prove nothing", cached)
	}

	// One read is one command, and moves no TTL.
	keys := scanKeys(t, rdb, prefix+"{acme}*")
	ttls := map[string]time.Duration{}
	for _, k := range keys {
		ttls[k] = rdb.PTTL(ctx, k).Val()
	}
	// The commands counted are the whole store's: on a store other tests
	// share (the cluster), their traffic adds to a read's, so a read is
	// measured again until one window holds nothing else. A read that ran
	// more than one script, or wrote, never gives a clean window.
	writes := []string{"set", "del", "incr", "incrby", "pexpire", "expire", "pexpireat", "zadd", "zremrangebyscore", "zremrangebyrank", "hset", "hincrby"}
	var calls map[string]int64
	for attempt := 0; ; attempt++ {
		resetStats(t, rdb)
		code, u := adminCall(t, a, "GET", "/v1/tenants/acme/usage")
		calls = commandCalls(t, rdb)
		if code != 200 || u.Limits[0].Used != 3 || u.Limits[1].Name != "monthly" || u.Limits[1].Used != 3 || u.Limits[1].Timezone != "Europe/Paris" {
			t.Fatalf("acme's usage: %d %+v, want 3 used of per-minute and monthly", code, u)
		}
		clean := calls["evalsha"]+calls["eval"] == 1
		for _, w := range writes {
			clean = clean && calls[w] == 0
		}
		if clean {
			break
		}
		if attempt+1 == 20 {
			t.Fatalf("no read of 20 ran alone as one script that writes nothing; the last window: %v", calls)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(ctx, k).Val(); ttl > ttls[k] || ttl <= 0 {
			t.Errorf("key %s: TTL %v after the read, was %v", k, ttl, ttls[k])
		}
	}
	if after := scanKeys(t, rdb, prefix+"{acme}*"); len(after) != len(keys) {
		t.Errorf("keys after the read %v, before %v", after, keys)
	}

	// A reset on a, just after b's deny cache took a fresh denial from
	// the store (which it serves alone for a second): b admits acme again
	// at once, because a announces the reset and b forgets. Without the
	// announcement b would deny for about a second more, the cache's own
	// bound; a test that waited that long could not tell.
	storeDenials := func() float64 {
		return metric(t, b, `tollgate_decisions_total{algorithm="sliding_log",outcome="denied"}`)
	}
	fresh := false
	var cached time.Time // no later than b's deny cache took the denial
	for range 100 {
		before := storeDenials()
		cached = time.Now()
		if code, _ := get(t, b, "acme"); code != 429 {
			t.Fatalf("b answered acme %d before the reset, want 429", code)
		}
		if storeDenials() > before {
			fresh = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !fresh {
		t.Fatal("b never asked the store about acme in 2 s: its deny cache did not refresh")
	}
	code, u := adminCall(t, a, "POST", "/v1/tenants/acme/reset?limit=monthly")
	reset := time.Now()
	if code != 200 || u.Limits[1].Used != 0 || u.Limits[0].Used != 3 {
		t.Fatalf("reset of monthly: %d %+v, want monthly whole and per-minute as it was", code, u)
	}
	// Heard within 400 ms, less what the process stalled meanwhile, and
	// always well before the cached denial could have aged out.
	const heard = 400 * time.Millisecond
	aged := cached.Add(layers.DefaultDenyCacheMaxAge - 100*time.Millisecond)
	admitted := time.Duration(-1)
	for now := time.Now(); now.Sub(reset)-stallWithin(reset, now) < heard && now.Before(aged); now = time.Now() {
		if code, _ := get(t, b, "acme"); code == 200 {
			admitted = time.Since(reset)
			if time.Since(cached) >= layers.DefaultDenyCacheMaxAge {
				t.Fatalf("b admitted acme %v after the reset, when its cached denial may have aged out: it may not have heard the reset", admitted)
			}
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if admitted < 0 {
		t.Fatalf("b still denies acme %v after the reset on a (%v of it this process stalled), its cached denial fresh: it did not hear the reset",
			time.Since(reset), stallWithin(reset, time.Now()))
	}
	t.Logf("b admitted acme %v after the reset on a", admitted)
	if code, u := adminCall(t, b, "GET", "/v1/tenants/acme/usage"); code != 200 || u.Limits[1].Used != 1 {
		t.Errorf("acme's usage on b after one request: %d %+v, want monthly used 1", code, u)
	}
}

func TestRedisResetsReachEveryReplica(t *testing.T) {
	t.Parallel()
	resetsReachEveryReplica(t, startRedis(t).Client)
}

func TestClusterResetsReachEveryReplica(t *testing.T) {
	t.Parallel()
	resetsReachEveryReplica(t, sharedClusterFor(t).Client)
}

// resetsReachEveryReplica: a reset announced through one client is
// heard by every client listening under the prefix, on a cluster
// whichever node each subscribed to; a message that is no tenant id is
// ignored; Close is idempotent and ends the calls.
func resetsReachEveryReplica(t *testing.T, rdb goredis.UniversalClient) {
	prefix := uniquePrefix(t)
	type reset struct {
		tenant domain.TenantID
		keys   string
	}
	heard := make(chan reset, 16)
	var listeners []*fleet.Resets
	for range 3 {
		l := fleet.ListenResets(conn.NewClient(rdb, conn.Options{}), prefix, func(id domain.TenantID, keys []string) { heard <- reset{id, strings.Join(keys, ",")} })
		listeners = append(listeners, l)
		defer l.Close()
	}
	ctx := context.Background()
	// A subscription is made in the background: announce until all three
	// listen (PUBLISH answers how many clients received it).
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.Publish(ctx, listeners[0].Channel(), "not a tenant id!").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 listeners subscribed after 5 s", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := listeners[1].Announce(ctx, "acme", []string{"", ":route:export:exports"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		select {
		case got := <-heard:
			if want := (reset{"acme", ",:route:export:exports"}); got != want {
				t.Fatalf("heard %+v, want %+v (and never the invalid messages)", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a listener did not hear the reset within 5 s")
		}
	}
	// A reset of more keys than one message carries: two messages.
	many := make([]string, 300)
	for i := range many {
		many[i] = fmt.Sprintf(":l%d", i)
	}
	if err := listeners[0].Announce(ctx, "acme", many); err != nil {
		t.Fatal(err)
	}
	keys := 0
	for range 6 { // two messages, three listeners
		select {
		case got := <-heard:
			keys += strings.Count(got.keys, ",") + 1
		case <-time.After(5 * time.Second):
			t.Fatal("a listener did not hear the reset of 300 keys within 5 s")
		}
	}
	if keys != 3*300 {
		t.Errorf("the listeners heard %d keys in all, want 3 × 300", keys)
	}
	for _, l := range listeners {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		l.Close()
	}
	if err := listeners[0].Announce(ctx, "acme", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-heard:
		t.Errorf("heard %q after Close", id)
	case <-time.After(100 * time.Millisecond):
	}
}
