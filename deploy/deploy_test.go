// Package deploy_test checks what deploy/ ships beside the binary: the
// Grafana dashboard and the Prometheus alert rules parse, their tests
// pass (promtool), and every metric they query is one a running gateway
// exposes.
package deploy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
)

const (
	dashboardFile = "grafana/tollgate.json"
	rulesFile     = "prometheus/tollgate-alerts.yml"
	rulesTestFile = "prometheus/tollgate-alerts.test.yml"
)

// promtool returns the path of promtool, or skips the test without it;
// with TOLLGATE_REQUIRE_DOCKER=1 or TOLLGATE_REQUIRE_PROMTOOL=1 (CI:
// scripts/test.sh installs Debian's prometheus) it fails instead.
func promtool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	if os.Getenv("TOLLGATE_REQUIRE_DOCKER") == "1" || os.Getenv("TOLLGATE_REQUIRE_PROMTOOL") == "1" {
		t.Fatal("no promtool on PATH, and TOLLGATE_REQUIRE_DOCKER=1 or TOLLGATE_REQUIRE_PROMTOOL=1 requires it (apt-get install prometheus; make test installs it)")
	}
	t.Skip("no promtool on PATH (apt-get install prometheus); TOLLGATE_REQUIRE_PROMTOOL=1 makes this a failure")
	return ""
}

func run(t *testing.T, dir string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// TestAlertRules: promtool checks the rules and runs their tests.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	p := promtool(t)
	run(t, ".", p, "check", "rules", rulesFile)
	run(t, "prometheus", p, "test", "rules", filepath.Base(rulesTestFile))
}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name, Type string
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type, UID string
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr       string `json:"expr"`
		Datasource *struct {
			Type, UID string
		} `json:"datasource"`
	} `json:"targets"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// exprs returns every PromQL expression of the dashboard, with its
// variables given values Prometheus accepts.
func exprs(d dashboard) []string {
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m", "$job", ".*")
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, vars.Replace(tg.Expr))
		}
	}
	return out
}

// TestDashboard: the dashboard is importable as it is (a fixed uid, a
// data source variable every panel uses, panels within the grid) and
// promtool parses every one of its queries.
func TestDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.UID == "" || d.SchemaVersion < 30 {
		t.Errorf("uid %q, schemaVersion %d: want a fixed uid and a current schema", d.UID, d.SchemaVersion)
	}
	if len(d.Templating.List) == 0 || d.Templating.List[0].Name != "datasource" || d.Templating.List[0].Type != "datasource" {
		t.Errorf("the first variable is not a datasource variable named datasource")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W <= 0 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			queries++
			if tg.Expr == "" || tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: a target without a query or the ${datasource} variable", p.Title)
			}
		}
	}
	if queries < 10 {
		t.Fatalf("%d queries: the dashboard was not read", queries)
	}
	p := promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs(d) {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i, q)
	}
	f := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, ".", p, "check", "rules", f)
}

var metricName = regexp.MustCompile(`\btollgate_[a-z0-9_]+`)

// TestQueriedMetricsExist: every metric the dashboard and the rules
// query is in /metrics of a running gateway that has seen traffic
// (allowed, denied, on a route with a concurrency limit, on a route with
// a token limit), and none has a tenant label.
func TestQueriedMetricsExist(t *testing.T) {
	t.Parallel()
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"limits": [{"name": "per-minute", "limit": 2, "window": "1m"}],
	  "routes": [{"name": "search", "path": "/search", "limits": [{"name": "parallel", "concurrency": 5}]},
	    {"name": "chat", "path": "/chat", "tokens": "openai", "reserve": 10, "limits": [{"name": "tpm", "limit": 100000, "window": "1m", "meter": "tokens"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// An upstream that answers as an LLM API does, with the tokens used.
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}`))
	}))
	t.Cleanup(upstream.Close)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_UPSTREAM_URL="+upstream.URL)
	for _, path := range []string{"/search", "/search", "/search", "/search", "/chat", "/chat"} {
		req, _ := http.NewRequest(http.MethodPost, g.Public+path, strings.NewReader(`{"model": "m"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tenant-ID", "acme-"+path[1:]) // the global limit spares the other route
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/chat" && resp.StatusCode != http.StatusOK {
			t.Errorf("POST /chat: %d, want 200", resp.StatusCode)
		}
		resp.Body.Close()
	}
	// A token route's settlement is counted once its answer has ended,
	// which may be after the client read it.
	var families map[string]string // name → type
	for deadline := time.Now().Add(10 * time.Second); ; {
		families = scrape(t, g.Admin+"/metrics")
		if _, ok := families["tollgate_tokens_used_total"]; ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(families) < 10 {
		t.Fatalf("/metrics: %d families", len(families))
	}
	queried := map[string][]string{}
	rules, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metricName.FindAllString(string(rules), -1) {
		queried[m] = append(queried[m], rulesFile)
	}
	for _, e := range exprs(readDashboard(t)) {
		for _, m := range metricName.FindAllString(e, -1) {
			queried[m] = append(queried[m], dashboardFile)
		}
	}
	if len(queried) < 8 {
		t.Fatalf("%d metrics queried: the files were not read", len(queried))
	}
	for m, where := range queried {
		if _, ok := families[m]; ok {
			continue
		}
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if families[base] == "histogram" {
			continue
		}
		t.Errorf("%s, queried in %s, is not in /metrics", m, where[0])
	}
}

// scrape returns the metric families of url, by name, with their type;
// it fails t on a series that names a tenant.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	families := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			families[f[2]] = f[3]
		}
		if strings.Contains(line, "tenant=") || strings.Contains(line, "acme") {
			t.Errorf("/metrics: a series names a tenant: %s", line)
		}
	}
	return families
}
