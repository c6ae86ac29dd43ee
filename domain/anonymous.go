package domain

import (
	"net/netip"
	"strings"
)

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
// from client address a, under TOLLGATE_ANONYMOUS=ip (docs/tenants.md):
//
//   - IPv4 per address: "ip:203.0.113.7". So is IPv6 that carries an
//     IPv4 address in its last 32 bits: IPv4-mapped (::ffff:203.0.113.7),
//     NAT64's well-known prefix (64:ff9b::203.0.113.7, RFC 6052) and
//     IPv4-compatible (::203.0.113.7, not :: or ::1), as the IPv4
//     clients behind one translator would otherwise share its /64.
//   - IPv6 per v6Bits-bit prefix, masked, in canonical text:
//     "ip:2001:db8:1:2::/64" ("ip:2001:db8::1/128" at 128). The zone is
//     dropped. v6Bits outside [MinIPv6Prefix]–[MaxIPv6Prefix] is clamped
//     into that range (config validation rejects it before).
//   - The zero Addr: [Unknown], the shared tenant.
//
// The subject stands in for a tenant in the request's keys: the stores
// keep every key of one subject together, so one client's keys stay
// together and clients spread. It is not a valid tenant id and never
// equals one: it holds ':' (see [ValidTenantID]), so no tenant's budget
// is an address's and no address is metered as a tenant. It holds only
// "ip:" then 0-9 a-f . : /, never '{' or '}', so a key layout may
// enclose it in braces; and it is at most [MaxAnonymousSubjectLen] bytes,
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
	if a4, ok := embeddedIPv4(a); ok {
		b = a4.AppendTo(b)
	} else {
		// Prefix drops the zone and, for 32–128 bits of IPv6, never fails.
		p, _ := a.Prefix(min(max(v6Bits, MinIPv6Prefix), MaxIPv6Prefix))
		b = p.AppendTo(b)
	}
	return TenantID(b)
}

// nat64Prefix is NAT64's well-known prefix (RFC 6052), 64:ff9b::/96: an
// IPv4 client translated to IPv6 has its address in the last 32 bits.
var nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")

// embeddedIPv4 returns the IPv4 address a is or carries, and whether it
// is or carries one: a itself when IPv4, the last 32 bits when IPv4-mapped
// (::ffff:0:0/96), in NAT64's well-known prefix or IPv4-compatible (::/96
// but for 0.0.0.0/8, which holds :: and ::1).
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	if a = a.Unmap(); a.Is4() {
		return a, true
	}
	a = a.WithZone("")
	b := a.As16()
	last := netip.AddrFrom4([4]byte(b[12:]))
	switch {
	case nat64Prefix.Contains(a):
		return last, true
	case [12]byte(b[:12]) == [12]byte{} && b[12] != 0:
		return last, true
	}
	return netip.Addr{}, false
}

// IsAnonymousSubject reports whether t is an [AnonymousSubject] rather than
// a tenant: it starts with "ip:", which no valid tenant id can. It does not
// allocate.
func IsAnonymousSubject(t TenantID) bool {
	return strings.HasPrefix(string(t), anonymousPrefix)
}
