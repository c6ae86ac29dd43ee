// Package edge runs tollgate's check listener behind the real edge
// proxies, with the very configurations users copy (examples/nginx.conf,
// examples/Caddyfile): Debian's nginx (nginx-light has auth_request) and
// Caddy (2.6, which has forward_auth), each started here on loopback
// ports of its own, in a temporary directory, never as a system service.
// It holds tests only.
//
// Without the nginx or caddy binary the tests skip, saying so;
// TOLLGATE_REQUIRE_EDGE=1 (set by `make test`, whose
// scripts/edge-tools.sh installs both) makes that a failure.
package edge

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/freeport"
)

// tenants is the gateway's tenants file: acme's key, 3 requests an hour.
const tenants = `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 3, "window": "1h"}]}`

// policy is the gateway's policy file: 3 requests an hour, and a route
// that is not metered, /free, which a client must not be able to claim.
const policy = `{"limits": [{"name": "default", "limit": 3, "window": "1h"}], "routes": [{"name": "free", "path": "/free", "cost": 0}]}`

// gateway starts tollgate with only a check listener (deny status
// denyStatus), trusting the loopback edge's X-Forwarded-For, metering
// acme by its key and anonymous traffic per client address, 3 an hour.
func gateway(t *testing.T, denyStatus int) *apptest.Gateway {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tenants.json"), tenants)
	writeFile(t, filepath.Join(dir, "policy.json"), policy)
	return apptest.Start(t,
		"TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_CHECK_ADDR=127.0.0.1:0",
		"TOLLGATE_CHECK_DENY_STATUS="+strconv.Itoa(denyStatus),
		"TOLLGATE_TENANTS_FILE="+filepath.Join(dir, "tenants.json"), "TOLLGATE_POLICY_FILE="+filepath.Join(dir, "policy.json"),
		"TOLLGATE_TRUSTED_PROXIES=127.0.0.1", "TOLLGATE_ANONYMOUS=ip")
}

// edgeTest is what a test of an edge proxy runs against: tollgate's
// check listener (g), the application behind the edge (up), and a
// directory and a loopback port of its own for the edge proxy.
type edgeTest struct {
	g         *apptest.Gateway
	up        *upstream
	dir, port string
}

// newEdgeTest starts the gateway (deny status denyStatus) and the
// application, and picks the edge's directory and port.
func newEdgeTest(t *testing.T, denyStatus int) edgeTest {
	t.Helper()
	return edgeTest{g: gateway(t, denyStatus), up: newUpstream(t), dir: tempDir(t), port: freePort(t)}
}

// TestNginxAuthRequest: nginx with examples/nginx.conf asks tollgate
// (deny status 403) before each request; the client sees 200s with the
// rate-limit headers, then a 429 with Retry-After and the headers.
func TestNginxAuthRequest(t *testing.T) {
	t.Parallel()
	nginx := requireBinary(t, "nginx", "nginx-light")
	e := newEdgeTest(t, http.StatusForbidden)
	dir := e.dir
	site := fromExample(t, "nginx.conf", map[string]string{
		"server 127.0.0.1:8090;": "server " + hostPort(e.g.Check) + ";",
		"server 127.0.0.1:8000;": "server " + hostPort(e.up.URL) + ";",
		"listen 8080;":           "listen 127.0.0.1:" + e.port + ";",
	})
	writeFile(t, filepath.Join(dir, "site.conf"), site)
	writeFile(t, filepath.Join(dir, "nginx.conf"), fmt.Sprintf(`worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  include %[1]s/site.conf;
}
`, dir))
	start(t, dir, e.port, nginx, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	exerciseBudget(t, "http://127.0.0.1:"+e.port, e.up)
}

// TestCaddyForwardAuth: Caddy with examples/Caddyfile asks tollgate
// (deny status 429) before each request; the client sees the same, and
// the denial is tollgate's own answer.
func TestCaddyForwardAuth(t *testing.T) {
	t.Parallel()
	caddy := requireBinary(t, "caddy", "caddy")
	e := newEdgeTest(t, http.StatusTooManyRequests)
	site := fromExample(t, "Caddyfile", map[string]string{
		"forward_auth 127.0.0.1:8090 {": "forward_auth " + hostPort(e.g.Check) + " {",
		"reverse_proxy 127.0.0.1:8000":  "reverse_proxy " + hostPort(e.up.URL),
		"\n:8080 {":                     "\n:" + e.port + " {",
	})
	// No admin endpoint, no certificates, loopback only: a test's Caddy.
	global := "{\n\tadmin off\n\tauto_https off\n\tdefault_bind 127.0.0.1\n}\n\n"
	writeFile(t, filepath.Join(e.dir, "Caddyfile"), global+site)
	start(t, e.dir, e.port, caddy, "run", "--config", filepath.Join(e.dir, "Caddyfile"), "--adapter", "caddyfile")
	exerciseBudget(t, "http://127.0.0.1:"+e.port, e.up)
}

// exerciseBudget checks what a client of the edge at base sees, and
// what the application (up) receives:
//
//   - acme (by API key, spoofing X-Tenant-ID and its look-alikes, and
//     the described URI as the unmetered /free): three 200s with the
//     rate-limit headers counting down, the application seeing each
//     with X-Tenant-ID: acme and no look-alike; then 429 with
//     Retry-After and the headers, a path with dot segments onto /free
//     refused, and the application seeing nothing more;
//   - anonymous clients on two loopback addresses, metered per address
//     (the edge's X-Forwarded-For is trusted): each its own 3.
func exerciseBudget(t *testing.T, base string, up *upstream) {
	t.Helper()
	for i, remaining := range []string{"2", "1", "0"} {
		resp, _ := get(t, base+"/v1/orders?page="+strconv.Itoa(i), "127.0.0.1", "X-API-Key", "k-acme", "X-Tenant-ID", "evil",
			"X_Tenant_ID", "evil", "X-Tenant_ID", "evil", "x_tenant-id", "evil",
			"X-Forwarded-Uri", "/free", "X-Original-URI", "/free")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("acme request %d: %d, want 200", i, resp.StatusCode)
		}
		checkRateLimitHeaders(t, fmt.Sprintf("acme request %d", i), resp.Header, remaining)
		if resp.Header.Get("Retry-After") != "" {
			t.Errorf("acme request %d: Retry-After %q on a 200", i, resp.Header.Get("Retry-After"))
		}
	}
	seen := up.requests()
	if len(seen) != 3 {
		t.Fatalf("the application saw %d requests, want 3", len(seen))
	}
	for i, r := range seen {
		if got := r.Values("X-Tenant-ID"); len(got) != 1 || got[0] != "acme" {
			t.Errorf("the application's request %d: X-Tenant-ID %q, want acme", i, got)
		}
		for _, name := range []string{"X_Tenant_ID", "X-Tenant_ID", "X_Tenant-ID"} {
			// CGI, WSGI and Rack would read it as X-Tenant-ID.
			if got := r.Values(name); len(got) != 0 {
				t.Errorf("the application's request %d: the look-alike %s %q reached it", i, name, got)
			}
		}
	}
	resp, body := get(t, base+"/v1/orders", "127.0.0.1", "X-API-Key", "k-acme")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("acme over budget: %d, want 429", resp.StatusCode)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 3600 {
		t.Errorf("the 429: Retry-After %q, want 1 to 3600 s", resp.Header.Get("Retry-After"))
	}
	checkRateLimitHeaders(t, "the 429", resp.Header, "0")
	if body != "rate limit exceeded\n" {
		t.Errorf("the 429's body %q", body)
	}
	if n := len(up.requests()); n != 3 {
		t.Errorf("the application saw %d requests after the denial, want still 3", n)
	}
	// The edge forwards dot segments as they came, and a router that
	// reads ".." as a name (Express) would serve this under /v1/orders:
	// it is refused, not metered as the unmetered /free.
	for _, path := range []string{"/v1/orders/../../free", "/v1/orders/%2e%2e/%2e%2e/free"} {
		if resp, _ := get(t, base+path, "127.0.0.1", "X-API-Key", "k-acme"); resp.StatusCode < 400 {
			t.Errorf("acme over budget, %s: %d, want it refused", path, resp.StatusCode)
		}
	}
	if n := len(up.requests()); n != 3 {
		t.Errorf("the application saw %d requests after the dot segments, want still 3", n)
	}

	// Anonymous: per client address.
	for _, client := range []string{"127.0.0.2", "127.0.0.3"} {
		for i, want := range []int{200, 200, 200, 429} {
			if resp, _ := get(t, base+"/v1/orders", client); resp.StatusCode != want {
				t.Errorf("anonymous %s, request %d: %d, want %d", client, i, resp.StatusCode, want)
			}
		}
	}
	for i, r := range up.requests()[3:] {
		if got := r.Get("X-Tenant-ID"); got != "unknown" {
			t.Errorf("anonymous request %d reached the application as %q, want unknown", i, got)
		}
	}
}

// checkRateLimitHeaders checks the five rate-limit headers of one
// answer: one limit, default, of 3 an hour, with remaining left.
func checkRateLimitHeaders(t *testing.T, what string, h http.Header, remaining string) {
	t.Helper()
	for name, want := range map[string]string{
		"RateLimit-Policy":      `"default";q=3;w=3600`,
		"X-RateLimit-Limit":     "3",
		"X-RateLimit-Remaining": remaining,
	} {
		if got := h.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s %q, want %q", what, name, got, want)
		}
	}
	if got := h.Values("RateLimit"); len(got) != 1 || !strings.HasPrefix(got[0], `"default";r=`+remaining+";t=") {
		t.Errorf("%s: RateLimit %q, want r=%s", what, got, remaining)
	}
	if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err != nil || reset < time.Now().Unix() {
		t.Errorf("%s: X-RateLimit-Reset %q, want a Unix time to come", what, h.Get("X-RateLimit-Reset"))
	}
}

// upstream is the application behind the edge: it records the headers
// of every request and answers 200.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex // guards seen
	seen []http.Header
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	up := &upstream{}
	up.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		up.mu.Lock()
		up.seen = append(up.seen, r.Header.Clone())
		up.mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(up.Close)
	return up
}

// requests returns the headers of the requests the application received.
func (u *upstream) requests() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.seen...)
}

// get sends GET url from the local address from (a loopback address:
// the client address the edge sees) with headers (name-value pairs),
// and returns the response and its body.
func get(t *testing.T, url, from string, headers ...string) (*http.Response, string) {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s from %s: %v", url, from, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// requireBinary returns the path of the edge proxy name, or skips t
// (fails it with TOLLGATE_REQUIRE_EDGE=1) when it is not installed.
func requireBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("TOLLGATE_REQUIRE_EDGE") == "1" {
		t.Fatalf("edge: %s is required (TOLLGATE_REQUIRE_EDGE=1) but not installed: %v", name, err)
	}
	t.Skipf("edge: %s not installed (apt-get install %s; `make test` installs it and sets TOLLGATE_REQUIRE_EDGE=1 to fail instead)", name, pkg)
	return ""
}

// fromExample returns the example file name (in examples/) with each
// key of replace replaced by its value: the addresses and ports of this
// test. A key the file lacks fails t: the example and the test must not
// drift apart.
func fromExample(t *testing.T, name string, replace map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for from, to := range replace {
		if strings.Count(s, from) != 1 {
			t.Fatalf("examples/%s holds %q %d times, want once", name, from, strings.Count(s, from))
		}
		s = strings.Replace(s, from, to, 1)
	}
	return s
}

// tempDir returns a fresh directory that nginx's workers, which run as
// nobody when the test runs as root, can read, removed at the end.
func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tollgate-edge-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	p, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

// hostPort returns the host:port of a base URL.
func hostPort(base string) string { return strings.TrimPrefix(base, "http://") }

// start runs the edge proxy (bin with args, in dir, its output in
// dir/output.log) until the end of the test, and waits until it accepts
// connections on port. It is stopped with SIGTERM, then killed.
func start(t *testing.T, dir, port, bin string, args ...string) {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	// Caddy keeps its data and autosaved config here, not in $HOME.
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir+"/data", "XDG_CONFIG_HOME="+dir+"/config")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); out.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+port)
		if err == nil {
			c.Close()
			return
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%s exited before listening (%v):\n%s", filepath.Base(bin), err, readFile(filepath.Join(dir, "output.log")))
		case <-ctx.Done():
			t.Fatalf("%s not listening on %s after 15 s:\n%s", filepath.Base(bin), port, readFile(filepath.Join(dir, "output.log")))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestDocsShowTheExamples: docs/edge.md shows the example files as they
// are, the very ones the tests above run.
func TestDocsShowTheExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "edge.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []struct{ name, fence string }{{"nginx.conf", "```nginx\n"}, {"Caddyfile", "```caddy\n"}} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", ex.name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), ex.fence+string(b)+"```\n") {
			t.Errorf("docs/edge.md does not show examples/%s as it is", ex.name)
		}
	}
}
