package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/ports"
)

// TestMethodOverrideOnAnotherRouteIsRefused: a request that names
// another method for the upstream to serve it as (X-HTTP-Method-Override
// and its kin, any case or with '_', or a "_method" query parameter, as
// Flask's documented middleware, Rack, Express's method-override,
// gorilla's handler, Symfony, Laravel and Spring read them) is metered on
// the route of its own method; when the named method matches another
// route, an upstream that honours the override serves that one (GET
// /v1/search with "X-HTTP-Method-Override: POST" reached the search
// route of cost 5 metered as default, cost 1), so it is answered 400 and
// spends nothing. An override that lands on the same route goes through.
func TestMethodOverrideOnAnotherRouteIsRefused(t *testing.T) {
	t.Parallel()
	policy, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "global", Rule: domain.Rule{Limit: 1000, Window: 60e9}}},
		[]domain.Route{
			{Name: "search", Method: "POST", Path: "/v1/search", Cost: 5},
			{Name: "purge", Method: "DELETE", Path: "/v1/items", Cost: 50},
			{Name: "export", Path: "/v1/export", Cost: 1},
		})
	if err != nil {
		t.Fatal(err)
	}
	var metered []string
	lim := ports.LimiterFunc(func(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		metered = append(metered, req.Route)
		return domain.Settle(req, domain.CountAdmitted, nil, func(int, int64) domain.Decision {
			return domain.Decision{Allowed: true, Limit: 1000, Remaining: 999}
		}), nil
	})
	var served int
	h := proxy.New(proxy.Options{
		Engine: engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: lim, Keys: keys.Layout{Prefix: "rl:"}}),
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			served++
		}),
	})
	for _, tt := range []struct {
		method, target string
		header         http.Header
		want           int    // status
		route          string // metered; "" for none
	}{
		{"GET", "/v1/search", http.Header{"X-Http-Method-Override": {"POST"}}, 400, ""},
		{"GET", "/v1/search", http.Header{"X_http_method_override": {"post"}}, 400, ""},
		{"GET", "/v1/search", http.Header{"X-Http-Method": {"POST"}}, 400, ""},
		{"GET", "/v1/search", http.Header{"X-Method-Override": {"POST"}}, 400, ""},
		{"GET", "/v1/search", http.Header{"X-Http-Method-Override": {"GET", "POST"}}, 400, ""},
		{"POST", "/v1/items?_method=DELETE", nil, 400, ""},
		{"POST", "/v1/items?a=1&%5Fmethod=delete", nil, 400, ""},
		{"POST", "/v1/items?_method=DELETE&a=%zz", nil, 400, ""},
		{"POST", "/v1/search", http.Header{"X-Http-Method-Override": {"GET"}}, 400, ""},
		// The same route either way: forwarded as sent.
		{"POST", "/v1/search", http.Header{"X-Http-Method-Override": {"POST"}}, 200, "search"},
		{"GET", "/v1/export", http.Header{"X-Http-Method-Override": {"DELETE"}}, 200, "export"},
		{"GET", "/v1/other?_method=PUT", nil, 200, "default"},
		{"GET", "/v1/search?a_method=POST&method=POST", http.Header{"X-Http-Method-Override": {""}}, 200, "default"},
	} {
		metered, served = nil, 0
		r := httptest.NewRequest(tt.method, tt.target, strings.NewReader(""))
		for k, vs := range tt.header {
			r.Header[k] = vs
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s %s %v: status %d, want %d (%q)", tt.method, tt.target, tt.header, w.Code, tt.want, w.Body)
		}
		switch {
		case tt.route == "" && (len(metered) != 0 || served != 0):
			t.Errorf("%s %s %v: metered %v, served %d times; want neither", tt.method, tt.target, tt.header, metered, served)
		case tt.route != "" && (len(metered) != 1 || metered[0] != tt.route || served != 1):
			t.Errorf("%s %s %v: metered %v, served %d times; want %s once", tt.method, tt.target, tt.header, metered, served, tt.route)
		}
		if tt.want == 400 && !strings.Contains(w.Body.String(), "ambiguous method") {
			t.Errorf("%s %s %v: body %q, want ambiguous method", tt.method, tt.target, tt.header, w.Body)
		}
	}
}
