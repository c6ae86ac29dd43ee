package check_test

import (
	"net/http"
	"testing"
)

// The edge forwards the URI to the upstream as it came, unresolved, so a
// spelling that the check endpoint would resolve onto another route than
// the upstream's reading is refused (400), never metered on the cheaper
// one. Both found by a hostile test, end to end behind nginx and Caddy.

// TestCheckFragmentRefused: nginx's auth_request passes $request_uri raw
// and forwards the same raw URI; an upstream that ends the path at '#'
// (Node's URL, Express) serves /v1/export#/../../status as /v1/export,
// which the check endpoint would have metered as the cost-0 status.
func TestCheckFragmentRefused(t *testing.T) {
	t.Parallel()
	h, _, _ := newCheck(t, setup{})
	for i := range 2 { // export: 2 an hour
		if w := ask(h, "X-Tenant-ID", "acme", "X-Original-URI", "/v1/export"); w.Code != http.StatusOK {
			t.Fatalf("export %d: %d, want 200", i+1, w.Code)
		}
	}
	if w := ask(h, "X-Tenant-ID", "acme", "X-Original-URI", "/v1/export"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("the third export: %d, want 429", w.Code)
	}
	for _, uri := range []string{"/v1/export#/../../status", "/v1/export#", "http://x/v1/export#/../../status", "/status?a#b"} {
		if w := ask(h, "X-Tenant-ID", "acme", "X-Original-URI", uri); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d (RateLimit-Policy %q), want 400", uri, w.Code, w.Header().Get("RateLimit-Policy"))
		}
	}
}

// TestCheckParamDotSegmentRefused: Go's ServeMux, nginx, Node and
// Express read "..;" as an ordinary name, so /v1/export/..;/..;/status
// is served under /v1/export/; resolved as Tomcat does it would have
// been metered as status.
func TestCheckParamDotSegmentRefused(t *testing.T) {
	t.Parallel()
	h, _, _ := newCheck(t, setup{})
	refusedOverExports(t, h, "X-Forwarded-Uri", "/v1/export/..;/..;/status", "/v1/export/..%3B/..%3B/status",
		"/v1/export/..;x/..;x/status", "/v1/export/%2E%2E;/%2e%2e;/status", "/v1/export/.;/x")
	// Parameters on an ordinary segment stay a path the routes match.
	if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/status;v=1"); w.Code == http.StatusBadRequest {
		t.Errorf("/status;v=1: 400, want it decided")
	}
}

// TestCheckLeadingDoubleSlashRefused: the edge forwards the URI as the
// client sent it, and WHATWG URL parsers (Node's new URL) and Python's
// urlsplit read "//status/v1/export" as host "status", path /v1/export:
// collapsed to /status/v1/export it would have been metered on status, a
// route of cost 0. So a path that starts with "//" or "/\", in origin or
// absolute form, is refused; one with "//" further on is decided.
func TestCheckLeadingDoubleSlashRefused(t *testing.T) {
	t.Parallel()
	h, _, _ := newCheck(t, setup{})
	for _, uri := range []string{"//status/v1/export", "///status/v1/export", `/\status/v1/export`, "//status", "http://edge//status/v1/export", "HTTPS://edge///status"} {
		if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", uri); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d (RateLimit-Policy %q), want 400", uri, w.Code, w.Header().Get("RateLimit-Policy"))
		}
	}
	if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1//export"); w.Code == http.StatusBadRequest {
		t.Errorf("/v1//export: 400, want it decided")
	}
}

// TestCheckDotSegmentRefused: nginx and Caddy forward the URI with its
// dot segments as the client sent them, and Express (Node's req.url),
// like other routers that take the path as it came, reads ".." as a
// name: /v1/export/../../status reached app.use('/v1/export') behind
// both, metered as /status, a route of cost 0, where the export budget
// was spent. So a "." or ".." segment, in any spelling, is refused.
func TestCheckDotSegmentRefused(t *testing.T) {
	t.Parallel()
	h, _, _ := newCheck(t, setup{})
	refusedOverExports(t, h, "X-Original-URI", "/v1/export/../../status", "/v1/export/%2e%2e/%2E%2E/status",
		"/v1/export/.%2e/.%2E/status", "/v1/export/./../../status", "/v1/export/x/..", "/v1/./export", "/v1/export/.",
		"http://edge/v1/export/../../status")
	// Dots inside a name are no dot segment.
	for _, uri := range []string{"/status/a.b", "/status/...", "/status/.well-known", "/status/..x", "/status/x..", "/status?p=/../x"} {
		if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", uri); w.Code == http.StatusBadRequest {
			t.Errorf("%s: 400, want it decided", uri)
		}
	}
}

// refusedOverExports spends acme's export budget on h, then checks that
// each of uris, described in header, is refused (400) rather than
// decided on another route.
func refusedOverExports(t *testing.T, h http.Handler, header string, uris ...string) {
	t.Helper()
	for range 3 {
		ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1/export/x")
	}
	if w := ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Uri", "/v1/export/x"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("export after its budget: %d, want 429", w.Code)
	}
	for _, uri := range uris {
		if w := ask(h, "X-Tenant-ID", "acme", header, uri); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d (RateLimit-Policy %q), want 400", uri, w.Code, w.Header().Get("RateLimit-Policy"))
		}
	}
}
