package domain_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

func TestNormalizePath(t *testing.T) {
	t.Parallel()
	tests := []pathCase{
		{"", "/"},
		{"/", "/"},
		{"/a/b", "/a/b"},
		{"/a/b/", "/a/b/"},
		{"/A/b", "/A/b"}, // case-sensitive: kept
		// Repeated slashes.
		{"//", "/"},
		{"//a///b//", "/a/b/"},
		// Dot segments.
		{"/./a", "/a"},
		{"/a/./b", "/a/b"},
		{"/a/b/../c", "/a/c"},
		{"/a/b/..", "/a/"},
		{"/a/b/.", "/a/b/"},
		{"/a/..", "/"},
		{"/a/../..", ""},
		{"/..", ""},
		{"/../admin", ""},
		{"/a/../../admin", ""},
		{"/.../a", "/.../a"}, // not a dot segment
		{"/..a/a..", "/..a/a.."},
		// Unreserved escapes are decoded, and then count as dots.
		{"/%41%7e%2D%5f", "/A~-_"},
		{"/%2e%2e/admin", ""},
		{"/%2E%2E/admin", ""},
		{"/a/%2e%2E/b", "/b"},
		{"/a/.%2e", "/"},
		{"/%2e/a", "/a"},
		// Other escapes are kept, upper-cased.
		{"/a%2fb", "/a%2Fb"},
		{"/a%20b", "/a%20b"},
		{"/%25", "/%25"},
		{"/%252e%252e/x", "/%252e%252e/x"}, // one decoding gives %2e: no dot
		{"/%c3%a9", "/%C3%A9"},
		// An encoded slash or backslash never hides a dot segment.
		{"/..%2fadmin", ""},
		{"/..%2Fadmin", ""},
		{"/a%2F..%2F..%2Fadmin", ""},
		{"/a%2f.", ""},
		{"/..%5cadmin", ""},
		{"/..\\admin", ""},
		{"/%2e%2e%2fadmin", ""},
		{"/a%2F%2Fb", "/a%2F%2Fb"},
		// Bytes a segment may not hold are escaped.
		{"/a b", "/a%20b"},
		{"/a\\b", "/a%5Cb"},
		{"/é", "/%C3%A9"},
		{"/a;b=1,c:d@e!$&'()*+", "/a;b=1,c:d@e!$&'()*+"},
		// A dot segment with parameters is a dot segment (Tomcat reads
		// "..;" as ".."), an encoded ';' starting them too.
		{"/a/..;/b", "/b"},
		{"/a/..;jsessionid=1/b", "/b"},
		{"/a/%2e%2E;x/b", "/b"},
		{"/a/..%3bx/b", "/b"},
		{"/a/.;/b", "/a/b"},
		{"/a/b/.;x", "/a/b/"},
		{"/a/b/..;", "/a/"},
		{"/..;/a", ""},
		{"/a/..;/..%3B", ""},
		{"/a/...;/b", "/a/...;/b"}, // not a dot segment
		{"/a/.x;/b", "/a/.x;/b"},
		{"/a/;x/b", "/a/;x/b"}, // parameters are forwarded as sent
		// Nor behind an encoded slash, with parameters or without.
		{"/a%2F..;%2Fb", ""},
		{"/a%2F.;x", ""},
		{"/a%5C..%3B", ""},
		{"/..;x%2Fy", ""},
		{"/a/b/..%3Bx%2F..", ""}, // not one ".." but two, to a lenient upstream
		{"/a/b/..;%2Fc", ""},
		// A ".." never removes a segment that lenient upstreams split
		// (Go reads "/a%2Fb/../c" as "/c", nginx as "/a/c") or drop
		// ("/a/;x/../c": Go "/a/c", Tomcat "/c").
		{"/a%2Fb/../c", ""},
		{"/a%5Cb/..", ""},
		{"/a/;x/../c", ""},
		{"/a/%3Bx/..;", ""},
		{"/a;x/../c", "/c"}, // one segment to every reader
		{"/a/b;x/..", "/a/"},
		// Malformed escapes, and paths that are not absolute.
		{"/%zz", ""},
		{"/%2", ""},
		{"/%", ""},
		{"a/b", ""},
		{"*", ""},
	}
	checkPathFunc(t, "NormalizePath", domain.NormalizePath, tests)
}

// pathCase is a path and what a path function should make of it; want ""
// means an error wrapping ErrInvalidPath.
type pathCase struct{ in, want string }

// checkPathFunc runs f, named name, on every case, and returns what it
// returned as wanted, refusals aside, for more checks.
func checkPathFunc(t *testing.T, name string, f func(string) (string, error), tests []pathCase) []string {
	t.Helper()
	var ok []string
	for _, tt := range tests {
		got, err := f(tt.in)
		switch {
		case tt.want == "":
			if !errors.Is(err, domain.ErrInvalidPath) {
				t.Errorf("%s(%q) = %q, %v; want ErrInvalidPath", name, tt.in, got, err)
			}
		case err != nil || got != tt.want:
			t.Errorf("%s(%q) = %q, %v; want %q", name, tt.in, got, err, tt.want)
		default:
			ok = append(ok, got)
		}
	}
	return ok
}

func TestNormalizePathDoesNotAllocateWhenNormal(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() {
		_, _ = domain.NormalizePath("/v1/orders/42/items")
	}); got != 0 {
		t.Errorf("NormalizePath of a normal path: %v allocs, want 0", got)
	}
}

// FuzzNormalizePath checks the normal form's properties on any input:
// it is idempotent, absolute, valid escaping, and holds no empty or dot
// segment, visible or behind an encoded slash, so it can never climb
// above "/".
func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"", "/", "/a/b/", "//a//", "/a/./b/../c", "/..", "/%2e%2e/admin", "/..%2fadmin",
		"/a%2F..%2Fb", "/%41", "/%zz", "/a b", "/..\\x", "/%252e", "/a/b/..", "/.%2e/.",
		"/a/..;/b", "/a%2F..;", "/a%2Fb/../c", "/a/;x/..", "/..%3B",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := domain.NormalizePath(in)
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidPath) {
				t.Fatalf("NormalizePath(%q): error %v does not wrap ErrInvalidPath", in, err)
			}
			return
		}
		if !strings.HasPrefix(out, "/") || strings.Contains(out, "//") {
			t.Fatalf("NormalizePath(%q) = %q: not absolute, or holds //", in, out)
		}
		again, err := domain.NormalizePath(out)
		if err != nil || again != out {
			t.Fatalf("NormalizePath(%q) = %q, but NormalizePath(%q) = %q, %v: not idempotent", in, out, out, again, err)
		}
		if _, err := url.PathUnescape(out); err != nil {
			t.Fatalf("NormalizePath(%q) = %q: bad escaping: %v", in, out, err)
		}
		for seg := range strings.SplitSeq(out[1:], "/") {
			for part := range strings.SplitSeq(strings.ReplaceAll(strings.ToUpper(seg), "%5C", "%2F"), "%2F") {
				if part, _, _ = strings.Cut(strings.ReplaceAll(part, "%3B", ";"), ";"); part == "." || part == ".." {
					t.Fatalf("NormalizePath(%q) = %q: holds a dot segment (parameters dropped)", in, out)
				}
			}
		}
		// Resolving the decoded form as an upstream that splits on every
		// slash and backslash and drops parameters would: it never climbs
		// above "/".
		dec, _ := url.PathUnescape(out)
		depth := 0
		for seg := range strings.FieldsFuncSeq(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
			seg, _, _ = strings.Cut(seg, ";") // and drops parameters
			switch seg {
			case "..":
				depth--
			case ".":
			default:
				depth++
			}
			if depth < 0 {
				t.Fatalf("NormalizePath(%q) = %q climbs above / once decoded (%q)", in, out, dec)
			}
		}
	})
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	tests := []pathCase{
		{"", "/"},
		{"/", "/"},
		{"/v1/export", "/v1/export"},
		{"/v1/export/", "/v1/export/"},
		// An encoded slash or backslash is a separator, also at a
		// segment's edges: repeated slashes collapse, a final one stays.
		{"/v1%2Fexport", "/v1/export"},
		{"/v1%5Cexport", "/v1/export"},
		{"/v1%2F", "/v1/"},
		{"/%2Fv1", "/v1"},
		{"/v1%2F%2F%5Cexport", "/v1/export"},
		{"/%2F", "/"},
		// Parameters are dropped; a segment of only parameters is empty.
		{"/v1/export;x", "/v1/export"},
		{"/v1/export;jsessionid=abc/x", "/v1/export/x"},
		{"/v1/export;a=b;c=d", "/v1/export"},
		{"/v1/;x/export", "/v1/export"},
		{"/v1/;x", "/v1/"},
		{"/;x", "/"},
		{"/v1;", "/v1"},
		{"/v1/export;x%3Ay", "/v1/export"},
		// An encoded ';' starts them too.
		{"/v1/export%3Bx", "/v1/export"},
		{"/v1/%3Bx/export", "/v1/export"},
		{"/v1%3B/export", "/v1/export"},
		// Parameters holding an encoded slash: read apart by upstreams.
		{"/v1;x%2Fexport", ""},
		{"/v1;x%5Cexport", ""},
		{"/v1%3Bx%2Fexport", ""},
		// The escapes of what a segment may hold as it is are decoded;
		// others are kept.
		{"/v1/x%3Aexport", "/v1/x:export"},
		{"/%21%24%26%27%28%29%2A%2B%2C%3D%40", "/!$&'()*+,=@"},
		{"/a%20b/%25/%3F%23/%C3%A9", "/a%20b/%25/%3F%23/%C3%A9"},
		{"/%252F", "/%252F"}, // one decoding: "%2F", no separator
		// Paths that are not normal are read as leniently.
		{"/a/..;/b", "/b"},
		{"/a/%2e%2E;x/b", "/b"},
		{"/a%2f..%2Fb", "/b"},
		{"/a%2Fb/../c", "/a/c"},
		{"/a//b/./c/", "/a/b/c/"},
		{"/A%41%7e", "/AA~"},
		{`/a\b`, "/a/b"},
		{"/a b", "/a%20b"},
		{"/a/b/..", "/a/"},
		{"/..;", ""},
		{"/a%2F..%2F..%2Fb", ""},
		{"/%zz", ""},
		{"/%2", ""},
		{"a/b", ""},
	}
	for _, got := range checkPathFunc(t, "MatchPath", domain.MatchPath, tests) {
		if again, err := domain.MatchPath(got); err != nil || again != got {
			t.Errorf("MatchPath(%q) = %q, %v; want it unchanged", got, again, err)
		}
		if norm, err := domain.NormalizePath(got); err != nil || norm != got {
			t.Errorf("MatchPath gave %q, which is not normal (%q, %v)", got, norm, err)
		}
	}
}

// TestMatchPathLeavesForwardingAlone: what is forwarded is the normal
// path as sent (an encoded slash in an id, parameters), while matching
// reads it leniently.
func TestMatchPathLeavesForwardingAlone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ raw, forward, match string }{
		{"/v1%2fexport", "/v1%2Fexport", "/v1/export"},
		{"/api/v4/projects/group%2Fproject/issues", "/api/v4/projects/group%2Fproject/issues", "/api/v4/projects/group/project/issues"},
		{"/v1/export;jsessionid=abc/x", "/v1/export;jsessionid=abc/x", "/v1/export/x"},
		{"/shop/;jsessionid=abc", "/shop/;jsessionid=abc", "/shop/"},
		{"/v1/export%3bx", "/v1/export%3Bx", "/v1/export"},
		{`/v1\export`, "/v1%5Cexport", "/v1/export"},
		{"/v1/x%3aexport", "/v1/x%3Aexport", "/v1/x:export"},
		{"/status/..;/v1/export", "/v1/export", "/v1/export"}, // resolved for every upstream
	} {
		norm, err := domain.NormalizePath(tt.raw)
		if err != nil || norm != tt.forward {
			t.Errorf("NormalizePath(%q) = %q, %v; want %q forwarded", tt.raw, norm, err, tt.forward)
			continue
		}
		if got, err := domain.MatchPath(norm); err != nil || got != tt.match {
			t.Errorf("MatchPath(%q) = %q, %v; want %q", norm, got, err, tt.match)
		}
		if again, _ := domain.NormalizePath(tt.raw); again != norm {
			t.Errorf("NormalizePath(%q) = %q after MatchPath, %q before", tt.raw, again, norm)
		}
	}
}

func TestMatchPathDoesNotAllocateWhenUnchanged(t *testing.T) {
	for _, p := range []string{"/v1/orders/42/items", "/v1/a%20b/%C3%A9/", "/"} {
		if got := testing.AllocsPerRun(100, func() {
			if m, err := domain.MatchPath(p); err != nil || m != p {
				t.Fatalf("MatchPath(%q) = %q, %v", p, m, err)
			}
		}); got != 0 {
			t.Errorf("MatchPath(%q): %v allocs, want 0", p, got)
		}
	}
}

// BenchmarkMatchPath is the per-request cost of the match form: of a
// path MatchPath returns as it is (the common case), and of one it reads.
func BenchmarkMatchPath(b *testing.B) {
	for _, p := range []string{"/v1/orders/42/items", "/v1%2Forders;x/42/items"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := domain.MatchPath(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHasDotSegment: a dot segment in any spelling, with or without
// parameters, and nothing else.
func TestHasDotSegment(t *testing.T) {
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/v1/export/..;/status", true},
		{"/v1/export/..%3B/status", true},
		{"/v1/export/..%3b/status", true},
		{"/v1/export/%2E%2E;x/status", true},
		{"/a/.;/b", true},
		{"/a/.%3Bx", true},
		{"/a/../b", true},
		{"/a/./b", true},
		{"/a/%2e%2E/b", true},
		{"/a/.%2e", true},
		{"/a/b/..", true},
		{".", true},
		{"/status;v=1", false},
		{"/a/...;/b", false},
		{"/a/x..;/b", false},
		{"/a/...", false},
		{"/a/..x", false},
		{"/.well-known/x", false},
		{"/a/b.json", false},
		{"/a/%41", false},
		{"/a/%2e%2e%2e", false},
		{"/a/%zz;/b", false}, // NormalizePath rejects it
		{"/a/..%2Fb", false}, // and this one
		{"/", false},
	} {
		if got := domain.HasDotSegment(tt.path); got != tt.want {
			t.Errorf("HasDotSegment(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}
