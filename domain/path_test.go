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
	tests := []struct {
		in, want string // want "" means ErrInvalidPath
	}{
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
		// Malformed escapes, and paths that are not absolute.
		{"/%zz", ""},
		{"/%2", ""},
		{"/%", ""},
		{"a/b", ""},
		{"*", ""},
	}
	for _, tt := range tests {
		got, err := domain.NormalizePath(tt.in)
		if tt.want == "" {
			if !errors.Is(err, domain.ErrInvalidPath) {
				t.Errorf("NormalizePath(%q) = %q, %v; want ErrInvalidPath", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizePath(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
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
				if part == "." || part == ".." {
					t.Fatalf("NormalizePath(%q) = %q: holds a dot segment", in, out)
				}
			}
		}
		// Resolving the decoded form as an upstream that splits on every
		// slash and backslash would: it never climbs above "/".
		dec, _ := url.PathUnescape(out)
		depth := 0
		for seg := range strings.FieldsFuncSeq(dec, func(r rune) bool { return r == '/' || r == '\\' }) {
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
