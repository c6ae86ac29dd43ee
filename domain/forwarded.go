package domain

import (
	"net/netip"
	"strings"
)

// Reading RFC 7239 Forwarded header lines, for TrustedProxies.ClientAddr.

// walkForwarded folds the for= nodes of lines' elements from left to right
// into the client a right-to-left walk would find (quoted strings, which
// may hold commas, cannot be split from the right). It returns the zero
// Addr when the lines hold no element or the rightmost one is malformed.
//
// The fold: after each element, client is the walk's answer for the
// elements so far. A malformed element leaves none (the walk would stop
// at once); an untrusted address is the answer; a trusted one is the
// answer only when there was none (it is then the leftmost of an
// all-trusted list, or the address right of a malformed one).
func (t TrustedProxies) walkForwarded(lines []string) (client netip.Addr) {
	for _, line := range lines {
		if trimOWS(line) == "" {
			continue
		}
		for rest, more := line, true; more; {
			var a netip.Addr
			var ok bool
			a, ok, rest, more = forwardedElement(rest)
			switch {
			case !ok:
				client = netip.Addr{}
			case !t.contains(a):
				client = a
			case !client.IsValid():
				client = a
			}
		}
	}
	return client
}

// forwardedElement reads the first element of s (RFC 7239: pairs
// separated by ';', elements by ',') and returns its for= node, whether
// it is well formed with exactly one for=, what follows the element's
// comma, and whether there was a comma.
func forwardedElement(s string) (node netip.Addr, ok bool, rest string, more bool) {
	fors, bad := 0, false
	for {
		s = trimOWS(s)
		if s == "" || s[0] == ',' {
			break
		}
		if s[0] == ';' { // RFC 7239 allows empty pairs
			s = s[1:]
			continue
		}
		name, value, quoted, after, pairOK := forwardedPair(s)
		s = after
		if !pairOK {
			bad = true
			s = skipToComma(s)
			break
		}
		if strings.EqualFold(name, "for") {
			fors++
			if quoted && strings.IndexByte(value, '\\') >= 0 {
				bad = true
			} else if node, ok = parseNode(value, true); !ok {
				bad = true
			}
		}
	}
	if s != "" { // s[0] == ','
		rest, more = s[1:], true
	}
	return node, ok && !bad && fors == 1, rest, more
}

// forwardedPair reads `token=value` at the start of s, value a token (or,
// leniently, any run of bytes up to OWS, ';' or ',') or a quoted string,
// and returns the raw value (quotes removed, escapes kept) and what
// follows; ok is false on a syntax error, where after is where it stopped.
func forwardedPair(s string) (name, value string, quoted bool, after string, ok bool) {
	i := 0
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	if i == 0 || i == len(s) || s[i] != '=' {
		return "", "", false, s[i:], false
	}
	name, s = s[:i], s[i+1:]
	if s != "" && s[0] == '"' {
		for j := 1; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '"':
				after, ok = pairEnd(s[j+1:])
				return name, s[1:j], true, after, ok
			}
		}
		return "", "", false, "", false // unterminated
	}
	j := 0
	for j < len(s) && s[j] != ';' && s[j] != ',' && s[j] != ' ' && s[j] != '\t' {
		if s[j] == '"' || s[j] == '\\' {
			return "", "", false, s[j:], false
		}
		j++
	}
	if j == 0 {
		return "", "", false, s, false
	}
	after, ok = pairEnd(s[j:])
	return name, s[:j], false, after, ok
}

// pairEnd checks that a pair's value is followed by OWS and then ';', ','
// or the end, and returns s from that delimiter.
func pairEnd(s string) (string, bool) {
	s = trimOWS(s)
	return s, s == "" || s[0] == ';' || s[0] == ','
}

// skipToComma returns s from its first comma outside a quoted string, or
// "" when there is none.
func skipToComma(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return s[i:]
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		}
	}
	return ""
}

// isTchar reports whether c may appear in an RFC 9110 token.
func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// parseNode parses an address with an optional port: "203.0.113.7",
// "203.0.113.7:80", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:80".
// obfPort allows RFC 7239's obfuscated ports ("_p"). The address is
// returned [clean].
func parseNode(s string, obfPort bool) (netip.Addr, bool) {
	host, v6 := s, false
	if strings.HasPrefix(s, "[") {
		end := strings.LastIndexByte(s, ']') // as netip.ParseAddrPort, for zones holding ']'
		if end < 0 {
			return netip.Addr{}, false
		}
		host, v6 = s[1:end], true
		if port := s[end+1:]; port != "" && (port[0] != ':' || !validPort(port[1:], obfPort)) {
			return netip.Addr{}, false
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && strings.IndexByte(s[i+1:], ':') < 0 {
		// One colon: IPv4 with a port. IPv6 has at least two.
		if !validPort(s[i+1:], obfPort) {
			return netip.Addr{}, false
		}
		host = s[:i]
	}
	if host == "" { // spares ParseAddr's error allocation for "" and "[]"
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(host)
	// A host without ':' parses as IPv4 only, so "v4:port" needs no check.
	if err != nil || (v6 && !a.Is6()) {
		return netip.Addr{}, false
	}
	return clean(a), true
}

// validPort reports whether p is a decimal port 0–65535 (digits only, as
// [netip.ParseAddrPort] reads it) or, when obf, an RFC 7239 obfport ("_"
// then ALPHA / DIGIT / "." / "_" / "-").
func validPort(p string, obf bool) bool {
	if obf && len(p) > 1 && p[0] == '_' {
		for i := 1; i < len(p); i++ {
			if c := p[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
				return false
			}
		}
		return true
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		if n = n*10 + int(p[i]-'0'); n > 65535 {
			return false
		}
	}
	return p != ""
}

// trimOWS trims HTTP optional whitespace (spaces and tabs) from both ends.
func trimOWS(s string) string { return strings.Trim(s, " \t") }
