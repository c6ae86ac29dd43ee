package httpface_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// TestIgnoreBodies: behind IgnoreBodies a handler that reads no body
// answers a request whose body stalls at once, and the connection is
// closed (without it the answer waited for the body forever); requests
// without a body keep their connection.
func TestIgnoreBodies(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(httpface.IgnoreBodies(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok")
	}), nil))
	t.Cleanup(srv.Close)
	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c, bufio.NewReader(c)
	}
	read := func(t *testing.T, br *bufio.Reader) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(b) != "ok" {
			t.Errorf("answer %d %q, want 200 ok", resp.StatusCode, b)
		}
	}

	t.Run("stalled body", func(t *testing.T) {
		t.Parallel()
		status, body, closed := testhttp.Raw(t, srv.URL, "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc")
		if status != http.StatusOK || body != "ok" || !closed {
			t.Errorf("a stalled body: %d %q, connection closed %v; want 200 ok, closed", status, body, closed)
		}
	})
	t.Run("no body", func(t *testing.T) {
		t.Parallel()
		c, br := dial(t)
		for range 2 {
			io.WriteString(c, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n")
			read(t, br)
		}
	})
}
