package domain

import (
	"fmt"
	"strings"
)

// NormalizePath returns the normal form of escaped, a request path in its
// escaped (wire) form, such as url.URL.EscapedPath returns. Every spelling
// of a path has one normal form, so that what is metered, what a route
// matches and what the upstream receives are the same path:
//
//   - Percent-escapes of unreserved characters (A-Z a-z 0-9 - . _ ~) are
//     decoded ("%41" is "A", "%2e" is "."); other escapes are kept, with
//     upper-case hex digits ("%2f" is "%2F"). Bytes that may not appear
//     in a path segment unescaped (space, '\', '"', non-ASCII, …) are
//     escaped.
//   - "." and ".." segments are resolved as RFC 3986 section 5.2.4 does;
//     a path that climbs above "/" is refused. A "." or ".." followed by
//     parameters (".;x", "..;", "..%3Bx") is a dot segment too: Tomcat
//     reads "/a/..;/b" as "/b", while Go's ServeMux and nginx read a
//     segment named "..;" under "/a/", so forwarding it as sent would
//     let the upstream serve another route than the one [MatchPath]
//     reads; resolved, every upstream reads "/b".
//   - Repeated slashes are collapsed ("/a//b" is "/a/b"); a trailing
//     slash is kept ("/a/" stays "/a/"), and a trailing "." or ".."
//     segment leaves one ("/a/b/.." is "/a/").
//   - Case is kept: matching is case-sensitive.
//
// An encoded slash (%2F) or backslash (%5C) is not a separator here and
// stays encoded, so "/files/a%2Fb" names one segment, as RFC 3986 says.
// Some upstreams decode it into a separator, though, and some ignore
// parameters (";x"), so two kinds of path are refused rather than
// forwarded, since upstreams would resolve their dot segments apart and
// no spelling may climb above the upstream's prefix or land on a route
// other than the metered one:
//
//   - a segment that would hold a "." or ".." part once %2F or %5C were
//     decoded ("..%2Fadmin", "a%2F..;x");
//   - a ".." that would remove a segment that a lenient upstream splits
//     (it holds %2F or %5C: "/a%2Fb/../c" is "/c" to Go but "/a/c" to
//     nginx) or drops (it is only parameters: "/a/;x/../c" is "/a/c" to
//     Go but "/c" to Tomcat).
//
// The result starts with "/", holds no empty, "." or ".." segment (nor
// such a part between encoded slashes, with or without parameters), and
// NormalizePath(result) is result. An empty escaped is "/". Errors wrap
// [ErrInvalidPath]; they do not quote the path. NormalizePath does not
// allocate when escaped is already normal.
func NormalizePath(escaped string) (string, error) {
	if escaped == "" {
		return "/", nil
	}
	if escaped[0] != '/' {
		return "", fmt.Errorf("%w: does not start with /", ErrInvalidPath)
	}
	if isNormalPath(escaped) {
		return escaped, nil
	}
	var segs []string
	trailing := false
	for raw := range strings.SplitSeq(escaped[1:], "/") {
		seg, err := normalizeSegment(raw)
		if err != nil {
			return "", err
		}
		trailing = false
		switch dotName(seg) { // a segment with %2F or %5C is no dot segment: see hidesDotSegment
		case "", ".":
			trailing = true
		case "..":
			if len(segs) == 0 {
				return "", fmt.Errorf("%w: climbs above /", ErrInvalidPath)
			}
			if splitsOrDrops(segs[len(segs)-1]) {
				return "", fmt.Errorf("%w: dot segment after a segment that upstreams split or drop", ErrInvalidPath)
			}
			segs = segs[:len(segs)-1]
			trailing = true
		default:
			if hidesDotSegment(seg) {
				return "", fmt.Errorf("%w: dot segment behind an encoded slash", ErrInvalidPath)
			}
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return "/", nil
	}
	n := len(segs) + 1
	for _, s := range segs {
		n += len(s)
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if trailing {
		b.WriteByte('/')
	}
	return b.String(), nil
}

// isNormalPath reports whether p, which starts with "/", is already in
// normal form: no escape, only path characters, and no empty (but a final
// one) or dot segment. It is NormalizePath's fast path.
func isNormalPath(p string) bool {
	start := 1 // of the current segment
	for i := 1; i < len(p); i++ {
		c := p[i]
		if c == '/' {
			if seg := p[start:i]; seg == "" || isDotSegment(seg) {
				return false
			}
			start = i + 1
			continue
		}
		if c == '%' || !isPathChar(c) {
			return false
		}
	}
	return !isDotSegment(p[start:])
}

// normalizeSegment decodes the unreserved escapes of seg, upper-cases the
// hex digits of the others and escapes bytes a segment may not hold.
func normalizeSegment(seg string) (string, error) {
	var b strings.Builder
	b.Grow(len(seg))
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c == '%':
			if i+2 >= len(seg) || !isHex(seg[i+1]) || !isHex(seg[i+2]) {
				return "", fmt.Errorf("%w: malformed percent-escape", ErrInvalidPath)
			}
			d := unhex(seg[i+1])<<4 | unhex(seg[i+2])
			i += 2
			if isUnreserved(d) {
				b.WriteByte(d)
			} else {
				writeEscape(&b, d)
			}
		case isPathChar(c):
			b.WriteByte(c)
		default:
			writeEscape(&b, c)
		}
	}
	return b.String(), nil
}

// hidesDotSegment reports whether seg, a normalised segment, has a dot
// part ([isDotSegment]) between encoded slashes or backslashes.
func hidesDotSegment(seg string) bool {
	if !holdsEncodedSlash(seg) {
		return false
	}
	for part := range strings.SplitSeq(strings.ReplaceAll(seg, "%5C", "%2F"), "%2F") {
		if isDotSegment(part) {
			return true
		}
	}
	return false
}

// splitsOrDrops reports whether a lenient upstream reads seg, a kept
// normalised segment, as other than one segment: it splits one that holds
// an encoded slash or backslash, and drops one that is only parameters.
func splitsOrDrops(seg string) bool {
	return holdsEncodedSlash(seg) || withoutParams(seg) == ""
}

func holdsEncodedSlash(seg string) bool {
	return strings.Contains(seg, "%2F") || strings.Contains(seg, "%5C")
}

// dotName returns seg, a normalised segment, without its parameters when
// that leaves "." or "..", and else seg itself. A segment holding an
// encoded slash or backslash is returned as it is: a lenient upstream
// splits it before it drops parameters ("..;x%2Fy" is "..;x" and "y").
func dotName(seg string) string {
	if isDotSegment(seg) && !holdsEncodedSlash(seg) {
		return withoutParams(seg)
	}
	return seg
}

// HasDotSegment reports whether escaped, a request path, has a dot
// segment in any spelling: "." or "..", escaped ("%2e%2E") or with
// parameters ("..;x", "..%3B", ".;"). [NormalizePath] resolves them, but
// servers read them apart: Go's ServeMux, nginx and Tomcat resolve ".."
// (Tomcat also "..;"), while routers that take the path as it came
// (Express, on Node's req.url) read ".." as an ordinary name, and most
// servers read "..;" as one. A face that meters a path its upstream gets
// unresolved (the check endpoint) refuses such a path rather than meter
// it on another route. Segments NormalizePath rejects are not counted.
// It does not allocate for a segment that starts with neither '.' nor
// '%', nor for one without ';' or '%'.
func HasDotSegment(escaped string) bool {
	if !strings.ContainsAny(escaped, ".%") {
		return false // most paths have no '.' and no escape
	}
	for raw := range strings.SplitSeq(escaped, "/") {
		if raw == "" || raw[0] != '.' && raw[0] != '%' {
			continue // a dot segment starts with '.' or "%2E"
		}
		if raw == "." || raw == ".." {
			return true
		}
		if !strings.ContainsAny(raw, ";%") {
			continue // ".well-known", "...": a name
		}
		if seg, err := normalizeSegment(raw); err == nil && isDotSegment(seg) {
			return true
		}
	}
	return false
}

// isDotSegment reports whether seg, a segment with upper-case escapes,
// is "." or "..", once parameters are dropped ("..;x" is "..").
func isDotSegment(seg string) bool {
	if seg == "" || seg[0] != '.' {
		return false
	}
	s := withoutParams(seg)
	return s == "." || s == ".."
}

// withoutParams returns seg, a segment with upper-case escapes, up to its
// parameters: its first ';' or "%3B" (see [MatchPath] for the encoded
// one).
func withoutParams(seg string) string {
	for i := 0; i < len(seg); i++ {
		if seg[i] == ';' || seg[i] == '%' && strings.HasPrefix(seg[i:], "%3B") {
			return seg[:i]
		}
	}
	return seg
}

const upperHex = "0123456789ABCDEF"

func appendEscape(b []byte, c byte) []byte { return append(b, '%', upperHex[c>>4], upperHex[c&15]) }

func writeEscape(b *strings.Builder, c byte) {
	b.WriteByte('%')
	b.WriteByte(upperHex[c>>4])
	b.WriteByte(upperHex[c&15])
}

// isUnreserved reports whether c is an RFC 3986 unreserved character.
func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isPathChar reports whether c may appear unescaped in an RFC 3986 path
// segment (pchar without pct-encoded): unreserved, sub-delims, ':', '@'.
func isPathChar(c byte) bool { return pathChars[c] }

// pathChars is isPathChar's table: the fast paths of NormalizePath and
// MatchPath ask it of every byte.
var pathChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isUnreserved(byte(c)) || strings.IndexByte("!$&'()*+,;=:@", byte(c)) >= 0
	}
	return t
}()

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
