package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/ports"
)

// FuzzMatchThenForward sends any request path through the whole public
// handler (normalisation, route matching, the limiter, the reverse
// proxy) to an upstream mounted at /api, and checks that matching and
// forwarding agree: the path the upstream receives is normal, and it
// matches the very route the request was metered on. No spelling of a
// path is metered on one route and served on another, the upstream's
// path read as the most lenient upstream would (domain.MatchPath; the
// domain's FuzzMatchSpellings tries the spellings against a policy).
// Plain go test runs it on its seed corpus; go test -fuzz
// FuzzMatchThenForward ./faces/proxy explores.
func FuzzMatchThenForward(f *testing.F) {
	for _, s := range []string{
		"/", "/v1/search", "/v1/search/", "/v1//search", "/v1/./search", "/v1/x/../search", "/v1/%73earch",
		"/v1/search%2F..", "/v1/search/..", "/v1/searches", "/V1/search", "/v1/export/a", "/v1/exports",
		"/v1/../admin", "/../v1/search", "/%2e%2e/v1", "/..%2fv1", "/files/a%2Fb", "/files/a%2fb/c", "/files/a/b",
		"/status", "/status/", "//status", "/stat%75s", "/a b", "/%zz", "/v1/search%00", "/v1/%2e/search",
		"/v1%2Fexport", "/v1/export;x", "/v1/export;jsessionid=abc/x", "/status/..;/v1/export", "/v1%5Csearch", "/v1\\export",
	} {
		f.Add(s, "POST")
		f.Add(s, "GET")
	}
	policy, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "global", Rule: domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}}},
		[]domain.Route{
			{Name: "search", Method: "POST", Path: "/v1/search", Cost: 5},
			{Name: "search-any", Path: "/v1/search", Cost: 2},
			{Name: "export", Path: "/v1/export", Cost: 1},
			{Name: "v1", Path: "/v1", Cost: 1},
			{Name: "files", Path: "/files/a%2Fb", Cost: 1},
			{Name: "status", Path: "/status", Cost: 3},
		})
	if err != nil {
		f.Fatal(err)
	}
	var metered string // the route of the request being served; one at a time
	lim := ports.LimiterFunc(func(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		metered = req.Route
		return domain.Settle(req, domain.CountAdmitted, nil, func(int, int64) domain.Decision {
			return domain.Decision{Allowed: true, Limit: 1 << 40, Remaining: 1 << 30}
		}), nil
	})
	var forwarded string // the escaped path the upstream was sent
	target, _ := url.Parse("http://upstream.invalid/api")
	upstream := proxy.NewUpstream(target, proxy.UpstreamOptions{Log: slog.New(slog.DiscardHandler),
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			forwarded = r.URL.EscapedPath()
			return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}, Request: r}, nil
		})})
	h := proxy.New(proxy.Options{
		Engine:   engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: lim, Keys: keys.Layout{Prefix: "rl:"}}),
		Upstream: upstream,
	})

	f.Fuzz(func(t *testing.T, path, method string) {
		u, err := url.ParseRequestURI(path)
		if err != nil || u.Path == "" || u.RawQuery != "" || u.Fragment != "" || u.Host != "" || !domain.ValidToken(method) {
			return // not a request path a server would hand over
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method, r.URL, r.RequestURI = method, u, path
		metered, forwarded = "", ""
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == http.StatusBadRequest {
			if metered != "" || forwarded != "" {
				t.Fatalf("%s %q: 400, yet metered on %q and forwarded as %q", method, path, metered, forwarded)
			}
			return
		}
		if w.Code != http.StatusOK {
			t.Fatalf("%s %q: status %d", method, path, w.Code)
		}
		upstreamPath, ok := strings.CutPrefix(forwarded, "/api")
		if !ok || metered == "" {
			t.Fatalf("%s %q: forwarded as %q, metered on %q", method, path, forwarded, metered)
		}
		if upstreamPath == "" {
			upstreamPath = "/"
		}
		if norm, err := domain.NormalizePath(upstreamPath); err != nil || norm != upstreamPath {
			t.Fatalf("%s %q: the upstream got %q, not a normal path (%q, %v)", method, path, upstreamPath, norm, err)
		}
		read, err := domain.MatchPath(upstreamPath)
		if err != nil {
			t.Fatalf("%s %q: the upstream got %q, which a lenient upstream reads as climbing above /: %v", method, path, upstreamPath, err)
		}
		if served := policy.Match(method, read).Name; served != metered {
			t.Fatalf("%s %q: metered on route %q, but the upstream's path %q is on route %q", method, path, metered, upstreamPath, served)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
