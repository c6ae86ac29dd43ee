package engine

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// checkRemaining makes each limit of v that req checks (cost 0) deny when
// nothing remains of it: a check asks whether the budget has anything
// left, as one after reports of work done past it must hear that it has
// not. It reports whether it changed v.
func checkRemaining(req domain.Request, v *domain.Verdict) bool {
	changed := false
	for i, l := range req.Limits {
		d := &v.Decisions[i]
		if l.Cost == 0 && !l.Concurrency && d.Allowed && d.Remaining <= 0 {
			d.Allowed, d.RetryAfter = false, max(d.ResetAfter, time.Millisecond)
			changed = true
		}
	}
	if changed && v.Allowed && !domain.Admits(v.Decisions) {
		v.Allowed, v.Outcome = false, domain.OutcomeDenied
	}
	return changed
}

// chargeDenied charges, through the planned store's settler, what a
// planned request the store denied did not spend: the hits of each
// enforced limit that denied it (a report larger than what remained is
// still work done), or with PlannedChargeEvery every limit's hits. The
// limits it charges report nothing remaining. A verdict the store did
// not decide (a fail mode's, a layer's memory of a denial) is left as
// it is: nothing reached the store, and nothing is charged.
func (e *Engine) chargeDenied(ctx context.Context, req domain.Request, v *domain.Verdict) {
	if e.opts.PlannedSettler == nil || v.Allowed || v.Outcome != domain.OutcomeDenied || v.Decisions == nil {
		return
	}
	charged := func(i int) bool {
		l, d := req.Limits[i], v.Decisions[i]
		if l.Cost == 0 || l.Concurrency {
			return false
		}
		return e.opts.PlannedChargeEvery || (!d.Allowed && !l.Shadow)
	}
	// One settlement per distinct cost (a request's descriptors mostly
	// share the request's hits_addend): the keys of one request share a
	// slot, so each is one round trip.
	var done []int64
	for i := range req.Limits {
		if !charged(i) {
			continue
		}
		cost := req.Limits[i].Cost
		if containsCost(done, cost) {
			continue
		}
		done = append(done, cost)
		batch := domain.Request{Tenant: req.Tenant, Route: req.Route}
		for j, l := range req.Limits {
			if charged(j) && l.Cost == cost {
				l.Reserve = true
				batch.Limits = append(batch.Limits, l)
			}
		}
		if err := e.opts.PlannedSettler.Settle(ctx, batch, make([]domain.Decision, len(batch.Limits)), cost); err != nil {
			e.settleLog.Do(func(n int64) {
				e.opts.Log.Warn("charging a denied request's hits failed", "err", err.Error(),
					"failures_since_last_line", n)
			})
			return
		}
	}
	for i := range req.Limits {
		if charged(i) {
			v.Decisions[i].Remaining = 0
		}
	}
}

func containsCost(costs []int64, c int64) bool {
	for _, x := range costs {
		if x == c {
			return true
		}
	}
	return false
}
