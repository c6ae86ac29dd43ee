package proxy

import (
	"bufio"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
)

// meter is the proxy's one step that decides: it describes the request
// to the engine and maps the result to HTTP ([httpface.Answer]): what
// it admits goes to next, with the rate-limit headers when limits
// decided; a denial is 429, the closed fail mode's 503.
//
// A request admitted with concurrency slots holds them until next
// returns (see [engine.Result.Release]); [NewUpstream]'s proxy returns
// once the upstream's exchange is over (see [holding]).
//
// The path must be normal ([httpface.Normalize] runs first).
type meter struct {
	engine   *engine.Engine
	describe httpface.Describer
	metrics  httpface.Metrics // nil: none
	now      func() time.Time // nil: time.Now
	log      *slog.Logger     // nil: none
	// tokenRoutes is whether the current policy has a route whose
	// request bodies are read (see openAIRoute).
	tokenRoutes atomic.Pointer[tokenRoutes]
}

func (m *meter) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	d := m.describe.Describe(r, r.Method, r.URL.EscapedPath())
	d.Overrides = httpface.MethodOverrides(r.Header, r.URL.RawQuery)
	var tb *tokenBody
	answer := w // what the gateway's own answers are written to
	if route := m.openAIRoute(d); route != nil {
		answer = &openAIErrors{ResponseWriter: w}
		var ok bool
		if tb, ok = m.readTokenBody(answer, r, route, &d); !ok {
			return
		}
	}
	res, err := m.engine.Decide(r.Context(), d)
	switch {
	case errors.Is(err, domain.ErrInvalidPath):
		httpface.WriteInvalidPath(w, r, m.metrics)
		return
	case errors.Is(err, domain.ErrAmbiguousMethod):
		httpface.WriteAmbiguousMethod(w, r, m.metrics)
		return
	case err != nil:
		// Only a client gone mid-decision gets here (the fail mode
		// answers for the store): nobody reads an answer.
		return
	}
	// The concurrency slots an admitted request took come back when the
	// response has ended, however it ended: its last byte written (the
	// upstream's body copied, a stream finished), the client gone, the
	// upstream failed or timed out (502, 504), or a panic, before the
	// recoverer answers it.
	defer res.Release()
	r = r.WithContext(withTenant(r.Context(), res.Tenant, d.Client, res.Verdict.Release != nil))
	if status, admitted := httpface.Answer(answer, r, res, http.StatusTooManyRequests, m.now); !admitted {
		m.request(res.Route, status)
		return
	}
	// A reservation of token limits is settled when the upstream's
	// exchange is over (next has returned: see holding), with what the
	// answer reported.
	r, trip := startTokenTrip(r, res, tb)
	if trip != nil {
		defer m.settle(r.Context(), res, trip)
	}
	m.forward(next, w, r, res.Route)
}

// forward hands an admitted request to next, timing it and counting its
// status by route, through an [answerWriter].
func (m *meter) forward(next http.Handler, w http.ResponseWriter, r *http.Request, route *domain.Route) {
	aw := &answerWriter{StatusWriter: httpface.StatusWriter{ResponseWriter: w}}
	start := time.Now()
	next.ServeHTTP(aw, r)
	dropTrailerLookalikes(aw.Header())
	if m.metrics != nil {
		m.metrics.Upstream(route, time.Since(start))
		m.metrics.Request(route, aw.Final(r.Context()))
	}
}

// dropTrailerLookalikes deletes from h the trailers ReverseProxy put
// there after the body under http.TrailerPrefix (those the upstream did
// not announce, and those whose announcement dropGatewayHeaders
// withdrew) that are the gateway's headers: net/http sends them when the
// handler returns.
func dropTrailerLookalikes(h http.Header) {
	for name := range h {
		if t, ok := strings.CutPrefix(name, http.TrailerPrefix); ok && isGatewayHeader(t) {
			delete(h, name)
		}
	}
}

// answerWriter is what an admitted request's answer is written through:
// it records the status, and keeps the gateway's rate-limit headers off
// an interim answer (103 Early Hints) and on the final one. ReverseProxy
// writes a 1xx with the response's header map, its own headers merged
// in, then clears the map: without it the final answer lost the
// gateway's headers, and a 1xx carried the upstream's.
type answerWriter struct {
	httpface.StatusWriter
	saved  *[httpface.GatewayHeaderCount][]string // the gateway's, once a 1xx went out (rare: made then)
	hinted bool                                   // a 1xx went out, and the gateway's are not back yet
}

// WriteHeader writes a 1xx without any rate-limit header, a final status
// with the gateway's.
func (w *answerWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		h := w.Header()
		if w.saved == nil {
			w.saved = new([httpface.GatewayHeaderCount][]string)
			for i, k := range httpface.GatewayHeaders {
				w.saved[i] = h[k]
			}
		}
		w.hinted = true
		dropLookalikes(h)
		w.StatusWriter.WriteHeader(code)
		return
	}
	w.restore()
	w.StatusWriter.WriteHeader(code)
}

// Write writes p, the gateway's headers restored first after a 1xx.
func (w *answerWriter) Write(p []byte) (int, error) {
	w.restore()
	return w.StatusWriter.Write(p)
}

// Flush flushes, the gateway's headers restored first after a 1xx (a
// flush before any write commits the final header).
func (w *answerWriter) Flush() {
	w.restore()
	w.StatusWriter.Flush()
}

// Hijack takes the connection over (a 101 upgrade: ReverseProxy writes
// the 101 itself, with the header map), the gateway's headers restored
// first after a 1xx.
func (w *answerWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.restore()
	return http.NewResponseController(w.StatusWriter.ResponseWriter).Hijack()
}

// restore puts back the gateway's headers a 1xx withheld, replacing any
// the upstream's 1xx left.
func (w *answerWriter) restore() {
	if !w.hinted {
		return
	}
	h := w.Header()
	dropLookalikes(h)
	for i, k := range httpface.GatewayHeaders {
		if w.saved[i] != nil {
			h[k] = w.saved[i]
		}
	}
	w.hinted = false
}

func (m *meter) request(route *domain.Route, code int) {
	if m.metrics != nil {
		m.metrics.Request(route, code)
	}
}
