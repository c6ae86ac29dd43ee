package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// TestCalendarQuota: a monthly quota with a billing date, end to end on
// the memory store: RateLimit-Policy's w is the current period's real
// length, X-RateLimit-Reset is the period's end to the second on every
// response, the denial's Retry-After points at it, and a tenant's own
// billing date and limit override the policy's.
func TestCalendarQuota(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [
	  {"name": "per-second", "limit": 100, "window": "1s"},
	  {"name": "monthly", "limit": 3, "period": "month", "timezone": "UTC"}]}`)
	tenants := writeFile(t, "tenants.json", `{"tenants": [
	  {"id": "acme", "api_keys": ["k-acme"]},
	  {"id": "globex", "api_keys": ["k-globex"], "limits": [{"name": "monthly", "limit": 2, "anchor_day": 17, "timezone": "America/New_York"}]}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_TENANTS_FILE="+tenants, "TOLLGATE_ALGORITHM=token_bucket")

	now := time.Now().UTC()
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	monthEnd := monthStart.AddDate(0, 1, 0)
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	local := now.In(ny)
	billStart := time.Date(local.Year(), local.Month(), 17, 0, 0, 0, 0, ny)
	if local.Before(billStart) {
		billStart = billStart.AddDate(0, -1, 0)
	}
	billEnd := time.Date(billStart.Year(), billStart.Month()+1, 17, 0, 0, 0, 0, ny)

	for _, tt := range []struct {
		key        string
		limit      int
		start, end time.Time
	}{
		{"k-acme", 3, monthStart, monthEnd},
		{"k-globex", 2, billStart, billEnd},
	} {
		wantPolicy := `"per-second";q=100;w=1, "monthly";q=` + strconv.Itoa(tt.limit) + `;w=` + strconv.FormatInt(int64(tt.end.Sub(tt.start)/time.Second), 10)
		for i := range tt.limit + 1 {
			resp, _ := get(t, g.Public+"/", "X-API-Key", tt.key)
			if got := strings.Join(resp.Header.Values("RateLimit-Policy"), ", "); got != wantPolicy {
				t.Fatalf("%s request %d: RateLimit-Policy %q, want %q (the period's real length)", tt.key, i+1, got, wantPolicy)
			}
			// The monthly limit is the tightest: the reset is its boundary,
			// to the second, admitted or denied (not the second after it).
			if reset := resp.Header.Get("X-RateLimit-Reset"); reset != strconv.FormatInt(tt.end.Unix(), 10) {
				t.Errorf("%s request %d: X-RateLimit-Reset %s, want the period's end %d", tt.key, i+1, reset, tt.end.Unix())
			}
			if i < tt.limit {
				if resp.StatusCode != 200 {
					t.Fatalf("%s request %d: %d, want 200", tt.key, i+1, resp.StatusCode)
				}
				continue
			}
			if resp.StatusCode != 429 {
				t.Fatalf("%s over the quota: %d, want 429", tt.key, resp.StatusCode)
			}
			retry, _ := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
			if left := int64(time.Until(tt.end) / time.Second); retry < left-5 || retry > left+5 {
				t.Errorf("%s: Retry-After %d s, want about %d s (the period's end, %v)", tt.key, retry, left, tt.end)
			}
		}
	}
}

// TestTenantsCalendarOverridesBad: what a tenant's entry cannot say of
// a calendar limit stops the start-up, naming the file, the tenant and
// the limit.
func TestTenantsCalendarOverridesBad(t *testing.T) {
	t.Parallel()
	policy, err := app.LoadPolicyFile(writeFile(t, "policy.json", `{"limits": [
	  {"name": "default", "limit": 100, "period": "day"},
	  {"name": "monthly", "limit": 1000, "period": "month"},
	  {"name": "per-second", "limit": 10, "window": "1s"}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ entry, want string }{
		{`"window": "1h"`, `window: the limit "default" is a calendar limit: it has a period, not a window`},
		{`"limits": [{"name": "monthly", "window": "1h"}]`, `limits[0] (name "monthly"): a calendar limit has a period, not a window`},
		{`"limits": [{"name": "per-second", "timezone": "UTC"}]`, `limits[0] (name "per-second"): "timezone", "anchor_day" and "anchor_month" override a calendar limit's`},
		{`"limits": [{"name": "monthly", "timezone": "Mars/Olympus_Mons"}]`, `timezone "Mars/Olympus_Mons": not in the time-zone database`},
		{`"limits": [{"name": "monthly", "timezone": "Local"}]`, `timezone "Local": want an IANA zone`},
		{`"limits": [{"name": "monthly", "anchor_day": 32}]`, `anchor_day=32, want 1 to 31`},
		{`"limits": [{"name": "monthly", "anchor_month": 3}]`, `anchor_month=3 on a month period`},
		{`"limits": [{"name": "default", "anchor_day": 3}]`, `anchor_day=3 on a day period`},
		{`"limits": [{"name": "monthly", "period": "year"}]`, `unknown field "period"`},
	} {
		content := `{"tenants": [{"id": "acme", "api_keys": ["k"], ` + tt.entry + `}]}`
		_, err := app.LoadTenantsFile(writeFile(t, "tenants.json", content), policy)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "TOLLGATE_TENANTS_FILE") || !strings.Contains(err.Error(), "tenants[0]") {
			t.Errorf("tenant %s: error %v, want one naming TOLLGATE_TENANTS_FILE, the tenant and %q", tt.entry, err, tt.want)
		}
	}
}

// TestMonthlyPlansExample runs README's monthly plan over the files
// it shows (examples/plans.json, examples/customers.json): globex's
// trial of 5 a month admits five requests and denies the sixth until its
// billing date, and the usage API reads and resets it. README must show
// the files as they are, and its command must name them.
func TestMonthlyPlansExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plans.json", "customers.json"} {
		b, err := os.ReadFile("../examples/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), string(b)) {
			t.Errorf("README does not show examples/%s as it is:\n%s", name, b)
		}
		if !strings.Contains(string(readme), "=examples/"+name) {
			t.Errorf("README's command does not name examples/%s", name)
		}
	}
	const token = "0123456789abcdef0123456789abcdef"
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE=../examples/plans.json", "TOLLGATE_TENANTS_FILE=../examples/customers.json",
		"TOLLGATE_ADMIN_TOKEN="+token)
	for i, want := range []int{200, 200, 200, 200, 200, 429} {
		if resp, _ := get(t, g.Public+"/", "X-API-Key", "k-globex"); resp.StatusCode != want {
			t.Fatalf("globex request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	monthly := func(resp *http.Response, body string) (used, remaining int) {
		t.Helper()
		var u struct {
			Limits []struct {
				Name            string
				Used, Remaining int
			}
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &u) != nil || len(u.Limits) != 2 || u.Limits[1].Name != "monthly" {
			t.Fatalf("usage: %d %s", resp.StatusCode, body)
		}
		return u.Limits[1].Used, u.Limits[1].Remaining
	}
	if used, remaining := monthly(get(t, g.Admin+"/v1/tenants/globex/usage", "Authorization", "Bearer "+token)); used != 5 || remaining != 0 {
		t.Errorf("globex's month: used %d, remaining %d; want 5, 0", used, remaining)
	}
	if used, remaining := monthly(testhttp.Do(t, http.MethodPost, g.Admin+"/v1/tenants/globex/reset?limit=monthly", "", http.Header{"Authorization": {"Bearer " + token}})); used != 0 || remaining != 5 {
		t.Errorf("globex's month after its reset: used %d, remaining %d; want 0, 5", used, remaining)
	}
}
