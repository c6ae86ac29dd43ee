package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/internal/testhttp"
)

const adminToken = "0123456789abcdef0123456789abcdef"

// TestUsageAPI: a monthly plan end to end on the memory store: the usage
// API reads a tenant's budgets (its own override included), a reset
// makes the quota whole and the tenant is admitted at once (its cached
// denial forgotten), each call is counted, and a tenant the file does
// not hold is 404.
func TestUsageAPI(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [
	  {"name": "per-second", "limit": 100, "window": "1s"},
	  {"name": "monthly", "limit": 3, "period": "month"}]}`)
	tenants := writeFile(t, "tenants.json", `{"tenants": [
	  {"id": "acme", "api_keys": ["k-acme"]},
	  {"id": "globex", "api_keys": ["k-globex"], "limits": [{"name": "monthly", "limit": 2}]}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_TENANTS_FILE="+tenants, "TOLLGATE_ADMIN_TOKEN="+adminToken)
	auth := http.Header{"Authorization": {"Bearer " + adminToken}}
	usage := func(method, path string) (int, admin.UsageBody) {
		t.Helper()
		resp, body := testhttp.Do(t, method, g.Admin+path, "", auth)
		var b admin.UsageBody
		if resp.StatusCode == 200 {
			if err := json.Unmarshal([]byte(body), &b); err != nil {
				t.Fatalf("%s %s: %q: %v", method, path, body, err)
			}
		}
		return resp.StatusCode, b
	}
	for range 4 {
		get(t, g.Public+"/", "X-API-Key", "k-acme")
	}
	if resp, _ := get(t, g.Public+"/", "X-API-Key", "k-acme"); resp.StatusCode != 429 {
		t.Fatalf("acme over its monthly quota: %d, want 429", resp.StatusCode)
	}
	code, b := usage("GET", "/v1/tenants/acme/usage")
	if code != 200 || len(b.Limits) != 2 || b.Limits[1].Name != "monthly" || b.Limits[1].Used != 3 || b.Limits[1].Remaining != 0 || b.Limits[1].Period != "month" {
		t.Fatalf("acme's usage: %d %+v, want monthly used 3 of 3", code, b)
	}
	if _, b := usage("GET", "/v1/tenants/globex/usage"); b.Limits[1].Limit != 2 || b.Limits[1].Used != 0 {
		t.Errorf("globex's usage: %+v, want its own monthly limit of 2, nothing used", b.Limits[1])
	}
	code, b = usage("POST", "/v1/tenants/acme/reset?limit=monthly")
	if code != 200 || b.Limits[1].Used != 0 || b.Limits[1].Remaining != 3 {
		t.Fatalf("reset: %d %+v, want monthly whole", code, b)
	}
	if resp, _ := get(t, g.Public+"/", "X-API-Key", "k-acme"); resp.StatusCode != 200 {
		t.Errorf("acme right after the reset: %d, want 200 (the deny cache forgot it)", resp.StatusCode)
	}
	if code, _ := usage("GET", "/v1/tenants/initech/usage"); code != 404 {
		t.Errorf("a tenant the file does not hold: %d, want 404", code)
	}
	if resp, _ := testhttp.Do(t, "GET", g.Admin+"/v1/tenants/acme/usage", "", nil); resp.StatusCode != 401 {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	_, metrics := get(t, g.Admin+"/metrics")
	for _, want := range []string{`tollgate_admin_actions_total{action="usage"} 3`, `tollgate_admin_actions_total{action="reset"} 1`, `tollgate_admin_actions_total{action="unauthorized"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if logs := g.Logs(); !strings.Contains(logs, `"msg":"usage API: reset","tenant":"acme","limit":"monthly"`) || strings.Contains(logs, adminToken) {
		t.Errorf("logs: want the reset's audit line and never the token:\n%s", logs)
	}
}

// TestUsageAPIOff: without TOLLGATE_ADMIN_TOKEN the API's paths are 404,
// with a token or without.
func TestUsageAPIOff(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t)
	for _, h := range []http.Header{nil, {"Authorization": {"Bearer " + adminToken}}} {
		if resp, _ := testhttp.Do(t, "GET", g.Admin+"/v1/tenants/acme/usage", "", h); resp.StatusCode != 404 {
			t.Errorf("usage API off: %d, want 404", resp.StatusCode)
		}
	}
}
