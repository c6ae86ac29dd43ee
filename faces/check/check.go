// Package check is tollgate's decision endpoint (docs/edge.md): the face
// an edge proxy asks before it forwards a request (nginx auth_request,
// Caddy forward_auth, Traefik ForwardAuth). It answers every request,
// whatever its method and path, as a decision about the request it
// describes, and never proxies. It translates HTTP into the engine's
// described request and the verdict back into HTTP; it knows no store.
package check

import (
	"errors"
	"log/slog"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
)

// Headers that carry the described request's method and URI (path and
// query). Caddy and Traefik send the X-Forwarded pair; nginx's
// auth_request sends what its configuration sets, by convention the
// X-Original pair. An X-Forwarded header wins over its X-Original
// namesake.
const (
	HeaderForwardedMethod = "X-Forwarded-Method"
	HeaderOriginalMethod  = "X-Original-Method"
	HeaderForwardedURI    = "X-Forwarded-Uri"
	HeaderOriginalURI     = "X-Original-URI"
)

// The header names in http.Header's canonical form, so that reading them
// does not canonicalize (and allocate) on every check.
var (
	forwardedMethod = textproto.CanonicalMIMEHeaderKey(HeaderForwardedMethod)
	originalMethod  = textproto.CanonicalMIMEHeaderKey(HeaderOriginalMethod)
	forwardedURI    = textproto.CanonicalMIMEHeaderKey(HeaderForwardedURI)
	originalURI     = textproto.CanonicalMIMEHeaderKey(HeaderOriginalURI)
	tenantHeader    = textproto.CanonicalMIMEHeaderKey(httpface.HeaderTenantID)
)

// Options configure [New].
type Options struct {
	// Engine decides. Required.
	Engine *engine.Engine
	// Describer reads the described request's credentials and client
	// address from the check request's headers, which are the original
	// request's (the edge passes them on).
	Describer httpface.Describer
	// DenyStatus is the status of a denial: 429 (zero means 429), or 403
	// for nginx's auth_request, which takes any other status but 2xx and
	// 401 for an error (TOLLGATE_CHECK_DENY_STATUS).
	DenyStatus int
	// AccessLog writes one line per check to Log, with the described
	// method and path.
	AccessLog bool
	// Log gets the access lines and one line per handler panic. Nil: none.
	Log *slog.Logger
	// Metrics records answers (by route and status). May be nil.
	Metrics httpface.Metrics
	// Now returns the time of the X-RateLimit-Reset header. Nil:
	// time.Now.
	Now func() time.Time
}

// New returns the check listener's handler. For every request, of any
// method and path, it decides on the request described by:
//
//   - the method: X-Forwarded-Method, else X-Original-Method, else the
//     check request's own; it must be an RFC 9110 token;
//   - the URI: X-Forwarded-Uri, else X-Original-URI, else the check
//     request's own: a path with an optional query ("/v1/x?a=1") or an
//     absolute URI ("https://api.example.com/v1/x"). The query is
//     ignored; the path is normalised as the proxy normalises its own
//     ([domain.NormalizePath]) and matched as the proxy matches it;
//   - the credentials and client address of the check request's other
//     headers, read by opts.Describer.
//
// It answers:
//
//   - allowed, shadow denied, or on a route of cost 0: 200, an empty
//     body, the rate-limit headers (when limits decided) and
//     X-Tenant-ID: the tenant, for the edge to copy upstream;
//   - denied: opts.DenyStatus with the rate-limit headers, Retry-After
//     and the denial's body ([httpface.WriteDenied]);
//   - the store failing: the fail mode (open: 200 without rate-limit
//     headers; closed: 503 with Retry-After: 1; local: the local
//     decision, as above);
//   - a method that is not a token, a URI that does not parse, a path
//     with a dot segment (the edge forwards it unresolved) or one that
//     climbs above "/": 400, with nothing spent.
//
// The check request's body, if any, is never read nor waited for: its
// connection is closed after the answer instead.
func New(opts Options) http.Handler {
	if opts.Engine == nil {
		panic("check: New needs an engine")
	}
	if opts.DenyStatus == 0 {
		opts.DenyStatus = http.StatusTooManyRequests
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var h http.Handler = &checker{
		engine:     opts.Engine,
		describe:   opts.Describer,
		denyStatus: opts.DenyStatus,
		metrics:    opts.Metrics,
		now:        opts.Now,
	}
	if opts.AccessLog {
		h = httpface.AccessLog(opts.Log.Handler(), nil, opts.Describer)(h)
	}
	return httpface.Recoverer(opts.Log)(h)
}

// checker is the handler [New] builds.
type checker struct {
	engine     *engine.Engine
	describe   httpface.Describer
	denyStatus int
	metrics    httpface.Metrics // nil: none
	now        func() time.Time // nil: time.Now
}

func (c *checker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httpface.AbandonBody(w, r)
	method := headerOr(r.Header, forwardedMethod, originalMethod, r.Method)
	uri := headerOr(r.Header, forwardedURI, originalURI, r.RequestURI)
	if uri == "" { // a request built in process, not read from a connection
		uri = r.URL.RequestURI()
	}
	path, err := describedPath(uri)
	httpface.SetLogRequest(r.Context(), method, logPath(path, uri))
	switch {
	case !domain.ValidToken(method):
		c.badRequest(w, r, "invalid method")
		return
	case err != nil:
		httpface.WriteInvalidPath(w, r, c.metrics)
		return
	}
	d := c.describe.Describe(r, method, path)
	_, query, _ := strings.Cut(uri, "?")
	d.Overrides = httpface.MethodOverrides(r.Header, query)
	// A check never learns when the request it describes ends: it could
	// never give a concurrency slot back, nor settle what an answer
	// used (the application reports that on the admin listener), so
	// token limits are checked, not reserved from.
	d.SkipConcurrency, d.CheckTokens = true, true
	res, err := c.engine.Decide(r.Context(), d)
	switch {
	case errors.Is(err, domain.ErrInvalidPath):
		httpface.WriteInvalidPath(w, r, c.metrics)
		return
	case errors.Is(err, domain.ErrAmbiguousMethod):
		httpface.WriteAmbiguousMethod(w, r, c.metrics)
		return
	case err != nil:
		// Only a caller gone mid-decision gets here (the fail mode
		// answers for the store): nobody reads an answer.
		return
	}
	status, admitted := httpface.Answer(w, r, res, c.denyStatus, c.now)
	if admitted {
		w.Header()[tenantHeader] = []string{string(res.Tenant)}
		w.WriteHeader(http.StatusOK)
		status = http.StatusOK
	}
	if c.metrics != nil {
		c.metrics.Request(res.Route, status)
	}
}

// badRequest answers a described request that cannot be decided: 400,
// counted on the route "default".
func (c *checker) badRequest(w http.ResponseWriter, r *http.Request, msg string) {
	httpface.WriteError(w, r, http.StatusBadRequest, msg)
	if c.metrics != nil {
		c.metrics.Unrouted(http.StatusBadRequest)
	}
}

// headerOr returns the first value of h's first non-empty header among
// the canonical keys a and b, else or.
func headerOr(h http.Header, a, b, or string) string {
	if v := h[a]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	if v := h[b]; len(v) > 0 && v[0] != "" {
		return v[0]
	}
	return or
}

// errUnparsableURI is a described URI that is neither a path nor an
// absolute http(s) URI.
var errUnparsableURI = errors.New("check: unparsable described URI")

// describedPath returns the normal form ([domain.NormalizePath]) of the
// path of uri, a request target as an edge forwards it: origin form
// ("/a/b?q=1") or absolute form ("https://host/a/b?q=1"), as the Go
// server reads the proxy's own request line. The query is dropped. A
// byte that no request line holds (a control character, a space, a '#')
// makes uri unparsable, as do a dot segment in any spelling
// ([domain.HasDotSegment]: the upstream gets it unresolved) and any
// other form ("*", "a/b"); errors wrap
// [domain.ErrInvalidPath] for a path that does not normalise, and are
// errUnparsableURI otherwise.
func describedPath(uri string) (string, error) {
	for i := 0; i < len(uri); i++ {
		// A '#' is no request target's: the edge forwards it raw, and
		// an upstream that ends the path there would be metered on
		// what follows it ("/v1/export#/../../status").
		if c := uri[i]; c <= ' ' || c == 0x7f || c == '#' {
			return "", errUnparsableURI
		}
	}
	if !strings.HasPrefix(uri, "/") {
		if !hasHTTPScheme(uri) {
			return "", errUnparsableURI
		}
		u, err := url.ParseRequestURI(uri)
		if err != nil || u.Host == "" {
			return "", errUnparsableURI
		}
		uri = u.EscapedPath()
	} else if i := strings.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	// The upstream gets the URI as it came, unresolved: a ".." (or
	// "..;") that NormalizePath resolves is a name to Express and other
	// routers that take the path as it came ("/v1/export/../../status"
	// is served under /v1/export there, not as /status), and a path that
	// starts with "//" (or "/\") is an authority to WHATWG URL parsers
	// (Node's new URL) and urlsplit: "//free/v1/export" is /v1/export
	// there, not /free/v1/export.
	if domain.HasDotSegment(uri) || strings.HasPrefix(uri, "//") || strings.HasPrefix(uri, "/\\") {
		return "", errUnparsableURI
	}
	return domain.NormalizePath(uri)
}

// hasHTTPScheme reports whether uri starts with http:// or https://, in
// any case.
func hasHTTPScheme(uri string) bool {
	scheme, _, ok := strings.Cut(uri, "://")
	return ok && (strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https"))
}

// logPath is what the access log shows as the described path: its
// normal form, or for one that did not normalise the URI without its
// query (which may hold a credential).
func logPath(path, uri string) string {
	if path != "" {
		return path
	}
	if i := strings.IndexByte(uri, '?'); i >= 0 {
		return uri[:i]
	}
	return uri
}
