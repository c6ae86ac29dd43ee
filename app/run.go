package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/metrics"
)

// ShutdownTimeout is how long in-flight requests may run after a stop
// signal.
const ShutdownTimeout = 10 * time.Second

// ExitError is an error with the process exit status it calls for.
type ExitError struct {
	Code int   // the exit status: 2 for bad configuration
	Err  error // what to print, one line
}

// Error is the wrapped error's message.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit status for err, as returned by [Run]: 0 for
// nil, 2 for bad configuration or usage, 1 otherwise.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// Run is the gateway's main: it loads the config from environ, builds the
// store and the engine, serves the listeners (the proxy, the check
// endpoint when TOLLGATE_CHECK_ADDR is set, Envoy's rate limit service
// when TOLLGATE_RLS_ADDR is, admin; see faceListeners and withRLS)
// over that one engine, and on ctx's end stops accepting connections,
// lets in-flight requests finish (up to ShutdownTimeout), closes the
// store and returns nil. Logs are JSON lines on stderr. A bad setting,
// or a bad tenants, policy or rate limit service file, returns an
// *ExitError with Code 2 whose message is one line naming the variable or
// file.
//
// Run handles SIGHUP for as long as it runs: with a tenants or policy
// file it reloads both (see reload) and logs the outcome, a bad file
// leaving the tenants and the policy as they were; without either it
// logs the signal and ignores it.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 1 {
		if a := args[1]; a == "-h" || a == "-help" || a == "--help" {
			printUsage(stdout)
			return nil
		}
		if a := args[1]; a == "-version" || a == "--version" {
			fmt.Fprintln(stdout, BuildVersion())
			return nil
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: unexpected argument %q: configure tollgate with TOLLGATE_* variables (tollgate -h lists them; tollgate -version prints the version)", args[1])}
	}
	cfg, err := LoadConfig(environ)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %s", strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	level, _ := parseLevel(cfg.LogLevel)
	log := newLogger(stderr, level)
	for _, u := range unknownVariables(environ) {
		log.Warn("unknown variable ignored: no setting reads it", "variable", u.name, "did_you_mean", u.meant)
	}
	for _, v := range ineffectiveVariables(cfg, environ) {
		log.Warn("variable ignored: it has no effect with the other settings", "variable", v.name, "applies_with", v.appliesWith)
	}

	snap, err := loadSnapshot(cfg)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %w", err)}
	}
	rlsCfg, err := loadRLS(cfg)
	if err != nil {
		return err
	}
	// Notify before serving, with or without a file: from here on SIGHUP
	// reloads, or is logged and ignored, and never kills the process
	// (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Algorithm)
	be, err := newBackend(ctx, cfg, storeErrorReporter(log, m, cfg.FailMode), m, log)
	if err != nil {
		return fmt.Errorf("tollgate: %w", err)
	}
	defer func() {
		if err := be.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()
	trusted, _ := domain.ParseTrustedProxies(cfg.TrustedProxies) // validated
	anonymous := engine.AnonymousShared
	if cfg.Anonymous == AnonymousIP {
		anonymous = engine.AnonymousPerAddress
	}
	eng := engine.New(snap, engine.Options{
		Limiter:    be.limiter,
		Planned:    be.planned,
		Usage:      be.usage,
		Keys:       be.keys,
		Algorithm:  cfg.Algorithm,
		Anonymous:  anonymous,
		IPv6Prefix: cfg.IPv6Prefix,
		Observer:   m,
		Log:        log,
	})
	m.Routes(snap.Policy)

	ls := faceListeners(cfg, eng, trusted, m, log)
	ls, stopRLS := withRLS(ctx, ls, cfg, rlsCfg, eng, be.pinger, m, log)
	defer stopRLS()
	adminHandler := admin.New(be.pinger, cfg.RedisTimeout, reg, log)
	if cfg.AdminToken != "" {
		adminHandler = admin.WithUsage(adminHandler, admin.UsageOptions{Engine: eng, Token: cfg.AdminToken, Log: log, Count: m.AdminAction})
	}
	// The admin API reads no body: one sent anyway must not hold the
	// answer. (pprof's symbol lookup reads its POST body: it is outside.)
	adminHandler = httpface.IgnoreBodies(adminHandler)
	if cfg.Pprof {
		adminHandler = admin.WithPprof(adminHandler)
	}
	ls = append(ls, &listener{name: "admin", addr: cfg.AdminAddr, srv: newHTTPServer(adminHandler, log)})
	if err := listenAll(ls); err != nil {
		return fmt.Errorf("tollgate: %w", err)
	}
	attrs := append([]any{"version", BuildVersion()}, listenerAttrs(ls)...)
	log.Info("tollgate listening", append(attrs, "store", cfg.Store, "algorithm", cfg.Algorithm,
		"limit", cfg.Limit, "window", cfg.Window.String(), "fail_mode", cfg.FailMode,
		"replicas", replicasForLog(cfg), "deny_cache", cfg.DenyCache, "usage_api", cfg.AdminToken != "",
		"tenants", tenantsForLog(cfg, snap), "policy", policyForLog(cfg, snap.Policy), "shadow", cfg.Shadow,
		"anonymous", cfg.Anonymous, "trusted_proxies", trusted.String(), "check_deny_status", cfg.CheckDenyStatus,
		"upstream", upstreamName(cfg), "redis_url", redisURLForLog(cfg))...)
	noteChecksTakeNoSlots(cfg, snap.Policy, log)
	serveErr := serveAll(ls)

	// A reload runs beside this loop, one at a time: a file that never
	// finishes reading (a FIFO, a hung network mount) must not keep a
	// stop signal waiting. A SIGHUP during a reload runs one more after
	// it, which reads the files as they are then.
	reloaded := make(chan *domain.Policy, 1)
	reloading, again := false, false
	startReload := func() {
		reloading = true
		go func() { reloaded <- reload(cfg, eng, log).Policy }()
	}
wait:
	for {
		select {
		case err = <-serveErr:
			err = fmt.Errorf("tollgate: serve: %w", err)
			break wait
		case <-ctx.Done():
			log.Info("shutting down", "grace", ShutdownTimeout.String())
			break wait
		case <-hup:
			if reloading {
				again = true
			} else {
				startReload()
			}
		case p := <-reloaded:
			m.Routes(p)
			reloading = false
			if again {
				again = false
				startReload()
			}
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	// Every listener closes at once; then in-flight requests drain.
	if serr := shutdownAll(sctx, ls); serr != nil {
		log.Error("shutdown", "err", serr)
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// policyForLog describes the policy p read from cfg's policy file, if
// any: its path and how many limits and routes it has.
func policyForLog(cfg Config, p *domain.Policy) string {
	if cfg.PolicyFile == "" {
		return "none (one limit, default)"
	}
	n := len(p.Limits())
	routes := p.Routes()
	for _, r := range routes {
		n += len(r.Limits)
	}
	return fmt.Sprintf("file %s (%d limits, %d routes)", cfg.PolicyFile, n, len(routes)-1)
}

func tenantsForLog(cfg Config, snap *engine.Snapshot) string {
	if snap.Tenants == nil {
		return "header " + cfg.TenantHeader
	}
	return fmt.Sprintf("file %s (%d tenants)", cfg.TenantsFile, snap.Tenants.Len())
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

// replicasForLog says what N the local fail mode divides limits by.
func replicasForLog(cfg Config) string {
	switch {
	case cfg.FailMode != FailLocal:
		return ""
	case cfg.Replicas > 0:
		return strconv.Itoa(cfg.Replicas)
	case cfg.Store == StoreRedis:
		return "counted through the store"
	}
	return "1"
}

// upstreamName says where the proxy sends what it admits.
func upstreamName(cfg Config) string {
	switch {
	case cfg.ListenAddr == ListenOff:
		return "none (no proxy listener)"
	case cfg.UpstreamURL == "":
		return "echo"
	}
	return upstreamForLog(cfg.UpstreamURL)
}

func redisURLForLog(cfg Config) string {
	if cfg.Store != StoreRedis {
		return ""
	}
	return MaskURL(cfg.RedisURL)
}

// printUsage lists every variable, its default and what it accepts.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "tollgate: a rate-limiting API gateway. `tollgate -version` prints the version.")
	fmt.Fprintln(w, "Configure it with environment variables:")
	defaults := envDefaults()
	names := make([]string, 0, len(accepted))
	for n := range accepted {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %s%-20s default %-28q %s\n", EnvPrefix, n, defaults[n], accepted[n])
	}
	fmt.Fprintln(w, "Algorithms (TOLLGATE_ALGORITHM), each on every store:")
	for _, a := range domain.Algorithms {
		fmt.Fprintf(w, "  %-15s %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(w, "Stores (TOLLGATE_STORE):")
	for _, s := range stores {
		fmt.Fprintf(w, "  %-15s %s\n", s.name, s.summary)
	}
}
