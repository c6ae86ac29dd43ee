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
//     a path that climbs above "/" is refused.
//   - Repeated slashes are collapsed ("/a//b" is "/a/b"); a trailing
//     slash is kept ("/a/" stays "/a/"), and a trailing "." or ".."
//     segment leaves one ("/a/b/.." is "/a/").
//   - Case is kept: matching is case-sensitive.
//
// An encoded slash (%2F) or backslash (%5C) is not a separator here and
// stays encoded, so "/files/a%2Fb" names one segment, as RFC 3986 says.
// Some upstreams decode it into a separator, though, so a segment that
// would hold a "." or ".." part once %2F or %5C were decoded ("..%2Fadmin")
// is refused rather than forwarded: no spelling may climb above the
// upstream's prefix.
//
// The result starts with "/", holds no empty, "." or ".." segment (nor
// such a part between encoded slashes), and NormalizePath(result) is
// result. An empty escaped is "/". Errors wrap [ErrInvalidPath]; they do
// not quote the path. NormalizePath does not allocate when escaped is
// already normal.
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
		switch seg {
		case "", ".":
			trailing = true
		case "..":
			if len(segs) == 0 {
				return "", fmt.Errorf("%w: climbs above /", ErrInvalidPath)
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
// one), "." or ".." segment. It is NormalizePath's fast path.
func isNormalPath(p string) bool {
	start := 1 // of the current segment
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			c := p[i]
			if c == '/' {
				if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
					return false
				}
				start = i + 1
				continue
			}
			if c == '%' || !isPathChar(c) {
				return false
			}
			continue
		}
		if seg := p[start:]; seg == "." || seg == ".." {
			return false
		}
	}
	return true
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

// hidesDotSegment reports whether seg, a normalised segment, has a "." or
// ".." part between encoded slashes or backslashes.
func hidesDotSegment(seg string) bool {
	if !strings.Contains(seg, "%2F") && !strings.Contains(seg, "%5C") {
		return false
	}
	for part := range strings.SplitSeq(strings.ReplaceAll(seg, "%5C", "%2F"), "%2F") {
		if part == "." || part == ".." {
			return true
		}
	}
	return false
}

const upperHex = "0123456789ABCDEF"

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
func isPathChar(c byte) bool {
	return isUnreserved(c) || strings.IndexByte("!$&'()*+,;=:@", c) >= 0
}

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
