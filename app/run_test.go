package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

// get sends GET url with headers, given as name-value pairs, and returns
// the response and its body.
func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	return do(t, http.MethodGet, url, "", h)
}

func TestRunPerTenantBudgets(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [
	  {"id": "acme",   "api_keys": ["k-acme"],   "limit": 2, "window": "1m"},
	  {"id": "globex", "api_keys": ["k-globex"], "limit": 3, "window": "2m"},
	  {"id": "hooli",  "api_keys": ["k-hooli"]}
	]}`)
	base, logs := startGateway(t, "TOLLGATE_TENANTS_FILE="+path, "TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=30s")
	tests := []struct {
		tenant  string
		headers []string
		policy  string
		want    []int
	}{
		{"acme", []string{"Authorization", "Bearer k-acme"}, `"default";q=2;w=60`, []int{200, 200, 429}},
		{"globex", []string{"X-API-Key", "k-globex"}, `"default";q=3;w=120`, []int{200, 200, 200, 429}},
		{"hooli", []string{"X-API-Key", "k-hooli"}, `"default";q=1;w=30`, []int{200, 429}},
		{"unknown", []string{"X-Tenant-ID", "acme"}, `"default";q=1;w=30`, []int{200, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				resp, body := get(t, base+"/x", tt.headers...)
				if resp.StatusCode != want {
					t.Errorf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
				if got := resp.Header.Get("RateLimit-Policy"); got != tt.policy {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, tt.policy)
				}
				if want != http.StatusOK {
					continue
				}
				var echo struct{ Tenant string }
				if err := json.Unmarshal([]byte(body), &echo); err != nil || echo.Tenant != tt.tenant {
					t.Errorf("request %d: echo %q, want tenant %q", i+1, body, tt.tenant)
				}
			}
		})
	}
	t.Cleanup(func() {
		for _, key := range []string{"k-acme", "k-globex", "k-hooli"} {
			if strings.Contains(logs.String(), key) {
				t.Errorf("log holds API key %s", key)
			}
		}
	})
}

// TestRunReloadsOnSIGHUP sends a real SIGHUP to the test process while
// Run serves: Run must reload the tenants file rather than let the signal
// kill the process.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 1}]}`)
	base, logs := startGateway(t, "TOLLGATE_TENANTS_FILE="+path)
	policy := func() string {
		resp, _ := get(t, base+"/", "X-API-Key", "k-acme")
		return resp.Header.Get("RateLimit-Policy")
	}
	if got, want := policy(), `"default";q=1;w=60`; got != want {
		t.Fatalf("before reload: RateLimit-Policy %q, want %q", got, want)
	}

	rewrite(t, path, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 7},
	  {"id": "globex", "api_keys": ["k-globex"]}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new budget", func() bool { return policy() == `"default";q=7;w=60` })
	if l := logs.lines(t, "tenants file reloaded"); len(l) == 0 || l[0]["tenants"] != float64(2) {
		t.Errorf("reload log lines %v, want one with tenants=2", l)
	}

	rewrite(t, path, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 0}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rejection log line", func() bool {
		return len(logs.lines(t, "tenants file rejected; keeping the previous tenants")) > 0
	})
	if got, want := policy(), `"default";q=7;w=60`; got != want {
		t.Errorf("after a bad reload: RateLimit-Policy %q, want %q (the old table)", got, want)
	}
	if strings.Contains(logs.String(), "k-acme") {
		t.Errorf("log holds an API key:\n%s", logs)
	}
}

func TestRunRejectsOversizedHeader(t *testing.T) {
	t.Parallel()
	base, _ := startGateway(t)
	resp, _ := get(t, base+"/", "X-Big", strings.Repeat("a", 100<<10))
	if got, want := resp.StatusCode, http.StatusRequestHeaderFieldsTooLarge; got != want {
		t.Errorf("status %d, want %d", got, want)
	}
	// Just under the cap passes.
	resp, _ = get(t, base+"/", "X-Big", strings.Repeat("a", 60<<10))
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("60 KiB of headers: status %d, want %d", got, want)
	}
}
