package domain_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

// FuzzClientAddr checks, on any headers, that ClientAddr never panics and
// returns the peer or an address written in the headers, clean (unmapped,
// no zone); that X-Forwarded-For matches a plain right-to-left walk over
// strings.Split; and that the same entries sent as Forwarded for= give
// the same client (the two walkers agree).
func FuzzClientAddr(f *testing.F) {
	tp, err := domain.ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::/48, 192.0.2.1")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range [][4]string{
		{"10.0.0.1", "203.0.113.7, 10.0.0.2", "", ""},
		{"10.0.0.1", "1.1.1.1, garbage, 203.0.113.7:80", "10.0.0.3", ""},
		{"::ffff:10.0.0.1", "[2001:db8::1]:80,, 10.0.0.2", "[fe80::1%eth0]", ""},
		{"2001:db8:ffff::1", "", "", `for="[2001:db8::7]:4711";proto=https, For=10.0.0.2`},
		{"192.0.2.1", "", "", `for=unknown, for=_x;ext="a\",b", for=203.0.113.7:_p`},
		{"198.51.100.1", "1.1.1.1", "", "for=1.1.1.1"},
		{"10.0.0.1", "10.0.0.5, 10.0.0.3", "", ""},
		{"10.0.0.1", " , ", "", `for="x`},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, peerText, xff1, xff2, fwd string) {
		peer, err := netip.ParseAddr(peerText)
		if err != nil {
			peer = netip.Addr{}
		}
		xff, fwds := []string{xff1, xff2}, []string{fwd}
		got := tp.ClientAddr(peer, xff, fwds)

		if got != clean(got) {
			t.Fatalf("ClientAddr(%s, %q, %q) = %v, not unmapped and zoneless", peer, xff, fwds, got)
		}
		if got != clean(peer) && !writtenIn(got, xff1, xff2, fwd) {
			t.Fatalf("ClientAddr(%s, %q, %q) = %v, neither the peer nor in the headers", peer, xff, fwds, got)
		}
		if !tp.Contains(peer) && got != clean(peer) {
			t.Fatalf("ClientAddr(%s, %q, %q) = %v from an untrusted peer, want the peer", peer, xff, fwds, got)
		}

		if ref, ok := referenceXFF(tp, peer, xff); ok {
			if got != ref {
				t.Fatalf("ClientAddr(%s, xff %q) = %v, reference walk says %v", peer, xff, got, ref)
			}
			if asFwd, ok := asForwarded(xff); ok {
				if viaFwd := tp.ClientAddr(peer, nil, asFwd); viaFwd != got {
					t.Fatalf("ClientAddr(%s, forwarded %q) = %v, but as xff %q = %v", peer, asFwd, viaFwd, xff, got)
				}
			}
		}
	})
}

// clean is the address as ClientAddr returns it: unmapped, without zone.
func clean(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// writtenIn reports whether a, clean, is the clean form of an address
// written somewhere in the headers: some substring parses to it.
func writtenIn(a netip.Addr, headers ...string) bool {
	const longest = len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255")
	for _, h := range headers {
		for i := range h {
			for j := i + 1; j <= min(len(h), i+longest); j++ {
				if b, err := netip.ParseAddr(h[i:j]); err == nil && clean(b) == a {
					return true
				}
			}
		}
	}
	return false
}

// referenceXFF is docs/edge.md's rule for X-Forwarded-For, written plainly: all
// entries into one slice, then the walk. ok is false when it does not
// apply (untrusted peer, or no entry).
func referenceXFF(tp domain.TrustedProxies, peer netip.Addr, lines []string) (netip.Addr, bool) {
	if !tp.Contains(peer) {
		return netip.Addr{}, false
	}
	var entries []string
	for _, l := range lines {
		if strings.Trim(l, " \t") != "" {
			entries = append(entries, strings.Split(l, ",")...)
		}
	}
	if len(entries) == 0 {
		return netip.Addr{}, false
	}
	client := clean(peer)
	for i := len(entries) - 1; i >= 0; i-- {
		a, ok := referenceNode(strings.Trim(entries[i], " \t"))
		if !ok {
			return client, true
		}
		client = clean(a)
		if !tp.Contains(a) {
			return client, true
		}
	}
	return client, true
}

// referenceNode parses an entry with netip's own parsers: an address, an
// address and port, or a bracketed IPv6 address.
func referenceNode(e string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(e); err == nil {
		return a, true
	}
	if ap, err := netip.ParseAddrPort(e); err == nil {
		return ap.Addr(), true
	}
	if inner, ok := strings.CutPrefix(e, "["); ok {
		if inner, ok := strings.CutSuffix(inner, "]"); ok {
			if a, err := netip.ParseAddr(inner); err == nil && a.Is6() {
				return a, true
			}
		}
	}
	return netip.Addr{}, false
}

// asForwarded rewrites X-Forwarded-For lines as Forwarded lines, each
// entry a quoted for=. ok is false for entries the two headers read
// differently on purpose: obfuscated ports ('_') are Forwarded-only, and
// a quote or backslash cannot be carried inside a quoted string as is.
func asForwarded(lines []string) ([]string, bool) {
	var out []string
	for _, l := range lines {
		if strings.ContainsAny(l, "_\"\\") {
			return nil, false
		}
		if strings.Trim(l, " \t") == "" {
			continue
		}
		entries := strings.Split(l, ",")
		for i, e := range entries {
			entries[i] = `for="` + strings.Trim(e, " \t") + `"`
		}
		out = append(out, strings.Join(entries, ", "))
	}
	return out, true
}
