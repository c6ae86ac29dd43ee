package engine

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// DecidePlanned decides req, a request a face planned itself rather than
// described: Envoy's rate limit service, whose configuration names the
// limits of each request and their costs. req.Tenant is the subject the
// face meters the request as, req.Route labels it (the layers that
// remember decisions know a request by both), and each limit's key
// comes from [Engine.AppendDescriptorKey]. It goes to the planned
// limiter ([Options].Planned): the same store as every request
// [Engine.Decide] makes, under its layers, observed by the same Observer
// (with a nil route, since no route of the policy applies). The
// verdict's Decisions are written into dst as [ports.Limiter] says.
//
// Reports are counted: a limit of cost 0 (a check) denies once nothing
// remains of it, and a request the store denies is charged, through
// [Options].PlannedSettler, the hits of each limit that denied it (with
// PlannedChargeEvery, of every limit): a report of work done that is
// larger than what remains is still counted, so that the next check
// hears the budget is spent.
//
// Its errors are the limiter's that no layer answers for: ctx's when the
// caller went away, and [ports.ErrStoreFull] when a bounded store holds
// as many keys as it may (there is no shared subject to decide it as).
// A store that fails is no error: the fail mode answers.
func (e *Engine) DecidePlanned(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	start := time.Now()
	v, err := e.opts.Planned.Allow(ctx, req, dst)
	if err != nil {
		return domain.Verdict{}, err
	}
	if v.Decisions != nil {
		checkRemaining(req, &v)
		e.chargeDenied(ctx, req, &v)
	}
	e.observer.Decided(nil, v, time.Since(start))
	if v.Outcome == domain.OutcomeShadowDenied {
		e.shadow.Do(func(suppressed int64) {
			e.opts.Log.Info("shadow limit would deny; admitted", "route", req.Route,
				"keys", shadowDenials(req, v, func(l domain.Limit) string { return l.Key }),
				"shadow_denials_since_last_line", suppressed)
		})
	}
	return v, nil
}

// AppendDescriptorKey appends to dst the key of one of Envoy's
// descriptors of rlsDomain counted per window, in the store's layout
// ([ports.Keys].AppendDescriptor).
func (e *Engine) AppendDescriptorKey(dst []byte, rlsDomain string, window time.Duration, counter []byte) []byte {
	return e.opts.Keys.AppendDescriptor(dst, rlsDomain, window, counter)
}
