package apptest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Upstream is an upstream for tests of concurrency limits: it counts the
// requests it is serving at once, and the most it ever served at once.
// Its paths:
//
//   - /hold holds the request until [Upstream.Open] or
//     [Upstream.Release] (or its client goes away), then answers 200;
//   - /sleep?ms=N answers 200 after N ms (or when its client goes away);
//   - /stream?n=N&ms=M streams N lines, each flushed, M ms apart;
//   - /broken drops the connection without an answer (a gateway answers
//     502);
//   - anything else answers 200 at once.
//
// Upstream is safe for concurrent use by multiple goroutines. It is
// closed when the test ends.
type Upstream struct {
	// URL is its base URL, for TOLLGATE_UPSTREAM_URL.
	URL string

	srv            *httptest.Server
	inFlight, most atomic.Int64
	gate           chan struct{} // closed by Open
	one            chan struct{} // a send lets one held request finish: Release
	once           sync.Once
}

// NewUpstream starts an Upstream for the rest of t.
func NewUpstream(t testing.TB) *Upstream {
	t.Helper()
	u := &Upstream{gate: make(chan struct{}), one: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	u.URL = u.srv.URL
	t.Cleanup(func() {
		u.Open()
		u.srv.Close()
	})
	return u
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	now := u.inFlight.Add(1)
	defer u.inFlight.Add(-1)
	for m := u.most.Load(); now > m && !u.most.CompareAndSwap(m, now); m = u.most.Load() {
	}
	switch r.URL.Path {
	case "/hold":
		select {
		case <-u.gate:
		case <-u.one:
		case <-r.Context().Done():
			return
		}
	case "/sleep":
		select {
		case <-time.After(millis(r, "ms")):
		case <-r.Context().Done():
			return
		}
	case "/stream":
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		for i := range n {
			w.Write([]byte("line " + strconv.Itoa(i) + "\n"))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(millis(r, "ms")):
			case <-r.Context().Done():
				return
			}
		}
	case "/broken":
		if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	w.Write([]byte("ok\n"))
}

// millis returns the query parameter name of r as milliseconds.
func millis(r *http.Request, name string) time.Duration {
	n, _ := strconv.Atoi(r.URL.Query().Get(name))
	return time.Duration(n) * time.Millisecond
}

// InFlight returns how many requests it is serving now.
func (u *Upstream) InFlight() int64 { return u.inFlight.Load() }

// Most returns the most requests it ever served at once.
func (u *Upstream) Most() int64 { return u.most.Load() }

// WaitInFlight waits up to 10 s until it serves n requests at once, and
// fails t otherwise.
func (u *Upstream) WaitInFlight(t testing.TB, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u.InFlight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("apptest: the upstream serves %d requests at once, want %d", u.InFlight(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Open lets every request held on /hold, now or later, finish. It is
// idempotent.
func (u *Upstream) Open() { u.once.Do(func() { close(u.gate) }) }

// Release lets one request held on /hold finish, waiting up to 10 s for
// one to be held, and fails t otherwise.
func (u *Upstream) Release(t testing.TB) {
	t.Helper()
	select {
	case u.one <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("apptest: no request held on /hold to release")
	}
}

// CloseConnections closes the connections clients hold to it (idle
// ones included), so that their goroutines end.
func (u *Upstream) CloseConnections() { u.srv.CloseClientConnections() }
