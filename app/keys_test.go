package app_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// seen is an upstream that records the headers of each request it gets.
type seen struct {
	mu   sync.Mutex
	reqs []http.Header
}

func (s *seen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Header.Clone())
	s.mu.Unlock()
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *seen) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reqs[len(s.reqs)-1]
}

// TestRuntimeKeys: on the memory store, with unresolved traffic refused:
// a request without a key is 401 on the proxy and the check listener,
// forwarded nowhere and spending nothing; a key issued through the key
// API names its tenant (and is not forwarded), survives a SIGHUP, and is
// refused once revoked. Creations and revocations are logged and counted;
// no key is ever in the logs or /metrics.
func TestRuntimeKeys(t *testing.T) {
	t.Parallel()
	up := &seen{}
	upstream := httptest.NewServer(up)
	t.Cleanup(upstream.Close)
	tenants := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"]}]}`)
	g := apptest.Start(t, "TOLLGATE_TENANTS_FILE="+tenants, "TOLLGATE_ADMIN_TOKEN="+adminToken, "TOLLGATE_ANONYMOUS=reject",
		"TOLLGATE_UPSTREAM_URL="+upstream.URL, "TOLLGATE_CHECK_ADDR=127.0.0.1:0")
	auth := http.Header{"Authorization": {"Bearer " + adminToken}}

	for _, url := range []string{g.Public + "/x", g.Check + "/x"} {
		for _, key := range []string{"", "tg_not-a-key"} {
			resp, body := get(t, url, "X-API-Key", key)
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "Bearer" || !strings.Contains(body, "unauthorized") {
				t.Errorf("%s with key %q: %d %q (WWW-Authenticate %q), want 401 Bearer", url, key, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
	if up.count() != 0 {
		t.Fatalf("%d rejected requests reached the upstream", up.count())
	}
	if _, body := testhttp.Do(t, "GET", g.Admin+"/v1/tenants/unknown/usage", "", auth); !strings.Contains(body, `"used":0`) {
		t.Errorf("the usage of unknown after rejected requests: %s, want nothing used", body)
	}

	resp, body := testhttp.Do(t, "POST", g.Admin+"/v1/tenants/acme/keys", `{"expires_in": "1h"}`, auth)
	var created admin.CreatedKeyBody
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &created) != nil {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	for _, hdr := range [][2]string{{"X-API-Key", created.Key}, {"Authorization", "Bearer " + created.Key}} {
		if resp, _ := get(t, g.Public+"/x", hdr[0], hdr[1]); resp.StatusCode != 200 {
			t.Fatalf("the new key in %s: %d, want 200", hdr[0], resp.StatusCode)
		}
		h := up.last()
		if h.Get("X-Tenant-ID") != "acme" || h.Get("X-API-Key") != "" || h.Get("Authorization") != "" {
			t.Errorf("the upstream got X-Tenant-ID %q, X-API-Key %q, Authorization %q: want acme and no key", h.Get("X-Tenant-ID"), h.Get("X-API-Key"), h.Get("Authorization"))
		}
	}
	if resp, _ := get(t, g.Check+"/x", "X-API-Key", created.Key); resp.StatusCode != 200 || resp.Header.Get("X-Tenant-ID") != "acme" {
		t.Errorf("the check listener with the new key: %d, tenant %q", resp.StatusCode, resp.Header.Get("X-Tenant-ID"))
	}

	// A SIGHUP that reloads the tenants file keeps the runtime keys.
	rewrite(t, tenants, `{"tenants": [{"id": "acme", "api_keys": ["k-acme-2"]}, {"id": "globex", "api_keys": ["k-globex"]}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return len(logtest.Lines(t, g.Logs(), "tenants file reloaded")) > 0 })
	if resp, _ := get(t, g.Public+"/x", "X-API-Key", created.Key); resp.StatusCode != 200 {
		t.Errorf("the runtime key after a SIGHUP: %d, want 200", resp.StatusCode)
	}

	if resp, body := testhttp.Do(t, "DELETE", g.Admin+"/v1/tenants/acme/keys/"+created.ID, "", auth); resp.StatusCode != 204 {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	n := up.count()
	if resp, _ := get(t, g.Public+"/x", "X-API-Key", created.Key); resp.StatusCode != 401 {
		t.Errorf("the revoked key: %d, want 401", resp.StatusCode)
	}
	if up.count() != n {
		t.Error("a request with a revoked key reached the upstream")
	}

	_, metrics := get(t, g.Admin+"/metrics")
	for _, want := range []string{`tollgate_admin_actions_total{action="key_create"} 1`, `tollgate_admin_actions_total{action="key_revoke"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logs := g.Logs()
	for _, want := range []string{`"msg":"key API: key created","tenant":"acme","key_id":"` + created.ID + `"`, `"msg":"key API: key revoked","tenant":"acme","key_id":"` + created.ID + `"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s", want)
		}
	}
	secret := created.Key[len(created.Prefix):]
	if strings.Contains(logs, secret) || strings.Contains(metrics, secret) {
		t.Error("the key is in the logs or /metrics")
	}
}

// TestRuntimeKeysBound: a tenant has at most 100 live keys; the 101st is
// refused with 409 and nothing is created, and a revoked key frees its
// place. Without a tenants file any valid tenant id may have keys.
func TestRuntimeKeysBound(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_ADMIN_TOKEN="+adminToken)
	auth := http.Header{"Authorization": {"Bearer " + adminToken}}
	var last admin.CreatedKeyBody
	for i := range 100 {
		resp, body := testhttp.Do(t, "POST", g.Admin+"/v1/tenants/hooli/keys", "", auth)
		if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &last) != nil {
			t.Fatalf("key %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	if resp, body := testhttp.Do(t, "POST", g.Admin+"/v1/tenants/hooli/keys", "", auth); resp.StatusCode != 409 || !strings.Contains(body, "100 live keys") {
		t.Errorf("key 101: %d %s, want 409", resp.StatusCode, body)
	}
	_, body := testhttp.Do(t, "GET", g.Admin+"/v1/tenants/hooli/keys", "", auth)
	var list admin.KeysBody
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Keys) != 100 {
		t.Fatalf("list: %d keys, %v; want 100", len(list.Keys), err)
	}
	if resp, _ := testhttp.Do(t, "DELETE", g.Admin+"/v1/tenants/hooli/keys/"+last.ID, "", auth); resp.StatusCode != 204 {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	resp, body := testhttp.Do(t, "POST", g.Admin+"/v1/tenants/hooli/keys", "", auth)
	if resp.StatusCode != 201 || json.Unmarshal([]byte(body), &last) != nil {
		t.Fatalf("a key after a revocation: %d %s, want 201", resp.StatusCode, body)
	}
	// Without a tenants file, a runtime key names its tenant (over the
	// header); the header still names the others.
	for _, tt := range []struct{ key, header, want string }{
		{last.Key, "globex", `"tenant":"hooli"`},
		{"tg_nope", "globex", `"tenant":"globex"`},
		{"", "", `"tenant":"unknown"`},
	} {
		if _, body := get(t, g.Public+"/x", "X-API-Key", tt.key, "X-Tenant-ID", tt.header); !strings.Contains(body, tt.want) {
			t.Errorf("key %q, header %q: %s, want %s", tt.key, tt.header, body, tt.want)
		}
	}
}
