package domain_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// FuzzMatchSpellings generates a policy of a few routes and, for every
// route, spellings of paths under it (escapes of any character in either
// hex case, %2F, %5C and '\' for '/', ";parameters", "..;", ".;", "//",
// "./", "x/../", a decoy route climbed out of, a trailing slash), and
// meters each the way the gateway does: NormalizePath, MatchPath, Match.
// It fails when the route it meters differs from the one an independent
// lenient reading of the raw path picks (lenientRead and oracleRoute
// below: every escape decoded, '\' a slash, parameters dropped, dot
// segments resolved, slashes merged, the longest prefix), or when a path
// that reading sees climbing above "/" is accepted. A refusal (400) is
// always right. extra and method are one more raw request, checked
// against the same policy. Plain go test runs the seed corpus; go test
// -fuzz FuzzMatchSpellings ./domain explores.
func FuzzMatchSpellings(f *testing.F) {
	// The policy and requests of a hostile test of the route matching.
	hostile := policySeed("/v1/export", "/status", "GET /v1/getx", "/v1")
	for _, s := range [][2]string{
		{"GET", "/v1%2Fexport"}, {"GET", "/v1%2fexport"}, {"GET", "/v1%5Cexport"}, {"GET", `/v1\export`},
		{"GET", "/v1/export;x"}, {"GET", "/v1/export;jsessionid=abc/x"}, {"GET", "/status/..;/v1/export"},
		{"GET", "/status/..%3B/v1/export"}, {"GET", "/v1/export%3Bx"}, {"HEAD", "/v1/getx"}, {"head", "/v1/getx/"},
		{"GET", "/status;x%2F..%2Fv1/export"}, {"GET", "/status/;x/../v1/export"}, {"GET", "/a%2Fb/../v1/export"},
		{"GET", "/status/..;/..;/v1/export"}, {"GET", "/..;/v1/export"}, {"GET", "/v1;x%2Fexport"},
		{"HEAD", "/v1/getx/..%3bx/%2e%2e%3B%2F%761%5C%2Fg%65t%78/;x"}, {"GET", "/status/v1/..;%2F../export"},
	} {
		f.Add(hostile, s[1], s[0])
	}
	// Nested prefixes, methods on one path, escaped sub-delims, and
	// random policies: past its bytes, a seed's choices come from a
	// generator seeded by them.
	f.Add(policySeed("/v1", "/v1/export", "GET /v1/export", "HEAD /v1/export", "POST /v1"), "/v1/export/..;", "HEAD")
	f.Add(policySeed("/files/a%2Fb", "/v1/x:y", "/"), "/files/a/b/c", "GET")
	for i := range 48 {
		f.Add([]byte{byte(i), byte(i * 37)}, "/", "GET")
	}
	limits := []domain.PolicyLimit{{Name: "global", Rule: domain.Rule{Limit: 10, Window: time.Minute}}}
	f.Fuzz(func(t *testing.T, choices []byte, extra, method string) {
		c := newChooser(choices)
		routes := genRoutes(c)
		p, err := domain.NewPolicy(limits, routes)
		if err != nil {
			t.Fatalf("NewPolicy(%v): %v", routes, err)
		}
		if domain.ValidToken(method) {
			checkSpelling(t, p, routes, method, extra)
		}
		for _, r := range routes {
			for range 4 {
				checkSpelling(t, p, routes, genMethod(c, r), genSpelling(c, routes, r))
			}
		}
	})
}

// checkSpelling meters a request of method on raw against p (made of
// routes) as the gateway does, and fails when the route differs from
// oracleRoute's, or a path that climbs above "/" is accepted.
func checkSpelling(t *testing.T, p *domain.Policy, routes []domain.Route, method, raw string) {
	t.Helper()
	segs, ok, climbs := lenientRead(raw)
	norm, err := domain.NormalizePath(raw)
	if err == nil {
		var mp string
		if mp, err = domain.MatchPath(norm); err == nil {
			if !ok || climbs {
				t.Fatalf("%s %q: read as %q (normal %q), but a lenient server reads it as no path or one above /", method, raw, mp, norm)
			}
			want := oracleRoute(routes, method, segs)
			if got := p.Match(method, mp).Name; got != want {
				t.Fatalf("%s %q: metered on route %q (normal %q, matched as %q), but a lenient server reads %q: route %q",
					method, raw, got, norm, mp, "/"+strings.Join(segs, "/"), want)
			}
			checkMatchPath(t, raw, norm, mp, segs)
			return
		}
	}
	if !errors.Is(err, domain.ErrInvalidPath) {
		t.Fatalf("%s %q: error %v does not wrap ErrInvalidPath", method, raw, err)
	}
}

// checkMatchPath checks what MatchPath returned: its own match path, a
// normal path, the spelling of the very reading the oracle made, and what
// MatchPath makes of raw itself.
func checkMatchPath(t *testing.T, raw, norm, mp string, segs []string) {
	t.Helper()
	if again, err := domain.MatchPath(mp); err != nil || again != mp {
		t.Fatalf("MatchPath(%q) = %q, but MatchPath(%q) = %q, %v", norm, mp, mp, again, err)
	}
	if n, err := domain.NormalizePath(mp); err != nil || n != mp {
		t.Fatalf("MatchPath(%q) = %q, not normal: %q, %v", norm, mp, n, err)
	}
	if got, _, _ := lenientRead(mp); !slices.Equal(got, segs) {
		t.Fatalf("%q: matched as %q, which reads %q, but a lenient server reads %q", raw, mp, got, segs)
	}
	if direct, err := domain.MatchPath(raw); err == nil && direct != mp {
		t.Fatalf("MatchPath(%q) = %q, but MatchPath(NormalizePath) = %q", raw, direct, mp)
	}
}

// lenientRead reads raw as the most lenient upstream would, on its own:
// decode every escape, take '\' for '/', drop each segment's ';'
// parameters, resolve dot segments, merge slashes. ok is false when raw
// is not a path (not absolute, or a malformed escape); climbs reports a
// path above "/".
func lenientRead(raw string) (segs []string, ok, climbs bool) {
	if raw == "" {
		return nil, true, false
	}
	dec, err := url.PathUnescape(raw)
	if err != nil || raw[0] != '/' {
		return nil, false, false
	}
	for _, seg := range strings.FieldsFunc(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
		seg, _, _ = strings.Cut(seg, ";")
		switch seg {
		case "", ".":
		case "..":
			if len(segs) == 0 {
				return nil, true, true
			}
			segs = segs[:len(segs)-1]
		default:
			segs = append(segs, seg)
		}
	}
	return segs, true, false
}

// oracleRoute is the route a request of method on a path read as segs
// belongs on: of the routes whose path, read by lenientRead, is a prefix
// of segs and that take method, the one with the longest path; at equal
// length, the route of that very method, then (for HEAD) a GET route,
// then one without a method.
func oracleRoute(routes []domain.Route, method string, segs []string) string {
	best, bestLen, bestTier := domain.DefaultRoute, -1, 0
	for _, r := range routes {
		rs, _, _ := lenientRead(r.Path)
		if len(rs) > len(segs) || !slices.Equal(rs, segs[:len(rs)]) {
			continue
		}
		tier := 0
		switch {
		case r.Method != "" && strings.EqualFold(r.Method, method):
			tier = 3
		case strings.EqualFold(method, "HEAD") && strings.EqualFold(r.Method, "GET"):
			tier = 2
		case r.Method == "":
			tier = 1
		}
		if tier > 0 && (len(rs) > bestLen || len(rs) == bestLen && tier > bestTier) {
			best, bestLen, bestTier = r.Name, len(rs), tier
		}
	}
	return best
}

// The small alphabets of generated routes: a first segment, the next
// ones (normal form: "a%2Fb" is two segments to a lenient server, "x:y"
// may be spelled "x%3Ay"), and methods.
var (
	firstSegs    = []string{"v1", "status", "files"}
	nextSegs     = []string{"export", "getx", "a", "x:y", "a=b", "a%2Fb", "%C3%A9", "a%20b", "v1"}
	routeMethods = []string{"", "", "GET", "HEAD", "POST", "get"}
)

// chooser hands out choices: from its bytes while they last, then from a
// generator seeded by them, so a short seed still makes many choices and
// the fuzzer's mutations steer the first ones.
type chooser struct {
	b []byte
	r *rand.Rand
}

func newChooser(b []byte) *chooser {
	h := fnv.New64a()
	h.Write(b)
	return &chooser{b: b, r: rand.New(rand.NewPCG(h.Sum64(), uint64(len(b))))}
}

// n returns a choice in [0, k).
func (c *chooser) n(k int) int {
	if len(c.b) > 0 {
		v := int(c.b[0]) % k
		c.b = c.b[1:]
		return v
	}
	return c.r.IntN(k)
}

func (c *chooser) pick(s []string) string { return s[c.n(len(s))] }

// genRoutes makes 1 to 5 routes of paths 0 to 3 segments deep, none two
// alike as a lenient server reads them (which NewPolicy refuses).
func genRoutes(c *chooser) []domain.Route {
	var routes []domain.Route
	seen := map[string]bool{}
	for i := range 1 + c.n(5) {
		path := ""
		for d := range c.n(4) {
			if d == 0 {
				path += "/" + c.pick(firstSegs)
			} else {
				path += "/" + c.pick(nextSegs)
			}
		}
		if path == "" {
			path = "/"
		}
		method := c.pick(routeMethods)
		segs, _, _ := lenientRead(path)
		if key := strings.ToUpper(method) + " " + strings.Join(segs, "/"); !seen[key] {
			seen[key] = true
			routes = append(routes, domain.Route{Name: fmt.Sprintf("r%d", i), Method: method, Path: path, Cost: 1})
		}
	}
	return routes
}

// policySeed is the choices that make genRoutes return routes, each
// "[METHOD ]PATH" with segments from its alphabets.
func policySeed(routes ...string) []byte {
	b := []byte{byte(len(routes) - 1)}
	for _, r := range routes {
		method, path, ok := strings.Cut(r, " ")
		if !ok {
			method, path = "", r
		}
		segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
		if path == "/" {
			segs = nil
		}
		b = append(b, byte(len(segs)))
		for d, s := range segs {
			alphabet := nextSegs
			if d == 0 {
				alphabet = firstSegs
			}
			i := slices.Index(alphabet, s)
			if i < 0 {
				panic("policySeed: no segment " + s)
			}
			b = append(b, byte(i))
		}
		b = append(b, byte(slices.Index(routeMethods, method)))
	}
	return b
}

// genMethod is the method of a request to route r: r's own, or another.
func genMethod(c *chooser, r domain.Route) string {
	if r.Method != "" && c.n(2) == 0 {
		return r.Method
	}
	return c.pick([]string{"GET", "HEAD", "POST", "head", "PUT"})
}

// Pieces of spellings: separators (a leading one starts with '/'),
// parameters, trailing ends, and the pops that climb out of a decoy.
var (
	leadSeps = []string{"/", "/", "/", "/", "//", "/./", "/.;/", "/%2e/", "/z/../", "/z/..;/", "/z;q/../", "/;p/",
		"/z/..%3B/", "/%2E%2e;x/../z/../", "/z%2Fw/../", "/;p/../z/../"}
	innerSeps = []string{"%2F", "%2f", "%5C", "%5c", `\`, "/%2F", "%2F/", "%5C%2F"}
	params    = []string{";x", ";jsessionid=abc", "%3Bx", "%3b", ";", ";a=b;c=d", ";x%2Fy", "%3B..", ";%2e%2e"}
	ends      = []string{"", "", "/", "%2F", "/;x", "/.", "/.;", "/..;", "/..", "%5C..;", "/%3B"}
	pops      = []string{"/..", "/..;", "/..;x", "/%2e%2e%3B", "/..%3bx", "%2F..", "%2F..;"}
)

// genSpelling spells a path under route r: r's path and 0 to 2 more
// segments, maybe behind a decoy route climbed out of, each character
// maybe escaped, each separator and end one of many.
func genSpelling(c *chooser, routes []domain.Route, r domain.Route) string {
	segs, _, _ := lenientRead(r.Path)
	for range c.n(3) {
		s, _, _ := lenientRead("/" + c.pick(nextSegs))
		segs = append(segs, s...)
	}
	var b strings.Builder
	if c.n(4) == 0 { // a decoy: another route's path, then as many pops (or one fewer, or more)
		d, _, _ := lenientRead(routes[c.n(len(routes))].Path)
		for _, s := range d {
			b.WriteString("/" + genSegment(c, s))
		}
		for range len(d) + c.n(3) - 1 {
			b.WriteString(c.pick(pops))
		}
	}
	for _, s := range segs {
		if b.Len() == 0 || c.n(3) > 0 {
			b.WriteString(c.pick(leadSeps))
		} else {
			b.WriteString(c.pick(innerSeps))
		}
		b.WriteString(genSegment(c, s))
		if c.n(4) == 0 {
			b.WriteString(c.pick(params))
		}
	}
	b.WriteString(c.pick(ends))
	if b.Len() == 0 || b.String()[0] != '/' {
		return "/" + b.String()
	}
	return b.String()
}

// genSegment spells s, a decoded segment: a character a segment may hold
// as it is, or escaped; any other escaped, in either hex case.
func genSegment(c *chooser, s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		plain := 'a' <= ch && ch <= 'z' || 'A' <= ch && ch <= 'Z' || '0' <= ch && ch <= '9' || strings.IndexByte("-._~!$&'()*+,=:@", ch) >= 0
		if plain && c.n(4) > 0 {
			b.WriteByte(ch)
			continue
		}
		hex := fmt.Sprintf("%02X", ch)
		if c.n(2) == 0 {
			hex = strings.ToLower(hex)
		}
		b.WriteString("%" + hex)
	}
	return b.String()
}
