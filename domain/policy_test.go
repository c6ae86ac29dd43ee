package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

var (
	perSecond = domain.PolicyLimit{Name: "per-second", Rule: domain.Rule{Limit: 20, Window: time.Second}}
	perDay    = domain.PolicyLimit{Name: "per-day", Rule: domain.Rule{Limit: 100000, Window: 24 * time.Hour}, Shadow: true}
	exports   = domain.PolicyLimit{Name: "exports", Rule: domain.Rule{Limit: 10, Window: time.Hour}}
)

// examplePolicy is docs/policies.md's example, with a few routes more for
// matching.
func examplePolicy(t *testing.T) *domain.Policy {
	t.Helper()
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond, perDay}, []domain.Route{
		{Name: "search", Method: "POST", Path: "/v1/search", Cost: 5},
		{Name: "search-any", Path: "/v1/search", Cost: 2},
		{Name: "export", Path: "/v1/export", Cost: 1, Limits: []domain.PolicyLimit{exports}},
		{Name: "status", Path: "/status", Cost: 0},
		{Name: "v1", Path: "/v1", Cost: 1},
		{Name: "v1-deep", Path: "/v1/search/deep", Cost: 3},
		{Name: "files", Path: "/files/a%2Fb", Cost: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPolicyMatch(t *testing.T) {
	t.Parallel()
	p := examplePolicy(t)
	tests := []struct {
		method, path, want string
	}{
		{"POST", "/v1/search", "search"},
		{"post", "/v1/search", "search"}, // methods in any case: no dodging a POST route
		{"GET", "/v1/search", "search-any"},
		{"POST", "/v1/search/x", "search"},
		{"GET", "/v1/search/", "search-any"},
		{"POST", "/v1/searches", "v1"}, // not at a segment boundary
		{"POST", "/v1/search/deep", "v1-deep"},
		{"POST", "/v1/search/deep/er", "v1-deep"},
		{"GET", "/v1/export", "export"},
		{"GET", "/v1/export/x", "export"},
		{"GET", "/v1/exports", "v1"},
		{"GET", "/v1", "v1"},
		{"GET", "/v1/", "v1"},
		{"GET", "/v10", "default"},
		{"GET", "/V1/export", "default"}, // paths are case-sensitive
		{"GET", "/status", "status"},
		{"GET", "/", "default"},
		{"GET", "/statusx", "default"},
		// Paths are given as MatchPath reads them: the route's
		// "/files/a%2Fb" is read as "/files/a/b".
		{"GET", "/files/a/b", "files"},
		{"GET", "/files/a/b/c", "files"},
		{"GET", "/files/a", "default"},
		{"GET", "/files/a/bc", "default"},
	}
	for _, tt := range tests {
		if got := p.Match(tt.method, tt.path).Name; got != tt.want {
			t.Errorf("Match(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestPolicyMatchHead: a HEAD request falls back to a GET route, after a
// HEAD route of the same length and before a method-less one; a longer
// path wins first.
func TestPolicyMatchHead(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond}, []domain.Route{
		{Name: "v1", Path: "/v1"},
		{Name: "get-x", Method: "GET", Path: "/v1/getx"},
		{Name: "head-v1", Method: "HEAD", Path: "/v1"},
		{Name: "y", Path: "/y"},
		{Name: "get-y", Method: "get", Path: "/y"},
		{Name: "head-y", Method: "HEAD", Path: "/y"},
		{Name: "z", Path: "/z"},
		{Name: "get-z", Method: "GET", Path: "/z"},
		{Name: "post-w", Method: "POST", Path: "/w"},
		{Name: "all", Path: "/"},
		{Name: "head-all", Method: "head", Path: "/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ method, path, want string }{
		{"HEAD", "/v1/getx", "get-x"}, // a longer GET route beats a shorter HEAD one
		{"head", "/v1/getx/", "get-x"},
		{"HEAD", "/v1/getx/deep", "get-x"},
		{"GET", "/v1/getx", "get-x"},
		{"POST", "/v1/getx", "v1"},
		{"HEAD", "/v1/other", "head-v1"},
		{"GET", "/v1/other", "v1"},
		{"HEAD", "/y", "head-y"}, // HEAD, then GET, then none
		{"GET", "/y", "get-y"},
		{"POST", "/y", "y"},
		{"HEAD", "/z", "get-z"},
		{"Head", "/z/a", "get-z"},
		{"PUT", "/z", "z"},
		{"HEAD", "/w", "head-all"}, // a POST route never takes HEAD
		{"POST", "/w", "post-w"},
		{"HEAD", "/q", "head-all"},
		{"GET", "/q", "all"},
	} {
		if got := p.Match(tt.method, tt.path).Name; got != tt.want {
			t.Errorf("Match(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

// TestPolicyMatchSpellings: the spellings a hostile test tried,
// through NormalizePath, MatchPath and Match, are metered on the route
// the upstreams that decode %2F, drop parameters, read "..;" as ".." or
// serve HEAD with GET served them on, or refused.
func TestPolicyMatchSpellings(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond}, []domain.Route{
		{Name: "export", Path: "/v1/export", Cost: 5, Limits: []domain.PolicyLimit{exports}},
		{Name: "status", Path: "/status", Cost: 0},
		{Name: "getx", Method: "GET", Path: "/v1/getx", Cost: 2},
		{Name: "batch", Path: "/v1/items:batch", Cost: 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ method, raw, want string }{ // want "" is a 400
		{"GET", "/v1/export", "export"},
		{"GET", "/v1%2Fexport", "export"},
		{"GET", "/v1%2fexport", "export"},
		{"GET", "/v1%5Cexport", "export"},
		{"GET", `/v1\export`, "export"},
		{"GET", "/v1%2F%2Fexport%2F", "export"},
		{"GET", "/v1/export;x", "export"},
		{"GET", "/v1/export;jsessionid=abc/x", "export"},
		{"GET", "/v1;x/export", "export"},
		{"GET", "/v1/;x/export", "export"},
		{"GET", "/v1/export%3Bx", "export"},
		{"GET", "/status/..;/v1/export", "export"},
		{"GET", "/status/..;jsessionid=1/v1/export", "export"},
		{"GET", "/status/..%3B/v1/export", "export"},
		{"GET", "/status/%2e%2e;/v1/export", "export"},
		{"GET", "/status/.;/x", "status"},
		{"GET", "/v1/.;/export", "export"},
		{"HEAD", "/v1/getx", "getx"},
		{"HEAD", "/v1%2Fgetx;x", "getx"},
		{"GET", "/v1/items%3Abatch", "batch"},
		{"GET", "/v1/items%3abatch/1", "batch"},
		{"GET", "/v1/exports", "default"},
		{"GET", "/status", "status"},
		// Refused: readers disagree, or the path climbs.
		{"GET", "/..;/v1/export", ""},
		{"GET", "/status/..;/..;/v1/export", ""},
		{"GET", "/v1;x%2Fexport", ""},
		{"GET", "/status;x%2F..%2Fv1/export", ""},
		{"GET", "/status/;x/../v1/export", ""},
		{"GET", "/a%2Fb/../v1/export", ""},
		{"GET", "/status%2F..;%2Fv1/export", ""},
	} {
		got := ""
		if norm, err := domain.NormalizePath(tt.raw); err == nil {
			if mp, err := domain.MatchPath(norm); err == nil {
				got = p.Match(tt.method, mp).Name
			} else if !errors.Is(err, domain.ErrInvalidPath) {
				t.Errorf("MatchPath(%q): %v does not wrap ErrInvalidPath", norm, err)
			}
		} else if !errors.Is(err, domain.ErrInvalidPath) {
			t.Errorf("NormalizePath(%q): %v does not wrap ErrInvalidPath", tt.raw, err)
		}
		if got != tt.want {
			t.Errorf("%s %s: route %q, want %q (\"\" is refused)", tt.method, tt.raw, got, tt.want)
		}
	}
}

// TestPolicyMatchLengthAsRead: the longest path is the longest as
// MatchPath reads it, not as written.
func TestPolicyMatchLengthAsRead(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond}, []domain.Route{
		{Name: "a", Path: "/a;version=1"}, // read as "/a"
		{Name: "a-b", Path: "/a/b"},
		{Name: "c-d", Path: "/c%2Fd"}, // read as "/c/d"
		{Name: "c-d-e", Path: "/c/d/e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{"/a/b/c", "a-b"}, {"/a/x", "a"}, {"/a", "a"}, {"/c/d/e", "c-d-e"}, {"/c/d/x", "c-d"}, {"/c", "default"},
	} {
		if got := p.Match("GET", tt.path).Name; got != tt.want {
			t.Errorf("Match(GET %s) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestPolicyMatchCatchAll(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond}, []domain.Route{
		{Name: "all", Path: "/", Cost: 2},
		{Name: "writes", Method: "PUT", Path: "/", Cost: 3},
		{Name: "a", Path: "/a", Cost: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/", "all"}, {"GET", "/x/y", "all"}, {"PUT", "/x", "writes"}, {"PUT", "/a/b", "a"}, {"GET", "/ab", "all"},
	} {
		if got := p.Match(tt.method, tt.path).Name; got != tt.want {
			t.Errorf("Match(%s %s) = %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

func TestPolicyApplied(t *testing.T) {
	t.Parallel()
	p := examplePolicy(t)
	export := p.Match("GET", "/v1/export")
	names := func(r *domain.Route) string {
		var s []string
		for i, l := range r.Applied() {
			n := l.Name
			if r.Own(i) {
				n += "(own)"
			}
			s = append(s, n)
		}
		return strings.Join(s, ",")
	}
	if got, want := names(export), "per-second,per-day,exports(own)"; got != want {
		t.Errorf("export applies %s, want %s (global limits in file order, then the route's)", got, want)
	}
	def := p.Match("GET", "/other")
	if got, want := names(def), "per-second,per-day"; got != want || def.Cost != 1 {
		t.Errorf("default route applies %s at cost %d, want %s at cost 1", got, def.Cost, want)
	}
	if l, ok := p.Limit("exports"); !ok || l.Rule.Limit != 10 {
		t.Errorf("Limit(exports) = %+v, %v", l, ok)
	}
	if l, ok := p.Limit("per-day"); !ok || !l.Shadow {
		t.Errorf("Limit(per-day) = %+v, %v, want a shadow limit", l, ok)
	}
	if _, ok := p.Limit("nope"); ok {
		t.Error("Limit(nope) found")
	}
	if rs := p.Routes(); len(rs) != 8 || rs[len(rs)-1].Name != domain.DefaultRoute {
		t.Errorf("Routes() has %d routes, the last %q; want 8 ending with default", len(rs), rs[len(rs)-1].Name)
	}
	dp := domain.DefaultPolicy(domain.Rule{Limit: 3, Window: time.Minute}, true)
	if r := dp.Match("GET", "/x"); r.Name != "default" || len(r.Applied()) != 1 || r.Applied()[0].Name != "default" || !r.Applied()[0].Shadow {
		t.Errorf("DefaultPolicy: %+v", r.Applied())
	}
}

func TestNewPolicyErrors(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	lim := func(name string) domain.PolicyLimit { return domain.PolicyLimit{Name: name, Rule: rule} }
	route := func(name, method, path string, cost int64, own ...domain.PolicyLimit) domain.Route {
		return domain.Route{Name: name, Method: method, Path: path, Cost: cost, Limits: own}
	}
	tests := []struct {
		name   string
		limits []domain.PolicyLimit
		routes []domain.Route
		want   string
	}{
		{"bad limit name", []domain.PolicyLimit{lim("Per-Second")}, nil, `limits[0] (name "Per-Second"): bad name`},
		{"empty limit name", []domain.PolicyLimit{lim("")}, nil, `limits[0] (name ""): bad name`},
		{"long limit name", []domain.PolicyLimit{lim(strings.Repeat("a", 33))}, nil, "bad name"},
		{"underscore", []domain.PolicyLimit{lim("per_day")}, nil, "bad name"},
		{"duplicate limit", []domain.PolicyLimit{lim("a"), lim("a")}, nil, `limits[1] (name "a"): duplicate limit name, also limits[0]`},
		{"route limit shadows a global", []domain.PolicyLimit{lim("a")}, []domain.Route{route("r", "", "/r", 1, lim("a"))},
			`routes[0].limits[0] (name "a"): duplicate limit name, also limits[0]`},
		{"two routes, one limit name", nil, []domain.Route{route("r", "", "/r", 1, lim("x")), route("s", "", "/s", 1, lim("x"))},
			"duplicate limit name, also routes[0].limits[0]"},
		{"bad rule", []domain.PolicyLimit{{Name: "a", Rule: domain.Rule{Limit: 0, Window: time.Second}}}, nil, "invalid rule: limit=0"},
		{"bad window", []domain.PolicyLimit{{Name: "a", Rule: domain.Rule{Limit: 1, Window: 0}}}, nil, "invalid rule: window=0s"},
		{"bad route name", nil, []domain.Route{route("Search", "", "/s", 1)}, `routes[0] (name "Search"): bad name`},
		{"default route name", nil, []domain.Route{route("default", "", "/s", 1)}, "implicit route"},
		{"duplicate route name", nil, []domain.Route{route("s", "", "/s", 1), route("s", "", "/t", 1)}, "duplicate route name, also routes[0]"},
		{"duplicate method and path", nil, []domain.Route{route("a", "POST", "/s", 1), route("b", "post", "/s", 1)},
			"routes[1] (name \"b\"): duplicate route: routes[0] has the same method and path"},
		{"duplicate path", nil, []domain.Route{route("a", "", "/s", 1), route("b", "", "/s", 1)}, "duplicate route"},
		{"relative path", nil, []domain.Route{route("a", "", "s", 1)}, `path "s" is not a normal path`},
		{"empty path", nil, []domain.Route{route("a", "", "", 1)}, `path "" is not a normal path`},
		{"dot segments", nil, []domain.Route{route("a", "", "/v1/../s", 1)}, `want "/s"`},
		{"repeated slashes", nil, []domain.Route{route("a", "", "//s", 1)}, `want "/s"`},
		{"trailing slash", nil, []domain.Route{route("a", "", "/s/", 1)}, `want "/s"`},
		{"encoded unreserved", nil, []domain.Route{route("a", "", "/%73", 1)}, `want "/s"`},
		{"climbs", nil, []domain.Route{route("a", "", "/..", 1)}, "not a normal path"},
		{"dot segment with parameters", nil, []domain.Route{route("a", "", "/v1/..;/s", 1)}, `want "/s"`},
		{"parameters with an encoded slash", nil, []domain.Route{route("a", "", "/v1;x%2Fs", 1)},
			`path "/v1;x%2Fs": invalid path: encoded slash in a segment's parameters`},
		{"duplicate as matched", nil, []domain.Route{route("a", "GET", "/v1/s", 1), route("b", "get", "/v1%2Fs;x", 1)},
			`routes[1] (name "b"): duplicate route: routes[0] has the same method and path ("/v1%2Fs;x" is read as "/v1/s")`},
		{"duplicate as matched, trailing", nil, []domain.Route{route("a", "", "/v1", 1), route("b", "", "/v1/;x", 1)},
			`("/v1/;x" is read as "/v1")`},
		{"bad method", nil, []domain.Route{route("a", "GE T", "/s", 1)}, "not an HTTP method token"},
		{"negative cost", nil, []domain.Route{route("a", "", "/s", -1)}, "cost -1: want an integer from 0 to 1000000"},
		{"cost too high", nil, []domain.Route{route("a", "", "/s", 1_000_001)}, "cost 1000001"},
		{"cost above a limit", []domain.PolicyLimit{lim("a")}, []domain.Route{route("r", "", "/s", 11)}, `cost 11 is above limit "a"'s limit of 10`},
		{"cost 0 with limits of its own", []domain.PolicyLimit{lim("a")}, []domain.Route{route("free", "", "/s", 0, lim("b"))},
			`routes[0] (name "free"): cost 0 is not metered at all, so the route's own limits would never apply`},
		{"cost 0 with a concurrency limit", nil, []domain.Route{route("free", "", "/s", 0,
			domain.PolicyLimit{Name: "inflight", Concurrency: true, Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow}})},
			"cost 0 is not metered at all"},
		{"concurrency counting tokens", []domain.PolicyLimit{{Name: "inflight", Concurrency: true, Tokens: true,
			Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow}}}, nil, "counts requests in flight, not tokens"},
		{"reserve without tokens", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Reserve: 5}},
			`"reserve" without "tokens"`},
		{"unknown token source", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Tokens: "anthropic"}},
			`tokens "anthropic": want "openai" or "header:<Name>"`},
		{"bad header source", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Tokens: "header:X Units"}},
			"want \"openai\" or"},
		{"empty header source", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Tokens: "header:"}},
			"want \"openai\" or"},
		{"negative reserve", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Tokens: "openai", Reserve: -1}},
			"reserve -1: want an integer from 1 to 4294967296"},
		{"tokens on a free route", []domain.PolicyLimit{tpm}, []domain.Route{{Name: "r", Path: "/r", Cost: 0, Tokens: "openai"}},
			"its tokens would never be counted"},
		{"tokens without a token limit", []domain.PolicyLimit{lim("a")}, []domain.Route{{Name: "r", Path: "/r", Cost: 1, Tokens: "openai"}},
			`no limit that applies to the route counts tokens`},
	}
	for _, tt := range tests {
		_, err := domain.NewPolicy(tt.limits, tt.routes)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, domain.ErrInvalidPolicy) {
			t.Errorf("%s: NewPolicy error %v, want one containing %q wrapping ErrInvalidPolicy", tt.name, err, tt.want)
		}
	}
	// Every problem is reported.
	_, err := domain.NewPolicy([]domain.PolicyLimit{lim("A"), lim("b"), lim("b")}, []domain.Route{route("r", "", "x", -1)})
	if err == nil || strings.Count(err.Error(), "invalid policy") != 4 {
		t.Errorf("four problems: %v", err)
	}
	// Cost 0 and no limits at all are valid.
	if _, err := domain.NewPolicy(nil, []domain.Route{route("free", "", "/", 0)}); err != nil {
		t.Errorf("a free route without limits: %v", err)
	}
}

var tpm = domain.PolicyLimit{Name: "tpm", Rule: domain.Rule{Limit: 100000, Window: time.Minute}, Tokens: true}

func TestPolicyTokens(t *testing.T) {
	t.Parallel()
	rpm := domain.PolicyLimit{Name: "rpm", Rule: domain.Rule{Limit: 5, Window: time.Minute}}
	monthly := domain.PolicyLimit{Name: "monthly-tokens", Rule: domain.Rule{Limit: 5_000_000, Window: domain.NominalWindow(domain.PeriodMonth)},
		Calendar: &domain.Calendar{Unit: domain.PeriodMonth, Location: time.UTC, AnchorDay: 1}, Tokens: true}
	p, err := domain.NewPolicy([]domain.PolicyLimit{rpm, tpm, monthly}, []domain.Route{
		{Name: "chat", Method: "POST", Path: "/v1/chat/completions", Cost: 1, Tokens: "openai"},
		{Name: "render", Path: "/v1/render", Cost: 1, Tokens: "header:X-Usage-Units", Reserve: 50},
		// A cost above a token limit's budget is no error: it counts tokens.
		{Name: "bulk", Path: "/v1/bulk", Cost: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path    string
		tokened bool
		reserve int64
	}{
		{"/v1/chat/completions", true, domain.DefaultReserve},
		{"/v1/render", true, 50},
		{"/v1/bulk", false, 0},
		{"/other", false, 0},
	} {
		r := p.Match("POST", tt.path)
		if r.Tokened() != tt.tokened || r.Reserve != tt.reserve {
			t.Errorf("%s: route %q tokened %v reserve %d, want %v and %d", tt.path, r.Name, r.Tokened(), r.Reserve, tt.tokened, tt.reserve)
		}
	}
	// A tenant may override a token limit below any route's cost.
	if err := p.CheckOverride("tpm", domain.Rule{Limit: 1, Window: time.Minute}); err != nil {
		t.Errorf("override of a token limit: %v", err)
	}
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"a": true, "per-day": true, "0": true, strings.Repeat("z", 32): true,
		"": false, "A": false, "a_b": false, "a b": false, "a:b": false, strings.Repeat("z", 33): false, "é": false,
	} {
		if got := domain.ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestPolicyMatchDoesNotAllocate(t *testing.T) {
	p := examplePolicy(t)
	for _, m := range []string{"GET", "HEAD", "POST"} {
		if got := testing.AllocsPerRun(100, func() { _ = p.Match(m, "/v1/search/deep/x") }); got != 0 {
			t.Errorf("Match(%s): %v allocs, want 0", m, got)
		}
	}
}

// BenchmarkPolicyMatch is the per-request cost of matching a route.
func BenchmarkPolicyMatch(b *testing.B) {
	p, err := domain.NewPolicy([]domain.PolicyLimit{perSecond, perDay}, []domain.Route{
		{Name: "search", Method: "POST", Path: "/v1/search", Cost: 5},
		{Name: "export", Path: "/v1/export", Cost: 1, Limits: []domain.PolicyLimit{exports}},
		{Name: "status", Path: "/status", Cost: 0},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if p.Match("GET", "/v1/export/123").Name != "export" {
			b.Fatal("no match")
		}
	}
}

// TestCheckOverride: a tenant's rule below the cost of a route its limit
// applies to is refused; a global limit applies to every route, the
// implicit one (cost 1) included; a route's own limit to its route alone.
func TestCheckOverride(t *testing.T) {
	t.Parallel()
	hour := time.Hour
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "default", Rule: domain.Rule{Limit: 100, Window: hour}}},
		[]domain.Route{
			{Name: "export", Path: "/v1/export", Cost: 5, Limits: []domain.PolicyLimit{{Name: "exports", Rule: domain.Rule{Limit: 10, Window: hour}}}},
			{Name: "status", Path: "/status", Cost: 0},
		})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		limit int64
		ok    bool
	}{
		{"default", 5, true},
		{"default", 4, false}, // export costs 5, and default applies there
		{"exports", 5, true},
		{"exports", 2, false},
		{"default", 1, false},
	}
	for _, tt := range tests {
		err := p.CheckOverride(tt.name, domain.Rule{Limit: tt.limit, Window: hour})
		if (err == nil) != tt.ok {
			t.Errorf("CheckOverride(%q, limit %d) = %v, want ok=%v", tt.name, tt.limit, err, tt.ok)
		}
		if err != nil && !errors.Is(err, domain.ErrInvalidPolicy) {
			t.Errorf("CheckOverride error %v does not wrap ErrInvalidPolicy", err)
		}
	}
	// Without the export route, an override of 1 fits the implicit route.
	q := domain.DefaultPolicy(domain.Rule{Limit: 100, Window: hour}, false)
	if err := q.CheckOverride("default", domain.Rule{Limit: 1, Window: hour}); err != nil {
		t.Errorf("an override of 1 on cost-1 routes: %v", err)
	}
}
