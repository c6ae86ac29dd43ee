package proxy_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/fixedwindow"
	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/ports"
)

// received is what a recording upstream saw of one request.
type received struct {
	method, path, query, host, body string
	header                          http.Header
	escaped                         string // the path as sent: URL.EscapedPath
}

// recordingUpstream starts an upstream that records each request and
// answers with handler (200 "ok" if nil).
func recordingUpstream(t *testing.T, handler http.HandlerFunc) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{r.Method, r.URL.Path, r.URL.RawQuery, r.Host, string(body), r.Header.Clone(), r.URL.EscapedPath()}
		if handler == nil {
			_, _ = io.WriteString(w, "ok")
			return
		}
		handler(w, r)
	}))
	t.Cleanup(up.Close)
	return up, got
}

// allowAll admits every request: count 1 of a fresh window.
var allowAll = fixedwindow.Limiter{Counter: ports.CounterFunc(
	func(_ context.Context, _ string, window time.Duration) (int64, time.Duration, error) {
		return 1, window, nil
	})}

// proxyGateway serves NewServer with a proxy to upstream, resolving
// tenants with tenants (the X-Gateway-Tenant header if nil). It returns
// the gateway's URL and its log.
func proxyGateway(t *testing.T, upstream string, tenants app.TenantResolver, opts app.ProxyOptions) (string, *syncBuffer) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	if tenants == nil {
		tenants = app.HeaderTenants{Header: "X-Gateway-Tenant", Rule: defaultRule}
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	opts.Log = log
	gw := httptest.NewServer(app.NewServer(log, app.Config{}, allowAll, tenants, nil, app.NewProxy(target, opts)))
	t.Cleanup(gw.Close)
	return gw.URL, logs
}

func do(t *testing.T, method, url, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs // as given: no canonicalization
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestProxyForwardsRequest(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
	})
	gw, _ := proxyGateway(t, up.URL+"/api?from=gw", nil, app.ProxyOptions{})
	resp, body := do(t, "POST", gw+"/v1/items?a=1&b=two", "hello", http.Header{
		"Host":             {"client.example"},
		"X-Gateway-Tenant": {"acme"},
		"X-Custom":         {"v"},
		"X-Multi":          {"a", "b"},
		"Authorization":    {"Basic dXNlcjpwYXNz"},
		"X-Forwarded-For":  {"6.6.6.6"},
		"Content-Type":     {"text/plain"},
	})

	if resp.StatusCode != http.StatusCreated || body != "created" || resp.Header.Get("X-Upstream") != "yes" {
		t.Errorf("response %d %q X-Upstream=%q, want the upstream's 201 \"created\" yes", resp.StatusCode, body, resp.Header.Get("X-Upstream"))
	}
	if resp.Header.Get("X-RateLimit-Limit") != "100" {
		t.Errorf("X-RateLimit-Limit = %q, want 100", resp.Header.Get("X-RateLimit-Limit"))
	}
	r := <-got
	upHost := strings.TrimPrefix(up.URL, "http://")
	for _, c := range []struct{ what, got, want string }{
		{"method", r.method, "POST"},
		{"path (upstream path is a prefix)", r.path, "/api/v1/items"},
		{"query (merged)", r.query, "from=gw&a=1&b=two"},
		{"body", r.body, "hello"},
		{"Host (the upstream's)", r.host, upHost},
		{"X-Forwarded-Host", r.header.Get("X-Forwarded-Host"), "client.example"},
		{"X-Forwarded-Proto", r.header.Get("X-Forwarded-Proto"), "http"},
		{"X-Forwarded-For (the client's value dropped)", strings.Join(r.header.Values("X-Forwarded-For"), ","), "127.0.0.1"},
		{"X-Tenant-ID", r.header.Get("X-Tenant-ID"), "acme"},
		{"X-Custom", r.header.Get("X-Custom"), "v"},
		{"X-Multi", strings.Join(r.header.Values("X-Multi"), ","), "a,b"},
		{"Authorization (not the gateway's in header mode)", r.header.Get("Authorization"), "Basic dXNlcjpwYXNz"},
		{"Content-Type", r.header.Get("Content-Type"), "text/plain"},
	} {
		if c.got != c.want {
			t.Errorf("upstream got %s %q, want %q", c.what, c.got, c.want)
		}
	}
}

// looksLikeTenantID is the test's own idea of a header a server could
// read as X-Tenant-ID.
func looksLikeTenantID(name string) bool {
	return strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-Tenant-ID")
}

func TestProxyTenantHeaderNotSpoofable(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	headerGW, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	ft, err := app.LoadFileTenants(writeTenants(t, twoTenants), defaultRule)
	if err != nil {
		t.Fatal(err)
	}
	fileGW, _ := proxyGateway(t, up.URL, ft, app.ProxyOptions{StripCredentials: ft.StripCredentials})
	spoofs := []string{"X-Tenant-ID", "x-tenant-id", "X-TENANT-ID", "X_Tenant_ID", "x_tenant-id"}
	tests := []struct {
		name, gw string
		header   http.Header
		want     string
	}{
		{"header mode", headerGW, http.Header{"X-Gateway-Tenant": {"acme"}}, "acme"},
		{"header mode, invalid tenant", headerGW, http.Header{"X-Gateway-Tenant": {"no spaces"}}, "unknown"},
		{"header mode, no tenant", headerGW, http.Header{}, "unknown"},
		{"file mode", fileGW, http.Header{"X-Api-Key": {"k-globex"}}, "globex"},
		{"file mode, no key", fileGW, http.Header{}, "unknown"},
	}
	for _, tt := range tests {
		for _, spoof := range spoofs {
			tt.header[spoof] = []string{"evil"}
		}
		resp, _ := do(t, "GET", tt.gw+"/", "", tt.header)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", tt.name, resp.StatusCode)
		}
		r := <-got
		for name, vs := range r.header {
			if looksLikeTenantID(name) && (name != "X-Tenant-Id" || len(vs) != 1 || vs[0] != tt.want) {
				t.Errorf("%s: upstream got %s: %q, want only X-Tenant-Id: %q", tt.name, name, vs, tt.want)
			}
		}
		if r.header.Get("X-Tenant-ID") != tt.want {
			t.Errorf("%s: upstream got X-Tenant-ID %q, want %q", tt.name, r.header.Get("X-Tenant-ID"), tt.want)
		}
	}
}

func TestProxyAPIKeyNotForwarded(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	ft, err := app.LoadFileTenants(writeTenants(t, twoTenants), defaultRule)
	if err != nil {
		t.Fatal(err)
	}
	fileGW, _ := proxyGateway(t, up.URL, ft, app.ProxyOptions{StripCredentials: ft.StripCredentials})
	headerGW, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	tests := []struct {
		name, gw          string
		header            http.Header
		wantAuth, wantKey string
	}{
		{"bearer key stripped", fileGW, http.Header{"Authorization": {"Bearer k-acme-1"}}, "", ""},
		{"x-api-key stripped", fileGW, http.Header{"X-Api-Key": {"k-acme-1"}}, "", ""},
		{"unknown x-api-key stripped too", fileGW, http.Header{"X-Api-Key": {"wrong"}}, "", ""},
		{"unknown bearer key stripped too", fileGW, http.Header{"Authorization": {"Bearer wrong"}}, "", ""},
		{"upstream's bearer kept beside x-api-key", fileGW,
			http.Header{"X-Api-Key": {"k-acme-1"}, "Authorization": {"Bearer user-token"}}, "Bearer user-token", ""},
		{"gateway bearer key stripped beside a wrong x-api-key", fileGW,
			http.Header{"X-Api-Key": {"wrong"}, "Authorization": {"Bearer k-acme-1"}}, "", ""},
		{"basic auth kept", fileGW, http.Header{"Authorization": {"Basic dXNlcjpwYXNz"}}, "Basic dXNlcjpwYXNz", ""},
		{"header mode forwards both", headerGW,
			http.Header{"X-Api-Key": {"k"}, "Authorization": {"Bearer t"}}, "Bearer t", "k"},
	}
	for _, tt := range tests {
		do(t, "GET", tt.gw+"/", "", tt.header)
		r := <-got
		if a, k := r.header.Get("Authorization"), r.header.Get("X-API-Key"); a != tt.wantAuth || k != tt.wantKey {
			t.Errorf("%s: upstream got Authorization %q, X-API-Key %q; want %q, %q", tt.name, a, k, tt.wantAuth, tt.wantKey)
		}
	}
}

func TestProxyDropsHopByHopHeaders(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "X-Up-Hop")
		w.Header().Set("X-Up-Hop", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Up-End", "kept")
	})
	gw, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	resp, _ := do(t, "GET", gw+"/", "", http.Header{
		"Connection":       {"X-Hop"},
		"X-Hop":            {"secret"},
		"Keep-Alive":       {"timeout=5"},
		"Proxy-Connection": {"keep-alive"},
		"X-End":            {"kept"},
	})
	r := <-got
	for _, h := range []string{"X-Hop", "Keep-Alive", "Proxy-Connection"} {
		if v, ok := r.header[h]; ok {
			t.Errorf("upstream got hop-by-hop %s: %q", h, v)
		}
	}
	if r.header.Get("X-End") != "kept" {
		t.Errorf("upstream lost the end-to-end header X-End")
	}
	for _, h := range []string{"X-Up-Hop", "Keep-Alive"} {
		if v, ok := resp.Header[h]; ok {
			t.Errorf("client got hop-by-hop %s: %q", h, v)
		}
	}
	if resp.Header.Get("X-Up-End") != "kept" {
		t.Errorf("client lost the end-to-end header X-Up-End")
	}
}

func TestProxyStreamsResponse(t *testing.T) {
	t.Parallel()
	clientRead := make(chan struct{})
	up, _ := recordingUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select { // the second chunk only once the client has the first
		case <-clientRead:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "second\n")
	})
	gw, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	req, err := http.NewRequestWithContext(t.Context(), "GET", gw+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line := make(chan string, 1)
	go func() {
		l, _ := br.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if l != "first\n" {
			t.Fatalf("first chunk %q, want %q", l, "first\n")
		}
	case <-time.After(5 * time.Second):
		close(clientRead)
		t.Fatal("the first chunk did not reach the client before the upstream finished: the proxy buffers")
	}
	close(clientRead)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Errorf("rest %q, %v; want %q", rest, err, "second\n")
	}
}

// closedURL returns the URL of a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestProxyUpstreamErrors(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(slow.Close)
	ft, err := app.LoadFileTenants(writeTenants(t, twoTenants), defaultRule)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, upstream string
		accept         string
		status         int
		contentType    string
		body           string
	}{
		{"unreachable, JSON", closedURL(t), "application/json", 502, "application/json", `{"error":"upstream unavailable"}` + "\n"},
		{"unreachable, text", closedURL(t), "", 502, "text/plain; charset=utf-8", "upstream unavailable\n"},
		{"slow, JSON", slow.URL, "application/json, */*", 504, "application/json", `{"error":"upstream timed out"}` + "\n"},
		{"slow, text", slow.URL, "text/html", 504, "text/plain; charset=utf-8", "upstream timed out\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw, logs := proxyGateway(t, tt.upstream, ft, app.ProxyOptions{Timeout: 100 * time.Millisecond, StripCredentials: ft.StripCredentials})
			resp, body := do(t, "GET", gw+"/x", "", http.Header{"Accept": {tt.accept}, "X-Api-Key": {"k-acme-1"}})
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != tt.contentType || body != tt.body {
				t.Errorf("got %d %q %q, want %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body,
					tt.status, tt.contentType, tt.body)
			}
			lines := logs.lines(t, "proxy error")
			if len(lines) != 1 || lines[0]["status"] != float64(tt.status) {
				t.Errorf("log lines %v, want one proxy error with status %d", lines, tt.status)
			}
			if strings.Contains(logs.String(), "k-acme-1") {
				t.Errorf("log holds the API key:\n%s", logs)
			}
		})
	}
}

// TestProxyDropsUpstreamRateLimitHeaders: the gateway owns the rate-limit
// headers; an upstream's own values never reach the client beside them.
func TestProxyDropsUpstreamRateLimitHeaders(t *testing.T) {
	t.Parallel()
	up, _ := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
			w.Header().Set(h, "from-upstream")
		}
		w.Header().Set("X-Upstream", "kept")
	})
	gw, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	resp, _ := do(t, http.MethodGet, gw+"/", "", nil)
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if got := resp.Header.Values(h); len(got) != 1 || got[0] == "from-upstream" {
			t.Errorf("%s = %q, want the gateway's one value", h, got)
		}
	}
	if got := resp.Header.Get("X-Upstream"); got != "kept" {
		t.Errorf("X-Upstream = %q, want kept", got)
	}
}

// TestProxyKeepsAnyMethod: any RFC 9110 token method reaches the upstream
// as sent, not a 405 from the router after the budget was spent.
func TestProxyKeepsAnyMethod(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	gw, _ := proxyGateway(t, up.URL, nil, app.ProxyOptions{})
	for _, method := range []string{"PROPFIND", "PURGE", "REPORT", "MKCOL", "get", "X-Custom.1"} {
		resp, body := do(t, method, gw+"/dav/x", "", nil)
		if resp.StatusCode != http.StatusOK || body != "ok" {
			t.Errorf("%s: %d %q, want the upstream's 200 ok", method, resp.StatusCode, body)
			continue
		}
		if r := <-got; r.method != method || r.path != "/dav/x" {
			t.Errorf("%s: upstream got %s %s, want %s /dav/x", method, r.method, r.path, method)
		}
	}
}

// TestProxyKeepsRawQuery: a query the gateway cannot parse is forwarded
// as sent, not dropped (ReverseProxy's Rewrite mode strips it).
func TestProxyKeepsRawQuery(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	tests := []struct{ upstream, query, want string }{
		{up.URL, "b=%zz", "b=%zz"},
		{up.URL, "a=1;b=2", "a=1;b=2"},
		{up.URL, "x=%41&y", "x=%41&y"},
		{up.URL + "/api?from=gw", "b=%zz", "from=gw&b=%zz"},
	}
	for _, tt := range tests {
		gw, _ := proxyGateway(t, tt.upstream, nil, app.ProxyOptions{})
		if resp, _ := do(t, http.MethodGet, gw+"/a?"+tt.query, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("?%s: status %d, want 200", tt.query, resp.StatusCode)
			continue
		}
		if r := <-got; r.query != tt.want {
			t.Errorf("?%s via %s: upstream got query %q, want %q", tt.query, tt.upstream, r.query, tt.want)
		}
	}
}
