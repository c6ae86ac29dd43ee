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
// X-Forwarded-For and Forwarded headers are believed (docs/edge.md). Trust
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
// (docs/edge.md, "Trust and X-Forwarded-For"):
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
