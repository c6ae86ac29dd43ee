package apptest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ExampleEnviron is what a gateway needs to run the repository's
// examples/ files, from a package directory one level below the root
// (app/, integration/).
var ExampleEnviron = []string{
	"TOLLGATE_POLICY_FILE=../examples/policy.json",
	"TOLLGATE_TENANTS_FILE=../examples/tenants.json",
}

// CheckExamples walks g, a fresh gateway running the fixed window over
// the examples/ files ([ExampleEnviron]), through what docs/policies.md's
// walkthrough shows: every limit in the headers at the route's cost, an
// unmetered route, a route's own limit denying without spending from the
// global ones, and a shadow limit counting would-be denials in /metrics
// while everyone is admitted.
func CheckExamples(t *testing.T, g *Gateway) {
	t.Helper()
	send := func(method, path, key string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, g.Public+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	header := func(resp *http.Response, name string) string { return strings.Join(resp.Header.Values(name), ", ") }

	// A search costs 5 from each global limit; acme has its own per-second.
	resp := send("POST", "/v1/search", "k-acme-1")
	if resp.StatusCode != 200 {
		t.Fatalf("POST /v1/search as acme: %d, want 200", resp.StatusCode)
	}
	if got, want := header(resp, "RateLimit-Policy"), `"per-second";q=100;w=1, "per-minute";q=60;w=60, "per-day";q=100000;w=86400`; got != want {
		t.Errorf("search: RateLimit-Policy %q, want %q", got, want)
	}
	if got := header(resp, "RateLimit"); !strings.HasPrefix(got, `"per-second";r=95;t=`) ||
		!strings.Contains(got, `"per-minute";r=55;t=`) || !strings.Contains(got, `"per-day";r=99995;t=`) {
		t.Errorf("search: RateLimit %q, want 95, 55 and 99995 remaining", got)
	}
	// The most constrained enforced limit: per-minute is in shadow mode,
	// and shadow limits never steer X-RateLimit-*.
	if got, want := header(resp, "X-RateLimit-Remaining"), "95"; got != want || header(resp, "X-RateLimit-Limit") != "100" {
		t.Errorf("search: X-RateLimit-Limit/Remaining %s/%s, want 100/95 (the most constrained enforced limit, not the shadow per-minute)", header(resp, "X-RateLimit-Limit"), got)
	}

	// Cost 0: not metered, no headers.
	if resp := send("GET", "/status", "k-acme-1"); resp.StatusCode != 200 || header(resp, "RateLimit") != "" {
		t.Errorf("GET /status: %d with RateLimit %q, want 200 without rate-limit headers", resp.StatusCode, header(resp, "RateLimit"))
	}

	// initech's own exports limit of 2: the third export is denied for
	// about an hour, and spends nothing from the global limits.
	for i, want := range []int{200, 200, 429} {
		resp := send("GET", "/v1/export/report", "k-initech")
		if resp.StatusCode != want {
			t.Errorf("export %d as initech: %d, want %d", i+1, resp.StatusCode, want)
		}
		if got, want := header(resp, "RateLimit-Policy"), `"per-second";q=20;w=1, "per-minute";q=60;w=60, "per-day";q=100000;w=86400, "exports";q=2;w=3600`; got != want {
			t.Errorf("export %d: RateLimit-Policy %q, want %q", i+1, got, want)
		}
		if want == 429 {
			if s, _ := strconv.Atoi(resp.Header.Get("Retry-After")); s < 3500 || s > 3600 {
				t.Errorf("denied export: Retry-After %q, want about 3600", resp.Header.Get("Retry-After"))
			}
			if got := header(resp, "RateLimit"); !strings.Contains(got, `"exports";r=0;`) || !strings.Contains(got, `"per-day";r=99998;`) {
				t.Errorf("denied export: RateLimit %q, want exports at 0 and per-day at 99998 (the denial spent nothing)", got)
			}
		}
	}
	if resp := send("GET", "/v1/other", "k-initech"); resp.StatusCode != 200 || !strings.Contains(header(resp, "RateLimit"), `"per-day";r=99997;`) {
		t.Errorf("initech elsewhere: %d, RateLimit %q, want 200 and per-day at 99997", resp.StatusCode, header(resp, "RateLimit"))
	}

	// acme's per-minute limit is in shadow mode: 55 units were left, so
	// of 70 more requests 15 would have been denied; all are admitted.
	var last *http.Response
	for i := range 70 {
		last = send("GET", "/v1/items", "k-acme-2")
		if last.StatusCode != 200 {
			t.Fatalf("acme request %d: %d, want 200 (the per-minute limit is in shadow mode)", i+1, last.StatusCode)
		}
	}
	if got := header(last, "RateLimit"); !strings.Contains(got, `"per-minute";r=0;`) {
		t.Errorf("last acme request: RateLimit %q, want per-minute at 0 (headers as computed)", got)
	}
	if last.Header.Get("Retry-After") != "" {
		t.Error("an admitted request has Retry-After")
	}

	metrics := g.Metrics(t)
	for _, want := range []string{
		`tollgate_decisions_total{algorithm="fixed_window",outcome="shadow_denied"} 15`,
		`tollgate_limit_decisions_total{limit="per-minute",outcome="shadow_denied",route="default"} 15`,
		`tollgate_limit_decisions_total{limit="per-minute",outcome="allowed",route="default"} 56`,
		`tollgate_limit_decisions_total{limit="exports",outcome="denied",route="export"} 1`,
		`tollgate_limit_decisions_total{limit="per-day",outcome="allowed",route="export"} 3`,
		`tollgate_requests_total{code="200",route="search"} 1`,
		`tollgate_requests_total{code="200",route="status"} 1`,
		`tollgate_requests_total{code="429",route="export"} 1`,
		`tollgate_requests_total{code="200",route="default"} 71`,
		`tollgate_upstream_duration_seconds_count{route="export"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, tenant := range []string{"acme", "initech", "globex"} {
		if strings.Contains(metrics, tenant) {
			t.Errorf("/metrics names tenant %s", tenant)
		}
	}
}

// Metrics returns the text of g's /metrics.
func (g *Gateway) Metrics(t testing.TB) string {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return string(b)
}
