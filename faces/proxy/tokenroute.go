package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy/tokens"
)

// settleTimeout bounds a settlement's store work: it runs after the
// answer, on a context its client no longer cancels.
const settleTimeout = 5 * time.Second

// tokenBody is what the proxy read of a request on a route whose tokens
// OpenAI's usage reports: the body, and what it asks for.
type tokenBody struct {
	body []byte
	q    tokens.Request
}

// tokenRoutes remembers, per policy, whether any route reads OpenAI
// usage, so that a policy without one costs a request no second match.
type tokenRoutes struct {
	policy *domain.Policy
	any    bool
}

// openAIRoute returns the route d is on when its tokens come from
// OpenAI's usage reports (its request body is read), nil otherwise.
// Decide matches again; a policy swapped in between is caught there
// (see startTokenTrip).
func (m *meter) openAIRoute(d engine.Described) *domain.Route {
	p := m.engine.Snapshot().Policy
	c := m.tokenRoutes.Load()
	if c == nil || c.policy != p {
		c = &tokenRoutes{policy: p}
		for _, r := range p.Routes() {
			c.any = c.any || (r.Tokens == domain.TokensOpenAI && r.Tokened())
		}
		m.tokenRoutes.Store(c)
	}
	if !c.any {
		return nil
	}
	matched, err := domain.MatchPath(d.Path)
	if err != nil {
		return nil // Decide refuses it
	}
	if r := p.Match(d.Method, matched); r.Tokens == domain.TokensOpenAI && r.Tokened() && r.Cost > 0 {
		return r
	}
	return nil
}

// readTokenBody reads the body of r, a request on route (an OpenAI
// token route), at most [tokens.MaxBody] bytes, and what it asks for,
// into d's Units and Least; r's body is then the bytes read. It answers
// and returns false for a body it refuses: past 1 MiB (413), a field of
// the wrong type or range (400), a body that stalled (408) or failed.
func (m *meter) readTokenBody(w http.ResponseWriter, r *http.Request, route *domain.Route, d *engine.Described) (*tokenBody, bool) {
	body, err := tokens.Read(r.Body)
	switch {
	case errors.Is(err, tokens.ErrTooLarge):
		httpface.AbandonBody(w, r)
		httpface.WriteError(w, r, http.StatusRequestEntityTooLarge,
			"request body too large: a route metered in tokens takes at most 1 MiB")
		m.request(route, http.StatusRequestEntityTooLarge)
		return nil, false
	case err != nil && bodyTimedOut(r):
		writeBodyTimedOut(w, r)
		m.request(route, http.StatusRequestTimeout)
		return nil, false
	case err != nil:
		// The client went away, or broke its body off: nobody reads an
		// answer, and nothing was spent.
		httpface.AbandonBody(w, r)
		httpface.WriteError(w, r, http.StatusBadRequest, "request body could not be read")
		m.request(route, http.StatusBadRequest)
		return nil, false
	}
	setBody(r, body)
	q, err := tokens.Parse(tokens.APIOf(r.URL.Path), body)
	if bad := (*tokens.BadRequest)(nil); errors.As(err, &bad) {
		httpface.WriteError(w, r, http.StatusBadRequest, bad.Error())
		m.request(route, http.StatusBadRequest)
		return nil, false
	}
	d.Units, d.Least = q.Units(route.Reserve), q.Least()
	return &tokenBody{body: body, q: q}, true
}

// setBody makes body r's body, with its length.
func setBody(r *http.Request, body []byte) {
	r.Body = http.NoBody // an empty body sent as such, not chunked
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Header["Content-Length"] = []string{strconv.Itoa(len(body))}
}

// tokenTrip is an admitted request's exchange on a token route: where
// its answer reports tokens, and, once the upstream has answered, its
// metered body. The transport sets body and status before the proxy
// reads the body; the proxy reads them once the exchange is over.
type tokenTrip struct {
	src    tokens.Source
	strip  bool         // remove the usage-only events: usage was asked for the client
	body   *tokens.Body // nil while (or when) nothing answered
	status int
}

type tokenTripKey struct{}

// startTokenTrip prepares the request of res, admitted on a route
// whose answers report tokens, for its upstream: its answer is metered
// and settled; with OpenAI's usage and a reservation of enforced token
// limits, its body's caps are lowered to what the reservation leaves
// for the answer (and usage asked for on a stream). It returns the
// request to forward and its trip, nil on a route without a token
// source or a request not metered. A request that reserved nothing of
// an enforced token limit (admitted by the fail mode without the store,
// or on shadow token limits alone) is not capped, but a stream's usage
// is still asked for, so that a shadow limit counts what was used.
func startTokenTrip(r *http.Request, res engine.Result, tb *tokenBody) (*http.Request, *tokenTrip) {
	if !res.Metered || res.Route == nil {
		return r, nil
	}
	src, ok := tokens.ParseSource(res.Route.Tokens)
	if !ok {
		return r, nil
	}
	trip := &tokenTrip{src: src}
	if src.OpenAI && tb != nil && tb.q.JSON {
		q, each := tb.q, int64(0) // 0: no cap
		if res.Reserved > 0 {
			each = q.Allowance(res.Reserved)
		}
		setBody(r, tokens.Rewrite(tb.body, q, each))
		trip.strip = q.UsageAdded()
	}
	return r.WithContext(context.WithValue(r.Context(), tokenTripKey{}, trip)), trip
}

// tokenTripFrom returns the trip of a request on a token route, or nil.
func tokenTripFrom(ctx context.Context) *tokenTrip {
	t, _ := ctx.Value(tokenTripKey{}).(*tokenTrip)
	return t
}

// meterAnswer meters resp, the upstream's answer to req, when req is on
// a token route: its body is replaced by one that reads what it reports
// as the client receives it. Every answer the transport receives goes
// through it, the ones nobody waits for any more included.
func meterAnswer(req *http.Request, resp *http.Response) {
	t := tokenTripFrom(req.Context())
	if t == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		return // an upgraded connection is a tunnel, and its body its conn
	}
	t.status = resp.StatusCode
	t.body = tokens.Meter(resp, t.src, t.strip)
}

// used returns what the trip's request used, for [engine.Engine.Settle]:
// what its answer reported; else, for a 2xx, what it reserved (an answer
// that said nothing may have used all of it); else 0 (an error answer,
// or none: the reservation is given back). cut is whether the answer's
// body ended before its end.
func (t *tokenTrip) used() (used int64, cut bool) {
	if t.body == nil {
		return 0, false
	}
	res := t.body.Result()
	switch {
	case res.Seen:
		return res.Used, res.Cut
	case t.status >= 200 && t.status < 300:
		return engine.KeepReserved, res.Cut
	}
	return 0, res.Cut
}

// settle settles res's reservation with what its trip used, once its
// upstream exchange is over, on a context the client no longer cancels.
func (m *meter) settle(ctx context.Context, res engine.Result, t *tokenTrip) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	used, cut := t.used()
	if cut && m.log != nil {
		m.log.Debug("a metered answer ended before its end", "route", res.Route.Name, "status", t.status,
			"reserved", res.Reserved, "reservation_kept", used == engine.KeepReserved)
	}
	m.engine.Settle(ctx, res, used)
}
