// Package httpface holds what tollgate's HTTP faces (the reverse proxy
// and the check endpoint) share: how a request is described to the
// engine ([Describer]: its credentials and client address), the normal
// form of its path ([Normalize]), how a verdict becomes rate-limit
// headers and a 429 ([SetRateLimitHeaders], [WriteDenied]), and the
// access log.
package httpface

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// Header names the faces write. RateLimit and RateLimit-Policy follow
// draft-ietf-httpapi-ratelimit-headers-11; the X-RateLimit-* trio is what
// existing clients read.
const (
	HeaderRateLimit        = "RateLimit"
	HeaderRateLimitPolicy  = "RateLimit-Policy"
	HeaderXRateLimitLimit  = "X-RateLimit-Limit"
	HeaderXRateLimitRemain = "X-RateLimit-Remaining"
	HeaderXRateLimitReset  = "X-RateLimit-Reset"
	HeaderRetryAfter       = "Retry-After"
	// HeaderTenantID carries the resolved tenant upstream.
	HeaderTenantID = "X-Tenant-ID"

	// DeniedBody is the message of a denial; UnavailableBody of the
	// closed fail mode's 503.
	DeniedBody      = "rate limit exceeded"
	UnavailableBody = "rate limiter unavailable"
)

// GatewayHeaders are the headers the gateway owns on a response, in the
// spelling it writes them.
var GatewayHeaders = rateLimitHeaderKeys[:]

// GatewayHeaderCount is len(GatewayHeaders), as a constant.
const GatewayHeaderCount = len(rateLimitHeaderKeys)

// WriteDenied answers a denial: status (429, or what the check listener
// is told to deny with), the rate-limit headers already set, Retry-After
// in whole seconds (at least 1) until every enforced limit that denied
// would admit, and the body "rate limit exceeded" (docs/http.md).
func WriteDenied(w http.ResponseWriter, r *http.Request, status int, v domain.Verdict) {
	AbandonBody(w, r)
	w.Header().Set(HeaderRetryAfter, strconv.FormatInt(max(domain.CeilSeconds(v.RetryAfter()), 1), 10))
	WriteError(w, r, status, DeniedBody)
}

// UnauthorizedBody is the message of a request refused for naming no
// tenant (TOLLGATE_ANONYMOUS=reject).
const UnauthorizedBody = "unauthorized: a valid API key is required"

// WriteUnauthorized answers a request that names no tenant when
// unresolved traffic is refused: 401 with WWW-Authenticate: Bearer.
func WriteUnauthorized(w http.ResponseWriter, r *http.Request) {
	AbandonBody(w, r)
	w.Header().Set("WWW-Authenticate", "Bearer")
	WriteError(w, r, http.StatusUnauthorized, UnauthorizedBody)
}

// WriteUnavailable answers the closed fail mode: 503, Retry-After 1.
func WriteUnavailable(w http.ResponseWriter, r *http.Request) {
	AbandonBody(w, r)
	w.Header().Set(HeaderRetryAfter, "1")
	WriteError(w, r, http.StatusServiceUnavailable, UnavailableBody)
}

// AbandonBody prepares the answer to a request whose body the gateway
// will not read (a denial, a 503): when r has a body, the connection is
// closed after the answer ("Connection: close" on HTTP/1.x), and its read
// deadline is set to now, so that net/http, which otherwise drains up to
// 256 KiB of an unread body before writing the answer and again before
// closing, never waits for a body that may never arrive: a denied POST
// whose body stops short gets its 429 at once instead of holding its
// connection. Call it before writing the answer.
func AbandonBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
	// ErrNotSupported (a recorder, HTTP/2) is fine: there is no
	// connection to drain, or its stream is reset instead.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// SetRateLimitHeaders writes the five rate-limit headers of docs/http.md for
// verdict v of limits at now: RateLimit-Policy and RateLimit with one item
// per limit, X-RateLimit-* for the most constrained one. A concurrency
// limit's policy item is `"name";q=N;qu="concurrent-requests"`, and its
// RateLimit item gives the free slots (r) and t=0 while one is free, 1
// when none is. A token limit's policy item ends `;qu="tokens"`, and its
// RateLimit item gives what remains after the request's reservation. Times are
// rounded up to whole seconds, so a client that waits as told is never
// early. It runs on every metered request, so it writes the keys
// directly (Header.Set would canonicalize, and allocate, each time) and
// makes two allocations in all: the five values are formatted into one
// buffer on the stack and become substrings of one string, and one slice
// backs the five one-element value slices.
func SetRateLimitHeaders(h http.Header, limits []domain.Limit, v domain.Verdict, now time.Time) {
	var (
		stack [256]byte // a handful of limits fit
		ends  [len(rateLimitHeaderKeys)]int
	)
	b := stack[:0]
	for i, d := range v.Decisions { // RateLimit-Policy
		// A limit name is a-z 0-9 -: a valid sf-string as it is.
		if limits[i].Concurrency {
			// A quota of requests in flight, not per window (the
			// draft's quota unit "concurrent-requests").
			b = append(appendItem(b, i, limits[i].Name, ";q=", d.Limit), `;qu="concurrent-requests"`...)
			continue
		}
		w := limits[i].Rule.Window
		if d.Window > 0 {
			w = d.Window // a calendar period's real length
		}
		b = appendItem(appendItem(b, i, limits[i].Name, ";q=", d.Limit), -1, "", ";w=", max(domain.CeilSeconds(w), 1))
		if limits[i].Reserve {
			b = append(b, `;qu="tokens"`...) // a quota of the units answers report
		}
	}
	ends[0] = len(b)
	for i, d := range v.Decisions { // RateLimit (a concurrency limit: r the free slots, t 0 while one is free, else 1)
		b = appendItem(appendItem(b, i, limits[i].Name, ";r=", max(d.Remaining, 0)), -1, "", ";t=", domain.CeilSeconds(d.ResetAfter))
	}
	ends[1] = len(b)
	tight := v.Tightest()
	d := v.Decisions[tight]
	resetAt := now.Add(d.ResetAfter)
	resetUnix := resetAt.Unix()
	switch {
	case limits[tight].Calendar != nil:
		// A period ends on a whole second (midnight in a zone, whose
		// offset is whole seconds): the nearest one is that boundary
		// while this clock is within half a second of the store's,
		// where rounding up would name the second after it.
		resetUnix = resetAt.Add(500 * time.Millisecond).Unix()
	case resetAt.Nanosecond() > 0:
		resetUnix++
	}
	for i, n := range [...]int64{d.Limit, max(d.Remaining, 0), resetUnix} {
		b = strconv.AppendInt(b, n, 10)
		ends[2+i] = len(b)
	}
	all := string(b)
	vals := make([]string, len(rateLimitHeaderKeys))
	from := 0
	for i, k := range rateLimitHeaderKeys {
		vals[i] = all[from:ends[i]]
		h[k] = vals[i : i+1 : i+1]
		from = ends[i]
	}
}

// appendItem appends the i-th item of a RateLimit or RateLimit-Policy
// list to b, `"name";<k><v>` after ", " unless it is the first; with i
// below 0, only another parameter of the item before, `<k><v>`.
func appendItem(b []byte, i int, name, k string, v int64) []byte {
	if i >= 0 {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"')
	}
	b = append(b, k...)
	return strconv.AppendInt(b, v, 10)
}

// rateLimitHeaderKeys are the keys SetRateLimitHeaders writes, in the
// order of its values, spelled as the draft and existing clients spell
// them (RateLimit, X-RateLimit-Limit), not in http.Header's canonical
// form (Ratelimit, X-Ratelimit-Limit): net/http writes a map key to the
// wire as it is, and some clients compare names case-sensitively.
// Header.Get does not find these keys; index the map with them.
var rateLimitHeaderKeys = [...]string{
	HeaderRateLimitPolicy,
	HeaderRateLimit,
	HeaderXRateLimitLimit,
	HeaderXRateLimitRemain,
	HeaderXRateLimitReset,
}

// WriteError answers status with msg: as {"error": msg} when the client
// accepts application/json, as plain text otherwise. It never echoes an
// internal error to the client.
func WriteError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	if acceptsJSON(r) {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":` + strconv.Quote(msg) + "}\n"))
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(msg + "\n"))
}

func acceptsJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for item := range strings.SplitSeq(v, ",") {
			mediaType, params, _ := strings.Cut(item, ";")
			if strings.EqualFold(strings.TrimSpace(mediaType), "application/json") && !refused(params) {
				return true
			}
		}
	}
	return false
}

// refused reports whether the parameters of an Accept item give it q=0:
// not acceptable (RFC 9110, 12.4.2).
func refused(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		name, value, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(name), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return err == nil && q == 0
		}
	}
	return false
}

// LooksLike reports whether name is header (a canonical-looking name
// such as X-Tenant-ID) in any case, with '_' for any '-'. Servers that
// map header names to variables (CGI, WSGI, Rack, nginx with
// underscores_in_headers) read X_Tenant_ID as X-Tenant-ID, so a client
// could smuggle its own tenant (or key) past a plain Header.Set. It does
// not allocate.
func LooksLike(name, header string) bool {
	if len(name) != len(header) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c, want := name[i], header[i]
		switch {
		case c == want, want == '-' && c == '_':
		case 'A' <= c && c <= 'Z' && c+'a'-'A' == want, 'a' <= c && c <= 'z' && c-('a'-'A') == want:
		default:
			return false
		}
	}
	return true
}
