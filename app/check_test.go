package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/logtest"
)

// checkAddr turns the check listener on, on a free loopback port.
const checkAddr = "TOLLGATE_CHECK_ADDR=127.0.0.1:0"

// TestCheckListenerSharesTheBudget: the proxy and the check listener
// decide with one engine, so a tenant's requests through either spend
// one budget, and both deny once it is spent.
func TestCheckListenerSharesTheBudget(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, checkAddr, "TOLLGATE_LIMIT=4", "TOLLGATE_WINDOW=1h")
	if g.Check == "" || g.Public == "" {
		t.Fatalf("listeners: public %q, check %q", g.Public, g.Check)
	}
	steps := []struct {
		via       string
		status    int
		remaining string
	}{
		{g.Public, 200, "3"}, {g.Check, 200, "2"}, {g.Public, 200, "1"}, {g.Check, 200, "0"},
		{g.Public, 429, "0"}, {g.Check, 429, "0"},
	}
	for i, s := range steps {
		resp, _ := get(t, s.via+"/v1/x", "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1/x")
		if resp.StatusCode != s.status || resp.Header.Get("X-RateLimit-Remaining") != s.remaining {
			t.Errorf("step %d via %s: %d, remaining %v; want %d, %s", i, s.via, resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"), s.status, s.remaining)
		}
	}
	// Another tenant, through the check listener first.
	if resp, _ := get(t, g.Check+"/", "X-Tenant-ID", "globex"); resp.StatusCode != 200 || resp.Header.Get("X-Tenant-ID") != "globex" {
		t.Errorf("globex via check: %d, X-Tenant-ID %q", resp.StatusCode, resp.Header.Get("X-Tenant-ID"))
	}
}

// TestCheckListenerAlone: TOLLGATE_LISTEN_ADDR=off runs no proxy; the
// check listener answers, 403 when so told, and the start-up line says
// which listeners run.
func TestCheckListenerAlone(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", checkAddr, "TOLLGATE_CHECK_DENY_STATUS=403", "TOLLGATE_LIMIT=1")
	if g.Public != "" || g.Check == "" {
		t.Fatalf("listeners: public %q, check %q; want only check", g.Public, g.Check)
	}
	for i, want := range []int{200, 403} {
		resp, body := get(t, g.Check+"/auth", "X-Tenant-ID", "acme", "X-Original-URI", "/v1/x", "X-Original-Method", "DELETE")
		if resp.StatusCode != want {
			t.Errorf("check %d: %d, want %d", i, resp.StatusCode, want)
		}
		if want == 403 && (resp.Header.Get("Retry-After") == "" || body != "rate limit exceeded\n" || resp.Header.Get("RateLimit") == "") {
			t.Errorf("the 403: Retry-After %q, RateLimit %v, body %q", resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"), body)
		}
	}
	lines := logtest.Lines(t, g.Logs(), "tollgate listening")
	if len(lines) != 1 || lines[0]["public"] != "off" || lines[0]["check"] != strings.TrimPrefix(g.Check, "http://") {
		t.Errorf("start-up lines %v, want public off and the check address", lines)
	}
}

// TestCheckFailModes: with the store down, the check listener answers
// as the fail mode says: open admits without rate-limit headers (the
// tenant still named), closed is 503 with Retry-After: 1.
func TestCheckFailModes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode, retryAfter, tenant string
		status                   int
	}{
		{"open", "", "acme", 200},
		{"closed", "1", "", 503},
	} {
		// Nothing listens on port 1: every store call fails at once.
		g := apptest.Start(t, checkAddr, "TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://127.0.0.1:1/0", "TOLLGATE_FAIL_MODE="+tt.mode)
		resp, _ := get(t, g.Check+"/", "X-Tenant-ID", "acme")
		if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter ||
			resp.Header.Get("X-Tenant-ID") != tt.tenant || resp.Header.Get("X-RateLimit-Limit") != "" {
			t.Errorf("fail mode %s: %d, Retry-After %q, X-Tenant-ID %q, X-RateLimit-Limit %v; want %d, %q, %q, none",
				tt.mode, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Tenant-ID"), resp.Header.Get("X-RateLimit-Limit"),
				tt.status, tt.retryAfter, tt.tenant)
		}
	}
}

// TestAnonymousPerAddress: with TOLLGATE_ANONYMOUS=ip, unresolved
// traffic is metered per client address, through the proxy and the check
// listener alike: two addresses have two budgets, one IPv6 /64 shares
// one, a resolved tenant keeps its own; the client address comes from
// X-Forwarded-For only because the peer (loopback) is trusted. The
// upstream is told unknown, the access log names the client, and no
// metric carries an address.
func TestAnonymousPerAddress(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, checkAddr, "TOLLGATE_ANONYMOUS=ip", "TOLLGATE_TRUSTED_PROXIES=127.0.0.0/8",
		"TOLLGATE_LIMIT=2", "TOLLGATE_WINDOW=1h", "TOLLGATE_ACCESS_LOG=true")
	steps := []struct {
		via, xff, tenant string
		status           int
	}{
		{g.Public, "203.0.113.7", "", 200},
		{g.Check, "203.0.113.7", "", 200},
		{g.Public, "203.0.113.7", "", 429},
		{g.Check, "198.51.100.1, 203.0.113.7", "", 429}, // the client is the rightmost untrusted entry
		{g.Public, "203.0.113.8", "", 200},              // another address, another budget
		{g.Check, "::ffff:203.0.113.8", "", 200},        // IPv4-mapped is IPv4
		{g.Public, "203.0.113.8", "", 429},
		{g.Check, "2001:db8:1:2::1", "", 200},
		{g.Public, "2001:db8:1:2:ffff::9", "", 200}, // the same /64
		{g.Check, "2001:db8:1:2:abcd::1", "", 429},
		{g.Public, "2001:db8:1:3::1", "", 200}, // another /64
		{g.Public, "203.0.113.7", "acme", 200}, // a tenant is metered as itself
	}
	for i, s := range steps {
		h := []string{"X-Forwarded-For", s.xff}
		if s.tenant != "" {
			h = append(h, "X-Tenant-ID", s.tenant)
		}
		resp, body := get(t, s.via+"/v1/x", h...)
		if resp.StatusCode != s.status {
			t.Errorf("step %d (%s via %s): %d, want %d", i, s.xff, s.via, resp.StatusCode, s.status)
		}
		wantTenant := s.tenant
		if wantTenant == "" {
			wantTenant = "unknown"
		}
		switch {
		case s.status != 200:
		case s.via == g.Public && !strings.Contains(body, `"tenant":"`+wantTenant+`"`):
			t.Errorf("step %d: the upstream saw %s, want tenant %s", i, body, wantTenant)
		case s.via == g.Check && resp.Header.Get("X-Tenant-ID") != wantTenant:
			t.Errorf("step %d: X-Tenant-ID %q, want %s", i, resp.Header.Get("X-Tenant-ID"), wantTenant)
		}
	}
	lines := logtest.Lines(t, g.Logs(), "access")
	if len(lines) != len(steps) {
		t.Fatalf("%d access lines, want %d", len(lines), len(steps))
	}
	for i, want := range []string{"203.0.113.7", "203.0.113.7", "203.0.113.7", "203.0.113.7", "203.0.113.8", "203.0.113.8"} {
		if lines[i]["client"] != want {
			t.Errorf("access line %d: client %v, want %s", i, lines[i]["client"], want)
		}
	}
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, addr := range []string{"203.0.113", "2001:db8", "ip:"} {
		if strings.Contains(string(metrics), addr) {
			t.Errorf("/metrics names an address (%s)", addr)
		}
	}
	if !strings.Contains(string(metrics), `tollgate_requests_total{code="429",route="default"} 4`) {
		t.Errorf("/metrics lacks the four 429s of both listeners on route default")
	}
}

// TestUntrustedForwardedForIgnored: from a peer that is not a trusted
// proxy, X-Forwarded-For is ignored: every request is the peer's, one
// budget whatever the header claims, and the access log says the peer.
func TestUntrustedForwardedForIgnored(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, checkAddr, "TOLLGATE_ANONYMOUS=ip", "TOLLGATE_TRUSTED_PROXIES=10.0.0.0/8",
		"TOLLGATE_LIMIT=2", "TOLLGATE_WINDOW=1h", "TOLLGATE_ACCESS_LOG=true")
	for i, s := range []struct {
		via, xff string
		status   int
	}{
		{g.Public, "203.0.113.1", 200}, {g.Check, "203.0.113.2", 200},
		{g.Public, "203.0.113.3", 429}, {g.Check, "203.0.113.4", 429},
	} {
		if resp, _ := get(t, s.via+"/", "X-Forwarded-For", s.xff, "Forwarded", "for="+s.xff); resp.StatusCode != s.status {
			t.Errorf("request %d claiming %s: %d, want %d", i, s.xff, resp.StatusCode, s.status)
		}
	}
	for i, l := range logtest.Lines(t, g.Logs(), "access") {
		if l["client"] != "127.0.0.1" {
			t.Errorf("access line %d: client %v, want the peer 127.0.0.1", i, l["client"])
		}
	}
}
