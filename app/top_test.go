package app_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/testhttp"
)

func TestTopTenantsVariable(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"0", "1", "20", "1000"} {
		if _, err := app.LoadConfig([]string{"TOLLGATE_TOP_TENANTS=" + ok}); err != nil {
			t.Errorf("TOLLGATE_TOP_TENANTS=%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"-1", "1001", "many", "2.5"} {
		err := app.Run(t.Context(), []string{"tollgate"}, []string{"TOLLGATE_TOP_TENANTS=" + bad}, &logtest.Buffer{}, &logtest.Buffer{})
		if app.ExitCode(err) != 2 || !strings.Contains(err.Error(), "TOLLGATE_TOP_TENANTS=") || !strings.Contains(err.Error(), "0 (off) to 1000") {
			t.Errorf("TOLLGATE_TOP_TENANTS=%s: %v (exit %d), want exit 2 naming it and what it accepts", bad, err, app.ExitCode(err))
		}
	}
}

// topOf reads g's /v1/top.
func topOf(t *testing.T, g *apptest.Gateway, query string) (int, admin.TopBody) {
	t.Helper()
	resp, body := testhttp.Do(t, "GET", g.Admin+"/v1/top"+query, "", http.Header{"Authorization": {"Bearer " + adminToken}})
	var b admin.TopBody
	if resp.StatusCode == 200 {
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatalf("/v1/top%s: %q: %v", query, body, err)
		}
	}
	return resp.StatusCode, b
}

// TestTopEndToEnd: on the memory store, a tenant denied on a policy's
// limit is at the top of that limit, with its denials, its admissions
// while watched and its remaining budget; the feed carries its denials;
// /metrics names no tenant; the token is required.
func TestTopEndToEnd(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "per-minute", "limit": 3, "window": "1m"}],
	  "routes": [{"name": "search", "path": "/search", "limits": [{"name": "searches", "limit": 100, "window": "1h"}]}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_ADMIN_TOKEN="+adminToken, "TOLLGATE_DENY_CACHE=false")

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", g.Admin+"/v1/denials", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("/v1/denials: %d %q, want 200 text/event-stream", resp.StatusCode, ct)
	}
	events := make(chan map[string]string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev map[string]string
				if json.Unmarshal([]byte(data), &ev) == nil && ev["tenant"] != "" {
					events <- ev
				}
			}
		}
	}()

	for i := range 7 {
		resp, _ := get(t, g.Public+"/search", "X-Tenant-ID", "noisy-tenant")
		if want := map[bool]int{true: 200, false: 429}[i < 3]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	get(t, g.Public+"/search", "X-Tenant-ID", "quiet-tenant")

	select {
	case ev := <-events:
		if ev["tenant"] != "noisy-tenant" || ev["limit"] != "per-minute" || ev["route"] != "search" || ev["client"] != "127.0.0.1" || ev["time"] == "" {
			t.Errorf("feed event %v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no denial on the feed within 10 s")
	}

	var b admin.TopBody
	waitFor(t, "the tenant in /v1/top", func() bool {
		code, body := topOf(t, g, "?window=5m")
		b = body
		return code == 200 && len(body.Limits) == 1 && len(body.PerSecond) > 0
	})
	l := b.Limits[0]
	if l.Limit != "per-minute" || l.Denied != 4 || len(l.Tenants) != 1 {
		t.Fatalf("limits %+v, want per-minute with 4 denials of one tenant", b.Limits)
	}
	if tt := l.Tenants[0]; tt.Tenant != "noisy-tenant" || tt.Denied != 4 || tt.DeniedMin != 4 || tt.Remaining == nil || *tt.Remaining != 0 {
		t.Errorf("tenant %+v, want noisy-tenant denied 4, remaining 0", tt)
	}
	if b.Replicas != 1 || b.WindowSeconds != 300 {
		t.Errorf("replicas %d, window %d: want 1 and 300", b.Replicas, b.WindowSeconds)
	}

	for _, q := range []string{"?window=10m", "?window=30s", "?window=abc", "?limit=5"} {
		if code, _ := topOf(t, g, q); code != 400 {
			t.Errorf("/v1/top%s: %d, want 400", q, code)
		}
	}
	for _, path := range []string{"/v1/top", "/v1/denials"} {
		if resp, _ := testhttp.Do(t, "GET", g.Admin+path, "", nil); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without the token: %d, want 401 with WWW-Authenticate", path, resp.StatusCode)
		}
	}
	resp2, page := get(t, g.Admin+"/ui/")
	if resp2.StatusCode != 200 || !strings.Contains(page, "who is being limited") || !strings.Contains(resp2.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("/ui/: %d, CSP %q", resp2.StatusCode, resp2.Header.Get("Content-Security-Policy"))
	}
	_, metrics := get(t, g.Admin+"/metrics")
	if strings.Contains(metrics, "noisy-tenant") || strings.Contains(metrics, "quiet-tenant") {
		t.Errorf("/metrics names a tenant")
	}
	if !strings.Contains(metrics, `tollgate_admin_actions_total{action="top"}`) {
		t.Errorf("/metrics does not count the calls of /v1/top")
	}
}

// TestTopOff: with TOLLGATE_TOP_TENANTS=0, or without an admin token,
// the paths are 404.
func TestTopOff(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{{"TOLLGATE_TOP_TENANTS=0", "TOLLGATE_ADMIN_TOKEN=" + adminToken}, {}} {
		g := apptest.Start(t, env...)
		for _, path := range []string{"/v1/top", "/v1/denials", "/ui/"} {
			if resp, _ := testhttp.Do(t, "GET", g.Admin+path, "", http.Header{"Authorization": {"Bearer " + adminToken}}); resp.StatusCode != 404 {
				t.Errorf("%v: %s: %d, want 404", env, path, resp.StatusCode)
			}
		}
	}
}

// TestTopFeedEndsAtShutdown: an open feed of denials ends when the
// gateway shuts down, rather than holding the shutdown to its grace.
func TestTopFeedEndsAtShutdown(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_ADMIN_TOKEN="+adminToken)
	req, _ := http.NewRequestWithContext(t.Context(), "GET", g.Admin+"/v1/denials", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	// The grace is 10 s: a feed that held it would take that long.
	if took := time.Since(start); took >= app.ShutdownTimeout {
		t.Errorf("shutdown with a feed open took %s, the whole grace", took)
	}
}
