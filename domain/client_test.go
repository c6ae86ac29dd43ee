package domain_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

func TestParseTrustedProxies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // TrustedProxies.String
	}{
		{"", ""},
		{" \t ", ""},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"10.0.0.0/8,192.168.0.0/16", "10.0.0.0/8,192.168.0.0/16"},
		{" 10.0.0.0/8 ,\t::1 ", "10.0.0.0/8,::1/128"},
		{"192.0.2.7", "192.0.2.7/32"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"2001:DB8::/32", "2001:db8::/32"},
		// Host bits are masked, as nginx does.
		{"10.0.0.1/8", "10.0.0.0/8"},
		{"192.0.2.77/24", "192.0.2.0/24"},
		{"2001:db8::1/32", "2001:db8::/32"},
		// IPv4-mapped networks are IPv4 networks.
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"},
		{"::ffff:10.1.2.3/104", "10.0.0.0/8"},
		{"::ffff:192.0.2.7", "192.0.2.7/32"},
		{"::ffff:0:0/96", "0.0.0.0/0"},
		{"::ffff:0:0/80", "::/80"}, // wider than the mapped range: stays IPv6
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"::/0", "::/0"},
		{"10.0.0.0/8,10.0.0.0/8", "10.0.0.0/8,10.0.0.0/8"},
	}
	for _, tt := range tests {
		tp, err := domain.ParseTrustedProxies(tt.in)
		if err != nil {
			t.Errorf("ParseTrustedProxies(%q) error = %v, want nil", tt.in, err)
			continue
		}
		if got := tp.String(); got != tt.want {
			t.Errorf("ParseTrustedProxies(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseTrustedProxiesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // the entry the error names
	}{
		{"10.0.0.0/33", `entry 1 "10.0.0.0/33"`},
		{"2001:db8::/129", `entry 1 "2001:db8::/129"`},
		{"foo", `entry 1 "foo"`},
		{"10.0.0.0/8, foo", `entry 2 "foo"`},
		{"10.0.0.0/8,,::1", `entry 2 ""`},
		{"10.0.0.0/8,", `entry 2 ""`},
		{",10.0.0.0/8", `entry 1 ""`},
		{"fe80::1%eth0", `entry 1 "fe80::1%eth0"`},
		{"fe80::/64%eth0", `entry 1 "fe80::/64%eth0"`},
		{"fe80::1%eth0/64", `entry 1 "fe80::1%eth0/64"`},
		{"10.0.0.0/-1", `entry 1 "10.0.0.0/-1"`},
		{"10.0.0.0/08", `entry 1 "10.0.0.0/08"`},
		{"10.0.0.0/", `entry 1 "10.0.0.0/"`},
		{"/8", `entry 1 "/8"`},
		{"10.0.0.0/8/8", `entry 1 "10.0.0.0/8/8"`},
		{"010.0.0.1", `entry 1 "010.0.0.1"`},
		{"10.0.0.0 /8", `entry 1 "10.0.0.0 /8"`},
		{"10.0.0.0/8 192.168.0.0/16", `entry 1 "10.0.0.0/8 192.168.0.0/16"`},
		{"10.0.0.1:80", `entry 1 "10.0.0.1:80"`},
		{"[::1]", `entry 1 "[::1]"`},
	}
	for _, tt := range tests {
		tp, err := domain.ParseTrustedProxies(tt.in)
		if !errors.Is(err, domain.ErrInvalidTrustedProxies) {
			t.Errorf("ParseTrustedProxies(%q) error = %v, want ErrInvalidTrustedProxies", tt.in, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTrustedProxies(%q) error = %q, want it to name %s", tt.in, err, tt.want)
		}
		if tp.String() != "" {
			t.Errorf("ParseTrustedProxies(%q) = %q with an error, want the zero value", tt.in, tp)
		}
	}
}

func TestTrustedProxiesContains(t *testing.T) {
	t.Parallel()
	tests := []struct {
		proxies string
		addr    string
		want    bool
	}{
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "10.1.2.3", true},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "::ffff:10.1.2.3", true},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "11.0.0.1", false},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "2001:db8::5", true},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "2001:db8::5%eth0", true},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "2001:db9::1", false},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "192.0.2.7", true},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "192.0.2.8", false},
		{"10.0.0.0/8, 2001:db8::/32, 192.0.2.7", "", false},
		{"::ffff:10.0.0.0/104", "10.9.9.9", true},
		{"::ffff:10.0.0.0/104", "::ffff:10.9.9.9", true},
		{"::ffff:10.0.0.0/104", "11.0.0.0", false},
		{"::/0", "2001:db8::1", true},
		{"::/0", "10.0.0.1", false},
		{"::/0", "::ffff:10.0.0.1", false},
		{"0.0.0.0/0", "203.0.113.9", true},
		{"0.0.0.0/0", "::ffff:203.0.113.9", true},
		{"0.0.0.0/0", "2001:db8::1", false},
		{"10.0.0.1/8", "10.200.0.1", true}, // masked: the /8 is trusted
		{"", "10.0.0.1", false},
		{"", "0.0.0.0", false},
		{"", "::", false},
	}
	for _, tt := range tests {
		tp, err := domain.ParseTrustedProxies(tt.proxies)
		if err != nil {
			t.Fatalf("ParseTrustedProxies(%q): %v", tt.proxies, err)
		}
		if got := tp.Contains(addr(tt.addr)); got != tt.want {
			t.Errorf("ParseTrustedProxies(%q).Contains(%s) = %v, want %v", tt.proxies, tt.addr, got, tt.want)
		}
	}
	var zero domain.TrustedProxies
	for _, a := range []string{"10.0.0.1", "127.0.0.1", "::1", "0.0.0.0", ""} {
		if zero.Contains(addr(a)) {
			t.Errorf("TrustedProxies{}.Contains(%s) = true, want false (the zero value trusts nobody)", a)
		}
	}
}

// addr parses s, "" as the zero Addr.
func addr(s string) netip.Addr {
	if s == "" {
		return netip.Addr{}
	}
	return netip.MustParseAddr(s)
}

// testProxies is the trusted set of the ClientAddr tables.
const testProxies = "10.0.0.0/8, 2001:db8:ffff::/48"

func TestClientAddr(t *testing.T) {
	t.Parallel()
	tp, err := domain.ParseTrustedProxies(testProxies)
	if err != nil {
		t.Fatal(err)
	}
	const client = "203.0.113.7"
	tests := []struct {
		name     string
		peer     string
		xff, fwd []string
		want     string
	}{
		// An untrusted peer is the client, whatever it claims.
		{"untrusted, no headers", "203.0.113.9", nil, nil, "203.0.113.9"},
		{"untrusted, spoofed xff", "203.0.113.9", []string{"1.1.1.1"}, nil, "203.0.113.9"},
		{"untrusted, spoofed xff of a trusted proxy", "203.0.113.9", []string{"1.1.1.1, 10.0.0.2"}, nil, "203.0.113.9"},
		{"untrusted, spoofed forwarded", "203.0.113.9", nil, []string{"for=1.1.1.1"}, "203.0.113.9"},
		{"untrusted mapped peer is unmapped", "::ffff:203.0.113.9", []string{"1.1.1.1"}, nil, "203.0.113.9"},
		{"untrusted peer loses its zone", "fe80::1%eth0", nil, nil, "fe80::1"},
		{"untrusted v6 just outside the trusted /48", "2001:db8:fffe::1", []string{"1.1.1.1"}, nil, "2001:db8:fffe::1"},
		{"zero peer", "", []string{client}, nil, ""},

		// Trusted peer: walk right to left.
		{"trusted, no headers", "10.0.0.1", nil, nil, "10.0.0.1"},
		{"trusted, empty headers", "10.0.0.1", []string{}, []string{}, "10.0.0.1"},
		{"one hop", "10.0.0.1", []string{client}, nil, client},
		{"two hops", "10.0.0.1", []string{client + ", 10.0.0.2"}, nil, client},
		{"three hops", "10.0.0.1", []string{client + ", 10.0.0.3, 10.0.0.2"}, nil, client},
		{"spoofed left part ignored", "10.0.0.1", []string{"1.1.1.1, 6.6.6.6, " + client + ", 10.0.0.2"}, nil, client},
		{"spoofed trusted address left of the client", "10.0.0.1", []string{"10.0.0.99, " + client + ", 10.0.0.2"}, nil, client},
		{"all trusted: leftmost", "10.0.0.1", []string{"10.0.0.5, 10.0.0.3"}, nil, "10.0.0.5"},
		{"one trusted entry: it", "10.0.0.1", []string{"10.0.0.5"}, nil, "10.0.0.5"},
		{"mapped peer matches an IPv4 network", "::ffff:10.0.0.1", []string{client}, nil, client},
		{"v6 peer and hops", "2001:db8:ffff::1", []string{"2001:db8:1::7, 2001:db8:ffff::2"}, nil, "2001:db8:1::7"},
		{"mapped trusted hop skipped", "10.0.0.1", []string{client + ", ::ffff:10.0.0.2"}, nil, client},
		{"mapped client unmapped", "10.0.0.1", []string{"::ffff:" + client}, nil, client},
		{"zoned client loses its zone", "10.0.0.1", []string{"fe80::7%eth0"}, nil, "fe80::7"},

		// A malformed entry ends the walk: the address to its right.
		{"malformed in the middle", "10.0.0.1", []string{client + ", garbage, 10.0.0.2"}, nil, "10.0.0.2"},
		{"malformed left of the client", "10.0.0.1", []string{"1.1.1.1, garbage, " + client + ", 10.0.0.2"}, nil, client},
		{"malformed leftmost, all trusted", "10.0.0.1", []string{"garbage, 10.0.0.3, 10.0.0.2"}, nil, "10.0.0.3"},
		{"rightmost malformed: peer", "10.0.0.1", []string{client + ", garbage"}, nil, "10.0.0.1"},
		{"only malformed: peer", "10.0.0.1", []string{"unknown"}, nil, "10.0.0.1"},
		{"empty entry", "10.0.0.1", []string{client + ",,10.0.0.2"}, nil, "10.0.0.2"},
		{"trailing comma", "10.0.0.1", []string{client + ","}, nil, "10.0.0.1"},
		{"leading comma", "10.0.0.1", []string{"," + client}, nil, client},
		{"only a comma", "10.0.0.1", []string{","}, nil, "10.0.0.1"},
		{"quoted entry", "10.0.0.1", []string{`"` + client + `", 10.0.0.2`}, nil, "10.0.0.2"},
		{"space inside an entry", "10.0.0.1", []string{"203.0.113 .7, 10.0.0.2"}, nil, "10.0.0.2"},
		{"leading zero octet", "10.0.0.1", []string{"203.0.113.07, 10.0.0.2"}, nil, "10.0.0.2"},
		{"malformed xff does not fall back to forwarded", "10.0.0.1", []string{"garbage"}, []string{"for=" + client}, "10.0.0.1"},

		// Several field lines: one list, in order.
		{"lines in order", "10.0.0.1", []string{client, "10.0.0.3", "10.0.0.2"}, nil, client},
		{"lines, client in the first", "10.0.0.1", []string{"1.1.1.1, " + client, "10.0.0.2"}, nil, client},
		{"last line is rightmost", "10.0.0.1", []string{client, "198.51.100.1"}, nil, "198.51.100.1"},
		{"malformed in an earlier line", "10.0.0.1", []string{client + ", x", "10.0.0.3", "10.0.0.2"}, nil, "10.0.0.3"},
		{"empty line holds no entry", "10.0.0.1", []string{client, ""}, nil, client},
		{"blank line holds no entry", "10.0.0.1", []string{client, " \t", "10.0.0.2"}, nil, client},

		// Ports, brackets, spaces.
		{"v4 with port", "10.0.0.1", []string{client + ":5678"}, nil, client},
		{"v4 with port 0", "10.0.0.1", []string{client + ":0"}, nil, client},
		{"v4 with port 65535", "10.0.0.1", []string{client + ":65535"}, nil, client},
		{"v4 with port 65536", "10.0.0.1", []string{client + ":65536, 10.0.0.2"}, nil, "10.0.0.2"},
		{"v4 with empty port", "10.0.0.1", []string{client + ":, 10.0.0.2"}, nil, "10.0.0.2"},
		{"v4 with signed port", "10.0.0.1", []string{client + ":+80, 10.0.0.2"}, nil, "10.0.0.2"},
		{"v4 with obfuscated port", "10.0.0.1", []string{client + ":_p, 10.0.0.2"}, nil, "10.0.0.2"},
		{"trusted hop with port", "10.0.0.1", []string{client + ", 10.0.0.2:443"}, nil, client},
		{"bracketed v6 with port", "10.0.0.1", []string{"[2001:db8::1]:80, 10.0.0.2"}, nil, "2001:db8::1"},
		{"bracketed v6", "10.0.0.1", []string{"[2001:db8::1]"}, nil, "2001:db8::1"},
		{"bare v6", "10.0.0.1", []string{"2001:db8::1"}, nil, "2001:db8::1"},
		{"bare v6 whose tail looks like a port", "10.0.0.1", []string{"2001:db8::1:80"}, nil, "2001:db8::1:80"},
		{"bracketed v4", "10.0.0.1", []string{"[" + client + "]:80, 10.0.0.2"}, nil, "10.0.0.2"},
		{"bracketed zoned v6 with port", "10.0.0.1", []string{"[fe80::7%eth0]:80"}, nil, "fe80::7"},
		{"bracket not closed", "10.0.0.1", []string{"[2001:db8::1:80, 10.0.0.2"}, nil, "10.0.0.2"},
		{"empty brackets", "10.0.0.1", []string{"[]:80, 10.0.0.2"}, nil, "10.0.0.2"},
		{"junk after brackets", "10.0.0.1", []string{"[2001:db8::1]x, 10.0.0.2"}, nil, "10.0.0.2"},
		{"v6 with port unbracketed is an address", "10.0.0.1", []string{"::ffff:" + client + ":80, 10.0.0.2"}, nil, "10.0.0.2"},
		{"spaces and tabs trimmed", "10.0.0.1", []string{" \t" + client + "\t , 10.0.0.2 "}, nil, client},

		// Forwarded, read only without X-Forwarded-For.
		{"xff wins over forwarded", "10.0.0.1", []string{client}, []string{"for=198.51.100.1"}, client},
		{"only empty xff lines: forwarded", "10.0.0.1", []string{"", " "}, []string{"for=" + client}, client},
		{"forwarded", "10.0.0.1", nil, []string{"for=" + client}, client},
		{"forwarded quoted", "10.0.0.1", nil, []string{`for="` + client + `"`}, client},
		{"forwarded quoted v4 with port", "10.0.0.1", nil, []string{`for="` + client + `:4711"`}, client},
		{"forwarded quoted v6 with port", "10.0.0.1", nil, []string{`for="[2001:db8::7]:4711"`}, "2001:db8::7"},
		{"forwarded quoted v6", "10.0.0.1", nil, []string{`for="[2001:db8::7]"`}, "2001:db8::7"},
		{"forwarded unquoted v6 (nginx $remote_addr)", "10.0.0.1", nil, []string{"for=2001:db8::7"}, "2001:db8::7"},
		{"forwarded unquoted bracketed v6 with port", "10.0.0.1", nil, []string{"for=[2001:db8::7]:80"}, "2001:db8::7"},
		{"forwarded obfuscated port", "10.0.0.1", nil, []string{`for="` + client + `:_p1"`}, client},
		{"forwarded For=", "10.0.0.1", nil, []string{"For=" + client}, client},
		{"forwarded FOR= quoted", "10.0.0.1", nil, []string{`FOR="` + client + `"`}, client},
		{"forwarded elements", "10.0.0.1", nil, []string{"for=" + client + ", for=10.0.0.2"}, client},
		{"forwarded elements with other pairs", "10.0.0.1", nil, []string{
			"for=198.51.100.1;proto=https, for=" + client + ";by=10.0.0.1;host=example.com, proto=http;for=10.0.0.2"}, client},
		{"forwarded lines in order", "10.0.0.1", nil, []string{"for=" + client, "for=10.0.0.3", "for=10.0.0.2"}, client},
		{"forwarded last line is rightmost", "10.0.0.1", nil, []string{"for=" + client, "for=198.51.100.1"}, "198.51.100.1"},
		{"forwarded empty line holds no element", "10.0.0.1", nil, []string{"for=" + client, ""}, client},
		{"forwarded all trusted: leftmost", "10.0.0.1", nil, []string{"for=10.0.0.5, for=10.0.0.3"}, "10.0.0.5"},
		{"forwarded spoofed left part ignored", "10.0.0.1", nil, []string{"for=1.1.1.1, for=" + client + ", for=10.0.0.2"}, client},
		{"forwarded unknown ends the walk", "10.0.0.1", nil, []string{"for=" + client + ", for=unknown, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded unknown rightmost: peer", "10.0.0.1", nil, []string{"for=" + client + ", for=unknown"}, "10.0.0.1"},
		{"forwarded obfuscated ends the walk", "10.0.0.1", nil, []string{"for=" + client + ", for=_hidden, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded quoted obfuscated: peer", "10.0.0.1", nil, []string{`for="_gazonk"`}, "10.0.0.1"},
		{"forwarded malformed left of the client", "10.0.0.1", nil, []string{"for=1.1.1.1, for=bogus, for=" + client + ", for=10.0.0.2"}, client},
		{"forwarded two for= in one element", "10.0.0.1", nil, []string{"for=" + client + ";for=198.51.100.1, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded element without for=", "10.0.0.1", nil, []string{"for=" + client + ", proto=https, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded only an element without for=", "10.0.0.1", nil, []string{"by=10.0.0.9;proto=https"}, "10.0.0.1"},
		{"forwarded empty element", "10.0.0.1", nil, []string{"for=" + client + ",, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded trailing comma", "10.0.0.1", nil, []string{"for=" + client + ","}, "10.0.0.1"},
		{"forwarded empty pairs allowed", "10.0.0.1", nil, []string{"for=" + client + ";;proto=http;"}, client},
		{"forwarded spaces around ;", "10.0.0.1", nil, []string{"for=" + client + " ; proto=http , for=10.0.0.2"}, client},
		{"forwarded quoted comma in another pair", "10.0.0.1", nil, []string{"for=" + client + `;ext="a,b", for=10.0.0.2`}, client},
		{"forwarded escaped quote in another pair", "10.0.0.1", nil, []string{"for=" + client + `;ext="a\",b", for=10.0.0.2`}, client},
		{"forwarded backslash in for=", "10.0.0.1", nil, []string{`for="203.0.113\.7"`}, "10.0.0.1"},
		{"forwarded unterminated quote", "10.0.0.1", nil, []string{`for=` + client + `, for="10.0.0.2`}, "10.0.0.1"},
		{"forwarded unterminated quote swallows the line", "10.0.0.1", nil, []string{`for="x, for=` + client}, "10.0.0.1"},
		{"forwarded junk after a value", "10.0.0.1", nil, []string{"for=" + client + " junk"}, "10.0.0.1"},
		{"forwarded junk after a quoted value", "10.0.0.1", nil, []string{`for="` + client + `"junk, for=10.0.0.2`}, "10.0.0.2"},
		{"forwarded resyncs after junk", "10.0.0.1", nil, []string{`proto=http junk, for=` + client}, client},
		{"forwarded resyncs after a bad pair", "10.0.0.1", nil, []string{`pro to=http, for=` + client}, client},
		{"forwarded stray quote opens a string", "10.0.0.1", nil, []string{`proto=ht"tp, for=` + client}, "10.0.0.1"},
		{"forwarded no =", "10.0.0.1", nil, []string{"for " + client}, "10.0.0.1"},
		{"forwarded space before =", "10.0.0.1", nil, []string{"for =" + client}, "10.0.0.1"},
		{"forwarded no name", "10.0.0.1", nil, []string{"=" + client}, "10.0.0.1"},
		{"forwarded empty value", "10.0.0.1", nil, []string{"for=, for=10.0.0.2"}, "10.0.0.2"},
		{"forwarded empty quoted value", "10.0.0.1", nil, []string{`for="", for=10.0.0.2`}, "10.0.0.2"},
		{"forwarded name only", "10.0.0.1", nil, []string{"for"}, "10.0.0.1"},
		{"forwarded quote in a token", "10.0.0.1", nil, []string{`for=203.0"113.7`}, "10.0.0.1"},
		{"forwarded mapped peer", "::ffff:10.0.0.1", nil, []string{"for=" + client}, client},
	}
	for _, tt := range tests {
		got := tp.ClientAddr(addr(tt.peer), tt.xff, tt.fwd)
		if want := addr(tt.want); got != want {
			t.Errorf("%s: ClientAddr(%s, xff %q, forwarded %q) = %v, want %v", tt.name, tt.peer, tt.xff, tt.fwd, got, want)
		}
	}
}

func TestClientAddrTrustsNobodyByDefault(t *testing.T) {
	t.Parallel()
	var tp domain.TrustedProxies
	for _, peer := range []string{"127.0.0.1", "10.0.0.1", "::1"} {
		if got := tp.ClientAddr(addr(peer), []string{"1.1.1.1"}, []string{"for=1.1.1.1"}); got != addr(peer) {
			t.Errorf("TrustedProxies{}.ClientAddr(%s, spoofed) = %v, want the peer", peer, got)
		}
	}
}

func TestClientAddrAllocs(t *testing.T) {
	tp, err := domain.ParseTrustedProxies(testProxies)
	if err != nil {
		t.Fatal(err)
	}
	peer := addr("10.0.0.1")
	tests := []struct {
		name     string
		xff, fwd []string
	}{
		{"xff", []string{"1.1.1.1, 203.0.113.7:80", "10.0.0.3, [2001:db8:ffff::2]:443"}, nil},
		{"forwarded", nil, []string{`for=1.1.1.1, for="[2001:db8::7]:4711";proto=https`, "for=10.0.0.2;by=10.0.0.1"}},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(100, func() { tp.ClientAddr(peer, tt.xff, tt.fwd) }); n != 0 {
			t.Errorf("%s: ClientAddr allocates %v times, want 0", tt.name, n)
		}
	}
}

func TestAnonymousSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		bits int
		want domain.TenantID
	}{
		{"203.0.113.7", 64, "ip:203.0.113.7"},
		{"203.0.113.7", 128, "ip:203.0.113.7"},
		{"::ffff:203.0.113.7", 64, "ip:203.0.113.7"},
		{"::ffff:203.0.113.7", 128, "ip:203.0.113.7"},
		{"0.0.0.0", 64, "ip:0.0.0.0"},
		{"255.255.255.255", 64, "ip:255.255.255.255"},
		// One /64, one subject; another /64, another.
		{"2001:db8:1:2:3:4:5:6", 64, "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", 64, "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:2::", 64, "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", 64, "ip:2001:db8:1:3::/64"},
		{"2001:DB8:1:2::1", 64, "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:2:3:4:5:6", 128, "ip:2001:db8:1:2:3:4:5:6/128"},
		{"2001:db8:1:2:3:4:5:7", 128, "ip:2001:db8:1:2:3:4:5:7/128"},
		{"2001:db8:1:2:3:4:5:6", 32, "ip:2001:db8::/32"},
		{"2001:db8:ffff:2:3:4:5:6", 32, "ip:2001:db8::/32"},
		{"2001:db9:1:2::", 32, "ip:2001:db9::/32"},
		{"2001:db8:1:2:3:4:5:6", 48, "ip:2001:db8:1::/48"},
		{"2001:db8:1:abcd::1", 56, "ip:2001:db8:1:ab00::/56"},
		{"2001:db8:1:2:3:4:5:6", 127, "ip:2001:db8:1:2:3:4:5:6/127"},
		{"2001:db8:1:2:3:4:5:7", 127, "ip:2001:db8:1:2:3:4:5:6/127"},
		{"fe80::1%eth0", 64, "ip:fe80::/64"},
		{"fe80::1%eth0", 128, "ip:fe80::1/128"},
		{"::1", 64, "ip:::/64"},
		{"::1", 128, "ip:::1/128"},
		{"::", 128, "ip:::/128"},
		{"::ffff:0:102:304", 128, "ip:::ffff:0:102:304/128"},
		// IPv4 embedded in IPv6 (NAT64's well-known prefix, IPv4-compatible):
		// the IPv4 address it carries, so the IPv4 clients behind one
		// translator are metered apart, and as they are over IPv4.
		{"64:ff9b::203.0.113.7", 64, "ip:203.0.113.7"},
		{"64:ff9b::203.0.113.8", 64, "ip:203.0.113.8"},
		{"64:ff9b::cb00:7107", 128, "ip:203.0.113.7"},
		{"64:FF9B::203.0.113.7", 32, "ip:203.0.113.7"},
		{"64:ff9b::10.1.2.3%eth0", 64, "ip:10.1.2.3"},
		{"::203.0.113.7", 64, "ip:203.0.113.7"},
		{"::102:304", 128, "ip:1.2.3.4"},
		{"::ffff:203.0.113.7", 32, "ip:203.0.113.7"},
		// Not IPv4-embedded: beside the well-known prefix, or ::/96 with
		// 0.0.0.0/8 (:: and ::1 are not IPv4 clients).
		{"64:ff9b:1::203.0.113.7", 64, "ip:64:ff9b:1::/64"},
		{"64:ff9b:0:0:1::cb00:7107", 64, "ip:64:ff9b::/64"},
		{"64:ff9b:0:0:1::cb00:7107", 128, "ip:64:ff9b::1:0:cb00:7107/128"},
		{"::0.255.255.255", 128, "ip:::ff:ffff/128"},
		{"::1:0:0:0", 128, "ip:::1:0:0:0/128"},
		// Out of range: clamped.
		{"2001:db8:1:2:3:4:5:6", 0, "ip:2001:db8::/32"},
		{"2001:db8:1:2:3:4:5:6", -1, "ip:2001:db8::/32"},
		{"2001:db8:1:2:3:4:5:6", 129, "ip:2001:db8:1:2:3:4:5:6/128"},
		{"", 64, domain.Unknown},
	}
	for _, tt := range tests {
		if got := domain.AnonymousSubject(addr(tt.addr), tt.bits); got != tt.want {
			t.Errorf("AnonymousSubject(%s, %d) = %q, want %q", tt.addr, tt.bits, got, tt.want)
		}
	}
}

// TestAnonymousSubjectShape: over random addresses and every prefix
// length, a subject is never a valid tenant id, never holds a brace,
// fits MaxAnonymousSubjectLen, and names the network that holds a.
func TestAnonymousSubjectShape(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(20, 10))
	longest := 0
	var addrs []netip.Addr
	for range 200 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		addrs = append(addrs, netip.AddrFrom16(b), netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom16(b).WithZone("eth0"))
		b[10], b[11] = 0xff, 0xff
		clear(b[:10])
		addrs = append(addrs, netip.AddrFrom16(b)) // IPv4-mapped
		b[10], b[11] = 0, 0
		b[12] |= 1
		addrs = append(addrs, netip.AddrFrom16(b)) // IPv4-compatible
		b[0], b[1], b[2], b[3] = 0, 0x64, 0xff, 0x9b
		addrs = append(addrs, netip.AddrFrom16(b)) // NAT64
	}
	addrs = append(addrs, netip.IPv6Unspecified(), netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
	for _, a := range addrs {
		for bits := domain.MinIPv6Prefix; bits <= domain.MaxIPv6Prefix; bits++ {
			s := domain.AnonymousSubject(a, bits)
			longest = max(longest, len(s))
			if domain.ValidTenantID(string(s)) || !strings.Contains(string(s), ":") {
				t.Fatalf("AnonymousSubject(%s, %d) = %q, a valid tenant id", a, bits, s)
			}
			if strings.ContainsAny(string(s), "{}") || strings.Trim(string(s[3:]), "0123456789abcdef.:/") != "" {
				t.Fatalf("AnonymousSubject(%s, %d) = %q, want only 0-9 a-f . : / after ip:", a, bits, s)
			}
			if len(s) > domain.MaxAnonymousSubjectLen {
				t.Fatalf("AnonymousSubject(%s, %d) = %q, %d bytes > %d", a, bits, s, len(s), domain.MaxAnonymousSubjectLen)
			}
			if !domain.IsAnonymousSubject(s) {
				t.Fatalf("IsAnonymousSubject(%q) = false", s)
			}
			if !strings.HasPrefix(string(s), "ip:") {
				t.Fatalf("AnonymousSubject(%s, %d) = %q, want the ip: prefix", a, bits, s)
			}
			if u, ok := carriedIPv4(a); ok {
				if got := netip.MustParseAddr(string(s[3:])); got != u {
					t.Fatalf("AnonymousSubject(%s, %d) = %q, want %s", a, bits, s, u)
				}
				continue
			}
			p, err := netip.ParsePrefix(string(s[3:]))
			if err != nil || p.Bits() != bits || p != p.Masked() || !p.Contains(a.WithZone("")) {
				t.Fatalf("AnonymousSubject(%s, %d) = %q, want the masked /%d holding it (%v)", a, bits, s, bits, err)
			}
		}
	}
	if longest != domain.MaxAnonymousSubjectLen {
		t.Errorf("longest subject = %d bytes, want MaxAnonymousSubjectLen = %d (the bound is tight)", longest, domain.MaxAnonymousSubjectLen)
	}
}

// carriedIPv4 returns the IPv4 address a is or carries in its last 32
// bits (IPv4-mapped, NAT64's 64:ff9b::/96, or ::/96 but for 0.0.0.0/8).
func carriedIPv4(a netip.Addr) (netip.Addr, bool) {
	if u := a.Unmap(); u.Is4() {
		return u, true
	}
	b := a.As16()
	v4 := netip.AddrFrom4([4]byte(b[12:]))
	nat64 := [12]byte{0, 0x64, 0xff, 0x9b}
	if [12]byte(b[:12]) == nat64 || ([12]byte(b[:12]) == [12]byte{} && b[12] != 0) {
		return v4, true
	}
	return netip.Addr{}, false
}

func TestIsAnonymousSubject(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    domain.TenantID
		want bool
	}{
		{"ip:203.0.113.7", true},
		{"ip:2001:db8::/64", true},
		{domain.Unknown, false},
		{"acme", false},
		{"ip", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := domain.IsAnonymousSubject(tt.t); got != tt.want {
			t.Errorf("IsAnonymousSubject(%q) = %v, want %v", tt.t, got, tt.want)
		}
	}
}

func TestAnonymousSubjectAllocs(t *testing.T) {
	for _, a := range []string{"203.0.113.7", "::ffff:203.0.113.7", "64:ff9b::203.0.113.7", "2001:db8:1:2:3:4:5:6", "fe80::1%eth0"} {
		ip := addr(a)
		if n := testing.AllocsPerRun(100, func() { domain.AnonymousSubject(ip, 64) }); n > 1 {
			t.Errorf("AnonymousSubject(%s, 64) allocates %v times, want at most 1 (the string)", a, n)
		}
	}
}

func ExampleTrustedProxies_ClientAddr() {
	tp, err := domain.ParseTrustedProxies("10.0.0.0/8, 192.0.2.1")
	if err != nil {
		panic(err)
	}
	xff := []string{"6.6.6.6, 203.0.113.7", "10.0.0.3"} // 6.6.6.6 was the client's own claim
	fmt.Println(tp.ClientAddr(netip.MustParseAddr("192.0.2.1"), xff, nil))
	fmt.Println(tp.ClientAddr(netip.MustParseAddr("198.51.100.9"), xff, nil)) // untrusted peer
	fmt.Println(tp.ClientAddr(netip.MustParseAddr("10.0.0.2"), nil, []string{`for="[2001:db8::7]:4711", for=10.0.0.3`}))
	// Output:
	// 203.0.113.7
	// 198.51.100.9
	// 2001:db8::7
}

func ExampleAnonymousSubject() {
	fmt.Println(domain.AnonymousSubject(netip.MustParseAddr("::ffff:203.0.113.7"), 64))
	fmt.Println(domain.AnonymousSubject(netip.MustParseAddr("2001:db8:1:2:aaaa::1"), 64))
	fmt.Println(domain.AnonymousSubject(netip.Addr{}, 64))
	// Output:
	// ip:203.0.113.7
	// ip:2001:db8:1:2::/64
	// unknown
}

func BenchmarkClientAddr(b *testing.B) {
	tp, err := domain.ParseTrustedProxies(testProxies)
	if err != nil {
		b.Fatal(err)
	}
	// Many clients, not one hot address.
	xffs := make([][]string, 256)
	fwds := make([][]string, 256)
	for i := range xffs {
		xffs[i] = []string{fmt.Sprintf("203.0.%d.%d, 10.0.0.3, 10.0.0.2", i/16, i)}
		fwds[i] = []string{fmt.Sprintf("for=203.0.%d.%d;proto=https, for=10.0.0.3, for=10.0.0.2", i/16, i)}
	}
	untrusted, trusted := addr("198.51.100.1"), addr("10.0.0.1")
	for _, bc := range []struct {
		name      string
		peer      netip.Addr
		xff, fwds [][]string
	}{
		{"untrusted", untrusted, xffs, nil},
		{"xff-3-hops", trusted, xffs, nil},
		{"forwarded-3-hops", trusted, nil, fwds},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var xff, fwd []string
				if bc.xff != nil {
					xff = bc.xff[i%len(bc.xff)]
				} else {
					fwd = bc.fwds[i%len(bc.fwds)]
				}
				tp.ClientAddr(bc.peer, xff, fwd)
				i++
			}
		})
	}
}

func BenchmarkAnonymousSubject(b *testing.B) {
	v4 := make([]netip.Addr, 256)
	v6 := make([]netip.Addr, 256)
	for i := range v4 {
		v4[i] = netip.AddrFrom4([4]byte{203, 0, byte(i / 16), byte(i)})
		v6[i] = netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(i), 0, 1, 0xaa, byte(i), 0, 0, 0, 0, 0, 1})
	}
	for _, bc := range []struct {
		name  string
		addrs []netip.Addr
	}{{"v4", v4}, {"v6-64", v6}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				domain.AnonymousSubject(bc.addrs[i%len(bc.addrs)], 64)
				i++
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					domain.AnonymousSubject(bc.addrs[i%len(bc.addrs)], 64)
					i++
				}
			})
		})
	}
}
