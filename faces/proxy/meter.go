package proxy

import (
	"errors"
	"net/http"
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
// returns (see [engine.Result.Release]).
//
// The path must be normal ([httpface.Normalize] runs first).
type meter struct {
	engine   *engine.Engine
	describe httpface.Describer
	metrics  httpface.Metrics // nil: none
	now      func() time.Time // nil: time.Now
}

func (m *meter) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	d := m.describe.Describe(r, r.Method, r.URL.EscapedPath())
	res, err := m.engine.Decide(r.Context(), d)
	switch {
	case errors.Is(err, domain.ErrInvalidPath):
		httpface.WriteInvalidPath(w, r, m.metrics)
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
	r = r.WithContext(withTenant(r.Context(), res.Tenant, d.Client))
	if status, admitted := httpface.Answer(w, r, res, http.StatusTooManyRequests, m.now); !admitted {
		m.request(res.Route, status)
		return
	}
	m.forward(next, w, r, res.Route)
}

// forward hands an admitted request to next, timing it and counting its
// status by route.
func (m *meter) forward(next http.Handler, w http.ResponseWriter, r *http.Request, route *domain.Route) {
	if m.metrics == nil {
		next.ServeHTTP(w, r)
		return
	}
	sw := &httpface.StatusWriter{ResponseWriter: w}
	start := time.Now()
	next.ServeHTTP(sw, r)
	m.metrics.Upstream(route, time.Since(start))
	m.metrics.Request(route, sw.Status())
}

func (m *meter) request(route *domain.Route, code int) {
	if m.metrics != nil {
		m.metrics.Request(route, code)
	}
}
