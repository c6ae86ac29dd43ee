package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/testhttp"
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

func TestProxyForwardsRequest(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "created")
	})
	gw, _ := proxyGateway(t, up.URL+"/api?from=gw", nil, proxy.UpstreamOptions{})
	resp, body := testhttp.Do(t, "POST", gw+"/v1/items?a=1&b=two", "hello", http.Header{
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
	headerGW, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	ft := twoTenants()
	fileGW, _ := proxyGateway(t, up.URL, ft, proxy.UpstreamOptions{})
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
		resp, _ := testhttp.Do(t, "GET", tt.gw+"/", "", tt.header)
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
	ft := twoTenants()
	fileGW, _ := proxyGateway(t, up.URL, ft, proxy.UpstreamOptions{})
	headerGW, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
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
		// A key on any Authorization line is the gateway's.
		{"a key on a second Authorization line stripped", fileGW,
			http.Header{"X-Api-Key": {"k-acme-1"}, "Authorization": {"Bearer user-token", "Bearer k-globex"}}, "Bearer user-token", ""},
		{"a key after Basic stripped", fileGW,
			http.Header{"Authorization": {"Basic dXNlcjpwYXNz", "Bearer k-globex"}}, "Basic dXNlcjpwYXNz", ""},
		{"a key after a tab stripped", fileGW, http.Header{"Authorization": {"Bearer\tk-globex"}}, "", ""},
		{"the key read stripped, another service's token on a second line kept", fileGW,
			http.Header{"Authorization": {"Bearer k-acme-1", "Bearer service-token"}}, "Bearer service-token", ""},
		// Connection naming X-API-Key does not hide that one was presented.
		{"upstream's bearer kept beside an x-api-key Connection names", fileGW,
			http.Header{"X-Api-Key": {"k-acme-1"}, "Authorization": {"Bearer user-token"}, "Connection": {"X-API-Key"}}, "Bearer user-token", ""},
	}
	for _, tt := range tests {
		testhttp.Do(t, "GET", tt.gw+"/", "", tt.header)
		r := <-got
		if a, k := strings.Join(r.header.Values("Authorization"), " | "), r.header.Get("X-API-Key"); a != tt.wantAuth || k != tt.wantKey {
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
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	resp, _ := testhttp.Do(t, "GET", gw+"/", "", http.Header{
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
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
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
	ft := twoTenants()
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
			gw, logs := proxyGateway(t, tt.upstream, ft, proxy.UpstreamOptions{Timeout: 100 * time.Millisecond})
			resp, body := testhttp.Do(t, "GET", gw+"/x", "", http.Header{"Accept": {tt.accept}, "X-Api-Key": {"k-acme-1"}})
			if resp.StatusCode != tt.status || resp.Header.Get("Content-Type") != tt.contentType || body != tt.body {
				t.Errorf("got %d %q %q, want %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body,
					tt.status, tt.contentType, tt.body)
			}
			lines := logs.Lines(t, "proxy error")
			if len(lines) != 1 || lines[0]["status"] != float64(tt.status) {
				t.Errorf("log lines %v, want one proxy error with status %d", lines, tt.status)
			}
			if strings.Contains(logs.String(), "k-acme-1") {
				t.Errorf("log holds the API key:\n%s", logs)
			}
		})
	}
}

// TestProxyErrorLinesThrottled: an upstream that is down fails every
// request, and each one logged a line (25 000 lines in 3 s); now at most
// one a second, saying how many it stands for. Every request still gets
// its 502.
func TestProxyErrorLinesThrottled(t *testing.T) {
	t.Parallel()
	gw, logs := proxyGateway(t, closedURL(t), twoTenants(), proxy.UpstreamOptions{})
	ask := func(n int) {
		for range n {
			if resp, _ := testhttp.Do(t, "GET", gw+"/x", "", http.Header{"X-Api-Key": {"k-acme-1"}}); resp.StatusCode != http.StatusBadGateway {
				t.Fatalf("status %d, want 502", resp.StatusCode)
			}
		}
	}
	ask(20)
	if lines := logs.Lines(t, "proxy error"); len(lines) != 1 || lines[0]["errors_since_last_line"] != float64(1) {
		t.Fatalf("after 20 failures: %v, want one line standing for 1", lines)
	}
	time.Sleep(1100 * time.Millisecond)
	ask(1)
	if lines := logs.Lines(t, "proxy error"); len(lines) != 2 || lines[1]["errors_since_last_line"] != float64(20) {
		t.Errorf("a second later: %v, want a second line standing for 20", lines)
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
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	resp, _ := testhttp.Do(t, http.MethodGet, gw+"/", "", nil)
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
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	for _, method := range []string{"PROPFIND", "PURGE", "REPORT", "MKCOL", "get", "X-Custom.1"} {
		resp, body := testhttp.Do(t, method, gw+"/dav/x", "", nil)
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
		gw, _ := proxyGateway(t, tt.upstream, nil, proxy.UpstreamOptions{})
		if resp, _ := testhttp.Do(t, http.MethodGet, gw+"/a?"+tt.query, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("?%s: status %d, want 200", tt.query, resp.StatusCode)
			continue
		}
		if r := <-got; r.query != tt.want {
			t.Errorf("?%s via %s: upstream got query %q, want %q", tt.query, tt.upstream, r.query, tt.want)
		}
	}
}

// TestProxyAPIKeyLookAlikesNotForwarded: with a tenants file, headers a
// server could read as X-API-Key (X_API_KEY, x-api_key, any case) never
// reach the upstream, whatever key they carry.
func TestProxyAPIKeyLookAlikesNotForwarded(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	gw, _ := proxyGateway(t, up.URL, twoTenants(), proxy.UpstreamOptions{})
	for _, name := range []string{"X_API_KEY", "x-api_key", "X_Api-Key", "x_api_key"} {
		// Raw bytes: net/http's client would canonicalize or refuse the name.
		conn := rawConn(t, gw, "GET / HTTP/1.1\r\nHost: gw\r\nX-API-Key: k-acme-1\r\n"+name+": k-globex\r\nConnection: close\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
			t.Fatal(err)
		}
		r := <-got
		for k, vs := range r.header {
			if looksLikeAPIKey(k) || strings.Contains(strings.Join(vs, ","), "k-") {
				t.Errorf("%s: the upstream got %s: %v", name, k, vs)
			}
		}
	}
}

func looksLikeAPIKey(name string) bool {
	return strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-API-Key")
}

// TestProxyClientAddressHeaders: the upstream's X-Real-IP is the client
// address the gateway read, True-Client-IP is dropped (a client cannot
// name its own address); from an untrusted peer X-Forwarded-For is the
// peer alone, from a trusted one the received list with the peer
// appended, and its X-Forwarded-Proto is kept.
func TestProxyClientAddressHeaders(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	untrusted, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	trusted, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{Trusted: mustTrust(t, "127.0.0.0/8")})
	spoof := http.Header{
		"X-Forwarded-For":   {"203.0.113.7, 10.0.0.9"},
		"X-Forwarded-Proto": {"https"},
		"X-Real-Ip":         {"6.6.6.6"},
		"True-Client-Ip":    {"6.6.6.6"},
		// Look-alikes that CGI, WSGI or nginx's underscores_in_headers
		// read as the real names: none may reach the upstream.
		"X_Forwarded_For":   {"6.6.6.6"},
		"X_forwarded_host":  {"evil.example"},
		"X_Forwarded_Proto": {"https"},
		"X_Real_IP":         {"6.6.6.6"},
		"True_Client_IP":    {"6.6.6.6"},
	}
	for _, tt := range []struct {
		name, gw, xff, realIP, proto string
	}{
		{"untrusted peer", untrusted, "127.0.0.1", "127.0.0.1", "http"},
		// 10.0.0.9 is not trusted: it is the client.
		{"trusted peer", trusted, "203.0.113.7, 10.0.0.9, 127.0.0.1", "10.0.0.9", "https"},
	} {
		testhttp.Do(t, "GET", tt.gw+"/", "", spoof)
		r := <-got
		if got := strings.Join(r.header.Values("X-Forwarded-For"), ", "); got != tt.xff {
			t.Errorf("%s: X-Forwarded-For %q, want %q", tt.name, got, tt.xff)
		}
		if got := r.header.Values("X-Real-Ip"); len(got) != 1 || got[0] != tt.realIP {
			t.Errorf("%s: X-Real-IP %q, want %q", tt.name, got, tt.realIP)
		}
		if got := r.header.Get("X-Forwarded-Proto"); got != tt.proto {
			t.Errorf("%s: X-Forwarded-Proto %q, want %q", tt.name, got, tt.proto)
		}
		if got := r.header.Values("True-Client-Ip"); len(got) != 0 {
			t.Errorf("%s: True-Client-IP %q reached the upstream", tt.name, got)
		}
		for name, v := range r.header {
			if strings.Contains(name, "_") {
				t.Errorf("%s: the look-alike %s: %q reached the upstream", tt.name, name, v)
			}
		}
	}
}

// TestProxyDropsPathOverrides: X-Original-URL and X-Rewrite-URL name
// the path that IIS's URL Rewrite, Zend and Symfony before 2.7.49 serve
// instead of the request line's: forwarded, a client metered on a cheap
// route reached any other. Neither reaches the upstream, in any spelling.
func TestProxyDropsPathOverrides(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	testhttp.Do(t, "GET", gw+"/status", "", http.Header{
		"X-Original-Url": {"/v1/export"}, "X-Rewrite-Url": {"/v1/export"},
		"X_Original_URL": {"/v1/export"}, "x-rewrite_url": {"/v1/export"},
	})
	r := <-got
	for name, v := range r.header {
		if n := strings.ToLower(strings.ReplaceAll(name, "_", "-")); n == "x-original-url" || n == "x-rewrite-url" {
			t.Errorf("%s: %q reached the upstream", name, v)
		}
	}
}

func mustTrust(t *testing.T, cidrs string) domain.TrustedProxies {
	t.Helper()
	tp, err := domain.ParseTrustedProxies(cidrs)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestProxyRefusesH2CUpgrade: an offer to switch to cleartext HTTP/2
// never reaches the upstream, which could otherwise turn the connection
// into a tunnel of unmetered requests; the request is served as HTTP/1.1,
// and other upgrade offers pass.
func TestProxyRefusesH2CUpgrade(t *testing.T) {
	t.Parallel()
	up, got := recordingUpstream(t, nil)
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	for _, tt := range []struct {
		upgrade, want string
	}{
		{"h2c", ""},
		{"H2C", ""},
		{"websocket, h2c", "websocket"},
	} {
		conn := rawConn(t, gw, "GET / HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: "+tt.upgrade+
			"\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			t.Errorf("Upgrade: %s: 101 Switching Protocols", tt.upgrade)
		}
		r := <-got
		if got := r.header.Get("Upgrade"); got != tt.want {
			t.Errorf("Upgrade: %s: the upstream got Upgrade %q, want %q", tt.upgrade, got, tt.want)
		}
		if got := r.header.Get("Http2-Settings"); got != "" {
			t.Errorf("Upgrade: %s: the upstream got HTTP2-Settings %q", tt.upgrade, got)
		}
	}
}
