package proxy_test

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy"
)

// TestProxyNormalisesPaths sends each path as raw bytes (no client
// cleans it) through the gateway to an upstream mounted at /api: dot
// segments never reach the upstream, and a path that climbs above "/" is
// 400 without being forwarded.
func TestProxyNormalisesPaths(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	gw, _ := proxyGateway(t, up.URL+"/api", nil, proxy.UpstreamOptions{})
	tests := []struct {
		path string
		want string // what the upstream sees (escaped), "" for a 400
	}{
		{"/v1/x", "/api/v1/x"},
		{"/a/../b", "/api/b"},
		{"/a//b/./c/", "/api/a/b/c/"},
		{"//a", "/api/a"},
		{"/%41%62c", "/api/Abc"},
		{"/a/%2e%2e/b", "/api/b"},
		{"/files/a%2fb", "/api/files/a%2Fb"}, // an encoded slash stays encoded
		{"/Admin", "/api/Admin"},             // case kept
		{"/../admin", ""},
		{"/%2e%2e/admin", ""},
		{"/%2E%2E/admin", ""},
		{"/..%2fadmin", ""},
		{"/a/..%2F..%2Fadmin", ""},
		{"/a/../../admin", ""},
	}
	for _, tt := range tests {
		conn := rawConn(t, gw, "GET "+tt.path+" HTTP/1.1\r\nHost: gw\r\nX-Gateway-Tenant: acme\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("GET %s: %v", tt.path, err)
		}
		resp.Body.Close()
		if tt.want == "" {
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("GET %s: status %d, want 400", tt.path, resp.StatusCode)
			}
			if resp.Header.Get("X-RateLimit-Limit") != "" {
				t.Errorf("GET %s: a 400 was metered", tt.path)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", tt.path, resp.StatusCode)
			continue
		}
		if r := <-got; r.escaped != tt.want {
			t.Errorf("GET %s: upstream got %s, want %s", tt.path, r.escaped, tt.want)
		}
	}
	select {
	case r := <-got:
		t.Errorf("upstream got %s %s, want nothing more", r.method, r.escaped)
	default:
	}
}

// TestEchoShowsNormalisedPath: the echo responder, too, sees the path
// that was metered.
func TestEchoShowsNormalisedPath(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(proxy.New(proxy.Options{Engine: newEngine(allowAll, defaultRule, nil), Upstream: proxy.Echo()}))
	t.Cleanup(gw.Close)
	conn := rawConn(t, gw.URL, "GET /a/./b//%63?q=1 HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"path":"/a/b/c"`) {
		t.Errorf("echo %q, want path /a/b/c", b.String())
	}
}
