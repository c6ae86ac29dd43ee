package app

import (
	"fmt"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
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
