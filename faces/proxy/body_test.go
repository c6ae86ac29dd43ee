package proxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy"
)

// TestDenialDoesNotWaitForTheBody: a denied request whose body never
// arrives gets its 429 at once, with Connection: close, and the server
// closes the connection instead of holding it (raw TCP, a real server).
func TestDenialDoesNotWaitForTheBody(t *testing.T) {
	t.Parallel()
	handler := proxy.New(proxy.Options{Engine: newEngine(denyAll, defaultRule, nil), Upstream: http.NotFoundHandler()})
	gw := httptest.NewServer(handler)
	t.Cleanup(gw.Close)
	tests := []struct{ name, req string }{
		{"content-length, 10 of 100 bytes", "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n0123456789"},
		{"chunked, no last chunk", "POST /x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"},
		{"expect 100-continue, no body", "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"},
		{"400 path, body pending", "POST /../x HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n0123456789"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn := rawConn(t, gw.URL, tt.req) // reads time out after 5 s
			br := bufio.NewReader(conn)
			head := readHead(t, br)
			if !strings.Contains(head[0], " 429 ") && !strings.Contains(head[0], " 400 ") {
				t.Errorf("status line %q, want a 429 (or 400)", head[0])
			}
			if !containsLine(head, "Connection: close") {
				t.Errorf("head lacks Connection: close:\n%s", strings.Join(head, "\n"))
			}
			_, err := io.Copy(io.Discard, br)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("the connection stayed open after the answer: %v", err)
			}
		})
	}
}

// TestDenialWithoutBodyKeepsTheConnection: a body-less denial keeps the
// connection alive, as before.
func TestDenialWithoutBodyKeepsTheConnection(t *testing.T) {
	t.Parallel()
	gw := httptest.NewServer(proxy.New(proxy.Options{Engine: newEngine(denyAll, defaultRule, nil), Upstream: http.NotFoundHandler()}))
	t.Cleanup(gw.Close)
	conn := rawConn(t, gw.URL, "GET /x HTTP/1.1\r\nHost: gw\r\n\r\nGET /y HTTP/1.1\r\nHost: gw\r\n\r\n")
	br := bufio.NewReader(conn)
	for i := range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Close {
			t.Errorf("response %d: %d close=%v, want 429 on a kept-alive connection", i+1, resp.StatusCode, resp.Close)
		}
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if strings.EqualFold(l, want) {
			return true
		}
	}
	return false
}
