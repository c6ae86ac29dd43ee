package engine

import "github.com/tollgate/tollgate/domain"

// Credentials are what a request presents to name its tenant. A face
// reads them from its protocol: the tenant header, the API key header,
// the token of an Authorization: Bearer.
type Credentials struct {
	// Header is the tenant header's value (TOLLGATE_TENANT_HEADER): the
	// tenant, when there is no tenants file.
	Header string
	// APIKey and Bearer are the keys presented in X-API-Key and
	// Authorization: Bearer; with a tenants file, the first known one
	// names the tenant.
	APIKey, Bearer string
}

// Resolve returns the tenant creds name in the current snapshot: by API
// key with a tenants file, else by the tenant header; [domain.Unknown]
// (with the policy's rules) when they name none.
func (e *Engine) Resolve(creds Credentials) Tenant { return e.resolve(e.snap.Load(), creds) }

// resolve returns the tenant creds name in snap.
func (e *Engine) resolve(snap *Snapshot, creds Credentials) Tenant {
	if snap.Tenants == nil {
		return Tenant{ID: domain.TenantOrUnknown(creds.Header)}
	}
	if t, ok := snap.Tenants.Lookup(creds.APIKey); ok {
		return *t
	}
	if t, ok := snap.Tenants.Lookup(creds.Bearer); ok {
		return *t
	}
	return unknownTenant
}

// UsesAPIKeys reports whether tenants are named by API key (a tenants
// file), not by a header.
func (e *Engine) UsesAPIKeys() bool { return e.snap.Load().Tenants != nil }

// KnownKey reports whether key is a tenant's API key.
func (e *Engine) KnownKey(key string) bool {
	d := e.snap.Load().Tenants
	if d == nil {
		return false
	}
	_, ok := d.Lookup(key)
	return ok
}
