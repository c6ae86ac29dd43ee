package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/domain"
)

var (
	// ErrBadAmount is a spend outside 0 to [MaxSpend].
	ErrBadAmount = errors.New("engine: amount out of range")
	// ErrNoSpend is a spend to an engine built without [Options].Settler,
	// or of a limit that cannot be spent from (a concurrency limit).
	ErrNoSpend = errors.New("engine: cannot spend")
	// ErrReadAfterSpend is a spend that was made, whose usage could not
	// be read after it (the store failed in between).
	ErrReadAfterSpend = errors.New("engine: the spend was made; reading the usage after it failed")
	// ErrWrongRoute is a spend of a route's own limit that names another
	// route.
	ErrWrongRoute = errors.New("engine: the limit is not that route's")
)

// MaxSpend is the most one spend may charge: 10⁹ units.
const MaxSpend = 1_000_000_000

// Spend charges amount units to tenant id's limit named limit, now, in
// its current window or period, past its budget if need be (the work was
// done): a cost reported after the fact, by an application behind the
// check endpoint or for work outside a request. route, when not empty,
// must be the route the limit is the own limit of (a global limit takes
// any route, or none). It then returns the tenant's usage, as
// [Engine.Usage] does.
//
// Its errors: Usage's, [ErrNoLimit] for a limit the policy does not
// name, [ErrWrongRoute], [ErrBadAmount], [ErrNoSpend], the store's,
// wrapped, and [ErrReadAfterSpend] (with the store's error) when the
// spend was made but the usage after it could not be read.
func (e *Engine) Spend(ctx context.Context, id domain.TenantID, limit, route string, amount int64) ([]LimitUsage, error) {
	if amount < 0 || amount > MaxSpend {
		return nil, fmt.Errorf("%w: %d, want 0 to %d", ErrBadAmount, amount, MaxSpend)
	}
	snap := e.snap.Load()
	pl, owner, ok := policyLimit(snap.Policy, limit)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: %q", ErrNoLimit, limit)
	case pl.Concurrency:
		return nil, fmt.Errorf("%w: %q is a concurrency limit: it counts requests in flight", ErrNoSpend, limit)
	case e.opts.Settler == nil:
		return nil, ErrNoSpend
	case owner != "" && route != "" && route != owner:
		return nil, fmt.Errorf("%w: %q is route %q's own limit, not %q's", ErrWrongRoute, limit, owner, route)
	}
	tenant, err := e.tenantByID(snap, id)
	if err != nil {
		return nil, err
	}
	l := e.limit(tenant, tenant.ID, owner, pl)
	l.Reserve = true // settled now, with nothing reserved before
	req := domain.Request{Tenant: tenant.ID, Route: domain.DefaultRoute, Limits: []domain.Limit{l}}
	if owner != "" {
		req.Route = owner
	}
	if amount > 0 {
		if err := e.opts.Settler.Settle(ctx, req, make([]domain.Decision, 1), amount); err != nil {
			return nil, fmt.Errorf("engine: spend %d of %q for tenant %s: %w", amount, limit, id, err)
		}
	}
	req, routes := e.usageRequest(snap, tenant, "")
	us, err := e.peek(ctx, req, routes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReadAfterSpend, err)
	}
	return us, nil
}

// policyLimit returns p's limit named name and the route it is the own
// limit of ("" for a global one).
func policyLimit(p *domain.Policy, name string) (domain.PolicyLimit, string, bool) {
	for _, l := range p.Limits() {
		if l.Name == name {
			return l, "", true
		}
	}
	for _, r := range p.Declared() {
		for _, l := range r.Limits {
			if l.Name == name {
				return l, r.Name, true
			}
		}
	}
	return domain.PolicyLimit{}, "", false
}
