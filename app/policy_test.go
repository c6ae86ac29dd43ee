package app_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/strictjson"
	"github.com/tollgate/tollgate/ports"
)

// TestExamples runs docs/policies.md's walkthrough over the examples/
// files on the memory store.
func TestExamples(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, append([]string{"TOLLGATE_ACCESS_LOG=true"}, apptest.ExampleEnviron...)...)
	apptest.CheckExamples(t, g)
	routes := map[string]string{} // route → an outcome seen on it
	for _, l := range logtest.Lines(t, g.Logs(), "access") {
		routes[l["route"].(string)] = l["outcome"].(string)
	}
	for _, route := range []string{"search", "status", "export", "default"} {
		if _, ok := routes[route]; !ok {
			t.Errorf("no access line on route %s (got %v)", route, routes)
		}
	}
	if routes["status"] != "unmetered" {
		t.Errorf("access line on route status: outcome %q, want unmetered", routes["status"])
	}
	// 15 shadow denials in a second or two: one or two log lines.
	lines := logtest.Lines(t, g.Logs(), "shadow limit would deny; admitted")
	if len(lines) < 1 || len(lines) > 3 {
		t.Fatalf("%d shadow log lines, want 1 to 3 (throttled to one a second)", len(lines))
	}
	if l := lines[0]; l["route"] != "default" || l["limits"] != "per-minute" || l["tenant"] != "acme" {
		t.Errorf("shadow log line %v, want route default, limits per-minute, tenant acme", l)
	}
}

// badPolicyFiles are policy files that must be rejected, each with a
// fragment the error must contain.
var badPolicyFiles = []struct {
	name, content, want string
}{
	{"empty file", ``, `empty file: want a JSON object with "limits" and "routes" arrays`},
	{"syntax error", "{\"limits\": [\n  {\"name\": \"a\" \"limit\": 1}]}", `2:16: limits[0]: invalid character '"' after object value (expecting ',' or '}')`},
	{"truncated", `{"limits": [`, "unexpected end of file"},
	{"trailing data", `{"limits": [{"name": "a", "limit": 1, "window": "1s"}]} []`, "1:57: invalid character '[' after top-level value"},
	{"not an object", `[]`, "got a JSON array, want an object"},
	{"unknown field", "{\"limits\": [\n  {\"name\": \"a\", \"limit\": 1, \"window\": \"1s\", \"shadw\": true}]}", `2:45: limits[0].shadw: unknown field "shadw"`},
	{"unknown top-level field", `{"limit": []}`, `unknown field "limit"`},
	{"field in another case", `{"limits": [{"Name": "a", "limit": 1, "window": "1s"}]}`,
		`limits[0].Name: unknown field "Name" (field names are case-sensitive: want "name")`},
	{"repeated member", `{"routes": [{"name": "r", "path": "/a", "path": "/b"}]}`, `routes[0].path: repeated member "path"`},
	{"repeated top-level member", `{"limits": [], "limits": []}`, `limits: repeated member "limits"`},
	{"type error", `{"routes": [{"name": "r", "path": "/a", "cost": "5"}]}`, "1:49: routes[0].cost: got a JSON string, want an integer"},
	{"shadow not a bool", `{"limits": [{"name": "a", "limit": 1, "window": "1s", "shadow": "yes"}]}`, "got a JSON string, want true or false"},
	{"nothing", `{}`, "no limit at all"},
	{"empty lists", `{"limits": [], "routes": []}`, "no limit at all"},
	{"no limit", `{"limits": [{"name": "a", "window": "1s"}]}`, `limits[0] (name "a"): no "limit"`},
	{"no window", `{"limits": [{"name": "a", "limit": 1}]}`, `limits[0] (name "a"): no "window"`},
	{"bad window", `{"limits": [{"name": "a", "limit": 1, "window": "soon"}]}`, `window "soon": want a Go duration`},
	{"window and period", `{"limits": [{"name": "m", "limit": 1, "window": "1h", "period": "month"}]}`, `both "window" and "period"`},
	{"unknown period", `{"limits": [{"name": "m", "limit": 1, "period": "fortnight"}]}`, `period "fortnight": want day, week, month or year`},
	{"unknown zone", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "Mars/Olympus"}]}`, `timezone "Mars/Olympus": not in the time-zone database`},
	{"local zone", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "Local"}]}`, `timezone "Local": want an IANA zone`},
	{"the host's zone", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "localtime"}]}`, `timezone "localtime": want an IANA zone`},
	{"a zone of leap seconds", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "right/Europe/Berlin"}]}`, `timezone "right/Europe/Berlin": want an IANA zone`},
	{"posixrules", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "posixrules"}]}`, `timezone "posixrules": want an IANA zone`},
	{"a zone spelt as a path", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "./Europe/Berlin"}]}`, `timezone "./Europe/Berlin": want an IANA zone`},
	{"a zone with an empty segment", `{"limits": [{"name": "m", "limit": 1, "period": "month", "timezone": "Europe//Berlin"}]}`, `timezone "Europe//Berlin": want an IANA zone`},
	{"anchor day 32", `{"limits": [{"name": "m", "limit": 1, "period": "month", "anchor_day": 32}]}`, `anchor_day=32, want 1 to 31`},
	{"anchor day 0", `{"limits": [{"name": "m", "limit": 1, "period": "month", "anchor_day": 0}]}`, `anchor_day 0: want 1 to 31`},
	{"anchor day on a week", `{"limits": [{"name": "w", "limit": 1, "period": "week", "anchor_day": 3}]}`, `anchor_day=3`},
	{"anchor month on a month", `{"limits": [{"name": "m", "limit": 1, "period": "month", "anchor_month": 2}]}`, `anchor_month=2`},
	{"zone without a period", `{"limits": [{"name": "m", "limit": 1, "window": "1h", "timezone": "UTC"}]}`, `need a "period"`},
	{"calendar limit below a route's cost", `{"limits": [{"name": "m", "limit": 2, "period": "month"}], "routes": [{"name": "x", "path": "/x", "cost": 5}]}`, `cost 5 is above limit "m"'s limit of 2`},
	{"window too short", `{"limits": [{"name": "a", "limit": 1, "window": "1us"}]}`, "invalid rule: window=1µs"},
	{"limit 0", `{"limits": [{"name": "a", "limit": 0, "window": "1s"}]}`, "invalid rule: limit=0"},
	{"bad route limit", `{"routes": [{"name": "r", "path": "/a", "limits": [{"name": "x", "limit": 1}]}]}`, `routes[0].limits[0] (name "x"): no "window"`},
	{"bad limit name", `{"limits": [{"name": "Per_Day", "limit": 1, "window": "1s"}]}`, `limits[0] (name "Per_Day"): bad name`},
	{"duplicate limit name", `{"limits": [{"name": "a", "limit": 1, "window": "1s"}, {"name": "a", "limit": 2, "window": "1s"}]}`,
		`limits[1] (name "a"): duplicate limit name, also limits[0]`},
	{"duplicate route name", `{"routes": [{"name": "r", "path": "/a"}, {"name": "r", "path": "/b"}]}`, "duplicate route name"},
	{"duplicate route", `{"routes": [{"name": "r", "method": "GET", "path": "/a"}, {"name": "s", "method": "GET", "path": "/a"}]}`,
		"duplicate route: routes[0] has the same method and path"},
	{"route path not normal", `{"routes": [{"name": "r", "path": "/a/../b"}]}`, `path "/a/../b" is not a normal path`},
	{"route without path", `{"routes": [{"name": "r"}]}`, `path "" is not a normal path`},
	{"bad method", `{"routes": [{"name": "r", "method": "GET /", "path": "/a"}]}`, "not an HTTP method token"},
	{"cost too high", `{"routes": [{"name": "r", "path": "/a", "cost": 1000001}]}`, "cost 1000001: want an integer from 0 to 1000000"},
	{"unknown meter", `{"limits": [{"name": "a", "limit": 1, "window": "1s", "meter": "bytes"}]}`, `meter "bytes": want "requests" (the default) or "tokens"`},
	{"reserve 0", `{"limits": [{"name": "t", "limit": 9, "window": "1s", "meter": "tokens"}], "routes": [{"name": "r", "path": "/a", "tokens": "openai", "reserve": 0}]}`,
		`routes[0] (name "r"): reserve 0: want an integer from 1 to 4294967296, or no "reserve" for 1024`},
	{"token source unknown", `{"limits": [{"name": "t", "limit": 9, "window": "1s", "meter": "tokens"}], "routes": [{"name": "r", "path": "/a", "tokens": "usage"}]}`,
		`tokens "usage": want "openai" or "header:<Name>"`},
	{"negative cost", `{"routes": [{"name": "r", "path": "/a", "cost": -1}]}`, "cost -1"},
	{"cost 0 with limits of its own", `{"routes": [{"name": "free", "path": "/a", "cost": 0, "limits": [{"name": "b", "limit": 5, "window": "1s"}]}]}`,
		`routes[0] (name "free"): cost 0 is not metered at all, so the route's own limits would never apply`},
	{"every problem reported, a window that does not parse too", `{"limits": [{"name": "A", "limit": 0, "window": "x"}], "routes": [{"name": "r", "path": "a"}]}`,
		`: limits[0] (name "A"): window "x": want a Go duration from 1ms to 8784h0m0s, such as "1m"; limits[0] (name "A"): bad name: want 1 to 32 of a-z 0-9 -; limits[0] (name "A"): invalid rule: limit=0, want 1 to 1000000000; routes[0] (name "r"): path "a" is not a normal path`},
	{"every problem reported", `{"limits": [{"name": "A", "limit": 1, "window": "1s"}], "routes": [{"name": "r", "path": "x", "cost": -2}]}`,
		`: limits[0] (name "A"): bad name: want 1 to 32 of a-z 0-9 -; routes[0] (name "r"): path "x" is not a normal path starting with / and without a trailing slash; routes[0] (name "r"): cost -2`},
}

// TestBadPolicyFile checks each bad file twice: LoadPolicyFile returns a
// *strictjson.FileError naming TOLLGATE_POLICY_FILE, and Run exits 2 with
// it before listening.
func TestBadPolicyFile(t *testing.T) {
	t.Parallel()
	for _, tt := range append(badPolicyFiles, badConcurrencyPolicies...) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, "policy.json", tt.content)
			_, err := app.LoadPolicyFile(path, false)
			var fe *strictjson.FileError
			if !errors.As(err, &fe) || fe.Path != path || fe.Var != "TOLLGATE_POLICY_FILE" {
				t.Errorf("LoadPolicyFile: error %v is not a *FileError for POLICY_FILE %s", err, path)
			}
			checkFileError(t, "LoadPolicyFile", err, path, tt.want)
			checkRunRejectsFile(t, "TOLLGATE_POLICY_FILE", path, tt.want)
		})
	}
	path := t.TempDir() + "/nope.json"
	_, err := app.LoadPolicyFile(path, false)
	checkFileError(t, "LoadPolicyFile", err, path, "read: no such file or directory")
}

// TestPolicyFileShadowAll: TOLLGATE_SHADOW puts every limit, global or a
// route's, in shadow mode.
func TestPolicyFileShadowAll(t *testing.T) {
	t.Parallel()
	for _, all := range []bool{false, true} {
		p, err := app.LoadPolicyFile("../examples/policy.json", all)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"per-second", "per-minute", "per-day", "exports"} {
			l, ok := p.Limit(name)
			if want := all || name == "per-minute"; !ok || l.Shadow != want {
				t.Errorf("shadow all %v: limit %s: %+v, %v; want shadow %v", all, name, l, ok, want)
			}
		}
		if r := p.Match("POST", "/v1/search"); r.Name != "search" || r.Cost != 5 {
			t.Errorf("POST /v1/search: route %s cost %d", r.Name, r.Cost)
		}
		if r := p.Match("GET", "/v1/export"); r.Cost != 1 {
			t.Errorf("export: cost %d, want the default 1", r.Cost)
		}
	}
}

// TestTenantsFileOverrides: a tenant's limits override named limits of
// the policy, global or a route's, each field defaulting to the
// policy's; names the policy lacks are errors.
func TestTenantsFileOverrides(t *testing.T) {
	t.Parallel()
	policy, err := app.LoadPolicyFile("../examples/policy.json", false)
	if err != nil {
		t.Fatal(err)
	}
	load := func(content string) (*engine.Directory, error) {
		return app.LoadTenantsFile(writeFile(t, "tenants.json", content), policy)
	}
	dir, err := load(`{"tenants": [
	  {"id": "acme", "api_keys": ["k1"], "limits": [{"name": "per-second", "limit": 100}, {"name": "exports", "window": "2h"}]},
	  {"id": "globex", "api_keys": ["k2"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(&engine.Snapshot{Policy: policy, Tenants: dir}, engine.Options{Keys: keys.Layout{}, Limiter: ports.LimiterFunc(nil)})
	acme := eng.Resolve(engine.Credentials{APIKey: "k1"})
	want := map[string]domain.Rule{
		"per-second": {Limit: 100, Window: time.Second},
		"exports":    {Limit: 10, Window: 2 * time.Hour},
	}
	if !sameTenant(acme, engine.Tenant{ID: "acme", Rules: want}) {
		t.Errorf("acme = %+v, want own rules %v", acme, want)
	}
	if u := eng.Resolve(engine.Credentials{APIKey: "nope"}); u.ID != domain.Unknown || u.Rules != nil {
		t.Errorf("unknown = %+v, want the policy's rules", u)
	}

	for _, tt := range []struct{ content, want string }{
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "per-week", "limit": 1}]}]}`,
			`tenants[0] (id "a"): limits[0] (name "per-week"): the policy has no limit of that name`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limit": 5}]}`,
			`limit and window override the limit "default", which the policy file does not have`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "exports", "limit": 1}, {"name": "exports", "limit": 2}]}]}`,
			`limits[1] (name "exports"): overridden twice`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "exports", "limit": 0}]}]}`,
			`limits[0] (name "exports"): limit 0: want an integer`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "exports", "window": "x"}]}]}`, `window "x"`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "exports", "shadow": true}]}]}`, `unknown field "shadow"`},
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"Name": "exports"}]}]}`, `unknown field "Name"`},
		// Below the cost of a route the limit applies to: search costs 5,
		// and per-second applies to every route.
		{`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "per-second", "limit": 2}]}]}`,
			`limits[0] (name "per-second"): invalid policy: limit 2 is below the cost 5 of route "search"`},
	} {
		_, err := load(tt.content)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "TOLLGATE_TENANTS_FILE") {
			t.Errorf("tenants %s: error %v, want one naming TOLLGATE_TENANTS_FILE and %q", tt.content, err, tt.want)
		}
	}

	// Without a policy file, limits may name "default", like limit/window.
	ft, err := loadFileTenants(t, writeFile(t, "tenants.json",
		`{"tenants": [{"id": "a", "api_keys": ["k"], "limits": [{"name": "default", "limit": 7}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := ft.eng.Resolve(engine.Credentials{APIKey: "k"}); got.Rules["default"] != (domain.Rule{Limit: 7, Window: defaultRule.Window}) {
		t.Errorf("limits naming default: rule %+v, want 7 per %v", got.Rules["default"], defaultRule.Window)
	}
}

// TestRunPolicyAndTenantsReload: SIGHUP re-reads both files as one; a
// bad policy file keeps both the old policy and the old tenants, and a
// tenants file that names a limit the new policy lacks is rejected with
// it.
func TestRunPolicyAndTenantsReload(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "a", "limit": 5, "window": "1m"}]}`)
	tenants := writeFile(t, "tenants.json", `{"tenants": [{"id": "acme", "api_keys": ["k"], "limits": [{"name": "a", "limit": 3}]}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_TENANTS_FILE="+tenants)
	header := func() string {
		resp, _ := get(t, g.Public+"/", "X-API-Key", "k")
		return strings.Join(resp.Header.Values("RateLimit-Policy"), ", ")
	}
	if got, want := header(), `"a";q=3;w=60`; got != want {
		t.Fatalf("start: RateLimit-Policy %q, want %q", got, want)
	}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// Both files change together: a new limit, and acme's override of it.
	rewrite(t, policy, `{"limits": [{"name": "a", "limit": 5, "window": "1m"}, {"name": "b", "limit": 9, "window": "1h"}]}`)
	rewrite(t, tenants, `{"tenants": [{"id": "acme", "api_keys": ["k"], "limits": [{"name": "b", "limit": 4}]}]}`)
	hup()
	waitFor(t, "the new pair", func() bool { return header() == `"a";q=5;w=60, "b";q=4;w=3600` })

	// A bad policy file: both stay.
	rewrite(t, policy, `{"limits": [{"name": "a", "limit": 0, "window": "1m"}]}`)
	rewrite(t, tenants, `{"tenants": [{"id": "acme", "api_keys": ["k"]}]}`)
	hup()
	waitFor(t, "the policy rejection", func() bool {
		return len(logtest.Lines(t, g.Logs(), "policy file rejected; keeping the previous policy and tenants")) > 0
	})
	if got, want := header(), `"a";q=5;w=60, "b";q=4;w=3600`; got != want {
		t.Errorf("after a bad policy: RateLimit-Policy %q, want %q (both files as they were)", got, want)
	}

	// A good policy without "b", and tenants still naming "b": rejected
	// as a pair.
	rewrite(t, policy, `{"limits": [{"name": "a", "limit": 6, "window": "1m"}]}`)
	rewrite(t, tenants, `{"tenants": [{"id": "acme", "api_keys": ["k"], "limits": [{"name": "b", "limit": 4}]}]}`)
	hup()
	waitFor(t, "the tenants rejection", func() bool {
		return len(logtest.Lines(t, g.Logs(), "tenants file rejected; keeping the previous tenants and policy")) > 0
	})
	if got, want := header(), `"a";q=5;w=60, "b";q=4;w=3600`; got != want {
		t.Errorf("after inconsistent files: RateLimit-Policy %q, want %q", got, want)
	}
}

// TestRunPolicyReloadHeaderMode: without a tenants file, SIGHUP reloads
// the policy file alone.
func TestRunPolicyReloadHeaderMode(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "a", "limit": 5, "window": "1m"}]}`)
	g := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy)
	header := func() string {
		resp, _ := get(t, g.Public+"/x", "X-Tenant-ID", "acme")
		return strings.Join(resp.Header.Values("RateLimit-Policy"), ", ")
	}
	if got, want := header(), `"a";q=5;w=60`; got != want {
		t.Fatalf("start: RateLimit-Policy %q, want %q", got, want)
	}
	rewrite(t, policy, `{"limits": [{"name": "a", "limit": 5, "window": "1m"}], "routes": [{"name": "x", "path": "/x", "limits": [{"name": "xs", "limit": 2, "window": "1s"}]}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new policy", func() bool { return header() == `"a";q=5;w=60, "xs";q=2;w=1` })
	rewrite(t, policy, `{"limits": [{"name": "a", "limit": 5, "window": "1m"}], "bogus": 1}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rejection", func() bool {
		return len(logtest.Lines(t, g.Logs(), "policy file rejected; keeping the previous policy")) > 0
	})
	if got, want := header(), `"a";q=5;w=60, "xs";q=2;w=1`; got != want {
		t.Errorf("after a bad policy: %q, want %q", got, want)
	}
}

// TestMiddlewarePolicy drives the proxy face over a policy with a
// scripted limiter: a route of cost 0 never reaches the limiter; the
// request carries the route's cost, its limits in order (global, then
// own) with the tenant's rules and keys; a shadow denial is admitted with
// its headers and no Retry-After; a denial's Retry-After ignores shadow
// limits.
func TestMiddlewarePolicy(t *testing.T) {
	t.Parallel()
	policy, err := app.LoadPolicyFile("../examples/policy.json", false)
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.Request
	var verdict func(domain.Request) domain.Verdict
	lim := ports.LimiterFunc(func(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		got = append(got, req)
		return verdict(req), nil
	})
	h := proxy.New(proxy.Options{
		Engine:   engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: lim, Keys: keys.Layout{Prefix: "rl:"}}),
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
	})
	serve := func(method, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, nil)
		r.Header.Set("X-Tenant-ID", "acme")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	verdict = func(domain.Request) domain.Verdict { t.Fatal("the limiter was asked"); return domain.Verdict{} }
	if w := serve("GET", "/status/x"); w.Code != 200 || w.Header()["RateLimit"] != nil || len(got) != 0 {
		t.Errorf("cost 0: %d, headers %v, %d decisions; want 200, no headers, no decision", w.Code, w.Header(), len(got))
	}

	// Each limit decides on its own: per-minute (shadow) denies.
	decide := func(deny map[string]time.Duration) func(domain.Request) domain.Verdict {
		return func(req domain.Request) domain.Verdict {
			return domain.Settle(req, domain.CountAdmitted, nil, func(i int, cost int64) domain.Decision {
				if wait, ok := deny[req.Limits[i].Name]; ok && cost > 0 {
					return domain.Decision{Limit: req.Limits[i].Rule.Limit, ResetAfter: wait, RetryAfter: wait}
				}
				return domain.Decision{Allowed: true, Limit: req.Limits[i].Rule.Limit, Remaining: 3, ResetAfter: time.Second}
			})
		}
	}
	verdict = decide(map[string]time.Duration{"per-minute": 40 * time.Second})
	w := serve("GET", "/v1/export/a")
	if w.Code != 200 || w.Header().Get("Retry-After") != "" {
		t.Errorf("shadow denial: %d, Retry-After %q; want 200 without Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if got, want := w.Header()["RateLimit"], `"per-second";r=3;t=1, "per-minute";r=0;t=40, "per-day";r=3;t=1, "exports";r=3;t=1`; len(got) != 1 || got[0] != want {
		t.Errorf("shadow denial: RateLimit %q, want %q", got, want)
	}
	req := got[len(got)-1]
	if req.Route != "export" || len(req.Limits) != 4 {
		t.Fatalf("request %+v, want route export, cost 1, four limits", req)
	}
	for i, want := range []domain.Limit{
		{Name: "per-second", Key: "rl:{acme}:per-second", Rule: domain.Rule{Limit: 20, Window: time.Second}, Cost: 1},
		{Name: "per-minute", Key: "rl:{acme}:per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}, Cost: 1, Shadow: true},
		{Name: "per-day", Key: "rl:{acme}:per-day", Rule: domain.Rule{Limit: 100000, Window: 24 * time.Hour}, Cost: 1},
		{Name: "exports", Key: "rl:{acme}:route:export:exports", Rule: domain.Rule{Limit: 10, Window: time.Hour}, Cost: 1},
	} {
		if req.Limits[i] != want {
			t.Errorf("limit %d: %+v, want %+v", i, req.Limits[i], want)
		}
	}

	// An enforced denial beside a longer shadow one: Retry-After is the
	// enforced limit's.
	verdict = decide(map[string]time.Duration{"per-minute": 50 * time.Second, "exports": 7 * time.Second})
	if w := serve("GET", "/v1/export"); w.Code != 429 || w.Header().Get("Retry-After") != "7" {
		t.Errorf("enforced denial: %d, Retry-After %q; want 429, 7", w.Code, w.Header().Get("Retry-After"))
	}
	// A search costs 5.
	verdict = decide(nil)
	serve("POST", "/v1/search")
	if req := got[len(got)-1]; req.Route != "search" || len(req.Limits) != 3 || req.Limits[0].Cost != 5 || req.Limits[2].Cost != 5 {
		t.Errorf("search: %+v, want route search, cost 5, three limits", req)
	}
}
