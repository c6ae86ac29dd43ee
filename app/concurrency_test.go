package app_test

import (
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/logtest"
)

func TestLoadConfigLease(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"1s", "10m", "2500ms"} {
		if _, err := app.LoadConfig([]string{"TOLLGATE_LEASE=" + ok}); err != nil {
			t.Errorf("TOLLGATE_LEASE=%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"999ms", "10m1s", "0s", "-1s", "soon", "10"} {
		_, err := app.LoadConfig([]string{"TOLLGATE_LEASE=" + bad})
		var ce *app.ConfigError
		if !errors.As(err, &ce) || ce.Var != "TOLLGATE_LEASE" {
			t.Errorf("TOLLGATE_LEASE=%s: error %v, want a *ConfigError naming TOLLGATE_LEASE", bad, err)
			continue
		}
		if bad != "soon" && bad != "10" && !strings.Contains(err.Error(), "from 1s to 10m") {
			t.Errorf("TOLLGATE_LEASE=%s: %q does not say what is accepted", bad, err)
		}
	}
	// Run exits 2 naming it.
	err := app.Run(t.Context(), []string{"tollgate"}, []string{"TOLLGATE_LEASE=11m"}, &logtest.Buffer{}, &logtest.Buffer{})
	if app.ExitCode(err) != 2 || !strings.Contains(err.Error(), "TOLLGATE_LEASE") {
		t.Errorf("Run with TOLLGATE_LEASE=11m: %v (exit %d), want exit 2 naming TOLLGATE_LEASE", err, app.ExitCode(err))
	}
}

// badConcurrencyPolicies are policy files with a bad concurrency limit,
// among the bad policy files of TestBadPolicyFile.
var badConcurrencyPolicies = []struct{ name, content, want string }{
	{"zero", `{"limits": [{"name": "inflight", "concurrency": 0}]}`, `limits[0] (name "inflight"): invalid rule: concurrency=0, want 1 to 1000000`},
	{"too many", `{"limits": [{"name": "inflight", "concurrency": 1000001}]}`, `concurrency=1000001, want 1 to 1000000`},
	{"negative, a route's", `{"routes": [{"name": "r", "path": "/r", "limits": [{"name": "inflight", "concurrency": -5}]}]}`,
		`routes[0].limits[0] (name "inflight"): invalid rule: concurrency=-5`},
	{"with a limit", `{"limits": [{"name": "inflight", "concurrency": 5, "limit": 10}]}`, `"concurrency" with "limit", "window" or "period"`},
	{"with a window", `{"limits": [{"name": "inflight", "concurrency": 5, "window": "1s"}]}`, `"concurrency" with "limit", "window" or "period"`},
	{"with a period", `{"limits": [{"name": "inflight", "concurrency": 5, "period": "day"}]}`, `"concurrency" with "limit", "window" or "period"`},
	{"with a time zone", `{"limits": [{"name": "inflight", "concurrency": 5, "timezone": "UTC"}]}`, `"concurrency" with "limit", "window" or "period"`},
	{"not an integer", `{"limits": [{"name": "inflight", "concurrency": 2.5}]}`, `concurrency`},
}

// TestConcurrencyBeyondCost: a route's cost does not apply to a
// concurrency limit (TestBadPolicyFile runs badConcurrencyPolicies).
func TestConcurrencyBeyondCost(t *testing.T) {
	t.Parallel()
	if _, err := app.LoadPolicyFile(writeFile(t, "policy.json",
		`{"limits": [{"name": "inflight", "concurrency": 2}], "routes": [{"name": "heavy", "path": "/h", "cost": 50}]}`), false); err != nil {
		t.Errorf("concurrency 2 beside a route of cost 50: %v, want accepted", err)
	}
}

// TestBadConcurrencyOverride: a tenant overrides a concurrency limit's
// concurrency (1 to 10⁶), and nothing else of it; a rate limit has none.
func TestBadConcurrencyOverride(t *testing.T) {
	t.Parallel()
	policy, err := app.LoadPolicyFile(writeFile(t, "policy.json",
		`{"limits": [{"name": "per-minute", "limit": 60, "window": "1m"}, {"name": "default", "concurrency": 5}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ content, want string }{
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "default", "concurrency": 0}]}]}`, `concurrency=0, want 1 to 1000000`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "default", "limit": 3}]}]}`, `override its "concurrency"`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "default", "window": "1s"}]}]}`, `override its "concurrency"`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "per-minute", "concurrency": 3}]}]}`, `"concurrency" overrides a concurrency limit's`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limit": 3}]}`, `a concurrency limit: override its "concurrency"`},
	} {
		path := writeFile(t, "tenants.json", tt.content)
		_, err := app.LoadTenantsFile(path, policy)
		checkFileError(t, "LoadTenantsFile", err, path, tt.want)
	}
	if _, err := app.LoadTenantsFile(writeFile(t, "tenants.json",
		`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "default", "concurrency": 1000000}]}]}`), policy); err != nil {
		t.Errorf("concurrency 10⁶: %v, want accepted", err)
	}
}

// fetch sends GET url with the tenant header, in a goroutine of its own,
// and sends its status on the returned channel.
func fetch(url, tenant string) <-chan int {
	out := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("X-Tenant-ID", tenant)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- 0
			return
		}
		resp.Body.Close()
		out <- resp.StatusCode
	}()
	return out
}

// TestConcurrencyLimit, end to end on the memory store: a tenant holds at
// most its concurrency of requests at the upstream; another is denied at
// once with 429, Retry-After 1 and the concurrency headers, and spends
// no rate budget; slots come back as the requests end; the gauge follows.
// A tenant's own concurrency applies.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	up := apptest.NewUpstream(t)
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "per-minute", "limit": 100, "window": "1m"}, {"name": "inflight", "concurrency": 2}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_UPSTREAM_URL="+up.URL)
	held := []<-chan int{fetch(g.Public+"/hold", "acme"), fetch(g.Public+"/hold", "acme")}
	up.WaitInFlight(t, 2)
	for i := range 3 {
		resp, _ := get(t, g.Public+"/", "X-Tenant-ID", "acme")
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("request %d with 2 in flight: %d, Retry-After %q; want 429, 1", i+1, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		if got, want := strings.Join(resp.Header.Values("RateLimit-Policy"), ", "), `"per-minute";q=100;w=60, "inflight";q=2;qu="concurrent-requests"`; got != want {
			t.Errorf("RateLimit-Policy %q, want %q", got, want)
		}
		// Denied for want of a slot: the rate limit spent nothing (98 left).
		if got := strings.Join(resp.Header.Values("RateLimit"), ", "); !strings.HasPrefix(got, `"per-minute";r=98;`) || !strings.HasSuffix(got, `"inflight";r=0;t=1`) {
			t.Errorf("RateLimit %q, want per-minute r=98 and \"inflight\";r=0;t=1", got)
		}
	}
	if resp, _ := get(t, g.Public+"/", "X-Tenant-ID", "globex"); resp.StatusCode != 200 {
		t.Errorf("another tenant: %d, want 200", resp.StatusCode)
	}
	if got := gauge(t, g, "inflight"); got != "2" {
		t.Errorf("tollgate_in_flight{limit=\"inflight\"} = %s with 2 in flight, want 2", got)
	}
	up.Open()
	for i, c := range held {
		if status := <-c; status != 200 {
			t.Errorf("held request %d: %d, want 200", i+1, status)
		}
	}
	waitFor(t, "the gauge back at 0", func() bool { return gauge(t, g, "inflight") == "0" })
	if resp, _ := get(t, g.Public+"/", "X-Tenant-ID", "acme"); resp.StatusCode != 200 {
		t.Errorf("after the requests ended: %d, want 200", resp.StatusCode)
	}
}

// gauge returns the value of tollgate_in_flight{limit} on g's admin
// listener, as text.
func gauge(t *testing.T, g *apptest.Gateway, limit string) string {
	t.Helper()
	_, body := get(t, g.Admin+"/metrics")
	prefix := `tollgate_in_flight{limit="` + limit + `"} `
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimPrefix(line, prefix)
		}
	}
	return "absent"
}

// TestConcurrencyLowered: a concurrency limit lowered by SIGHUP evicts no
// running request; it refuses new ones until fewer than the new limit
// run. A bad concurrency in the new file is refused and the old policy
// kept.
func TestConcurrencyLowered(t *testing.T) {
	t.Parallel()
	up := apptest.NewUpstream(t)
	policy := writeFile(t, "policy.json", `{"routes": [{"name": "slow", "path": "/", "limits": [{"name": "slow-inflight", "concurrency": 3}]}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_UPSTREAM_URL="+up.URL)
	var held []<-chan int
	for range 3 {
		held = append(held, fetch(g.Public+"/hold", "acme"))
	}
	up.WaitInFlight(t, 3)
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	policyOf := func() (int, string) {
		resp, _ := get(t, g.Public+"/hold", "X-Tenant-ID", "acme") // denied (or held, if admitted)
		return resp.StatusCode, strings.Join(resp.Header.Values("RateLimit-Policy"), ", ")
	}
	for i, bad := range []string{`"concurrency": 0`, `"concurrency": 1000001`, `"concurrency": 2, "window": "1s"`, `"concurrency": 2, "limit": 5`} {
		rewrite(t, policy, `{"routes": [{"name": "slow", "path": "/", "limits": [{"name": "slow-inflight", `+bad+`}]}]}`)
		hup()
		waitFor(t, "the rejection of "+bad, func() bool {
			return len(logtest.Lines(t, g.Logs(), "policy file rejected; keeping the previous policy")) > i
		})
		if status, got := policyOf(); status != 429 || got != `"slow-inflight";q=3;qu="concurrent-requests"` {
			t.Fatalf("after a file with %s: %d, %q; want 429 under the old limit of 3", bad, status, got)
		}
	}
	rewrite(t, policy, `{"routes": [{"name": "slow", "path": "/", "limits": [{"name": "slow-inflight", "concurrency": 1}]}]}`)
	hup()
	waitFor(t, "the lowered limit", func() bool {
		status, got := policyOf()
		return status == 429 && got == `"slow-inflight";q=1;qu="concurrent-requests"`
	})
	if n := up.InFlight(); n != 3 {
		t.Errorf("%d requests at the upstream after the limit was lowered, want the 3 running (none evicted)", n)
	}
	// The running requests end one by one: new ones are refused until
	// fewer than the new cap run, 2 and 1 running included.
	for running := int64(2); running >= 1; running-- {
		up.Release(t)
		up.WaitInFlight(t, running)
		if status, _ := policyOf(); status != 429 {
			t.Errorf("%d running under a cap of 1: a new request got %d, want 429", running, status)
		}
	}
	up.Release(t)
	up.WaitInFlight(t, 0)
	for i, c := range held {
		if status := <-c; status != 200 {
			t.Errorf("running request %d: %d, want 200 (it was admitted before the change)", i+1, status)
		}
	}
	up.Open()
	// One slot now: one request at a time.
	var wg sync.WaitGroup
	statuses := make(chan int, 4)
	for range 4 {
		wg.Go(func() {
			resp, _ := get(t, g.Public+"/sleep?ms=1000", "X-Tenant-ID", "acme")
			statuses <- resp.StatusCode
		})
	}
	wg.Wait()
	close(statuses)
	ok := 0
	for s := range statuses {
		if s == 200 {
			ok++
		}
	}
	if ok != 1 || up.Most() > 3 {
		t.Errorf("4 at once under a limit of 1: %d admitted, most at the upstream %d; want 1, and never more than the 3 held before", ok, up.Most())
	}
}

// TestConcurrencyOnTheCheckListener: checks leave concurrency limits out
// (a check never learns when its request ends), and the start-up log
// says so; the proxy listener's requests take their slots.
func TestConcurrencyOnTheCheckListener(t *testing.T) {
	t.Parallel()
	up := apptest.NewUpstream(t)
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "per-minute", "limit": 100, "window": "1m"}],
	  "routes": [{"name": "slow", "path": "/hold", "limits": [{"name": "slow-inflight", "concurrency": 1}]}]}`)
	g := apptest.Start(t, checkAddr, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_UPSTREAM_URL="+up.URL)
	const note = "concurrency limits do not apply on the check listener: a check never learns when its request ends; they apply on the proxy listener"
	if lines := logtest.Lines(t, g.Logs(), note); len(lines) != 1 || lines[0]["limits"] != "slow-inflight" {
		t.Errorf("start-up note: %v, want one naming slow-inflight", lines)
	}
	held := fetch(g.Public+"/hold", "acme") // takes the one slot
	up.WaitInFlight(t, 1)
	if resp, _ := get(t, g.Public+"/hold", "X-Tenant-ID", "acme"); resp.StatusCode != 429 {
		t.Errorf("a second proxied request on the slow route: %d, want 429", resp.StatusCode)
	}
	for i := range 3 {
		resp, _ := get(t, g.Check+"/", "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/hold")
		if resp.StatusCode != 200 || strings.Contains(resp.Header.Get("RateLimit-Policy"), "slow-inflight") {
			t.Errorf("check %d on the slow route, its slot taken: %d, RateLimit-Policy %q; want 200 without the concurrency limit",
				i+1, resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
		}
	}
	up.Open()
	if status := <-held; status != 200 {
		t.Errorf("the held request: %d, want 200", status)
	}
	if lines := logtest.Lines(t, apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy).Logs(), note); len(lines) != 0 {
		t.Errorf("without a check listener: %v, want no note", lines)
	}
}
