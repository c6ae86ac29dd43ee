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
	slotsKey  = &contextKey{"slots"}
)

// withTenant returns ctx carrying the resolved tenant id, the client's
// address, and whether the request holds concurrency slots. It is one
// allocation, where context.WithValue would be two (the context, and the
// id boxed in an interface): it runs on every request.
func withTenant(ctx context.Context, id domain.TenantID, client netip.Addr, slots bool) context.Context {
	return &tenantContext{Context: ctx, id: id, client: client, slots: slots}
}

// tenantContext is a context carrying a tenant id under tenantKey, the
// client address, and whether the request holds slots. Its Value is a
// pointer to the field, which an interface holds without allocating.
type tenantContext struct {
	context.Context
	id     domain.TenantID
	client netip.Addr
	slots  bool
}

func (c *tenantContext) Value(key any) any {
	switch key {
	case tenantKey:
		return &c.id
	case clientKey:
		return &c.client
	case slotsKey:
		return &c.slots
	}
	return c.Context.Value(key)
}

// holdsSlots reports whether the request of ctx holds concurrency slots
// (see [holding]).
func holdsSlots(ctx context.Context) bool {
	s, ok := ctx.Value(slotsKey).(*bool)
	return ok && *s
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
