package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/internal/strictjson"
)

// loadSnapshot reads what the engine decides with from cfg's files: the
// policy file (without one, the one limit "default" of TOLLGATE_LIMIT per
// TOLLGATE_WINDOW), then the tenants file, validated against that policy
// (without one, tenants are named by TOLLGATE_TENANT_HEADER). An error is
// a *strictjson.FileError naming the file's variable.
func loadSnapshot(cfg Config) (*engine.Snapshot, error) {
	p := domain.DefaultPolicy(cfg.Rule(), cfg.Shadow)
	if cfg.PolicyFile != "" {
		var err error
		if p, err = LoadPolicyFile(cfg.PolicyFile, cfg.Shadow); err != nil {
			return nil, err
		}
	}
	snap := &engine.Snapshot{Policy: p}
	if cfg.TenantsFile != "" {
		hint := ""
		if cfg.PolicyFile == "" {
			hint = fmt.Sprintf(": without %sPOLICY_FILE the policy is one limit, %q (%sLIMIT per %sWINDOW); set %sPOLICY_FILE to a policy file that defines the limits the tenants override",
				EnvPrefix, domain.DefaultLimit, EnvPrefix, EnvPrefix, EnvPrefix)
		}
		d, err := loadTenantsFile(cfg.TenantsFile, p, hint)
		if err != nil {
			return nil, err
		}
		snap.Tenants = d
	}
	return snap, nil
}

// reloader keeps what the gateway decides with up to date while it
// serves: the tenants and policy files, re-read on SIGHUP and swapped
// into the engine whole, and Envoy's rate limit service's configuration,
// its directory watched or its xDS subscription followed. A rejected file is logged and what was in use stays.
type reloader struct {
	cfg    Config
	eng    *engine.Engine
	log    *slog.Logger
	routes func(*domain.Policy) // told every policy put in use
	rls    *rlsConfig           // nil without the rate limit service
	face   *rls.Server          // rls's face
}

// run reloads the files on every signal of hup, and follows the rate
// limit service's configuration (its directory polled every
// rlsReloadInterval, or its xDS subscription), until ctx ends. A reload of the files runs beside this loop, one at a
// time: a file that never finishes reading (a FIFO, a hung network
// mount) must not keep a stop waiting. A signal during a reload runs one
// more after it, which reads the files as they are then.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	if r.rls != nil {
		go r.rls.run(ctx, r.rlsChanged, r.rlsRejected)
	}
	done := make(chan *domain.Policy, 1)
	reloading, again := false, false
	start := func() {
		reloading = true
		go func() { done <- r.files().Policy }()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if reloading {
				again = true
			} else {
				start()
			}
		case p := <-done:
			r.routes(p)
			reloading = false
			if again {
				again = false
				start()
			}
		}
	}
}

// files re-reads the tenants and policy files and swaps them into the
// engine in one atomic step: the policy and the tenants together (a bad
// file in either keeps both as they were). Without either file, the
// signal is logged and ignored. It returns the snapshot now in use.
func (r *reloader) files() *engine.Snapshot {
	cfg, log := r.cfg, r.log
	if cfg.TenantsFile == "" && cfg.PolicyFile == "" {
		log.Info("SIGHUP ignored: no tenants file and no policy file")
		return r.eng.Snapshot()
	}
	snap, err := loadSnapshot(cfg)
	if err != nil {
		msg := "policy file rejected; keeping the previous policy"
		if fe := (*strictjson.FileError)(nil); errors.As(err, &fe) && fe.Var == tenantsFileVar {
			msg = "tenants file rejected; keeping the previous tenants and policy"
		} else if cfg.TenantsFile != "" {
			msg = "policy file rejected; keeping the previous policy and tenants"
		}
		attrs := []any{"err", err}
		if old := r.eng.Snapshot().Tenants; old != nil {
			attrs = append(attrs, "tenants", old.Len())
		}
		log.Error(msg, attrs...)
		return r.eng.Snapshot()
	}
	r.eng.Swap(snap)
	switch {
	case cfg.TenantsFile != "" && cfg.PolicyFile != "":
		log.Info("tenants and policy files reloaded", "path", cfg.TenantsFile, "tenants", snap.Tenants.Len(), "policy", policyForLog(cfg, snap.Policy))
	case cfg.TenantsFile != "":
		log.Info("tenants file reloaded", "path", cfg.TenantsFile, "tenants", snap.Tenants.Len(), "policy", policyForLog(cfg, snap.Policy))
	default:
		log.Info("policy file reloaded", "policy", policyForLog(cfg, snap.Policy))
	}
	return snap
}

// rlsChanged puts the rate limit service's new configuration c in use.
func (r *reloader) rlsChanged(c *rlsconf.Config) {
	r.face.SetConfig(c)
	r.log.Info("rate limit service configuration reloaded", append(r.rls.source, "domains", len(c.Domains()))...)
	if r.cfg.RLSXDS == "" {
		warnUnconfigured(r.log, r.cfg.RLSConfig, c)
	} else if len(c.Domains()) == 0 {
		r.log.Warn("rate limit service: no domain configured; every request is answered OK", r.rls.source...)
	}
}

// rlsRejected logs a change of the rate limit service's configuration
// that does not load; the previous configuration stays.
func (r *reloader) rlsRejected(err error) {
	r.log.Error("rate limit service configuration rejected; keeping the previous one", append(r.rls.source, "err", err)...)
}
