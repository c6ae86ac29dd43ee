package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
)

// slotWatch is an engine observer that tells when slots come back.
type slotWatch struct {
	held     atomic.Int64
	released chan time.Time
}

func (s *slotWatch) Decided(*domain.Route, domain.Verdict, time.Duration) {}
func (s *slotWatch) StoreFull()                                           {}
func (s *slotWatch) Settled(*domain.Route, int64, int64, error)           {}
func (s *slotWatch) InFlight(_ string, delta int) {
	s.held.Add(int64(delta))
	if delta < 0 {
		s.released <- time.Now()
	}
}

// slotUpstream is a real upstream whose paths end their responses in
// each way a response ends. ended receives the instant /stream's handler
// finished its body.
func slotUpstream(t *testing.T, ended chan<- time.Time) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/full": // a body of a known length, more than a buffer's
			body := strings.Repeat("x", 64<<10)
			w.Header().Set("Content-Length", fmt.Sprint(len(body)))
			io.WriteString(w, body)
		case "/stream": // chunked, flushed write by write
			for i := range 5 {
				fmt.Fprintf(w, "chunk %d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
			ended <- time.Now()
		case "/forever": // streams until the client goes
			io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case "/broken": // the upstream drops the connection: 502
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		case "/slow": // no headers within the upstream timeout: 504
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// slotDrain is slotGateway's drain bound: a request whose client is gone
// or was answered 504 holds its slot until the upstream's exchange ends,
// for at most this long.
const slotDrain = 100 * time.Millisecond

// slotGateway serves the proxy face to up with a global concurrency limit
// of 1 on the memory store; a request to /panic panics in the handler
// after its decision.
func slotGateway(t *testing.T, up string, watch *slotWatch) *httptest.Server {
	t.Helper()
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "inflight", Rule: domain.Rule{Limit: 1, Window: domain.ConcurrencyWindow}, Concurrency: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(up)
	upstream := proxy.NewUpstream(target, proxy.UpstreamOptions{Timeout: 100 * time.Millisecond, DrainTimeout: slotDrain, Log: slog.New(slog.DiscardHandler)})
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine: engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:"}, Observer: watch}),
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/panic" {
				panic("a handler's bug")
			}
			upstream.ServeHTTP(w, r)
		}),
	}))
	t.Cleanup(gw.Close)
	return gw
}

// TestSlotComesBackAtEveryEnd: a request's concurrency slot comes back
// soon after its response's end (within a second), however it ends: its last byte
// written, a streamed body finished, the upstream failing (502), a panic
// in a handler (before the recoverer's 500 is written). When nobody waits
// for the upstream's answer any more (the client hanging up mid-stream,
// the upstream timing out: 504), the slot is held until the upstream
// ends its exchange, and these upstreams end it only when their
// connection closes: the drain bound's end. After each, the one slot is
// free again.
func TestSlotComesBackAtEveryEnd(t *testing.T) {
	t.Parallel()
	streamed := make(chan time.Time, 1)
	up := slotUpstream(t, streamed)
	watch := &slotWatch{released: make(chan time.Time, 16)}
	gw := slotGateway(t, up.URL, watch)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	// get answers path and returns the status and the instant the
	// response ended (its body read to the end).
	get := func(path string) (int, time.Time) {
		resp, err := client.Get(gw.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, time.Now()
	}
	tests := []struct {
		name   string
		status int
		// end runs the request and returns the instant the response
		// ended, as its end is defined.
		end func(t *testing.T) time.Time
	}{
		{"the last byte written", 200, func(t *testing.T) time.Time { _, at := get("/full"); return at }},
		{"a streamed body finished", 200, func(t *testing.T) time.Time { get("/stream"); return <-streamed }},
		{"the client hung up mid-stream, and the drain bound passed", 200, func(t *testing.T) time.Time {
			c, err := net.Dial("tcp", gw.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET /forever HTTP/1.1\r\nHost: gw\r\n\r\n")
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				if strings.Contains(line, "first") {
					break
				}
			}
			c.Close()
			return time.Now().Add(slotDrain)
		}},
		{"the upstream failed", 502, func(t *testing.T) time.Time { return mustStatus(t, get, "/broken", 502) }},
		{"the upstream timed out, and the drain bound passed", 504, func(t *testing.T) time.Time {
			return mustStatus(t, get, "/slow", 504).Add(slotDrain)
		}},
		{"a panic in a handler", 500, func(t *testing.T) time.Time { return mustStatus(t, get, "/panic", 500) }},
	}
	for _, tt := range tests {
		end := tt.end(t)
		select {
		case at := <-watch.released:
			// Soon after the end: a slot kept for the request's lease
			// or never given back comes back late or not at all. (The
			// bound leaves a loaded machine's scheduling room.)
			if late := at.Sub(end); late > time.Second {
				t.Errorf("%s: the slot came back %v after the end, want within 1s", tt.name, late)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the slot did not come back within 5s", tt.name)
		}
		if got := watch.held.Load(); got != 0 {
			t.Errorf("%s: %d slots held after it, want 0", tt.name, got)
		}
		// The one slot is free: the next request is admitted.
		if status, _ := get("/full"); status != 200 {
			t.Fatalf("%s: the next request: %d, want 200 (the slot is still taken)", tt.name, status)
		}
		<-watch.released
	}
}

// mustStatus runs get on path, fails t unless it answers status, and
// returns when the answer ended.
func mustStatus(t *testing.T, get func(string) (int, time.Time), path string, status int) time.Time {
	t.Helper()
	got, at := get(path)
	if got != status {
		t.Errorf("GET %s: %d, want %d", path, got, status)
	}
	return at
}

// TestSlotHeldWhileRunning: while a request runs, its slot is taken (a
// second is denied with 429, Retry-After 1 and the concurrency headers);
// its end frees it.
func TestSlotHeldWhileRunning(t *testing.T) {
	t.Parallel()
	up := slotUpstream(t, make(chan time.Time, 1))
	watch := &slotWatch{released: make(chan time.Time, 16)}
	gw := slotGateway(t, up.URL, watch)
	resp, err := http.Get(gw.URL + "/forever")
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Values("RateLimit"); len(got) != 1 || got[0] != `"inflight";r=0;t=1` {
		t.Errorf("RateLimit of the running request = %q, want \"inflight\";r=0;t=1", got)
	}
	denied, err := http.Get(gw.URL + "/full")
	if err != nil {
		t.Fatal(err)
	}
	denied.Body.Close()
	for name, want := range map[string]string{
		"RateLimit-Policy": `"inflight";q=1;qu="concurrent-requests"`,
		"RateLimit":        `"inflight";r=0;t=1`,
		"Retry-After":      "1",
	} {
		if got := strings.Join(denied.Header.Values(name), ","); denied.StatusCode != 429 || got != want {
			t.Errorf("a request while the slot is taken: %d, %s = %q; want 429, %q", denied.StatusCode, name, got, want)
		}
	}
	resp.Body.Close() // the client hangs up on the stream
	<-watch.released
	if ok, err := http.Get(gw.URL + "/full"); err != nil || ok.StatusCode != 200 {
		t.Errorf("after the stream ended: %v, %v; want 200", ok, err)
	} else {
		ok.Body.Close()
	}
}
