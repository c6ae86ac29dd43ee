package domain

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrInvalidTrustedProxies reports a TOLLGATE_TRUSTED_PROXIES entry that is
// empty, not an address or CIDR, or an IPv6 address with a zone.
var ErrInvalidTrustedProxies = errors.New("invalid trusted proxies")

// TrustedProxies is a parsed TOLLGATE_TRUSTED_PROXIES: the CIDRs whose
// X-Forwarded-For and Forwarded headers are believed (contract §10). Trust
// is configuration, never a header: like nginx's set_real_ip_from with
// real_ip_recursive on, only the TCP peer decides whether the headers are
// read at all, and only the listed networks are skipped while walking them.
//
// The zero value trusts nobody. A TrustedProxies is immutable and safe for
// concurrent use by multiple goroutines.
type TrustedProxies struct {
	prefixes []netip.Prefix // masked; IPv4 (and IPv4-mapped) networks as IPv4
}

// ParseTrustedProxies parses s, comma-separated CIDRs with optional spaces
// around the commas; an empty (or all-space) s trusts nobody.
//
//   - A bare address is a network of one: /32 for IPv4, /128 for IPv6.
//   - Host bits are masked, as nginx, Caddy and Traefik do: "10.0.0.1/8"
//     trusts 10.0.0.0/8. [TrustedProxies.String] shows the effective
//     networks, for the start-up log.
//   - An IPv4-mapped IPv6 network ("::ffff:10.0.0.0/104") is its IPv4
//     network (10.0.0.0/8). Addresses are matched unmapped, so any other
//     IPv6 network, "::/0" included, never trusts an IPv4 peer.
//   - An empty entry ("10.0.0.0/8,,::1" or a trailing comma), an IPv6 zone
//     ("fe80::1%eth0"), a prefix length out of range ("10.0.0.0/33") and
//     anything else that is not an address or CIDR are errors.
//
// The error wraps [ErrInvalidTrustedProxies] and names the first bad entry
// (1-based) and its text; configuration is not attacker-controlled.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	if trimOWS(s) == "" {
		return TrustedProxies{}, nil
	}
	entries := strings.Split(s, ",")
	prefixes := make([]netip.Prefix, 0, len(entries))
	for i, e := range entries {
		p, err := parseTrustedEntry(trimOWS(e))
		if err != nil {
			return TrustedProxies{}, fmt.Errorf("%w: entry %d %q: %v", ErrInvalidTrustedProxies, i+1, trimOWS(e), err)
		}
		prefixes = append(prefixes, p)
	}
	return TrustedProxies{prefixes: prefixes}, nil
}

// parseTrustedEntry parses one trimmed TOLLGATE_TRUSTED_PROXIES entry into
// its normal form: masked, IPv4-mapped networks as IPv4.
func parseTrustedEntry(e string) (netip.Prefix, error) {
	var p netip.Prefix
	switch {
	case e == "":
		return netip.Prefix{}, errors.New("empty")
	case strings.IndexByte(e, '/') >= 0:
		var err error
		if p, err = netip.ParsePrefix(e); err != nil {
			return netip.Prefix{}, err
		}
	default:
		a, err := netip.ParseAddr(e)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a.Zone() != "" {
			return netip.Prefix{}, errors.New("an IPv6 zone cannot be trusted")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	// Masking keeps the ::ffff: marker only when at least 96 bits remain.
	if a := p.Addr(); a.Is4In6() {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// String returns the effective networks, canonical and comma-separated
// ("10.0.0.0/8,2001:db8::/32"); the empty string when t trusts nobody.
func (t TrustedProxies) String() string {
	var b []byte
	for i, p := range t.prefixes {
		if i > 0 {
			b = append(b, ',')
		}
		b = p.AppendTo(b)
	}
	return string(b)
}

// Contains reports whether a is in one of t's networks. a is matched
// unmapped and without its zone, so an IPv4-mapped peer (::ffff:10.1.2.3)
// matches an IPv4 network (10.0.0.0/8). It does not allocate.
func (t TrustedProxies) Contains(a netip.Addr) bool {
	return t.contains(clean(a))
}

// contains is [TrustedProxies.Contains] for an address already [clean].
func (t TrustedProxies) contains(a netip.Addr) bool {
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clean returns a unmapped (IPv4-mapped IPv6 as IPv4) and without zone:
// the form every address takes inside and out of this file.
func clean(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// ClientAddr returns the client address of a request whose TCP peer is
// peer and that carries the X-Forwarded-For field lines xff and the
// Forwarded (RFC 7239) field lines forwarded, in the order received
// (contract §10):
//
//   - peer not in t: peer. The headers, which anyone can send, are ignored.
//   - peer in t: X-Forwarded-For, every field line and every comma-separated
//     entry, is walked from right to left. Trusted addresses are skipped and
//     the first untrusted one is the client. When every entry is trusted, the
//     leftmost is the client.
//   - A malformed entry ends the walk: the address to its right (the last
//     good one seen) is the client, or peer when the rightmost entry is
//     malformed. Ending early never believes more of the list than its
//     well-formed right end, which is the part trusted proxies wrote.
//   - Without any X-Forwarded-For entry (no field line, or only empty ones),
//     the for= parameters of Forwarded's elements are walked the same way.
//     Without either, peer.
//
// An entry is an IPv4 or IPv6 address, optionally with a port
// ("203.0.113.7:5678", "[2001:db8::1]:80", also "[2001:db8::1]"), with
// spaces or tabs around it. An empty entry ("a,,b", "a,") is malformed; an
// empty field line holds no entry. In Forwarded, for= is case-insensitive
// and its value may be quoted (RFC 7239 wants "[v6]:port" quoted; unquoted
// IPv6, which nginx's `for=$remote_addr` produces, is read too). "unknown",
// obfuscated identifiers ("_hidden"), a quoted value holding a backslash, an
// element without for= or with two, and an element that does not parse are
// malformed. An obfuscated port ("192.0.2.43:_p") is accepted: the address
// is known.
//
// The result is unmapped (IPv4-mapped IPv6 as IPv4) and without zone; it is
// the zero Addr only when peer is. ClientAddr does not allocate unless an
// entry is malformed, and it reads only as much of X-Forwarded-For as the
// walk needs.
func (t TrustedProxies) ClientAddr(peer netip.Addr, xff, forwarded []string) netip.Addr {
	peer = clean(peer)
	if !t.contains(peer) {
		return peer
	}
	a, seen := t.walkXFF(xff)
	if !seen {
		a = t.walkForwarded(forwarded)
	}
	if !a.IsValid() {
		return peer
	}
	return a
}

// walkXFF walks the entries of lines from right to left and returns the
// client they name, the zero Addr when the rightmost entry is malformed,
// and whether lines hold any entry at all.
func (t TrustedProxies) walkXFF(lines []string) (client netip.Addr, seen bool) {
	var last netip.Addr // the leftmost trusted entry walked so far
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		if trimOWS(line) == "" {
			continue
		}
		seen = true
		for {
			j := strings.LastIndexByte(line, ',')
			a, ok := parseNode(trimOWS(line[j+1:]), false)
			if !ok {
				return last, true
			}
			if !t.contains(a) {
				return a, true
			}
			last = a
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return last, seen
}

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

// IPv6 grouping bounds for [AnonymousSubject] (TOLLGATE_IPV6_PREFIX).
const (
	MinIPv6Prefix = 32
	MaxIPv6Prefix = 128
)

// MaxAnonymousSubjectLen is the longest [AnonymousSubject], in bytes:
// "ip:" and the longest canonical IPv6 prefix
// ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128").
const MaxAnonymousSubjectLen = len("ip:") + len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff") + len("/128")

// anonymousPrefix starts every [AnonymousSubject].
const anonymousPrefix = "ip:"

// AnonymousSubject returns the metering subject of unresolved traffic
// from client address a, under TOLLGATE_ANONYMOUS=ip (contract §10):
//
//   - IPv4, and IPv4-mapped IPv6, per address: "ip:203.0.113.7".
//   - IPv6 per v6Bits-bit prefix, masked, in canonical text:
//     "ip:2001:db8:1:2::/64" ("ip:2001:db8::1/128" at 128). The zone is
//     dropped. v6Bits outside [MinIPv6Prefix]–[MaxIPv6Prefix] is clamped
//     into that range (config validation rejects it before).
//   - The zero Addr: [Unknown], the shared tenant.
//
// The subject becomes the Redis Cluster hash tag of the keys
// ([Key] gives `<prefix>{ip:203.0.113.7}`), so one client's keys share a
// slot and clients spread over the cluster. It is not a valid tenant id and
// never equals one: it holds ':' (see [ValidTenantID]), so no tenant's
// budget is an address's and no address is metered as a tenant. It holds
// only "ip:" then 0-9 a-f . : /, never '{' or '}', so the hash tag ends
// where [Key] closes it; and it is at most [MaxAnonymousSubjectLen] bytes,
// so with IPv6 grouped the key space one client can create stays bounded.
// It must not reach metric labels or X-Tenant-ID (those say [Unknown]);
// [IsAnonymousSubject] tells it apart.
//
// It allocates once, for the string.
func AnonymousSubject(a netip.Addr, v6Bits int) TenantID {
	if !a.IsValid() {
		return Unknown
	}
	var buf [MaxAnonymousSubjectLen]byte
	b := append(buf[:0], anonymousPrefix...)
	if a = a.Unmap(); a.Is4() {
		b = a.AppendTo(b)
	} else {
		// Prefix drops the zone and, for 32–128 bits of IPv6, never fails.
		p, _ := a.Prefix(min(max(v6Bits, MinIPv6Prefix), MaxIPv6Prefix))
		b = p.AppendTo(b)
	}
	return TenantID(b)
}

// IsAnonymousSubject reports whether t is an [AnonymousSubject] rather than
// a tenant: it starts with "ip:", which no valid tenant id can. It does not
// allocate.
func IsAnonymousSubject(t TenantID) bool {
	return strings.HasPrefix(string(t), anonymousPrefix)
}
