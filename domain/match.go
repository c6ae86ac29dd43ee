package domain

import (
	"bytes"
	"fmt"
	"strings"
)

// MatchPath returns the form of a path that routes are matched on: the
// path as the most lenient upstream reads it. normal is a path in normal
// form, as [NormalizePath] returns it and as a route's path is written;
// what is forwarded stays normal, so that an API with %2F in its ids
// keeps them. MatchPath reads:
//
//   - An encoded slash or backslash (%2F, %5C; '\' is %5C in normal form)
//     as a separator, as nginx, Python's WSGI servers and Jetty 9 do:
//     "/v1%2Fexport" is "/v1/export", and at a segment's edge it is a
//     repeated or trailing slash ("/%2Fv1%2F" is "/v1/").
//   - A segment's parameters, from its first ';' to its end, as absent,
//     as servlet containers do: "/v1/export;jsessionid=1/x" is
//     "/v1/export/x". A segment that is only parameters is empty, and
//     empty segments collapse as in NormalizePath ("/v1/;x/export" is
//     "/v1/export"), a final one leaving a trailing slash ("/v1/;x" is
//     "/v1/"). An encoded ';' (%3B) starts parameters too: a server
//     that decodes before it drops parameters (some framework routers
//     strip ';' from the decoded path) reads "/v1/export%3Bx" as
//     "/v1/export", the export resource itself, while Tomcat, Jetty,
//     nginx and Go read a name "export;x", at most a sibling under
//     "/v1"; metering the reading that reaches the resource is the
//     lenient choice. A "..%3B", which would climb, is resolved by
//     NormalizePath in what is forwarded, so no upstream reads it apart.
//   - Parameters that hold an encoded slash or backslash ("/v1;x%2Fexport")
//     as an error: Tomcat and Jetty drop parameters before they decode
//     (they read "/v1"), a decode-first server splits first (it reads
//     "/v1/export"), and no one route is right.
//   - The escapes of the characters a segment may hold unescaped (the
//     unreserved ones, the sub-delims ! $ & ' ( ) * + , = and : @) as
//     those characters, since every upstream decodes them:
//     "/v1/x%3Aexport" is "/v1/x:export", as a route "/v1/x:export" is
//     written. Other escapes are kept with upper-case hex, so every byte
//     has one spelling and comparing two results compares what upstreams
//     decode.
//   - "." and ".." segments (also once parameters are dropped) as resolved,
//     and a path that climbs above "/" as an error. NormalizePath has
//     resolved every one in a normal path (and refused those behind an
//     encoded slash), so only a path that is not normal meets them here.
//
// The result is a normal path without parameters, encoded slashes or
// backslashes, and MatchPath(result) is result. A path without ';' or a
// decodable escape is returned as it is, without allocating. Errors wrap
// [ErrInvalidPath]: the caller answers 400 and spends nothing. An empty
// normal is "/".
func MatchPath(normal string) (string, error) {
	if normal == "" {
		return "/", nil
	}
	if normal[0] != '/' {
		return "", fmt.Errorf("%w: does not start with /", ErrInvalidPath)
	}
	if isMatchPath(normal) {
		return normal, nil
	}
	m := matchBuilder{b: make([]byte, 0, len(normal)+1)}
	m.open()
	inParams := false // the rest of the segment is parameters
	for i := 1; i < len(normal); i++ {
		c := normal[i]
		sep := c == '\\'
		if c == '/' {
			if err := m.close(); err != nil {
				return "", err
			}
			m.open()
			inParams = false
			continue
		}
		if c == '%' {
			if i+2 >= len(normal) || !isHex(normal[i+1]) || !isHex(normal[i+2]) {
				return "", fmt.Errorf("%w: malformed percent-escape", ErrInvalidPath)
			}
			d := unhex(normal[i+1])<<4 | unhex(normal[i+2])
			i += 2
			switch {
			case d == '/' || d == '\\':
				sep = true
			case inParams:
				continue
			case d == ';':
				inParams = true
				continue
			case isPathChar(d):
				m.b = append(m.b, d)
				continue
			default:
				m.b = appendEscape(m.b, d)
				continue
			}
		}
		switch {
		case sep && inParams:
			return "", fmt.Errorf("%w: encoded slash in a segment's parameters", ErrInvalidPath)
		case sep:
			if err := m.close(); err != nil {
				return "", err
			}
			m.open()
		case inParams:
		case c == ';':
			inParams = true
		case isPathChar(c):
			m.b = append(m.b, c)
		default:
			m.b = appendEscape(m.b, c)
		}
	}
	if err := m.close(); err != nil {
		return "", err
	}
	if len(m.b) == 0 {
		return "/", nil
	}
	if m.trailing {
		m.b = append(m.b, '/')
	}
	return string(m.b), nil
}

// matchBuilder writes MatchPath's result: b holds "/a/b", resolved and
// without a trailing slash, and the segment being read, b[start:].
type matchBuilder struct {
	b        []byte
	start    int  // of the open segment in b, after its '/'
	trailing bool // the last segment closed was empty or a dot segment
}

func (m *matchBuilder) open() {
	m.b = append(m.b, '/')
	m.start = len(m.b)
}

// close ends the open segment: an empty or "." one is removed, and a ".."
// one with the segment before it.
func (m *matchBuilder) close() error {
	switch string(m.b[m.start:]) {
	case "", ".":
		m.b = m.b[:m.start-1]
		m.trailing = true
	case "..":
		m.b = m.b[:m.start-1]
		i := bytes.LastIndexByte(m.b, '/')
		if i < 0 {
			return fmt.Errorf("%w: climbs above /", ErrInvalidPath)
		}
		m.b = m.b[:i]
		m.trailing = true
	default:
		m.trailing = false
	}
	return nil
}

// isMatchPath reports whether p, which starts with "/", is its own
// [MatchPath]: no empty (but a final one) or dot segment, no ';', only
// path characters, and only escapes, in upper-case hex, of bytes that are
// neither path characters nor separators. It is MatchPath's fast path.
func isMatchPath(p string) bool {
	start := 1 // of the current segment
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '/':
			if seg := p[start:i]; seg == "" || seg == "." || seg == ".." {
				return false
			}
			start = i + 1
		case c == '%':
			if i+2 >= len(p) || !isUpperHex(p[i+1]) || !isUpperHex(p[i+2]) {
				return false
			}
			if d := unhex(p[i+1])<<4 | unhex(p[i+2]); isPathChar(d) || d == '/' || d == '\\' {
				return false
			}
			i += 2
		case c == ';' || !isPathChar(c):
			return false
		}
	}
	seg := p[start:]
	return seg != "." && seg != ".."
}

// Match returns the route of a request with method and path, path being
// what [MatchPath] returns for the request's normal path: of the routes
// whose path (as MatchPath reads it) is a prefix of path at a segment
// boundary and that take method, the one with the longest path; else the
// implicit route [DefaultRoute]. Matching is case-sensitive on the path;
// methods are compared in any case.
//
// A route without a method takes every method, and one with a method
// takes that method; a GET route also takes HEAD, since Go's ServeMux,
// Flask and Express serve HEAD with the GET handler. At equal length the
// most specific route wins: for HEAD a HEAD route, then a GET route, then
// one without a method; for another method a route with that method, then
// one without. Length comes first, so for HEAD /v1/export/x a GET
// /v1/export route beats a HEAD /v1 route and a method-less /v1 one, as
// it would for GET. Match does not allocate.
func (p *Policy) Match(method, path string) *Route {
	head := strings.EqualFold(method, "HEAD")
	for _, r := range p.routes { // in the order above: see NewPolicy's sort
		if (r.Method == "" || strings.EqualFold(r.Method, method) || head && strings.EqualFold(r.Method, "GET")) && underPath(path, r.match) {
			return r
		}
	}
	return p.def
}

// methodRank orders routes of one path length for [Policy.Match]: a HEAD
// route (2) before a route with another method (1), before one without
// (0). A HEAD request thus meets its HEAD route before the GET route it
// falls back to, and every other request its own method's route before
// a method-less one (HEAD routes do not take it).
func methodRank(method string) int {
	switch {
	case strings.EqualFold(method, "HEAD"):
		return 2
	case method != "":
		return 1
	}
	return 0
}

// underPath reports whether path is prefix or lies under it, at a
// segment boundary: /v1/export is under /v1/export, and /v1/export/x,
// but /v1/exports is not.
func underPath(path, prefix string) bool {
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || prefix == "/" || path[len(prefix)] == '/'
}
