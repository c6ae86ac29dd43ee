package proxy

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// TestBodyIdleTimeout: an admitted body that stalls is cut off after the
// idle bound, through the real proxy; one that trickles in for longer
// than the bound, but never idles that long, streams through whole.
func TestBodyIdleTimeout(t *testing.T) {
	t.Parallel()
	// The bound is large against the writer's gaps (a tenth of it), so
	// that a loaded machine's scheduling delays cannot make a gap idle.
	const idle = 600 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil {
			return
		}
		io.WriteString(w, strconv.FormatInt(n, 10))
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	gw := httptest.NewServer(bodyIdleTimeout(idle)(NewUpstream(target, UpstreamOptions{Log: discardLog()})))
	t.Cleanup(gw.Close)

	dial := func(t *testing.T) net.Conn {
		c := dialServer(t, gw)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		return c
	}

	t.Run("stalled", func(t *testing.T) {
		t.Parallel()
		c := dial(t)
		start := time.Now()
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 100\r\n\r\n0123456789")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a stalled body: %v", err)
		}
		resp.Body.Close()
		if got, want := resp.StatusCode, http.StatusRequestTimeout; got != want {
			t.Errorf("status %d, want %d", got, want)
		}
		if took := time.Since(start); took < idle || took > idle+2*time.Second {
			t.Errorf("answered after %v, want about %v", took, idle)
		}
	})
	t.Run("slow but steady", func(t *testing.T) {
		t.Parallel()
		c := dial(t)
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: gw\r\nContent-Length: 32\r\nConnection: close\r\n\r\n")
		for range 32 { // 32 × idle/10: over three times the idle bound in all
			time.Sleep(idle / 10)
			io.WriteString(c, "x")
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "32" {
			t.Errorf("slow upload: %d %q, want 200 \"32\" (every byte forwarded)", resp.StatusCode, body)
		}
	})
}

func TestIdleBodyErrorWrapsErrBodyIdle(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(bodyIdleTimeout(50 * time.Millisecond)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		if !errors.Is(err, errBodyIdle) {
			t.Errorf("read error %v, want errBodyIdle", err)
		}
	})))
	t.Cleanup(srv.Close)
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab")
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Fatal(err)
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestStalledBodyNotForwarded: a stalled body is not waited for where
// nothing forwards it: the echo responder reads it and answers 408 after
// the idle bound, as a real upstream's proxy does; an upstream that
// refuses the connection is answered 502 at once; neither waits for the
// body. A chunked body that does not parse is the echo responder's 400
// at once. Every time the connection is closed after the answer.
func TestStalledBodyNotForwarded(t *testing.T) {
	t.Parallel()
	// An answer "at once" is one before the body's idle bound, a long
	// one there, so that a loaded machine's delays cannot pass for a
	// wait; the 408 waits a short one.
	const idle, long = 300 * time.Millisecond, 5 * time.Second
	refused := httptest.NewServer(http.NotFoundHandler())
	target, _ := url.Parse(refused.URL)
	refused.Close() // its port now refuses connections
	for _, tt := range []struct {
		name     string
		handler  http.Handler
		code     int
		idle     time.Duration
		min, max time.Duration
	}{
		{"echo", Echo(), http.StatusRequestTimeout, idle, idle, idle + 3*time.Second},
		{"echo, a bad chunk", Echo(), http.StatusBadRequest, long, 0, long},
		{"upstream refused", NewUpstream(target, UpstreamOptions{Log: discardLog()}), http.StatusBadGateway, long, 0, long},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := httptest.NewServer(bodyIdleTimeout(tt.idle)(tt.handler))
			t.Cleanup(gw.Close)
			start := time.Now()
			request := "POST /x HTTP/1.1\r\nHost: gw\r\nContent-Length: 10\r\n\r\nabc"
			if strings.Contains(tt.name, "chunk") {
				request = "POST /x HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n"
			}
			status, _, closed := testhttp.Raw(t, gw.URL, request)
			if took := time.Since(start); status != tt.code || !closed || took < tt.min || took > tt.max {
				t.Errorf("status %d after %v, connection closed %v; want %d after %v to %v, closed", status, took, closed, tt.code, tt.min, tt.max)
			}
		})
	}
}

// TestAnswerWriterRestoresAfterHints: after a 1xx (whose header map
// ReverseProxy clears), the gateway's headers are back on the final
// answer whichever call commits it: WriteHeader, Write or Flush.
func TestAnswerWriterRestoresAfterHints(t *testing.T) {
	t.Parallel()
	for _, commit := range []string{"WriteHeader", "Write", "Flush"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			aw := &answerWriter{StatusWriter: httpface.StatusWriter{ResponseWriter: w}}
			aw.Header()["X-RateLimit-Limit"] = []string{"7"}
			aw.WriteHeader(http.StatusEarlyHints)
			clear(aw.Header()) // as ReverseProxy does after a 1xx
			switch commit {
			case "WriteHeader":
				aw.WriteHeader(http.StatusOK)
			case "Write":
				aw.Write([]byte("x"))
			case "Flush":
				aw.Flush()
			}
		}))
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if got := resp.Header.Get("X-RateLimit-Limit"); resp.StatusCode != http.StatusOK || got != "7" {
			t.Errorf("committed by %s after a 103: %d, X-RateLimit-Limit %q, want 200 and 7", commit, resp.StatusCode, got)
		}
	}
}

// TestResponseIdleTimeout: a client that stops reading an admitted
// response is cut off after the idle bound, and the upstream's
// connection with it (it held both for ever: a few clients could pin
// every upstream connection); one that reads slowly, but never stalls
// that long, gets the whole response.
func TestResponseIdleTimeout(t *testing.T) {
	t.Parallel()
	// The bound is large against the reader's gaps (a tenth of it), so
	// that a loaded machine's scheduling delays cannot make a gap idle.
	const idle = 600 * time.Millisecond
	chunk := strings.Repeat("x", 64<<10)
	endless, finite := make(chan error, 1), make(chan error, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, done := 32, finite // 2 MiB: more than the sockets' buffers hold
		if r.URL.Path == "/endless" {
			n, done = 1<<30, endless
		}
		var err error
		for range n {
			if _, err = io.WriteString(w, chunk); err != nil {
				break
			}
		}
		done <- err
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	gw := httptest.NewUnstartedServer(responseIdleTimeout(idle)(NewUpstream(target, UpstreamOptions{Log: discardLog()})))
	// Small socket buffers at both ends: loopback's grow to megabytes,
	// and a write waits until a third of its buffer is free, so a reader
	// taking a tenth of the bound between reads could make one write
	// wait longer than the bound.
	gw.Listener = smallBuffers{gw.Listener}
	gw.Start()
	t.Cleanup(gw.Close)
	dial := func(t *testing.T) net.Conn {
		c := dialServer(t, gw)
		c.(*net.TCPConn).SetReadBuffer(64 << 10)
		return c
	}

	t.Run("stalled", func(t *testing.T) {
		c := dial(t)
		io.WriteString(c, "GET /endless HTTP/1.1\r\nHost: gw\r\n\r\n")
		select {
		case err := <-endless:
			if err == nil {
				t.Errorf("the upstream wrote its endless body whole")
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("a client that reads nothing still holds the upstream 20 s on (idle bound %v)", idle)
		}
	})
	t.Run("slow but steady", func(t *testing.T) {
		// A loaded machine can stall the reader itself past the bound:
		// such a run proves nothing, and is run again; a reader that
		// never paused longer than half the bound must get it all.
		for range 5 {
			total, gap, took := readSlowly(t, dial(t), idle)
			err := <-finite
			if gap >= idle/2 {
				t.Logf("the reader paused %v (bound %v): again", gap, idle)
				continue
			}
			if want := 32 * len(chunk); total != want {
				t.Errorf("read %d bytes over %v (longest pause %v), want %d", total, took.Round(time.Millisecond), gap, want)
			}
			if err != nil {
				t.Errorf("upstream: %v", err)
			}
			return
		}
		t.Skip("the machine never let the reader keep its pace")
	})
}

// readSlowly asks c for /finite and reads the response a little at a
// time, a tenth of idle apart. It returns the bytes read, the longest
// pause between two reads, and how long it took.
func readSlowly(t *testing.T, c net.Conn, idle time.Duration) (total int, gap, took time.Duration) {
	t.Helper()
	io.WriteString(c, "GET /finite HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	start := time.Now()
	last := start
	for {
		time.Sleep(idle / 10)
		n, err := resp.Body.Read(buf)
		gap = max(gap, time.Since(last))
		last = time.Now()
		total += n
		if err != nil {
			return total, gap, time.Since(start)
		}
	}
}

// smallBuffers is a listener whose connections have a 64 KiB send
// buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return c, err
}

// dialServer opens a connection to srv, closed when the test ends.
func dialServer(t *testing.T, srv *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestResponseIdleTimeoutSlowUpstream: an upstream that pauses longer
// than the idle bound before it ends its body is not the client's stall:
// the client, reading all along, gets the response whole (the chunked
// body's end was written by net/http after the handler returned, under
// the deadline of the last write, long past: the client saw it cut off).
func TestResponseIdleTimeoutSlowUpstream(t *testing.T) {
	t.Parallel()
	const idle = 300 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(3 * idle)
	}))
	t.Cleanup(up.Close)
	target, _ := url.Parse(up.URL)
	gw := httptest.NewServer(responseIdleTimeout(idle)(NewUpstream(target, UpstreamOptions{Log: discardLog()})))
	t.Cleanup(gw.Close)

	resp, err := gw.Client().Get(gw.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "data: first\n\n" {
		t.Errorf("body %q, %v; want the whole stream", body, err)
	}
}
