package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/ports"
)

// UsageTimeout bounds one usage call's store work when
// [UsageOptions].Timeout is zero.
const UsageTimeout = 5 * time.Second

// UsageOptions configure [WithUsage].
type UsageOptions struct {
	// Engine answers: [engine.Engine.Usage] and [engine.Engine.Reset].
	// Required.
	Engine *engine.Engine
	// Token is the bearer token every call must present
	// (TOLLGATE_ADMIN_TOKEN). Required: without one there is no API.
	Token string
	// Timeout bounds each call's store work. Zero means UsageTimeout.
	Timeout time.Duration
	// Log gets one line per reset (the audit trail), and at most one a
	// second about calls refused for their token and one a second about
	// calls the store failed. May be nil.
	Log *slog.Logger
	// Count, if not nil, counts each call by action: usage, reset, spend
	// or unauthorized (tollgate_admin_actions_total).
	Count func(action string)
	// Idempotency remembers spends made with an Idempotency-Key. Nil:
	// such a spend is refused (400).
	Idempotency ports.Idempotency
}

// WithUsage returns admin with the usage API under /v1/tenants/:
//
//	GET  /v1/tenants/{id}/usage            every limit that applies to the tenant, as it stands
//	POST /v1/tenants/{id}/reset[?limit=n]  its budgets (or limit n's) start afresh; the usage after
//	POST /v1/tenants/{id}/spend            charge a limit what an application reports; the usage after
//
// Every call needs Authorization: Bearer <token>, compared in constant
// time, or gets 401 with WWW-Authenticate: Bearer, before anything about
// the tenant is looked at. Answers are JSON: the usage ([UsageBody]), or
// {"error": "..."} with 400 for an invalid id or limit, 404 for a tenant
// a tenants file does not hold, 503 (Retry-After: 1) when the store
// fails. Reading never spends, never creates a key and never changes a
// TTL.
func WithUsage(admin http.Handler, opts UsageOptions) http.Handler {
	if opts.Engine == nil || opts.Token == "" {
		panic("admin: WithUsage needs an engine and a token")
	}
	opts.Timeout, opts.Log, opts.Count = apiDefaults(opts.Timeout, opts.Log, opts.Count)
	u := &usageAPI{opts: opts}
	u.failed.Interval = time.Second
	auth := newBearer(opts.Token, opts.Log, opts.Count)
	r := chi.NewRouter()
	r.Route("/v1", func(r chi.Router) {
		r.Use(auth.authorize)
		r.Get("/tenants/{id}/usage", u.usage)
		r.Post("/tenants/{id}/reset", u.reset)
		r.Post("/tenants/{id}/spend", u.spend)
		r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusNotFound, errorBody{"no such path: see GET /v1/tenants/{id}/usage, POST /v1/tenants/{id}/reset and POST /v1/tenants/{id}/spend"})
		})
		r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
			allow := http.MethodGet
			if strings.HasSuffix(r.URL.Path, "/reset") || strings.HasSuffix(r.URL.Path, "/spend") {
				allow = http.MethodPost
			}
			w.Header().Set("Allow", allow)
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{"method not allowed: GET /v1/tenants/{id}/usage, POST /v1/tenants/{id}/reset, POST /v1/tenants/{id}/spend"})
		})
	})
	r.NotFound(admin.ServeHTTP)
	r.MethodNotAllowed(admin.ServeHTTP)
	return r
}

// usageAPI serves the usage API.
type usageAPI struct {
	opts   UsageOptions
	failed throttle.Log // calls the store failed
}

// usage answers GET /v1/tenants/{id}/usage.
func (u *usageAPI) usage(w http.ResponseWriter, r *http.Request) {
	u.opts.Count("usage")
	ctx, cancel := context.WithTimeout(r.Context(), u.opts.Timeout)
	defer cancel()
	id := tenantParam(r)
	us, err := u.opts.Engine.Usage(ctx, id)
	u.answer(w, id, "", us, err)
}

// reset answers POST /v1/tenants/{id}/reset[?limit=name], a call
// without a body (one with a body is refused, resetting nothing). Every call
// that passed the token check writes one audit line: "usage API: reset"
// when it was done, "usage API: reset not done" with the status when it
// was refused, "usage API: reset failed: …" when the store did not
// answer (a stalled Redis may still run it); each counted as a reset:
// the calls, whatever they answered.
func (u *usageAPI) reset(w http.ResponseWriter, r *http.Request) {
	u.opts.Count("reset")
	id := tenantParam(r)
	what, code, done := "all", http.StatusBadRequest, false
	query, err := url.ParseQuery(r.URL.RawQuery)
	vs, named := query["limit"]
	if named {
		what = strings.Join(vs, ",")
	}
	switch other := otherParam(query, "limit"); {
	case err != nil:
		writeJSON(w, code, errorBody{"query: not a valid URL query; its one parameter is limit, such as ?limit=per-minute"})
	case other != "":
		// A misspelt ?Limit= must not reset every limit.
		writeJSON(w, code, errorBody{fmt.Sprintf("query: unknown parameter %s; the one parameter is limit, such as ?limit=per-minute", quoted(other))})
	case r.ContentLength != 0:
		// Nor may a body that names a limit (a form's limit=monthly, as
		// curl -d sends it): the limit is in the query.
		writeJSON(w, code, errorBody{"body: a reset takes none; name a limit in the query, such as ?limit=per-minute"})
	case !named:
		code, done = u.resetAs(w, r, id, "")
	case len(vs) == 1 && domain.ValidName(vs[0]):
		code, done = u.resetAs(w, r, id, vs[0])
	default:
		writeJSON(w, code, errorBody{"limit: want one limit name of the policy, such as ?limit=per-minute"})
	}
	if done {
		u.opts.Log.Info("usage API: reset", "tenant", string(id), "limit", what, "client", peer(r), "status", code)
		return
	}
	msg := "usage API: reset not done"
	if code == http.StatusServiceUnavailable {
		// A stalled Redis that received the DEL may still run it.
		msg = "usage API: reset failed: the store did not answer (it may still make it)"
	}
	attrs := []any{"tenant", clipped(string(id))}
	if named || code == http.StatusServiceUnavailable {
		// A refused call that named no limit reset nothing: "all" would
		// say it was asked to reset every limit.
		attrs = append(attrs, "limit", clipped(what))
	}
	u.opts.Log.Warn(msg, append(attrs, "client", peer(r), "status", code)...)
}

// otherParam is a parameter of query other than want, or "".
func otherParam(query url.Values, want string) string {
	for k := range query {
		if k != want {
			return k
		}
	}
	return ""
}

// tenantParam is the tenant id in r's path, decoded once: chi matches
// the escaped path when there is one (RawPath), so %61cme is acme and
// %2F a slash (then an invalid id), and %2561cme is %61cme (invalid).
// An undecodable one is returned as it is, and is invalid.
func tenantParam(r *http.Request) domain.TenantID {
	raw := chi.URLParam(r, "id")
	if r.URL.RawPath == "" {
		return domain.TenantID(raw) // chi matched the decoded path: decoded already
	}
	if id, err := url.PathUnescape(raw); err == nil {
		return domain.TenantID(id)
	}
	return domain.TenantID(raw)
}

// resetAs resets tenant id's limit (every one: "") and answers its usage
// (503 when the reset was made but the usage after it could not be read).
// It returns the status it answered and whether the reset was made.
func (u *usageAPI) resetAs(w http.ResponseWriter, r *http.Request, id domain.TenantID, limit string) (code int, done bool) {
	ctx, cancel := context.WithTimeout(r.Context(), u.opts.Timeout)
	defer cancel()
	us, err := u.opts.Engine.Reset(ctx, id, limit)
	code = u.answer(w, id, limit, us, err)
	return code, code == http.StatusOK || errors.Is(err, engine.ErrReadAfterReset)
}

// clipped is s cut at 80 bytes, for a log line: a refused call's id or
// limit is the client's, of any length.
func clipped(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// peer is the caller's address, for the log: the connection's, never a
// header's (the admin listener trusts no proxy).
func peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
