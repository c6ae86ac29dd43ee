package proxy_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/proxy"
)

// rawConn dials addr (host:port, or an http:// URL) and writes req as
// is. Reads on the connection time out after 5 s, so a server that never
// answers fails the test instead of hanging it.
func rawConn(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// readHead reads a response's status line and header block from br, as
// the bytes on the wire, without the final empty line.
func readHead(t *testing.T, br *bufio.Reader) []string {
	t.Helper()
	var lines []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the response head after %q: %v", lines, err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			return lines
		}
		lines = append(lines, line)
	}
}

// TestRateLimitHeadersWireSpelling reads the response bytes: RateLimit and
// RateLimit-Policy go out as the draft spells them, not as Go's canonical
// Ratelimit, on admitted, denied and proxied answers, and an upstream's
// own copies (in any case) never travel beside them.
func TestRateLimitHeadersWireSpelling(t *testing.T) {
	t.Parallel()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["ratelimit"] = []string{"from-upstream"}
		w.Header().Set("RateLimit-Policy", "from-upstream")
	}))
	t.Cleanup(up.Close)
	echo := newLimited(newFakeStore(), domain.Rule{Limit: 1, Window: time.Minute}, limited{})
	echoGW := httptest.NewServer(echo)
	t.Cleanup(echoGW.Close)
	proxyGW, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})

	for _, c := range []struct {
		name, base string
		status     string
	}{
		{"admitted", echoGW.URL, "200"},
		{"denied", echoGW.URL, "429"},
		{"proxied", proxyGW, "200"},
	} {
		conn := rawConn(t, c.base, "GET /x HTTP/1.1\r\nHost: gw\r\nX-Tenant-ID: acme\r\nConnection: close\r\n\r\n")
		head := readHead(t, bufio.NewReader(conn))
		if !strings.Contains(head[0], " "+c.status+" ") {
			t.Errorf("%s: status line %q, want %s", c.name, head[0], c.status)
		}
		seen := map[string]int{}
		for _, l := range head[1:] {
			name, value, _ := strings.Cut(l, ":")
			if strings.EqualFold(name, "RateLimit") || strings.EqualFold(name, "RateLimit-Policy") {
				seen[name]++
				if strings.Contains(value, "from-upstream") {
					t.Errorf("%s: the upstream's %q reached the client", c.name, l)
				}
			}
		}
		if seen["RateLimit"] != 1 || seen["RateLimit-Policy"] != 1 || len(seen) != 2 {
			t.Errorf("%s: rate-limit header names on the wire %v, want RateLimit and RateLimit-Policy once each\n%s",
				c.name, seen, strings.Join(head, "\n"))
		}
	}
}
