package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/faces/httpface"
)

// BodyIdleTimeout bounds how long the gateway waits for the next bytes of
// an admitted request's body. It is an idle bound, not a total one: each
// read that delivers data extends it, so a slow upload streams for as
// long as it keeps sending, and only a body that stalls for this long is
// cut off (the connection is closed).
const BodyIdleTimeout = 30 * time.Second

// errBodyIdle is the read error of a request body that stalled for the
// idle timeout.
var errBodyIdle = errors.New("request body idle timeout")

// bodyIdleTimeout is middleware that bounds the idle time of every
// request body to idle: before each read, the connection's read deadline
// is moved to idle from now, so a body that stops arriving fails its
// read with errBodyIdle (and the proxy gives up on it) instead of holding
// a goroutine and a connection forever, while a body that keeps arriving
// is never cut off. Requests without a body pass untouched.
func bodyIdleTimeout(idle time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil && r.Body != http.NoBody {
				b := &idleBody{ReadCloser: r.Body, rc: http.NewResponseController(w), idle: idle}
				// In the context too: the reverse proxy wraps the body, and
				// its error handler must still find out (bodyTimedOut).
				r = r.WithContext(context.WithValue(r.Context(), idleBodyKey{}, b))
				r.Body = b
			}
			next.ServeHTTP(w, r)
		})
	}
}

// idleBody is a request body whose every read has an idle deadline. It
// stops moving the deadline once a read fails (EOF included): net/http
// then reads the connection in the background to notice a client that
// goes away, and a deadline set then would cancel the request.
//
// The reads run on the proxy's transport goroutine; the proxy's error
// handler asks timedOut from its own.
type idleBody struct {
	io.ReadCloser
	rc      *http.ResponseController
	idle    time.Duration
	done    bool         // a read failed: leave the deadline alone
	pending atomic.Int64 // unix nanos of the deadline of the read in progress; 0 if none
	expired atomic.Bool  // a read hit the idle deadline
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.done {
		return b.ReadCloser.Read(p)
	}
	deadline := time.Now().Add(b.idle)
	if b.rc.SetReadDeadline(deadline) != nil {
		b.done = true // not supported: read as is
		return b.ReadCloser.Read(p)
	}
	b.pending.Store(deadline.UnixNano())
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
		if errors.Is(err, os.ErrDeadlineExceeded) {
			b.expired.Store(true)
			err = fmt.Errorf("%w (%s without data): %w", errBodyIdle, b.idle, err)
		}
	}
	b.pending.Store(0)
	return n, err
}

// timedOut reports whether a read hit the idle deadline, or is past it.
// The second case matters because the connection's read error cancels
// the request's context before the read returns, so the proxy can learn
// of the cancelation first.
func (b *idleBody) timedOut() bool {
	if b.expired.Load() {
		return true
	}
	d := b.pending.Load()
	return d != 0 && time.Now().UnixNano() >= d
}

// bodyTimedOut reports whether r's body stalled past its idle bound, as
// opposed to a client that went away or an upstream that failed.
func bodyTimedOut(r *http.Request) bool {
	b, ok := r.Context().Value(idleBodyKey{}).(*idleBody)
	return ok && b.timedOut()
}

type idleBodyKey struct{}

// writeBodyTimedOut answers a request whose body stalled past its idle
// bound: 408, and the connection closed after it (the rest of the body
// may never come).
func writeBodyTimedOut(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	httpface.WriteError(w, r, http.StatusRequestTimeout, "request body timed out")
}

// refuseH2CUpgrade drops a request's offer to upgrade to HTTP/2 over
// cleartext (Upgrade: h2c): forwarded, the upstream could switch the
// connection to a raw tunnel of requests the gateway never meters. The
// request itself is served as HTTP/1.1, as RFC 9113 lets a server that
// declines the upgrade do; other upgrades (WebSocket) pass untouched.
func refuseH2CUpgrade(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs, ok := r.Header["Upgrade"]; ok && offersH2C(vs) {
			r = r.Clone(r.Context())
			var keep []string
			for _, v := range vs {
				for p := range strings.SplitSeq(v, ",") {
					if p = strings.TrimSpace(p); p != "" && !strings.EqualFold(p, "h2c") {
						keep = append(keep, p)
					}
				}
			}
			if len(keep) == 0 {
				r.Header.Del("Upgrade")
			} else {
				r.Header["Upgrade"] = []string{strings.Join(keep, ", ")}
			}
			r.Header.Del("Http2-Settings")
		}
		next.ServeHTTP(w, r)
	})
}

// offersH2C reports whether an Upgrade field's values name h2c.
func offersH2C(vs []string) bool {
	for _, v := range vs {
		for p := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(p), "h2c") {
				return true
			}
		}
	}
	return false
}

// ResponseIdleTimeout bounds how long the gateway waits for a client to
// take the next bytes of its response. Like [BodyIdleTimeout] it is an
// idle bound, not a total one: a response streams for as long as the
// client keeps reading, and only one whose client stops reading for this
// long is cut off (the connection is closed, and with it the upstream's).
const ResponseIdleTimeout = 30 * time.Second

// responseIdleTimeout is middleware that bounds the time every write of
// a response may wait for the client to idle: before a write or a flush,
// the connection's write deadline is moved to idle from now (at most
// every idle/30, so about every second with 30 s), so that a client that
// stops reading fails the write (the proxy gives up on the upstream's
// body) instead of holding a goroutine, its connection and an upstream
// connection for ever. The response's end, written once the handler
// has returned, gets a deadline of its own. net/http clears the
// deadline once the response has gone out, and on a hijack (an upgraded
// connection is a tunnel, not a response).
func responseIdleTimeout(idle time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			iw := &idleWriter{ResponseWriter: w, idle: idle}
			next.ServeHTTP(iw, r)
			// net/http writes the response's end (a chunked body's last
			// chunk, the trailers, what is still buffered) once the
			// handler has returned: that write gets idle from now, not
			// what is left of the last write's, which an upstream that
			// paused before ending its body had used up. Not when nothing
			// set a deadline (a hijacked connection, for one).
			if !iw.set.IsZero() {
				iw.set = time.Time{}
				iw.extend()
			}
		})
	}
}

// idleWriter is a response whose every write has an idle deadline.
type idleWriter struct {
	http.ResponseWriter
	idle time.Duration
	set  time.Time // when the deadline was last moved; zero before
	off  bool      // the connection takes no deadline: write as is
}

// extend moves the write deadline to idle from now, unless it was moved
// less than idle/30 ago.
func (w *idleWriter) extend() {
	if w.off {
		return
	}
	now := time.Now()
	if !w.set.IsZero() && now.Sub(w.set) < w.idle/30 {
		return
	}
	if setWriteDeadline(w.ResponseWriter, now.Add(w.idle)) != nil {
		w.off = true
		return
	}
	w.set = now
}

// setWriteDeadline is http.ResponseController's SetWriteDeadline without
// allocating one per request: it unwraps w until a writer sets it.
func setWriteDeadline(w http.ResponseWriter, at time.Time) error {
	for {
		switch x := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			return x.SetWriteDeadline(at)
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

func (w *idleWriter) WriteHeader(code int) {
	w.extend()
	w.ResponseWriter.WriteHeader(code)
}

func (w *idleWriter) Write(p []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher, for handlers that assert it.
func (w *idleWriter) Flush() { _ = w.FlushError() }

// FlushError flushes what was written, as http.ResponseController's
// Flush does (and without one allocated per flush: a stream of events
// flushes at every event), and returns the connection's error.
func (w *idleWriter) FlushError() error {
	w.extend()
	return httpface.Flush(w.ResponseWriter)
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
