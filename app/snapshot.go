package app

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
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

// reload re-reads the files on SIGHUP and swaps them into e in one
// atomic step: the policy and the tenants together (a bad file in either
// keeps both as they were). Without either file, the signal is logged
// and ignored. A rejection is logged and the gateway keeps serving with
// what it has. It returns the snapshot now in use.
func reload(cfg Config, e *engine.Engine, log *slog.Logger) *engine.Snapshot {
	if cfg.TenantsFile == "" && cfg.PolicyFile == "" {
		log.Info("SIGHUP ignored: no tenants file and no policy file")
		return e.Snapshot()
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
		if old := e.Snapshot().Tenants; old != nil {
			attrs = append(attrs, "tenants", old.Len())
		}
		log.Error(msg, attrs...)
		return e.Snapshot()
	}
	e.Swap(snap)
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
