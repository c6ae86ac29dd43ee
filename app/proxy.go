package app

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// HeaderTenantID is the header that carries the resolved tenant upstream.
// Whatever a client sent under that name is overwritten.
const HeaderTenantID = "X-Tenant-ID"

// newProxy returns a reverse proxy to target. It keeps method, path, query,
// body and headers, sets X-Forwarded-For/-Proto/-Host, passes the resolved
// tenant as X-Tenant-ID, answers 504 when the upstream's response headers
// take longer than timeout and 502 when it cannot be reached.
func newProxy(target *url.URL, timeout time.Duration, log *slog.Logger) *httputil.ReverseProxy {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ResponseHeaderTimeout = timeout
	transport.MaxIdleConnsPerHost = 256
	transport.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set(HeaderTenantID, string(TenantFrom(pr.In.Context())))
		},
		Transport:     transport,
		FlushInterval: -1, // stream: flush every write, as for SSE
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status, msg := http.StatusBadGateway, "upstream unavailable"
			if isTimeout(err) {
				status, msg = http.StatusGatewayTimeout, "upstream timed out"
			}
			if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
				// The client went away; nobody reads the answer.
				log.Debug("client canceled proxied request", "path", r.URL.Path)
				return
			}
			log.Warn("proxy error", "status", status, "method", r.Method, "path", r.URL.Path, "err", err)
			writeError(w, r, status, msg)
		},
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
