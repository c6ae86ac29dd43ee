package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/admin"
)

const topToken = "top-token-0123456789abcdef"

func TestRedisTop(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	fleetTop(t, srv.Client, srv.URL)
}

func TestClusterTop(t *testing.T) {
	t.Parallel()
	c := sharedClusterFor(t)
	fleetTop(t, c.Client, c.Seed, "TOLLGATE_REDIS_MODE=cluster")
}

// fleetTop: two replicas on one store, each denying its own tenant; each
// replica's /v1/top names both, with the fleet's denials and the
// remaining budget; the board's keys all carry a TTL.
func fleetTop(t *testing.T, rdb goredis.UniversalClient, url string, environ ...string) {
	prefix := uniquePrefix(t)
	env := append([]string{"TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_LIMIT=2", "TOLLGATE_ADMIN_TOKEN=" + topToken}, environ...)
	a, b := startReplica(t, url, env...), startReplica(t, url, env...)
	for g, tenant := range map[*apptest.Gateway]string{a: "only-on-a", b: "only-on-b"} {
		for i := range 5 {
			if code, _ := get(t, g, tenant); code != map[bool]int{true: 200, false: 429}[i < 2] {
				t.Fatalf("%s request %d: %d", tenant, i, code)
			}
		}
	}
	// Both replicas' tenants are in the budget's shared store: a third
	// replica's denials of only-on-a add to a's.
	if code, _ := get(t, b, "only-on-a"); code != 429 {
		t.Fatalf("only-on-a through b: %d, want 429", code)
	}
	for _, g := range []*apptest.Gateway{a, b} {
		var top admin.TopBody
		deadline := time.Now().Add(30 * time.Second)
		for {
			top = topCall(t, g)
			if top.Replicas == 2 && len(top.Limits) == 1 && top.Limits[0].Denied == 7 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if top.Replicas != 2 || len(top.Limits) != 1 || top.Limits[0].Denied != 7 || len(top.Limits[0].Tenants) != 2 {
			t.Fatalf("%s: /v1/top %+v, want 2 replicas and 7 denials of 2 tenants", g.Admin, top)
		}
		first, second := top.Limits[0].Tenants[0], top.Limits[0].Tenants[1]
		if first.Tenant != "only-on-a" || first.Denied != 4 || second.Tenant != "only-on-b" || second.Denied != 3 {
			t.Errorf("%s: tenants %+v, want only-on-a denied 4 then only-on-b 3", g.Admin, top.Limits[0].Tenants)
		}
		for _, tt := range top.Limits[0].Tenants {
			if tt.Remaining == nil || *tt.Remaining != 0 {
				t.Errorf("%s: %s remaining %v, want 0", g.Admin, tt.Tenant, tt.Remaining)
			}
		}
	}
	keys := scanKeys(t, rdb, prefix+"{top:board}*")
	if len(keys) != 3 {
		t.Errorf("board keys %v, want the index and two posts", keys)
	}
	for _, k := range keys {
		if ttl := rdb.PTTL(context.Background(), k).Val(); ttl <= 0 {
			t.Errorf("key %s: PTTL %v, want a TTL", k, ttl)
		}
	}

	// A replica that stops drops out of the others' answers when its
	// post expires (5 s).
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for top := topCall(t, a); top.Replicas != 1; top = topCall(t, a) {
		if time.Now().After(deadline) {
			t.Fatalf("a stopped replica still counted after 60 s: %+v", top)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if top := topCall(t, a); len(top.Limits) != 1 || top.Limits[0].Denied != 3 {
		t.Errorf("after b stopped: %+v, want a's own 3 denials", top.Limits)
	}
}

func topCall(t *testing.T, g *apptest.Gateway) admin.TopBody {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.Admin+"/v1/top?window=5m", nil)
	req.Header.Set("Authorization", "Bearer "+topToken)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/top: %v", err)
	}
	defer resp.Body.Close()
	var b admin.TopBody
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&b) != nil {
		t.Fatalf("GET /v1/top: %d", resp.StatusCode)
	}
	return b
}
