package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/internal/watch"
	"github.com/tollgate/tollgate/metrics"
)

// gateway is what Run serves, built from the config: the engine over the
// store and its layers, the listeners of the faces that decide with it,
// and what reloads it.
type gateway struct {
	cfg       Config
	log       *slog.Logger
	snap      *engine.Snapshot // as loaded at start-up
	backend   backend
	ring      *engine.KeyRing // nil: no key API
	listeners []*listener
	reloader  *reloader
}

// build reads the tenants, policy and rate limit service files, then
// builds the store and its layers (newBackend), the engine over them
// (newEngine) and the listeners of every face cfg turns on. A bad file is
// an *ExitError of code 2 naming it.
func build(ctx context.Context, cfg Config, log *slog.Logger) (*gateway, error) {
	snap, err := loadSnapshot(cfg)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %w", err)}
	}
	rlsCfg, err := loadRLS(cfg, log)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, cfg.Algorithm)
	be, err := newBackend(ctx, cfg, storeErrorReporter(log, m, cfg.FailMode), m, log)
	if err != nil {
		return nil, fmt.Errorf("tollgate: %w", err)
	}
	w := newWatch(cfg, be, log)
	if w != nil {
		be.closers = append([]io.Closer{w}, be.closers...) // stops posting before the store closes
	}
	ring := newKeyRing(ctx, cfg, be, reg, log)
	eng := newEngine(cfg, snap, be, ring, w, m, log)
	m.Routes(snap.Policy)
	ls := faceListeners(cfg, eng, m, log)
	ls, face := withRLS(ls, cfg, rlsCfg, eng, be.pinger, m, log)
	ls = append(ls, adminListener(cfg, eng, be.idem, be.pinger, w, reg, m, log))
	r := &reloader{cfg: cfg, eng: eng, log: log, routes: m.Routes, rls: rlsCfg, face: face}
	return &gateway{cfg: cfg, log: log, snap: snap, backend: be, ring: ring, listeners: ls, reloader: r}, nil
}

// newWatch returns what watches who is being limited, posting through
// be's board on a shared store; nil when TOLLGATE_TOP_TENANTS is 0, and
// without an admin token (nothing could read it).
func newWatch(cfg Config, be backend, log *slog.Logger) *watch.Watch {
	if cfg.AdminToken == "" || cfg.TopTenants == 0 {
		return nil
	}
	return watch.New(watch.Options{Top: cfg.TopTenants, Board: be.board, Replica: be.replica, Log: log})
}

// watcher is w as the engine's watcher, nil when w is.
func watcher(w *watch.Watch) engine.Watcher {
	if w == nil {
		return nil
	}
	return w
}

// newEngine returns the engine that decides with be's limiter, starting
// with snap, resolves the runtime keys of ring (may be nil), and tells w
// (when not nil) who each decision was about.
func newEngine(cfg Config, snap *engine.Snapshot, be backend, ring *engine.KeyRing, w *watch.Watch, m *metrics.Metrics, log *slog.Logger) *engine.Engine {
	anonymous := engine.AnonymousShared
	switch cfg.Anonymous {
	case AnonymousIP:
		anonymous = engine.AnonymousPerAddress
	case AnonymousReject:
		anonymous = engine.AnonymousReject
	}
	return engine.New(snap, engine.Options{
		Limiter: be.limiter,
		Planned: be.planned,
		Usage:   be.usage,
		Settler: be.settler,
		// Reports to the rate limit service are charged when denied.
		PlannedSettler:     be.rlsSettler,
		PlannedChargeEvery: be.rlsEvery,
		Keys:               be.keys,
		KeyRing:            ring,
		Algorithm:          cfg.Algorithm,
		Anonymous:          anonymous,
		IPv6Prefix:         cfg.IPv6Prefix,
		Observer:           m,
		Watcher:            watcher(w),
		Log:                log,
	})
}

// serve listens on every listener, serves them and reloads on each
// signal of hup until ctx ends (nil) or a listener fails (its error);
// then it stops accepting connections and lets in-flight requests finish,
// up to ShutdownTimeout.
func (g *gateway) serve(ctx context.Context, hup <-chan os.Signal) error {
	if err := listenAll(g.listeners); err != nil {
		return err
	}
	g.logListening()
	serveErr := serveAll(g.listeners)
	rctx, stopReloads := context.WithCancel(ctx)
	defer stopReloads()
	go g.reloader.run(rctx, hup)
	if g.ring != nil {
		go g.ring.Run(rctx)
	}
	var err error
	select {
	case err = <-serveErr:
		err = fmt.Errorf("tollgate: serve: %w", err)
	case <-ctx.Done():
		g.log.Info("shutting down", "grace", ShutdownTimeout.String())
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	// Every listener closes at once; then in-flight requests drain.
	if serr := shutdownAll(sctx, g.listeners); serr != nil {
		g.log.Error("shutdown", "err", serr)
	}
	if err == nil {
		g.log.Info("stopped")
	}
	return err
}

// close closes the store and its layers, logging what failed.
func (g *gateway) close() {
	if err := g.backend.Close(); err != nil {
		g.log.Error("closing the store", "err", err)
	}
}

// logListening writes the start-up line: the listeners' addresses and
// the effective settings, credentials masked.
func (g *gateway) logListening() {
	cfg, snap := g.cfg, g.snap
	trusted, _ := domain.ParseTrustedProxies(cfg.TrustedProxies) // validated
	attrs := append([]any{"version", BuildVersion()}, listenerAttrs(g.listeners)...)
	g.log.Info("tollgate listening", append(attrs, "store", cfg.Store, "algorithm", cfg.Algorithm,
		"limit", cfg.Limit, "window", cfg.Window.String(), "fail_mode", cfg.FailMode,
		"replicas", replicasForLog(cfg), "deny_cache", cfg.DenyCache, "usage_api", cfg.AdminToken != "",
		"tenants", tenantsForLog(cfg, snap), "policy", policyForLog(cfg, snap.Policy), "shadow", cfg.Shadow,
		"anonymous", cfg.Anonymous, "trusted_proxies", trusted.String(), "check_deny_status", cfg.CheckDenyStatus,
		"upstream", upstreamName(cfg), "redis_url", redisURLForLog(cfg))...)
	noteChecksTakeNoSlots(cfg, snap.Policy, g.log)
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
