package app

import (
	"context"
	"net/http"

	"github.com/tollgate/tollgate/domain"
)

// Tenant is a resolved request's tenant, the policy it is metered under
// and its own rules for the policy's limits.
type Tenant struct {
	ID domain.TenantID
	// Rule is the tenant's rule for the limit named "default": the
	// tenants file's limit and window, else the policy's. It is zero
	// when the policy has no such limit.
	Rule domain.Rule
	// Limits are the tenant's own rules by limit name (the tenants
	// file's "limits"); nil for most tenants.
	Limits map[string]domain.Rule
	// Policy is the policy the tenant is metered under, from the same
	// generation of files as the tenant. Nil: one limit, "default", with
	// Rule.
	Policy *domain.Policy
}

// rule returns t's rule for l: its own, else the policy's.
func (t Tenant) rule(l domain.PolicyLimit) domain.Rule {
	if r, ok := t.Limits[l.Name]; ok {
		return r
	}
	if l.Name == domain.DefaultLimit && t.Rule != (domain.Rule{}) {
		return t.Rule
	}
	return l.Rule
}

// TenantResolver names the tenant of a request. It never fails: traffic it
// cannot attribute is the tenant [domain.Unknown] with the default rule.
// Implementations are safe for concurrent use.
type TenantResolver interface {
	ResolveTenant(r *http.Request) Tenant
}

// HeaderTenants resolves the tenant from a request header, every tenant
// with the same rules. The header is only as trustworthy as whatever sets
// it: run it behind an authenticating edge that sets the header and
// overwrites any value a client sent.
type HeaderTenants struct {
	Header string      // canonical or not; in canonical form (X-Tenant-Id) it is looked up without allocating
	Rule   domain.Rule // every tenant's rule for the limit "default"; zero: the policy's
	// Policy returns the current policy. Nil: one limit, "default", with
	// Rule.
	Policy func() *domain.Policy
}

// ResolveTenant implements [TenantResolver]. A missing or invalid id is
// [domain.Unknown].
func (h HeaderTenants) ResolveTenant(r *http.Request) Tenant {
	t := Tenant{ID: domain.TenantOrUnknown(r.Header.Get(h.Header)), Rule: h.Rule}
	if h.Policy != nil {
		t.Policy = h.Policy()
	}
	return t
}

type contextKey struct{ name string }

var tenantKey = &contextKey{"tenant"}

// withTenant returns ctx carrying the resolved tenant id. It is one
// allocation, where context.WithValue would be two (the context, and the
// id boxed in an interface): it runs on every request.
func withTenant(ctx context.Context, id domain.TenantID) context.Context {
	return &tenantContext{Context: ctx, id: id}
}

// tenantContext is a context carrying a tenant id under tenantKey. Its
// Value is a pointer to the id, which an interface holds without
// allocating.
type tenantContext struct {
	context.Context
	id domain.TenantID
}

func (c *tenantContext) Value(key any) any {
	if key == tenantKey {
		return &c.id
	}
	return c.Context.Value(key)
}

// TenantFrom returns the tenant the rate-limit middleware resolved for the
// request of ctx, or [domain.Unknown] outside it.
func TenantFrom(ctx context.Context) domain.TenantID {
	if id, ok := ctx.Value(tenantKey).(*domain.TenantID); ok {
		return *id
	}
	return domain.Unknown
}
