package engine

import (
	"context"

	"github.com/tollgate/tollgate/domain"
)

// KeepReserved, given to [Engine.Settle] as what a request used, keeps
// what its token limits reserved: an answer that succeeded without
// reporting its usage.
const KeepReserved = -1

// reservation returns what a request described by d reserves from each
// token limit of route: what d asks for, else the route's reserve; one
// unit when d only checks token limits.
func (d Described) reservation(route *domain.Route) int64 {
	switch {
	case d.CheckTokens:
		return 1
	case d.Units > 0:
		return min(d.Units, domain.MaxCostUnits)
	}
	return route.Reserve
}

// least returns the smallest reservation that serves a request described
// by d: d.Least, at least 1 (a token limit's [domain.Limit.Least]).
func (d Described) least() int64 { return max(d.Least, 1) }

// reserved returns the least that v's enforced Reserve limits spent, and
// whether there is one: what the request's answer may use of every token
// limit. A shadow limit neither caps an answer nor denies it.
func reserved(limits []domain.Limit, v domain.Verdict) (int64, bool) {
	least, any := int64(0), false
	for i, l := range limits {
		if !l.Reserve || l.Shadow || i >= len(v.Decisions) {
			continue
		}
		if s := v.Decisions[i].Spent; !any || s < least {
			least, any = s, true
		}
	}
	return least, any
}

// storeDecided reports whether the store itself decided v, so that a
// settlement through the store finds what v reserved there: not a fail
// mode's verdict (which reserved nothing, or in process).
func storeDecided(v domain.Verdict) bool {
	return v.Decisions != nil && (v.Outcome == domain.OutcomeAllowed || v.Outcome == domain.OutcomeShadowDenied)
}

// reserve finishes the decision of an admitted request with token limits:
// it notes what they reserved in res, and gives the reservation back at
// once when d only checks them. (A token limit with less left than the
// least that serves the request, d.Least, denied it at the store, all or
// nothing with its other limits.)
func (e *Engine) reserve(ctx context.Context, d Described, res *Result, req domain.Request, v *domain.Verdict) {
	if !v.Allowed || !anyReserve(req.Limits) {
		return
	}
	res.settle = storeDecided(*v) && e.opts.Settler != nil
	res.Limits, res.Verdict = req.Limits, *v
	got, ok := reserved(req.Limits, *v)
	if !ok {
		return // shadow token limits alone: settled, never capping
	}
	res.Reserved = got
	if d.CheckTokens {
		e.Settle(ctx, *res, 0)
		res.settle = false
	}
}

// Settle replaces what res's admitted request reserved from its token
// limits with used, the units its answer reported (0 gives the
// reservation back; [KeepReserved] keeps it), in the windows and periods
// its admission counted in, through the store. It does nothing for a
// request that reserved nothing at the store: one without token limits,
// denied, or admitted by a fail mode. The caller settles each admitted
// request once, when its answer has ended; a store that fails loses the
// settlement (the reservation stands), logged at most once a second.
func (e *Engine) Settle(ctx context.Context, res Result, used int64) {
	if !res.settle {
		return
	}
	if used == KeepReserved {
		used = res.kept()
	}
	used = min(max(used, 0), domain.MaxCostUnits)
	req := domain.Request{Tenant: res.Subject, Route: res.Route.Name, Limits: res.Limits}
	err := e.opts.Settler.Settle(ctx, req, res.Verdict.Decisions, used)
	if err != nil {
		e.settleLog.Do(func(n int64) {
			e.opts.Log.Warn("a token settlement failed; the reservation stands", "err", err.Error(),
				"settlements_failed_since_last_line", n)
		})
	}
	e.observer.Settled(res.Route, res.Reserved, used, err)
}

// anyReserve reports whether any of limits is a Reserve limit.
func anyReserve(limits []domain.Limit) bool {
	for _, l := range limits {
		if l.Reserve {
			return true
		}
	}
	return false
}

// kept is what a request that keeps its reservation used: what it
// reserved of its enforced token limits, else the most a shadow one
// reserved.
func (r Result) kept() int64 {
	if r.Reserved > 0 {
		return r.Reserved
	}
	var most int64
	for i, l := range r.Limits {
		if l.Reserve && i < len(r.Verdict.Decisions) {
			most = max(most, r.Verdict.Decisions[i].Spent)
		}
	}
	return most
}
