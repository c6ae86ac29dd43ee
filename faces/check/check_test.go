package check_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/ports"
)

// TestCheckDescribedRequest: the described method and URI come from
// X-Forwarded-Method/-Uri, else X-Original-Method/-URI, else the check
// request's own; the path is normalised and matched as on the proxy and
// the query ignored; what does not parse, or climbs above "/", is 400
// and is never put to the limiter.
func TestCheckDescribedRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		header []string
		status int
		route  string // "" with a 400, or an unmetered route
	}{
		{"caddy and traefik", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/search?q=1"}, 200, "search"},
		{"nginx", []string{"X-Original-Method", "POST", "X-Original-URI", "/v1/search"}, 200, "search"},
		{"X-Forwarded-Uri wins", []string{"X-Forwarded-Uri", "/v1/export", "X-Original-URI", "/v1/search", "X-Original-Method", "POST"}, 200, "export"},
		{"X-Forwarded-Method wins", []string{"X-Forwarded-Method", "GET", "X-Original-Method", "POST", "X-Original-URI", "/v1/search"}, 200, "default"},
		{"the check request's own method", []string{"X-Original-URI", "/v1/search"}, 200, "default"},
		{"the check request's own URI", []string{"X-Forwarded-Method", "POST"}, 200, "default"},
		{"an empty header is absent", []string{"X-Forwarded-Uri", "", "X-Original-URI", "/v1/export"}, 200, "export"},
		{"method in any case", []string{"X-Forwarded-Method", "post", "X-Forwarded-Uri", "/v1/search"}, 200, "search"},
		{"HEAD matches a GET route", []string{"X-Forwarded-Method", "HEAD", "X-Forwarded-Uri", "/v1/items"}, 200, "items"},
		{"normalised", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1//search/"}, 200, "search"},
		{"a dot segment", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/./x/..//search/"}, 400, ""},
		{"escapes decoded", []string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/%73earch"}, 200, "search"},
		{"read as the most lenient upstream", []string{"X-Forwarded-Uri", "/v1/export;jsessionid=1"}, 200, "export"},
		{"the query is ignored", []string{"X-Forwarded-Uri", "/v1/items?path=/v1/export"}, 200, "items"},
		{"absolute form", []string{"X-Forwarded-Uri", "https://api.example.com/v1/export?a=1"}, 200, "export"},
		{"absolute form, any case", []string{"X-Forwarded-Uri", "HTTP://api.example.com/v1/export"}, 200, "export"},
		{"unmetered", []string{"X-Forwarded-Uri", "/status/x"}, 200, ""},

		{"climbs above /", []string{"X-Forwarded-Uri", "/../v1/export"}, 400, ""},
		{"climbs above /, encoded", []string{"X-Forwarded-Uri", "/v1/%2e%2e/%2E%2E/admin"}, 400, ""},
		{"climbs once read leniently", []string{"X-Forwarded-Uri", "/v1/..%2f..%2fadmin"}, 400, ""},
		{"climbs, nginx", []string{"X-Original-URI", "/a/../../etc/passwd"}, 400, ""},
		{"malformed escape", []string{"X-Forwarded-Uri", "/v1/%zz"}, 400, ""},
		{"relative", []string{"X-Forwarded-Uri", "v1/export"}, 400, ""},
		{"asterisk", []string{"X-Forwarded-Uri", "*"}, 400, ""},
		{"a space", []string{"X-Forwarded-Uri", "/v1/export x"}, 400, ""},
		{"a control byte", []string{"X-Forwarded-Uri", "/v1/\x01export"}, 400, ""},
		{"another scheme", []string{"X-Forwarded-Uri", "ftp://host/v1/export"}, 400, ""},
		{"absolute form without a host", []string{"X-Forwarded-Uri", "http:///v1/export"}, 400, ""},
		{"absolute form that climbs", []string{"X-Forwarded-Uri", "http://h/../x"}, 400, ""},
		{"method not a token", []string{"X-Forwarded-Method", "PO ST", "X-Forwarded-Uri", "/v1/search"}, 400, ""},
		{"method with a slash", []string{"X-Original-Method", "GET/1", "X-Original-URI", "/v1/search"}, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, lim, _ := newCheck(t, setup{})
			w := ask(h, tt.header...)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d (body %q)", w.Code, tt.status, w.Body.String())
			}
			asked := lim.(*recorder).asked()
			switch {
			case tt.route == "" && len(asked) != 0:
				t.Errorf("the limiter was asked %v, want nothing spent", asked)
			case tt.route != "" && (len(asked) != 1 || asked[0].Route != tt.route):
				t.Errorf("the limiter was asked %v, want one request on route %s", asked, tt.route)
			}
			if tt.status == 400 && w.Header().Get("X-Tenant-ID") != "" {
				t.Errorf("a 400 carries X-Tenant-ID %q", w.Header().Get("X-Tenant-ID"))
			}
		})
	}
}

// TestCheckAnswers: allowed is 200 with an empty body, the rate-limit
// headers and X-Tenant-ID; a denial is the deny status (429, or 403)
// with the headers, Retry-After and the denial's body, and no X-Tenant-ID;
// the route's cost is spent from every limit.
func TestCheckAnswers(t *testing.T) {
	t.Parallel()
	for _, deny := range []int{0, 429, 403} {
		want := deny
		if want == 0 {
			want = 429
		}
		h, _, _ := newCheck(t, setup{denyStatus: deny})
		search := []string{"X-Tenant-ID", "acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/search"}
		steps := []struct {
			status               int
			rateLimit, remaining string
		}{
			{200, `"per-minute";r=5;t=30`, "5"},
			{200, `"per-minute";r=0;t=30`, "0"},
			{want, `"per-minute";r=0;t=30`, "0"},
		}
		for i, s := range steps {
			w := ask(h, search...)
			hdr := w.Header()
			if w.Code != s.status {
				t.Errorf("deny %d, step %d: status %d, want %d", deny, i, w.Code, s.status)
			}
			for name, v := range map[string]string{
				"RateLimit-Policy":      `"per-minute";q=10;w=60`,
				"RateLimit":             s.rateLimit,
				"X-RateLimit-Limit":     "10",
				"X-RateLimit-Remaining": s.remaining,
				"X-RateLimit-Reset":     "1795953631", // t0 + 30 s, rounded up
			} {
				if got := header(hdr, name); got != v {
					t.Errorf("deny %d, step %d: %s %q, want %q", deny, i, name, got, v)
				}
			}
			if s.status == 200 {
				if got := hdr.Values("X-Tenant-ID"); len(got) != 1 || got[0] != "acme" {
					t.Errorf("step %d: X-Tenant-ID %q, want acme", i, got)
				}
				if w.Body.Len() != 0 || hdr.Get("Retry-After") != "" {
					t.Errorf("step %d: body %q, Retry-After %q; want neither", i, w.Body.String(), hdr.Get("Retry-After"))
				}
				continue
			}
			if got := hdr.Get("Retry-After"); got != "30" {
				t.Errorf("deny %d: Retry-After %q, want 30", deny, got)
			}
			if got := w.Body.String(); got != "rate limit exceeded\n" {
				t.Errorf("deny %d: body %q", deny, got)
			}
			if got := hdr.Get("X-Tenant-ID"); got != "" {
				t.Errorf("deny %d: a denial carries X-Tenant-ID %q", deny, got)
			}
		}
		// Another route's own limit counts per route, on top of the
		// global one, which search used up: denied too.
		if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1/export"); w.Code != want {
			t.Errorf("deny %d: export after the global limit ran out: %d, want %d", deny, w.Code, want)
		}
		// Another tenant has its own budget.
		if w := ask(h, "X-Tenant-ID", "globex", "X-Forwarded-Uri", "/v1/export"); w.Code != 200 || header(w.Header(), "RateLimit") != `"per-minute";r=9;t=30, "exports";r=1;t=30` {
			t.Errorf("deny %d: globex on export: %d %q", deny, w.Code, header(w.Header(), "RateLimit"))
		}
	}
}

// TestCheckUnmetered: a route of cost 0 is 200 with X-Tenant-ID and no
// rate-limit headers, and nothing is decided.
func TestCheckUnmetered(t *testing.T) {
	t.Parallel()
	h, lim, _ := newCheck(t, setup{})
	w := ask(h, "X-Tenant-ID", "acme", "X-Original-URI", "/status")
	if w.Code != 200 || w.Header().Get("X-Tenant-ID") != "acme" {
		t.Errorf("unmetered: %d, X-Tenant-ID %q; want 200, acme", w.Code, w.Header().Get("X-Tenant-ID"))
	}
	for _, name := range rateLimitHeaders {
		if got := header(w.Header(), name); got != "" {
			t.Errorf("unmetered: %s %q", name, got)
		}
	}
	if n := len(lim.(*recorder).asked()); n != 0 {
		t.Errorf("unmetered: %d decisions", n)
	}
}

// TestCheckFailModesAndOutcomes: what the limiter's layers answer when
// the store fails, or in shadow mode, becomes the documented answer.
func TestCheckFailModesAndOutcomes(t *testing.T) {
	t.Parallel()
	decided := func(outcome domain.Outcome, allowed bool) func(domain.Request) domain.Verdict {
		return func(req domain.Request) domain.Verdict {
			v := domain.Settle(req, domain.CountAdmitted, nil, func(i int, _ int64) domain.Decision {
				d := domain.Decision{Allowed: allowed, Limit: 4, Remaining: 1, ResetAfter: 10 * time.Second}
				if !allowed {
					d.Remaining, d.RetryAfter = 0, 7*time.Second
				}
				return d
			})
			v.Outcome = outcome
			return v
		}
	}
	tests := []struct {
		name       string
		verdict    func(domain.Request) domain.Verdict
		status     int
		headers    bool   // the rate-limit headers
		retryAfter string // "" for none
		tenant     bool   // X-Tenant-ID
	}{
		{"fail open", func(domain.Request) domain.Verdict {
			return domain.Verdict{Allowed: true, Outcome: domain.OutcomeError}
		}, 200, false, "", true},
		{"fail closed", func(domain.Request) domain.Verdict {
			return domain.Verdict{Outcome: domain.OutcomeError, Unavailable: true}
		}, 503, false, "1", false},
		{"local allowed", decided(domain.OutcomeLocalAllowed, true), 200, true, "", true},
		{"local denied", decided(domain.OutcomeLocalDenied, false), 429, true, "7", false},
		{"cached denied", decided(domain.OutcomeCachedDenied, false), 429, true, "7", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, _, _ := newCheck(t, setup{lim: &recorder{verdict: tt.verdict}})
			w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1/items")
			if w.Code != tt.status {
				t.Errorf("status %d, want %d", w.Code, tt.status)
			}
			for _, name := range rateLimitHeaders {
				if got := header(w.Header(), name) != ""; got != tt.headers {
					t.Errorf("%s present %v, want %v", name, got, tt.headers)
				}
			}
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if got := w.Header().Get("X-Tenant-ID") == "acme"; got != tt.tenant {
				t.Errorf("X-Tenant-ID %q, want it %v", w.Header().Get("X-Tenant-ID"), tt.tenant)
			}
		})
	}
}

// TestCheckShadow: a request only shadow limits would deny is 200 with
// the headers as computed.
func TestCheckShadow(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "daily", Rule: domain.Rule{Limit: 1, Window: 24 * time.Hour}, Shadow: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _, logs := newCheck(t, setup{policy: p, accessLog: true})
	for i, want := range []string{`"daily";r=0;t=30`, `"daily";r=0;t=30`} {
		w := ask(h, "X-Tenant-ID", "acme")
		if w.Code != 200 || header(w.Header(), "RateLimit") != want || w.Header().Get("Retry-After") != "" {
			t.Errorf("request %d: %d RateLimit %q Retry-After %q; want 200, %q, none", i, w.Code, header(w.Header(), "RateLimit"), w.Header().Get("Retry-After"), want)
		}
	}
	lines := logs.Lines(t, "access")
	if len(lines) != 2 || lines[0]["outcome"] != "allowed" || lines[1]["outcome"] != "shadow_denied" {
		t.Errorf("access lines %v, want allowed then shadow_denied", lines)
	}
}

// TestCheckClientAddress: the client address is the check request's
// peer (the edge), or, when the edge is trusted, what its
// X-Forwarded-For names; with TOLLGATE_ANONYMOUS=ip, unresolved traffic
// is metered per that address, and X-Tenant-ID still says unknown.
func TestCheckClientAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, trusted, xff, key string
	}{
		{"untrusted edge: its own address", "", "203.0.113.7", "rl:{ip:192.0.2.1}:per-minute"},
		{"trusted edge", "192.0.2.0/24", "203.0.113.7", "rl:{ip:203.0.113.7}:per-minute"},
		{"trusted edge, a client's own list ignored", "192.0.2.0/24", "6.6.6.6, 203.0.113.7", "rl:{ip:203.0.113.7}:per-minute"},
		{"IPv6 per /64", "192.0.2.0/24", "2001:db8:1:2:3:4:5:6", "rl:{ip:2001:db8:1:2::/64}:per-minute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, lim, _ := newCheck(t, setup{trusted: tt.trusted, anonymous: engine.AnonymousPerAddress})
			w := ask(h, "X-Forwarded-For", tt.xff, "X-Forwarded-Uri", "/v1/items")
			if w.Code != 200 || w.Header().Get("X-Tenant-ID") != "unknown" {
				t.Errorf("%d X-Tenant-ID %q, want 200, unknown", w.Code, w.Header().Get("X-Tenant-ID"))
			}
			if asked := lim.(*recorder).asked(); len(asked) != 1 || asked[0].Limits[0].Key != tt.key {
				t.Errorf("asked %v, want the key %s", asked, tt.key)
			}
		})
	}
}

// TestCheckAccessLog: one line per check with the described method and
// path (normalised, no query), the route, the tenant, the client (on a
// 400 too), the status and the outcome.
func TestCheckAccessLog(t *testing.T) {
	t.Parallel()
	h, _, logs := newCheck(t, setup{accessLog: true, trusted: "192.0.2.1", denyStatus: 403})
	for range 3 {
		ask(h, "X-Tenant-ID", "acme", "X-Original-Method", "POST", "X-Original-URI", "/v1//search?token=SECRET", "X-Forwarded-For", "203.0.113.7")
	}
	ask(h, "X-Original-URI", "/../admin?token=SECRET")
	ask(h, "X-Original-URI", "/status")
	want := []map[string]any{
		{"method": "POST", "path": "/v1/search", "route": "search", "tenant": "acme", "client": "203.0.113.7", "status": 200.0, "outcome": "allowed"},
		{"method": "POST", "path": "/v1/search", "route": "search", "tenant": "acme", "client": "203.0.113.7", "status": 200.0, "outcome": "allowed"},
		{"method": "POST", "path": "/v1/search", "route": "search", "tenant": "acme", "client": "203.0.113.7", "status": 403.0, "outcome": "denied"},
		{"method": "GET", "path": "/../admin", "route": "default", "tenant": "", "client": "192.0.2.1", "status": 400.0, "outcome": ""},
		{"method": "GET", "path": "/status", "route": "status", "tenant": "unknown", "client": "192.0.2.1", "status": 200.0, "outcome": "unmetered"},
	}
	lines := logs.Lines(t, "access")
	if len(lines) != len(want) {
		t.Fatalf("%d access lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %#v, want %#v", i, k, lines[i][k], v)
			}
		}
	}
	for _, l := range lines {
		if strings.Contains(l["path"].(string), "SECRET") || strings.Contains(l["path"].(string), "check") {
			t.Errorf("line %v shows the query or the check request's own path", l)
		}
	}
}

// TestCheckCallerGone: a check whose caller went away mid-decision is
// not answered (nobody reads it).
func TestCheckCallerGone(t *testing.T) {
	t.Parallel()
	lim := ports.LimiterFunc(func(ctx context.Context, _ domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		return domain.Verdict{}, context.Canceled
	})
	h, _, _ := newCheck(t, setup{lim: lim})
	if w := ask(h); w.Code != 200 || len(w.Header()) != 0 || w.Body.Len() != 0 {
		t.Errorf("caller gone: wrote %d %v %q, want nothing", w.Code, w.Header(), w.Body.String())
	}
}

// TestCheckAnyMethodAndPath: the check request's own method and path do
// not matter when the described ones are given.
func TestCheckAnyMethodAndPath(t *testing.T) {
	t.Parallel()
	h, lim, _ := newCheck(t, setup{})
	for _, m := range []string{"GET", "POST", "PROPFIND", "DELETE", "OPTIONS"} {
		r, _ := http.NewRequest(m, "http://tollgate/any/where?x=1", nil)
		r.RemoteAddr = "192.0.2.1:1"
		r.Header.Set("X-Forwarded-Method", "GET")
		r.Header.Set("X-Forwarded-Uri", "/v1/items")
		w := &recorderWriter{header: http.Header{}}
		h.ServeHTTP(w, r)
		if w.code != 200 {
			t.Errorf("%s /any/where: %d, want 200", m, w.code)
		}
	}
	for i, req := range lim.(*recorder).asked() {
		if req.Route != "items" {
			t.Errorf("check %d decided on route %s, want items", i, req.Route)
		}
	}
}

// recorderWriter is a minimal ResponseWriter.
type recorderWriter struct {
	header http.Header
	code   int
}

func (w *recorderWriter) Header() http.Header { return w.header }
func (w *recorderWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorderWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	return len(p), nil
}

// TestCheckMethodOverrideOnAnotherRoute: the described request's method
// override (its X-HTTP-Method-Override, reaching the check with the
// client's headers, or a "_method" in the described URI's query) that
// would have the upstream serve another route than the described
// method's is 400 and decided on nothing; one on the same route is
// decided as usual.
func TestCheckMethodOverrideOnAnotherRoute(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		header []string
		want   int
	}{
		{[]string{"X-Forwarded-Uri", "/v1/search", "X-HTTP-Method-Override", "POST"}, 400},
		{[]string{"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/items?_method=GET"}, 400},
		{[]string{"X-Forwarded-Uri", "/v1/export", "X_HTTP_Method_Override", "POST"}, 200},
	} {
		h, lim, _ := newCheck(t, setup{})
		w := ask(h, append([]string{"X-Tenant-ID", "acme"}, tt.header...)...)
		if w.Code != tt.want {
			t.Errorf("%q: status %d, want %d (%q)", tt.header, w.Code, tt.want, w.Body)
		}
		if asked := lim.(*recorder).asked(); tt.want == 400 && (len(asked) != 0 || w.Body.String() != "ambiguous method\n") {
			t.Errorf("%q: decided %d times, body %q; want none and ambiguous method", tt.header, len(asked), w.Body)
		}
	}
}
