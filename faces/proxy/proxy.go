package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/throttle"
)

// UpstreamOptions are the optional settings of [NewUpstream].
type UpstreamOptions struct {
	// Timeout bounds the wait for the upstream's response headers; past
	// it, the client gets 504. Zero means no limit.
	Timeout time.Duration
	// DrainTimeout bounds an exchange that holds concurrency slots once
	// nobody waits for its answer (the client gone, or answered 504):
	// the upstream has this long to end it, then its connection is
	// closed and the slots come back. Zero means [DefaultDrainTimeout].
	DrainTimeout time.Duration
	// Credentials, if set, is the engine whose tenants' API keys are the
	// gateway's own: with a tenants file they never go upstream (see
	// [NewUpstream]).
	Credentials *engine.Engine
	// Trusted are the proxies whose X-Forwarded-For the upstream sees
	// extended rather than replaced (TOLLGATE_TRUSTED_PROXIES).
	Trusted domain.TrustedProxies
	// Log receives one line per failed upstream request. If nil,
	// slog.Default() is used.
	Log *slog.Logger
	// Transport sends the requests upstream. If nil, NewUpstream makes
	// one for its single upstream; tests and benchmarks pass their own.
	Transport http.RoundTripper
}

// NewUpstream returns a reverse proxy to target, for the requests the
// engine admitted. It keeps method, path, query, body and
// headers, with these exceptions:
//
//   - The path is joined to target's path, which acts as a prefix, and the
//     queries of both are merged: with target http://svc/api, GET
//     /v1/x?a=1 goes to http://svc/api/v1/x?a=1.
//   - Host is target's host, as the upstream's virtual hosting, TLS and
//     routing expect; the client's Host goes in X-Forwarded-Host.
//   - X-Forwarded-For/-Proto/-Host describe the client's connection to the
//     gateway. From a peer that is not a trusted proxy, values the client
//     sent are dropped, not appended to: the gateway is the edge, and a
//     client could claim any address. From a trusted proxy the received
//     X-Forwarded-For is kept with the peer appended, and its
//     X-Forwarded-Proto and -Host are kept. Their look-alikes
//     (X_Forwarded_For, …) are removed from anyone.
//   - X-Real-IP is the client's address (docs/edge.md); True-Client-IP,
//     which only a CDN may set, is removed, and so are their look-alikes.
//   - X-Original-URL and X-Rewrite-URL (and look-alikes) are removed: IIS's
//     URL Rewrite, Zend and old Symfony serve the path they name instead of
//     the one the gateway metered.
//   - X-Tenant-ID is the tenant the engine resolved. Any header that a
//     server could take for it (any case, '_' for '-') is removed first, so
//     no client can pick its tenant for the upstream.
//   - Hop-by-hop headers (Connection and the headers it names, Keep-Alive,
//     Proxy-Connection, Trailer, Transfer-Encoding, TE but for "TE:
//     trailers", which tells the upstream that trailers are relayed, and
//     Upgrade unless the client switches protocols) are dropped in both
//     directions, as RFC 9110 section 7.6.1 requires.
//   - With opts.Credentials using API keys (a tenants file), the gateway's
//     key is removed: X-API-Key and its look-alikes (X_API_KEY, x-api_key:
//     servers that map header names to variables read them as X-API-Key),
//     and a Bearer Authorization that is a tenant's key or that stood
//     alone as the presented key. An Authorization beside an X-API-Key
//     that is not a gateway key is the upstream's own credential (a user
//     token) and is kept.
//
// Responses that stream are flushed to the client at each write of the
// upstream: server-sent events (text/event-stream) and every response
// without a Content-Length (chunked: long polls, streamed exports).
// Responses of a known length go through the connection's buffer, without
// a flush (and a system call) per write. Upstream connections are kept
// alive and reused, up to 1024 idle ones. When the upstream cannot be
// reached the client gets 502, and 504 past opts.Timeout, as JSON when it
// accepts JSON; either way a line is logged, without headers, at most
// one a second (an upstream down fails every request: its
// errors_since_last_line says how many the line stands for).
//
// A request that holds concurrency slots holds them until the upstream's
// exchange is over, not only until its client goes or is answered 504:
// its round trip is not aborted then, and the answer is read and
// discarded, for at most opts.DrainTimeout more (see [holding]).
func NewUpstream(target *url.URL, opts UpstreamOptions) http.Handler {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	errLines := &throttle.Log{Interval: time.Second}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	// The upstream is the configured URL, never HTTP_PROXY's: a gateway
	// that honoured the environment would send tenants' traffic elsewhere.
	transport.Proxy = nil
	transport.ResponseHeaderTimeout = opts.Timeout
	// One upstream: as many idle connections as concurrent requests need,
	// so that a burst's connections are reused afterwards, not closed
	// (DefaultTransport keeps 100 in all) and dialled again: with 2 per
	// host, 64 clients held 244 upstream connections and left dozens in
	// TIME-WAIT.
	transport.MaxIdleConns = maxIdleUpstreamConns
	transport.MaxIdleConnsPerHost = maxIdleUpstreamConns
	// The client's Accept-Encoding goes upstream as sent, and the body
	// comes back as the upstream encoded it: a Transport that asked for
	// gzip on its own would decompress every response the client could
	// have taken compressed.
	transport.DisableCompression = true
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	held := transport.Clone()
	held.ResponseHeaderTimeout = 0 // holding times the headers without aborting
	rt := &holding{plain: transport, held: held, timeout: opts.Timeout, drain: opts.DrainTimeout}
	if opts.Transport != nil {
		rt.plain, rt.held = opts.Transport, opts.Transport
	}
	if rt.drain <= 0 {
		rt.drain = DefaultDrainTimeout
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// ReverseProxy drops a query it cannot parse (/a?b=%zz) from
			// pr.Out before Rewrite; the gateway keeps the query as the
			// client sent it. The gateway never interprets the query, so
			// forwarding it raw gives the upstream exactly what the client
			// meant, not a reading of it.
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.SetURL(target)
			endAtLength(pr.Out)
			h := pr.Out.Header
			keys := opts.Credentials != nil && opts.Credentials.UsesAPIKeys()
			// From what the client sent: ReverseProxy has already removed
			// from pr.Out the headers its Connection names.
			presented := pr.In.Header.Get(apiKeyHeader) != ""
			for name := range h {
				if httpface.LooksLike(name, httpface.HeaderTenantID) || httpface.LooksLike(name, "X-Real-IP") || httpface.LooksLike(name, "True-Client-IP") ||
					httpface.LooksLike(name, "X-Forwarded-For") || httpface.LooksLike(name, "X-Forwarded-Host") || httpface.LooksLike(name, "X-Forwarded-Proto") ||
					httpface.LooksLike(name, "X-Original-URL") || httpface.LooksLike(name, "X-Rewrite-URL") ||
					(keys && httpface.LooksLike(name, httpface.HeaderAPIKey)) {
					delete(h, name)
				}
			}
			if keys {
				dropKeys(h, presented, opts.Credentials)
			}
			setForwarded(h, pr.In, opts.Trusted)
			if t := tokenTripFrom(pr.In.Context()); t != nil && t.src.OpenAI {
				// The usage is read from the answer as it goes by: it
				// must come uncompressed.
				h["Accept-Encoding"] = []string{"identity"}
			}
		},
		Transport: rt,
		ModifyResponse: func(resp *http.Response) error {
			if bodyTimedOut(resp.Request) {
				// The upstream answered a body cut short: that answer is
				// to a request the client never finished sending.
				resp.Body.Close()
				return errBodyIdle
			}
			return dropGatewayHeaders(resp)
		},
		// 0: ReverseProxy flushes every write of text/event-stream and
		// of responses without a Content-Length, and buffers the rest.
		FlushInterval: 0,
		BufferPool:    &copyBuffers,
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if t := tokenTripFrom(r.Context()); t != nil && t.src.OpenAI {
				w = &openAIErrors{ResponseWriter: w}
			}
			held := asHeldTimeout(err)
			if held != nil {
				// Answered now; the slots are held until the exchange ends.
				defer held.wait()
			}
			if bodyTimedOut(r) {
				// The client's body stalled (see bodyIdleTimeout), not the
				// upstream; the read error also canceled r's context.
				log.Info("request body idle timeout", "method", r.Method, "path", r.URL.Path)
				writeBodyTimedOut(w, r)
				return
			}
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				// The client went away; nobody reads the answer.
				log.Debug("client canceled proxied request", "method", r.Method, "path", r.URL.Path)
				return
			}
			status, msg := http.StatusBadGateway, "upstream unavailable"
			if isTimeout(err) {
				status, msg = http.StatusGatewayTimeout, "upstream timed out"
			}
			errLines.Do(func(n int64) {
				log.Warn("proxy error", "status", status, "method", r.Method, "path", r.URL.Path, "err", err,
					"errors_since_last_line", n)
			})
			// What is left of the body will not be read: the answer must
			// not wait for it (an upstream refused before any was sent).
			httpface.AbandonBody(w, r)
			if held != nil {
				writeHeld(w, r, func(w http.ResponseWriter) { httpface.WriteError(w, r, status, msg) })
				return
			}
			httpface.WriteError(w, r, status, msg)
		},
	}
}

// endAtLength makes the body of out, of a known length, end at that
// length without reading the client's body again. Having sent the
// declared length, http.Transport reads once more to check that no more
// follows; once the upstream's answer has begun, the server has closed
// the client's body, that read fails, and the transport drops the
// upstream connection and the answer on its way (golang/go#40747).
func endAtLength(out *http.Request) {
	if out.ContentLength > 0 && out.Body != nil && out.Body != http.NoBody {
		out.Body = &lengthBody{Reader: io.LimitReader(out.Body, out.ContentLength), Closer: out.Body}
	}
}

// lengthBody is a request body read through a limit.
type lengthBody struct {
	io.Reader
	io.Closer
}

// dropKeys removes from h every Authorization value whose bearer token
// is a tenant's key, and the first one's when no X-API-Key was presented
// (the key the gateway read): the key belongs to the gateway, on
// whichever line it came. Other values (Basic, another service's token)
// are kept.
func dropKeys(h http.Header, presented bool, creds *engine.Engine) {
	vs := h[httpface.HeaderAuthorization]
	kept := vs[:0:0]
	for i, v := range vs {
		if token := httpface.BearerTokenOf(v); token != "" && ((!presented && i == 0) || creds.KnownKey(token)) {
			continue
		}
		kept = append(kept, v)
	}
	if len(kept) == len(vs) {
		return
	}
	if len(kept) == 0 {
		delete(h, httpface.HeaderAuthorization)
		return
	}
	h[httpface.HeaderAuthorization] = kept
}

// setForwarded sets on h, the outbound request's header, what
// ProxyRequest.SetXForwarded sets (X-Forwarded-For: the client's address;
// X-Forwarded-Host: the Host it asked for; X-Forwarded-Proto: http or
// https), X-Real-IP: the client address the proxy read, and X-Tenant-ID:
// the tenant the engine resolved for in. From a trusted proxy (trusted),
// the received X-Forwarded-For is kept with the peer appended, and the
// received X-Forwarded-Host and -Proto are kept. The values share one
// backing array, one allocation where Header.Set makes one per header.
// ReverseProxy has already removed whatever the client sent under the
// X-Forwarded-* names (Rewrite mode), and the caller any look-alike of
// those, of X-Tenant-ID or of X-Real-IP.
func setForwarded(h http.Header, in *http.Request, trusted domain.TrustedProxies) {
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	host := in.Host
	vals := []string{"", host, proto, string(TenantFrom(in.Context())), ""}
	peer, _, err := net.SplitHostPort(in.RemoteAddr)
	if err == nil {
		vals[0] = peer
		if fromTrusted := trusted.Contains(httpface.PeerAddr(in)); fromTrusted {
			if xff := in.Header["X-Forwarded-For"]; len(xff) > 0 {
				vals[0] = strings.Join(xff, ", ") + ", " + peer
			}
			if v := in.Header.Get("X-Forwarded-Host"); v != "" {
				vals[1] = v
			}
			if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
				vals[2] = v
			}
		}
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	h["X-Forwarded-Host"] = vals[1:2:2]
	h["X-Forwarded-Proto"] = vals[2:3:3]
	h[canonicalTenantHeader] = vals[3:4:4]
	if c := clientFrom(in.Context()); c.IsValid() {
		vals[4] = c.String()
		h["X-Real-Ip"] = vals[4:5:5]
	}
}

// apiKeyHeader is X-API-Key in canonical form.
var apiKeyHeader = textproto.CanonicalMIMEHeaderKey(httpface.HeaderAPIKey)

// maxIdleUpstreamConns bounds the idle connections kept to the upstream.
const maxIdleUpstreamConns = 1024

// canonicalTenantHeader is HeaderTenantID as http.Header keys it, so that
// the proxy sets it without canonicalizing (and allocating) per request.
var canonicalTenantHeader = textproto.CanonicalMIMEHeaderKey(httpface.HeaderTenantID)

// copyBuffers are the proxy's body-copy buffers: without a pool,
// ReverseProxy allocates 32 KiB per response, most of the garbage a
// proxied request makes.
var copyBuffers bufferPool

// bufferPool is an [httputil.BufferPool] of 32 KiB buffers. sync.Pool
// holds pointers (a slice put in an interface would allocate its header
// at every Put), so the pointers themselves are pooled too, in holders:
// in the steady state Get and Put allocate nothing.
type bufferPool struct {
	bufs    sync.Pool // *[]byte holding a buffer
	holders sync.Pool // *[]byte holding nil
}

const copyBufferSize = 32 << 10

// Get returns a buffer of copyBufferSize bytes.
func (p *bufferPool) Get() []byte {
	h, ok := p.bufs.Get().(*[]byte)
	if !ok {
		return make([]byte, copyBufferSize)
	}
	buf := *h
	*h = nil
	p.holders.Put(h)
	return buf
}

// Put returns buf, from Get, to the pool.
func (p *bufferPool) Put(buf []byte) {
	h, ok := p.holders.Get().(*[]byte)
	if !ok {
		h = new([]byte)
	}
	*h = buf
	p.bufs.Put(h)
}

// isTimeout reports whether err is the upstream taking too long to answer
// (504), as opposed to the upstream not being reachable at all (502): a
// dial that timed out is the latter.
func isTimeout(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// dropGatewayHeaders removes the upstream's values of the headers the
// gateway owns (httpface.GatewayHeaders), so a client never sees two, in
// any spelling: the gateway writes RateLimit and RateLimit-Policy with
// the draft's case, so a canonical Ratelimit from the upstream would
// otherwise travel beside them as a second field. Its announced
// trailers go too; what arrives after the body the meter drops
// (dropTrailerLookalikes).
func dropGatewayHeaders(resp *http.Response) error {
	dropLookalikes(resp.Header)
	dropLookalikes(resp.Trailer)
	return nil
}

// dropLookalikes deletes from h every one of the gateway's headers, in
// any case or with _ for -.
func dropLookalikes(h http.Header) {
	for name := range h {
		if isGatewayHeader(name) {
			delete(h, name)
		}
	}
}

// isGatewayHeader reports whether name is one of the gateway's headers,
// in any case, or a look-alike (X_RateLimit_Remaining).
func isGatewayHeader(name string) bool {
	for _, h := range httpface.GatewayHeaders {
		if httpface.LooksLike(name, h) {
			return true
		}
	}
	return false
}
