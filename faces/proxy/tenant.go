package proxy

import (
	"context"
	"net/netip"

	"github.com/tollgate/tollgate/domain"
)

type contextKey struct{ name string }

var (
	tenantKey = &contextKey{"tenant"}
	clientKey = &contextKey{"client"}
)

// withTenant returns ctx carrying the resolved tenant id and the
// client's address. It is one allocation, where context.WithValue would
// be two (the context, and the id boxed in an interface): it runs on
// every request.
func withTenant(ctx context.Context, id domain.TenantID, client netip.Addr) context.Context {
	return &tenantContext{Context: ctx, id: id, client: client}
}

// tenantContext is a context carrying a tenant id under tenantKey, and
// the client address. Its Value is a pointer to the id, which an
// interface holds without allocating.
type tenantContext struct {
	context.Context
	id     domain.TenantID
	client netip.Addr
}

func (c *tenantContext) Value(key any) any {
	switch key {
	case tenantKey:
		return &c.id
	case clientKey:
		return &c.client
	}
	return c.Context.Value(key)
}

// TenantFrom returns the tenant the engine resolved for the request of
// ctx, or [domain.Unknown] outside the proxy.
func TenantFrom(ctx context.Context) domain.TenantID {
	if id, ok := ctx.Value(tenantKey).(*domain.TenantID); ok {
		return *id
	}
	return domain.Unknown
}

// clientFrom returns the client address the proxy read for the request
// of ctx, or the zero value.
func clientFrom(ctx context.Context) netip.Addr {
	if a, ok := ctx.Value(clientKey).(*netip.Addr); ok {
		return *a
	}
	return netip.Addr{}
}
