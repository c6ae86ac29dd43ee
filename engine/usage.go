package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/domain"
)

var (
	// ErrNoTenant is a usage call about an id the tenants file does not
	// hold (the admin face answers 404).
	ErrNoTenant = errors.New("engine: no such tenant")
	// ErrNoLimit is a reset of a limit the policy does not name.
	ErrNoLimit = errors.New("engine: no such limit")
	// ErrNoUsage is a usage call to an engine built without
	// [Options].Usage.
	ErrNoUsage = errors.New("engine: the store reads no usage")
	// ErrReadAfterReset is a reset that was made, whose usage could not
	// be read after it (the store failed in between).
	ErrReadAfterReset = errors.New("engine: the reset was made; reading the usage after it failed")
)

// LimitUsage is one limit's budget, as it stands, for one tenant.
type LimitUsage struct {
	// Route names the route whose own limit this is; "" for a global
	// limit, which every route shares.
	Route string
	// Algorithm counts it: the store's, fixed_window for a calendar
	// quota, or "concurrency" for a concurrency limit (slots, not a
	// window).
	Algorithm string
	// Limit is the limit as the tenant's requests carry it: its name,
	// the tenant's rule, key and calendar, and whether it is a shadow.
	Limit domain.Limit
	// Decision is the limit at cost 0: Remaining, ResetAfter, and for a
	// calendar quota its period's length (Window).
	Decision domain.Decision
}

// Meter returns what u's limit counts: "tokens" for a token limit,
// "requests" for any other.
func (u LimitUsage) Meter() string {
	if u.Limit.Reserve {
		return "tokens"
	}
	return "requests"
}

// UsageConcurrency is the Algorithm of a concurrency limit's usage.
const UsageConcurrency = "concurrency"

// Used returns what the window or period has spent: the limit less what
// remains; for a concurrency limit, the requests in flight (more than
// the limit after one lowered under running requests).
func (u LimitUsage) Used() int64 {
	if u.Limit.Concurrency {
		return u.Decision.Held
	}
	return max(u.Limit.Rule.Limit-u.Decision.Remaining, 0)
}

// Usage returns every limit that applies to tenant id, with its budget as
// it stands: the global limits in the policy's order, then each route's
// own limits, routes in the policy's order. It reads the store in one
// round trip, spends nothing, creates no key and changes no TTL.
//
// Its errors: [domain.ErrInvalidTenant] for an id that is not one,
// [ErrNoTenant] for one a tenants file does not hold ([domain.Unknown],
// the tenant of unresolved traffic, is always held), [ErrNoUsage], and
// the store's own, wrapped.
func (e *Engine) Usage(ctx context.Context, id domain.TenantID) ([]LimitUsage, error) {
	snap := e.snap.Load()
	tenant, err := e.tenantByID(snap, id)
	if err != nil {
		return nil, err
	}
	req, routes := e.usageRequest(snap, tenant, "")
	us, err := e.peek(ctx, req, routes)
	if err != nil {
		return nil, fmt.Errorf("engine: usage of tenant %s: %w", id, err)
	}
	return us, nil
}

// Reset makes tenant id's budgets whole: of every limit, or with limit
// set of that limit only (a global limit on every route). It then
// returns the tenant's usage, as [Engine.Usage] does. Its errors are
// Usage's, [ErrNoLimit] for a limit the policy does not name, and
// [ErrReadAfterReset] (with the store's error) when the reset was made
// but the usage after it could not be read.
func (e *Engine) Reset(ctx context.Context, id domain.TenantID, limit string) ([]LimitUsage, error) {
	snap := e.snap.Load()
	if limit != "" {
		if _, ok := snap.Policy.Limit(limit); !ok {
			return nil, fmt.Errorf("%w: %q", ErrNoLimit, limit)
		}
	}
	tenant, err := e.tenantByID(snap, id)
	if err != nil {
		return nil, err
	}
	req, _ := e.usageRequest(snap, tenant, limit)
	if err := e.opts.Usage.Reset(ctx, req); err != nil {
		return nil, fmt.Errorf("engine: reset tenant %s: %w", id, err)
	}
	req, routes := e.usageRequest(snap, tenant, "")
	us, err := e.peek(ctx, req, routes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadAfterReset, err)
	}
	return us, nil
}

// tenantByID returns the tenant whose usage id asks for: with a tenants
// file, its entry there (its own rules); else any valid id, with the
// policy's rules.
func (e *Engine) tenantByID(snap *Snapshot, id domain.TenantID) (Tenant, error) {
	if e.opts.Usage == nil {
		return Tenant{}, ErrNoUsage
	}
	if _, err := domain.ParseTenantID(string(id)); err != nil {
		return Tenant{}, err
	}
	if snap.Tenants == nil || id == domain.Unknown {
		return Tenant{ID: id}, nil
	}
	t, ok := snap.Tenants.ByID(id)
	if !ok {
		return Tenant{}, fmt.Errorf("%w: %q", ErrNoTenant, id)
	}
	return *t, nil
}

// usageRequest returns the request of every limit that applies to
// tenant (only the one named only, when set), each keyed as the
// tenant's own requests key it, and the route each limit belongs to.
func (e *Engine) usageRequest(snap *Snapshot, tenant Tenant, only string) (domain.Request, []string) {
	req := domain.Request{Tenant: tenant.ID, Route: domain.DefaultRoute}
	var routes []string
	add := func(route string, l domain.PolicyLimit) {
		if only == "" || l.Name == only {
			req.Limits = append(req.Limits, e.limit(tenant, tenant.ID, route, l))
			routes = append(routes, route)
		}
	}
	for _, l := range snap.Policy.Limits() {
		add("", l)
	}
	for _, r := range snap.Policy.Declared() {
		for i, l := range r.Applied() {
			if r.Own(i) {
				add(r.Name, l)
			}
		}
	}
	return req, routes
}

// peek reads req's limits from the store. Its error is the store's, as
// it is: the caller says what the read was for.
func (e *Engine) peek(ctx context.Context, req domain.Request, routes []string) ([]LimitUsage, error) {
	if len(req.Limits) == 0 {
		return []LimitUsage{}, nil
	}
	v, err := e.opts.Usage.Peek(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]LimitUsage, len(req.Limits))
	for i, l := range req.Limits {
		algorithm := e.opts.Algorithm
		switch {
		case l.Concurrency:
			algorithm = UsageConcurrency
		case l.Calendar != nil:
			algorithm = domain.AlgorithmFixedWindow
		}
		out[i] = LimitUsage{Route: routes[i], Algorithm: algorithm, Limit: l, Decision: v.Decisions[i]}
	}
	return out, nil
}
