package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// TestListenersDoNotWaitForStalledBodies: on every HTTP listener, a
// request whose body stalls is answered at once where the body is never
// read (the admin listener, the check listener, a denial on the proxy),
// and its connection is then closed; none waits for the body.
func TestListenersDoNotWaitForStalledBodies(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_CHECK_ADDR=127.0.0.1:0", "TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=1h",
		"TOLLGATE_ADMIN_TOKEN=0123456789abcdef0123456789abcdef")
	if resp, err := http.Get(g.Public + "/spend"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the one request of the budget: %v %v", resp, err)
	}
	for _, tt := range []struct {
		name, base, request string
		code                int
	}{
		{"admin healthz", g.Admin, "POST /healthz HTTP/1.1", http.StatusMethodNotAllowed},
		{"admin usage API", g.Admin, "GET /v1/tenants/acme/usage HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef", http.StatusOK},
		{"admin reset with a body", g.Admin, "POST /v1/tenants/acme/reset HTTP/1.1\r\nAuthorization: Bearer 0123456789abcdef0123456789abcdef", http.StatusBadRequest},
		{"check", g.Check, "POST / HTTP/1.1\r\nX-Forwarded-Uri: /x\r\nX-Forwarded-Method: GET", http.StatusTooManyRequests},
		{"proxy denial", g.Public, "POST /x HTTP/1.1", http.StatusTooManyRequests},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, closed := testhttp.Raw(t, tt.base, tt.request+"\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
			if status != tt.code || !closed {
				t.Errorf("status %d, connection closed %v; want %d, closed", status, closed, tt.code)
			}
		})
	}
}

// TestRunWarnsOfUnknownVariables: a TOLLGATE_* variable no setting reads
// is logged once at start-up, with the variable it most likely meant;
// the gateway starts all the same (the setting keeps its default).
func TestRunWarnsOfUnknownVariables(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_LIMT=5", "TOLLGATE_SOMETHING_ELSE=1", "OTHER_PREFIX_LIMT=1")
	logs := g.Logs()
	for _, want := range []string{
		`"msg":"unknown variable ignored: no setting reads it","variable":"TOLLGATE_LIMT","did_you_mean":"TOLLGATE_LIMIT"`,
		`"variable":"TOLLGATE_SOMETHING_ELSE","did_you_mean":""`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "OTHER_PREFIX") || strings.Count(logs, "unknown variable ignored") != 2 {
		t.Errorf("logs warn of %d variables, want the 2 TOLLGATE_ ones:\n%s", strings.Count(logs, "unknown variable ignored"), logs)
	}
	if !strings.Contains(logs, `"limit":100`) {
		t.Errorf("the limit is not the default 100:\n%s", logs)
	}
}

// TestRunWarnsOfIneffectiveVariables: a setting that the others make
// moot is logged once at start-up, with what it needs: a
// TOLLGATE_REDIS_URL without TOLLGATE_STORE=redis ran every replica on
// its own in-memory budget without a word.
func TestRunWarnsOfIneffectiveVariables(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "per-second", "limit": 20, "window": "1s"}]}`)
	g := apptest.Start(t, "TOLLGATE_REDIS_URL=redis://10.0.0.7:6379/0", "TOLLGATE_LEASE=30s",
		"TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_LIMIT=5", "TOLLGATE_IPV6_PREFIX=48",
		"TOLLGATE_CHECK_DENY_STATUS=403", "TOLLGATE_RLS_COUNT_DENIED=true", "TOLLGATE_REPLICAS=3",
		"TOLLGATE_REDIS_TIMEOUT=", "TOLLGATE_REDIS_MODE=single", "TOLLGATE_SHADOW=false")
	logs := g.Logs()
	for _, want := range []string{
		`"msg":"variable ignored: it has no effect with the other settings","variable":"TOLLGATE_REDIS_URL","applies_with":"TOLLGATE_STORE=redis"`,
		`"variable":"TOLLGATE_LEASE","applies_with":"TOLLGATE_STORE=redis"`,
		`"variable":"TOLLGATE_LIMIT","applies_with":"no TOLLGATE_POLICY_FILE (the policy file's limits replace it)"`,
		`"variable":"TOLLGATE_IPV6_PREFIX","applies_with":"TOLLGATE_ANONYMOUS=ip"`,
		`"variable":"TOLLGATE_CHECK_DENY_STATUS","applies_with":"TOLLGATE_CHECK_ADDR"`,
		`"variable":"TOLLGATE_RLS_COUNT_DENIED","applies_with":"TOLLGATE_RLS_ADDR"`,
		`"variable":"TOLLGATE_REPLICAS","applies_with":"TOLLGATE_FAIL_MODE=local and TOLLGATE_STORE=redis"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	// Empty is unset, a default changes nothing; the listeners apptest
	// sets and TOLLGATE_SHADOW apply.
	if n := strings.Count(logs, "variable ignored: it has no effect"); n != 7 {
		t.Errorf("logs warn of %d variables, want 7:\n%s", n, logs)
	}

	quiet := apptest.Start(t, "TOLLGATE_LIMIT=5", "TOLLGATE_ANONYMOUS=ip", "TOLLGATE_IPV6_PREFIX=48",
		"TOLLGATE_CHECK_ADDR=127.0.0.1:0", "TOLLGATE_CHECK_DENY_STATUS=403")
	if logs := quiet.Logs(); strings.Contains(logs, "variable ignored") {
		t.Errorf("a gateway whose settings all apply warns:\n%s", logs)
	}
}

// TestOptionsStarIsDecided: "OPTIONS *" reaches the handlers: the check
// listener decides the request it describes (net/http answered 200
// itself, a check never decided), and the proxy refuses the target.
func TestOptionsStarIsDecided(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_CHECK_ADDR=127.0.0.1:0", "TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=1h")
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		status, _, _ := testhttp.Raw(t, g.Check, "OPTIONS * HTTP/1.1\r\nHost: h\r\nX-Tenant-ID: acme\r\nX-Forwarded-Uri: /v1/export\r\nConnection: close\r\n\r\n")
		if status != want {
			t.Errorf("check %d of OPTIONS *: %d, want %d", i+1, status, want)
		}
	}
	if status, _, _ := testhttp.Raw(t, g.Public, "OPTIONS * HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"); status != http.StatusBadRequest {
		t.Errorf("the proxy's OPTIONS *: %d, want 400", status)
	}
}

// TestRunWarnsOfUnverifiedRedisTLS: skip_verify=true in a rediss:// URL
// turns off the check of Redis's certificate, which go-redis did
// without a word; the start-up log now says so, and only then.
func TestRunWarnsOfUnverifiedRedisTLS(t *testing.T) {
	t.Parallel()
	const msg = "redis: TLS without certificate verification (skip_verify=true in TOLLGATE_REDIS_URL): whoever is on the path to Redis can pose as it"
	for url, warn := range map[string]bool{
		"rediss://:pw@127.0.0.1:1/0?skip_verify=true":  true,
		"rediss://:pw@127.0.0.1:1/0?skip_verify=false": false,
		"rediss://:pw@127.0.0.1:1/0":                   false,
		"redis://:pw@127.0.0.1:1/0":                    false,
	} {
		g := apptest.Start(t, "TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL="+url)
		if got := strings.Contains(g.Logs(), msg); got != warn {
			t.Errorf("%s: warned %v, want %v:\n%s", url, got, warn, g.Logs())
		}
	}
}
