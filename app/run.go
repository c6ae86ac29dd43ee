package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/adapters"
	"github.com/tollgate/tollgate/domain"
)

// ShutdownTimeout is how long in-flight requests may run after a stop
// signal.
const ShutdownTimeout = 10 * time.Second

// ExitError is an error with the process exit status it calls for.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
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
// store, serves the public and admin listeners, and on ctx's end stops
// accepting connections, lets in-flight requests finish (up to
// ShutdownTimeout), closes the store and returns nil. Logs are JSON lines
// on stderr. A bad setting or tenants file returns an *ExitError with Code
// 2 whose message is one line naming the variable or file.
//
// Run handles SIGHUP for as long as it runs: with a tenants file it
// reloads the file (see [FileTenants.Reload]) and logs the outcome, a bad
// file leaving the tenants as they were; without one it logs the signal
// and ignores it.
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

	policies, err := newPolicySource(cfg)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %w", err)}
	}
	tenants, fileTenants, err := newTenantResolver(cfg, policies)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %w", err)}
	}
	// Notify before serving, with or without a tenants file: from here on
	// SIGHUP reloads, or is logged and ignored, and never kills the
	// process (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	reg := prometheus.NewRegistry()
	metrics := NewMetrics(reg, cfg.Algorithm)
	be, err := newBackend(ctx, cfg, StoreErrorReporter(log, metrics, cfg.FailMode), metrics, log)
	if err != nil {
		return fmt.Errorf("tollgate: %w", err)
	}
	defer func() {
		if err := be.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	upstream := echoHandler()
	if cfg.UpstreamURL != "" {
		target, _ := url.Parse(cfg.UpstreamURL) // validated
		upstream = NewProxy(target, ProxyOptions{
			Timeout:          cfg.UpstreamTimeout,
			StripCredentials: stripCredentials(fileTenants),
			Log:              log,
		})
	}
	current := func() *domain.Policy { // the policy requests are metered under
		if fileTenants != nil {
			return fileTenants.Policy()
		}
		return policies.Policy()
	}
	metrics.Routes(current())
	public := newHTTPServer(NewServer(log, cfg, be.limiter, tenants, metrics, upstream), log)
	adminHandler := NewAdminServer(be.pinger, cfg.RedisTimeout, reg)
	if cfg.Pprof {
		adminHandler = withPprof(adminHandler)
	}
	admin := newHTTPServer(adminHandler, log)
	publicLn, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return fmt.Errorf("tollgate: public listener: %w", err)
	}
	adminLn, err := net.Listen("tcp", cfg.AdminAddr)
	if err != nil {
		publicLn.Close()
		return fmt.Errorf("tollgate: admin listener: %w", err)
	}
	log.Info("tollgate listening", "version", BuildVersion(),
		"public", publicLn.Addr().String(), "admin", adminLn.Addr().String(),
		"store", cfg.Store, "algorithm", cfg.Algorithm,
		"limit", cfg.Limit, "window", cfg.Window.String(), "fail_mode", cfg.FailMode,
		"replicas", replicasForLog(cfg), "deny_cache", cfg.DenyCache,
		"tenants", tenantsForLog(cfg, fileTenants), "policy", policyForLog(cfg, current()), "shadow", cfg.Shadow,
		"upstream", upstreamName(cfg.UpstreamURL), "redis_url", redisURLForLog(cfg))

	serveErr := make(chan error, 2)
	go func() { serveErr <- public.Serve(publicLn) }()
	go func() { serveErr <- admin.Serve(adminLn) }()

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
			reload(cfg, fileTenants, policies, log)
			metrics.Routes(current())
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	// Both listeners close at once; then in-flight requests drain.
	var wg sync.WaitGroup
	shutdownErrs := make([]error, 2)
	for i, srv := range []*http.Server{public, admin} {
		wg.Go(func() { shutdownErrs[i] = srv.Shutdown(sctx) })
	}
	wg.Wait()
	if serr := errors.Join(shutdownErrs...); serr != nil {
		log.Error("shutdown", "err", serr)
	}
	if err == nil {
		log.Info("stopped")
	}
	return err
}

// newTenantResolver returns the resolver cfg asks for: API keys from the
// tenants file when one is set (then also returned as *FileTenants, for
// reloads), validated against the policy and carrying it, else the
// tenant header, with the current policy of policies.
func newTenantResolver(cfg Config, policies *policySource) (TenantResolver, *FileTenants, error) {
	if cfg.TenantsFile == "" {
		return HeaderTenants{Header: http.CanonicalHeaderKey(cfg.TenantHeader), Policy: policies.Policy}, nil, nil
	}
	ft, err := NewFileTenants(cfg.TenantsFile, policies.Read)
	if err != nil {
		return nil, nil, err
	}
	return ft, ft, nil
}

// reload re-reads the files on SIGHUP: with a tenants file, the policy
// and the tenants together (one atomic swap of both; a bad file in
// either keeps both as they were), else the policy file alone. Without
// either file, the signal is logged and ignored. A rejection is logged
// and the gateway keeps serving with what it has.
func reload(cfg Config, ft *FileTenants, policies *policySource, log *slog.Logger) {
	switch {
	case ft != nil:
		if err := ft.Reload(); err != nil {
			msg := "tenants file rejected; keeping the previous tenants and policy"
			if fe := (*FileError)(nil); errors.As(err, &fe) && fe.Var == "POLICY_FILE" {
				msg = "policy file rejected; keeping the previous policy and tenants"
			}
			log.Error(msg, "tenants", ft.Len(), "err", err)
			return
		}
		log.Info("tenants file reloaded", "path", ft.Path(), "tenants", ft.Len(), "policy", policyForLog(cfg, ft.Policy()))
	case cfg.PolicyFile != "":
		if err := policies.Reload(); err != nil {
			log.Error("policy file rejected; keeping the previous policy", "err", err)
			return
		}
		log.Info("policy file reloaded", "policy", policyForLog(cfg, policies.Policy()))
	default:
		log.Info("SIGHUP ignored: no tenants file and no policy file")
	}
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

func tenantsForLog(cfg Config, ft *FileTenants) string {
	if ft == nil {
		return "header " + cfg.TenantHeader
	}
	return fmt.Sprintf("file %s (%d tenants)", ft.Path(), ft.Len())
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
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
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

func upstreamName(u string) string {
	if u == "" {
		return "echo"
	}
	return MaskURL(u)
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
		fmt.Fprintf(w, "  %s%-17s default %-28q %s\n", EnvPrefix, n, defaults[n], accepted[n])
	}
	fmt.Fprintln(w, "Algorithms (TOLLGATE_ALGORITHM), each on both stores:")
	for _, a := range adapters.Algorithms {
		fmt.Fprintf(w, "  %-15s %s\n", a.Name, a.Summary)
	}
}

// stripCredentials returns the proxy's credential stripper: the tenants
// file's, or none in header mode (the header is the edge's, not a secret).
func stripCredentials(ft *FileTenants) func(http.Header) {
	if ft == nil {
		return nil
	}
	return ft.StripCredentials
}
