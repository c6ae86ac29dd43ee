package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"
)

// HeaderTenantID is the header that carries the resolved tenant upstream.
// Whatever a client sent under that name, or a look-alike, is removed.
const HeaderTenantID = "X-Tenant-ID"

// ProxyOptions are the optional settings of [NewProxy].
type ProxyOptions struct {
	// Timeout bounds the wait for the upstream's response headers; past
	// it, the client gets 504. Zero means no limit.
	Timeout time.Duration
	// StripCredentials, if set, removes the gateway's own credentials
	// from the forwarded request's headers: [FileTenants.StripCredentials]
	// when tenants are resolved by API key.
	StripCredentials func(http.Header)
	// Log receives one line per failed upstream request. If nil,
	// slog.Default() is used.
	Log *slog.Logger
	// Transport sends the requests upstream. If nil, NewProxy makes one
	// for its single upstream (see [NewProxy]); tests and benchmarks
	// pass their own.
	Transport http.RoundTripper
}

// NewProxy returns a reverse proxy to target, for the requests the
// rate-limit middleware admitted. It keeps method, path, query, body and
// headers, with these exceptions:
//
//   - The path is joined to target's path, which acts as a prefix, and the
//     queries of both are merged: with target http://svc/api, GET
//     /v1/x?a=1 goes to http://svc/api/v1/x?a=1.
//   - Host is target's host, as the upstream's virtual hosting, TLS and
//     routing expect; the client's Host goes in X-Forwarded-Host.
//   - X-Forwarded-For/-Proto/-Host describe the client's connection to the
//     gateway. Values the client sent are dropped, not appended to: the
//     gateway is the edge, and a client could claim any address.
//   - X-Tenant-ID is the tenant the middleware resolved. Any header that a
//     server could take for it (any case, '_' for '-') is removed first, so
//     no client can pick its tenant for the upstream.
//   - Hop-by-hop headers (Connection and the headers it names, Keep-Alive,
//     Proxy-Connection, TE, Trailer, Transfer-Encoding, and Upgrade unless
//     the client switches protocols) are dropped in both directions, as
//     RFC 9110 section 7.6.1 requires.
//   - With opts.StripCredentials, the gateway's API key is removed.
//
// Responses that stream are flushed to the client at each write of the
// upstream: server-sent events (text/event-stream) and every response
// without a Content-Length (chunked: long polls, streamed exports).
// Responses of a known length go through the connection's buffer, without
// a flush (and a system call) per write. Upstream connections are kept
// alive and reused, up to 1024 idle ones. When the upstream cannot be
// reached the client gets 502, and 504 past opts.Timeout, as JSON when it
// accepts JSON; either way one line is logged, without headers.
func NewProxy(target *url.URL, opts ProxyOptions) *httputil.ReverseProxy {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
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
	var rt http.RoundTripper = transport
	if opts.Transport != nil {
		rt = opts.Transport
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// ReverseProxy drops a query it cannot parse (/a?b=%zz) from
			// pr.Out before Rewrite; the contract keeps the query as the
			// client sent it. The gateway never interprets the query, so
			// forwarding it raw gives the upstream exactly what the client
			// meant, not a reading of it.
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			pr.SetURL(target)
			h := pr.Out.Header
			for name := range h {
				if looksLikeTenantHeader(name) {
					delete(h, name)
				}
			}
			if opts.StripCredentials != nil {
				opts.StripCredentials(h)
			}
			setForwarded(h, pr.In)
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
			if bodyTimedOut(r) {
				// The client's body stalled (see bodyIdleTimeout), not the
				// upstream; the read error also canceled r's context.
				log.Info("request body idle timeout", "method", r.Method, "path", r.URL.Path)
				w.Header().Set("Connection", "close")
				writeError(w, r, http.StatusRequestTimeout, "request body timed out")
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
			log.Warn("proxy error", "status", status, "method", r.Method, "path", r.URL.Path, "err", err)
			writeError(w, r, status, msg)
		},
	}
}

// setForwarded sets on h, the outbound request's header, what
// ProxyRequest.SetXForwarded sets (X-Forwarded-For: the client's address;
// X-Forwarded-Host: the Host it asked for; X-Forwarded-Proto: http or
// https), and X-Tenant-ID: the tenant the middleware resolved for in. The
// four values share one backing array, one allocation where Header.Set
// makes one per header. ReverseProxy has already removed whatever the
// client sent under the X-Forwarded-* names (Rewrite mode), and the
// caller any look-alike of X-Tenant-ID.
func setForwarded(h http.Header, in *http.Request) {
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	vals := []string{"", in.Host, proto, string(TenantFrom(in.Context()))}
	if ip, _, err := net.SplitHostPort(in.RemoteAddr); err == nil {
		vals[0] = ip
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	h["X-Forwarded-Host"] = vals[1:2:2]
	h["X-Forwarded-Proto"] = vals[2:3:3]
	h[canonicalTenantHeader] = vals[3:4:4]
}

// maxIdleUpstreamConns bounds the idle connections kept to the upstream.
const maxIdleUpstreamConns = 1024

// canonicalTenantHeader is HeaderTenantID as http.Header keys it, so that
// the proxy sets it without canonicalizing (and allocating) per request.
var canonicalTenantHeader = textproto.CanonicalMIMEHeaderKey(HeaderTenantID)

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

// looksLikeTenantHeader reports whether name is X-Tenant-ID in any case,
// with '_' for any '-'. Servers that map header names to variables (CGI,
// WSGI, Rack, nginx with underscores_in_headers) read X_Tenant_ID as
// X-Tenant-ID, so a client could smuggle its own tenant past a plain
// Header.Set. It does not allocate.
func looksLikeTenantHeader(name string) bool {
	if len(name) != len(HeaderTenantID) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c, want := name[i], HeaderTenantID[i]
		switch {
		case c == want, want == '-' && c == '_':
		case 'A' <= c && c <= 'Z' && c+'a'-'A' == want, 'a' <= c && c <= 'z' && c-('a'-'A') == want:
		default:
			return false
		}
	}
	return true
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

// gatewayHeaders are the headers the gateway owns on a response. An
// upstream's own values are dropped, so a client never sees two.
var gatewayHeaders = []string{
	HeaderRateLimit, HeaderRateLimitPolicy,
	HeaderXRateLimitLimit, HeaderXRateLimitRemain, HeaderXRateLimitReset,
}

// dropGatewayHeaders removes the upstream's values of gatewayHeaders, in
// any spelling: the gateway writes RateLimit and RateLimit-Policy with
// the draft's case, so a canonical Ratelimit from the upstream would
// otherwise travel beside them as a second field.
func dropGatewayHeaders(resp *http.Response) error {
	for name := range resp.Header {
		if isGatewayHeader(name) {
			delete(resp.Header, name)
		}
	}
	return nil
}

// isGatewayHeader reports whether name is one of gatewayHeaders, in any
// case.
func isGatewayHeader(name string) bool {
	for _, h := range gatewayHeaders {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}
