package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/faces/check"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/watch"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

// listener is one of the gateway's listeners: the proxy, the check
// endpoint, Envoy's rate limit service or the admin listener.
type listener struct {
	name string // as the start-up log names it: public, check, rls, admin
	addr string // the host:port to listen on, the value of variable
	// variable is the setting that gives addr, such as
	// TOLLGATE_LISTEN_ADDR.
	variable string
	srv      server
	ln       net.Listener // set by listenAll
}

// server is what serves a listener: an *http.Server, or Envoy's rate
// limit service's gRPC server (rlsServer).
type server interface {
	Serve(net.Listener) error
	// Shutdown stops accepting, lets in-flight calls finish until ctx
	// ends, then cuts the rest.
	Shutdown(ctx context.Context) error
}

// listenerNames are the names of every listener the gateway may run, in
// the order of the start-up log.
var listenerNames = []string{"public", "check", "rls", "admin"}

// faceListeners returns the listeners of the faces cfg turns on: the
// proxy (TOLLGATE_LISTEN_ADDR, unless off) and the check endpoint
// (TOLLGATE_CHECK_ADDR, when set). Both decide with eng, so they share
// one store, breaker and deny cache: one budget per tenant.
func faceListeners(cfg Config, eng *engine.Engine, m *metrics.Metrics, log *slog.Logger) []*listener {
	trusted, _ := domain.ParseTrustedProxies(cfg.TrustedProxies) // validated
	describer := httpface.Describer{TenantHeader: http.CanonicalHeaderKey(cfg.TenantHeader), Trusted: trusted}
	var ls []*listener
	if cfg.ListenAddr != ListenOff {
		upstream := proxy.Echo()
		if cfg.UpstreamURL != "" {
			target, _ := url.Parse(cfg.UpstreamURL) // validated
			upstream = proxy.NewUpstream(target, proxy.UpstreamOptions{
				Timeout:     cfg.UpstreamTimeout,
				Credentials: eng,
				Trusted:     trusted,
				Log:         log,
			})
		}
		ls = append(ls, &listener{name: "public", addr: cfg.ListenAddr, variable: EnvPrefix + "LISTEN_ADDR", srv: newHTTPServer(proxy.New(proxy.Options{
			Engine:    eng,
			Upstream:  upstream,
			Describer: describer,
			AccessLog: cfg.AccessLog,
			Log:       log,
			Metrics:   m,
		}), log)})
	}
	if cfg.CheckAddr != "" {
		ls = append(ls, &listener{name: "check", addr: cfg.CheckAddr, variable: EnvPrefix + "CHECK_ADDR", srv: newHTTPServer(check.New(check.Options{
			Engine:     eng,
			Describer:  describer,
			DenyStatus: cfg.CheckDenyStatus,
			AccessLog:  cfg.AccessLog,
			Log:        log,
			Metrics:    m,
		}), log)})
	}
	return ls
}

// adminListener returns the admin listener (TOLLGATE_ADMIN_ADDR):
// /healthz, /readyz (asking ready), /metrics from reg, the usage API on
// eng with TOLLGATE_ADMIN_TOKEN, and pprof with TOLLGATE_PPROF.
func adminListener(cfg Config, eng *engine.Engine, idem ports.Idempotency, ready ports.Pinger, w *watch.Watch, reg *prometheus.Registry, m *metrics.Metrics, log *slog.Logger) *listener {
	h := admin.New(ready, cfg.RedisTimeout, reg, log)
	if cfg.AdminToken != "" {
		h = admin.WithUsage(h, admin.UsageOptions{Engine: eng, Token: cfg.AdminToken, Log: log, Count: m.AdminAction, Idempotency: idem})
	}
	if w != nil {
		h = admin.WithTop(h, admin.TopOptions{Engine: eng, Watch: w, Token: cfg.AdminToken, Log: log, Count: m.AdminAction})
	}
	// The admin API reads no body but a spend's: one sent anyway must not
	// hold the answer. (pprof's symbol lookup reads its POST body: it is
	// outside.)
	h = httpface.IgnoreBodies(h, admin.ReadsBody)
	h = withKeyAPI(h, cfg, eng, m, log) // reads its own bodies
	if cfg.Pprof {
		h = admin.WithPprof(h)
	}
	srv := newHTTPServer(h, log)
	if w != nil {
		// An open feed of denials is a request that never ends by
		// itself: closing the watch at shutdown ends every feed.
		srv.RegisterOnShutdown(func() { w.Close() })
	}
	return &listener{name: "admin", addr: cfg.AdminAddr, variable: EnvPrefix + "ADMIN_ADDR", srv: srv}
}

// newHTTPServer returns a server with timeouts against slow clients.
// There is no overall read or write timeout: bodies and responses may
// stream; the upstream timeout bounds the wait for the upstream.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// OPTIONS * reaches the handler too: net/http's own answer (200)
		// would be a check the check listener never decided.
		DisableGeneralOptionsHandler: true,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// listenAll listens on the address of every listener of ls, in order.
// On a failure it closes the listeners it opened and returns an
// *ExitError of code 2 naming the listener's variable and the fix: an
// address that cannot be listened on is a setting to change.
func listenAll(ls []*listener) error {
	for i, l := range ls {
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			for _, opened := range ls[:i] {
				opened.ln.Close()
			}
			return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %s=%q: %s (%w)", l.variable, l.addr, listenFix(l.variable, err), err)}
		}
		l.ln = ln
	}
	return nil
}

// listenFix says why a listen on variable's address failed with err and
// what to do about it.
func listenFix(variable string, err error) string {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return "the address is in use by another process: stop that process, or set " + variable + " to a free host:port"
	case errors.Is(err, syscall.EACCES):
		return "not permitted to listen there (ports below 1024 need privileges): set " + variable + " to a port from 1024, such as :8080, or grant CAP_NET_BIND_SERVICE"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no interface of this host has that address: set " + variable + " to one of its addresses, or to :port for every interface"
	}
	return "cannot listen there: set " + variable + " to a host:port this host can listen on"
}

// serveAll serves every listener of ls, opened by listenAll, in a
// goroutine of its own; what each Serve returns is sent on the channel,
// which has room for all.
func serveAll(ls []*listener) <-chan error {
	errc := make(chan error, len(ls))
	for _, l := range ls {
		go func() { errc <- l.srv.Serve(l.ln) }()
	}
	return errc
}

// shutdownAll closes every listener of ls at once, then lets in-flight
// requests drain until they are done or ctx ends.
func shutdownAll(ctx context.Context, ls []*listener) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ls))
	for i, l := range ls {
		wg.Go(func() { errs[i] = l.srv.Shutdown(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// listenerAttrs returns the start-up log's attributes for every listener
// the gateway may run (listenerNames): its bound address, or "off"; then
// those of the listeners of envoyproxy/ratelimit's environment.
func listenerAttrs(ls []*listener) []any {
	attrs := make([]any, 0, 2*len(listenerNames))
	for _, name := range listenerNames {
		addr := ListenOff
		for _, l := range ls {
			if l.name == name {
				addr = l.ln.Addr().String()
			}
		}
		attrs = append(attrs, name, addr)
	}
	for _, l := range ls {
		if !slices.Contains(listenerNames, l.name) {
			attrs = append(attrs, l.name, l.ln.Addr().String())
		}
	}
	return attrs
}

// noteChecksTakeNoSlots logs, when the check listener is on and policy
// has concurrency limits, that checks leave them out: a check never
// learns when the request it describes ends, so it could never give a
// slot back. Only the proxy listener's requests take slots.
func noteChecksTakeNoSlots(cfg Config, policy *domain.Policy, log *slog.Logger) {
	if cfg.CheckAddr == "" {
		return
	}
	var names []string
	for _, r := range policy.Routes() {
		for _, l := range r.Applied() {
			if l.Concurrency && !slices.Contains(names, l.Name) {
				names = append(names, l.Name)
			}
		}
	}
	if len(names) > 0 {
		log.Info("concurrency limits do not apply on the check listener: a check never learns when its request ends; they apply on the proxy listener",
			"limits", strings.Join(names, ","))
	}
}
