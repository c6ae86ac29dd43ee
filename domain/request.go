package domain

import "time"

// DefaultLimit is the name of the one limit that applies when no policy
// file names others: TOLLGATE_LIMIT per TOLLGATE_WINDOW.
const DefaultLimit = "default"

// Limit is one budget that applies to a request: its name (as the
// RateLimit headers show it), its rule, and the storage key its state
// lives under (built by [Key]).
type Limit struct {
	Name string
	Rule Rule
	Key  string
	// Shadow reports whether the limit is in shadow mode: it is decided
	// and spent like any other, but its denial does not deny the request
	// (see [Settle] for what it spends).
	Shadow bool
	// Calendar, when set, makes the limit a calendar quota: Rule.Limit
	// per period of the calendar, counted as a fixed window over the
	// period ([PeriodWindow]) whatever the store's algorithm, on the
	// store's clock (Redis: its server time). Key is then the base of the
	// period's key ([PeriodKey]). Rule.Window is [NominalWindow].
	Calendar *Calendar
}

// Request is what a limiter decides: one request of Tenant, spending Cost
// units from every limit in Limits. A Request is a value: a limiter reads
// it and never keeps or changes it.
type Request struct {
	// Tenant is the request's tenant ([Unknown] for unresolved traffic).
	Tenant TenantID
	// Route names the route the request matched, [DefaultLimit]'s name
	// "default" without a policy file. Layers that remember a decision
	// (the deny cache) key it by tenant and route.
	Route string
	// Limits are the limits that apply, in the order the headers list
	// them. A limiter decides against every one of them.
	Limits []Limit
	// Cost is what the request spends from each limit, at least 1. A
	// request of cost 0 is not metered, and is never put to a limiter.
	Cost int64
	// CountDenied makes every limit spend Cost whatever the verdict, as
	// a counter that increments before it decides does: a denied request
	// is counted too, and each limit decides on its own (no limit's
	// denial keeps another from counting). It is the fixed window's
	// option (the gateway's one default limit without a policy file, and
	// Envoy's rate limit service for parity); limiters of the other
	// algorithms ignore it.
	CountDenied bool
	// Decisions, if its capacity holds one Decision per limit, is where
	// the limiter writes the verdict's Decisions instead of allocating
	// them ([Settle]): the verdict's Decisions then share its array.
	// A caller that provides it owns that array for as long as it reads
	// the verdict, and gives each request its own; a layer that keeps a
	// verdict past its request copies the Decisions. Nil: the limiter
	// allocates them.
	Decisions []Decision
}

// Outcome is how a request was decided, as the decisions metric labels
// it. The zero value is [OutcomeAllowed].
type Outcome uint8

// Outcomes of a decision.
const (
	// OutcomeAllowed: every limit admitted the request, on the store.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: a limit denied it, on the store.
	OutcomeDenied
	// OutcomeShadowDenied: only limits in shadow mode would have denied
	// it; it is admitted.
	OutcomeShadowDenied
	// OutcomeError: the store failed; the fail mode decided (open admits
	// without decisions, closed denies without decisions).
	OutcomeError
	// OutcomeLocalAllowed: the store failed and the local fallback
	// admitted it.
	OutcomeLocalAllowed
	// OutcomeLocalDenied: the store failed and the local fallback denied
	// it.
	OutcomeLocalDenied
	// OutcomeCachedDenied: denied from the deny cache, without the store.
	OutcomeCachedDenied
)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "error", "local_allowed", "local_denied", "cached_denied"}

// Outcomes lists every outcome, for metrics that pre-create their series.
var Outcomes = []Outcome{OutcomeAllowed, OutcomeDenied, OutcomeShadowDenied, OutcomeError, OutcomeLocalAllowed, OutcomeLocalDenied, OutcomeCachedDenied}

// String returns the outcome's metric label: "allowed", "denied",
// "shadow_denied", "error", "local_allowed", "local_denied" or
// "cached_denied".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Verdict is a limiter's answer to a [Request]: one Decision per limit,
// in the request's order, and whether the request is admitted.
type Verdict struct {
	// Allowed reports whether the request is admitted: every limit not
	// in shadow mode admitted it (or the fail mode admits it).
	Allowed bool
	// Outcome says how it was decided.
	Outcome Outcome
	// Decisions holds one Decision per limit of the request, in its
	// order. It is nil when no limit decided: a fail mode that admits or
	// denies without the store. A limit that would have admitted a
	// request that another limit denied reports what it has left with
	// nothing spent.
	Decisions []Decision
}

// Tightest returns the index in v.Decisions of the most constrained
// enforced limit: the fewest remaining, and on a tie the later reset.
// Shadow limits never steer it (they deny nothing) unless every limit is
// in shadow mode; then it is the most constrained of them. It returns -1
// when v has no decisions.
func (v Verdict) Tightest() int {
	best, bestShadow := -1, true
	for i, d := range v.Decisions {
		if best >= 0 && d.Shadow && !bestShadow {
			continue
		}
		if best < 0 || (bestShadow && !d.Shadow) {
			best, bestShadow = i, d.Shadow
			continue
		}
		b := v.Decisions[best]
		if d.Remaining < b.Remaining || (d.Remaining == b.Remaining && d.ResetAfter > b.ResetAfter) {
			best = i
		}
	}
	return best
}

// RetryAfter returns how long until every limit that denied v would
// admit: the longest RetryAfter of its decisions, shadow limits left out
// (they deny nothing). It is zero when v is allowed.
func (v Verdict) RetryAfter() time.Duration {
	var r time.Duration
	for _, d := range v.Decisions {
		if !d.Allowed && !d.Shadow {
			r = max(r, d.RetryAfter)
		}
	}
	return r
}

// Settle makes the verdict of req, each of whose limits is decided by
// decide(i, cost): the request is admitted when every limit not in
// shadow mode admits it at req.Cost. decide must not change state: the
// caller spends afterwards, by one rule that every store follows
// ([Spends]):
//
//	limit i spends req.Cost  ⇔  v.Allowed && v.Decisions[i].Allowed
//
// So a request that an enforced limit denies spends nothing anywhere,
// and each limit that would have admitted it is decided again at cost 0,
// which reports what it has left untouched. A shadow limit that would
// deny an admitted request does not deny it (the verdict's outcome is
// [OutcomeShadowDenied]) and spends nothing from itself: it keeps
// exactly the state it would have if it were enforced, so its would-be
// denials are what enforcing it would deny. Every decision of a shadow
// limit has Shadow set. The verdict's decisions are written to
// req.Decisions when it has room for them, and else are Settle's one
// allocation.
func Settle(req Request, decide func(i int, cost int64) Decision) Verdict {
	n := len(req.Limits)
	dst := req.Decisions
	if cap(dst) < n {
		dst = make([]Decision, 0, n)
	}
	v := Verdict{Allowed: true, Decisions: dst[:0]}
	shadowDenied := false
	for i := range n {
		d := decide(i, req.Cost)
		if req.Limits[i].Shadow {
			d.Shadow = true
			shadowDenied = shadowDenied || !d.Allowed
		} else {
			v.Allowed = v.Allowed && d.Allowed
		}
		v.Decisions = append(v.Decisions, d)
	}
	if v.Allowed {
		if shadowDenied {
			v.Outcome = OutcomeShadowDenied
		}
		return v
	}
	v.Outcome = OutcomeDenied
	for i, d := range v.Decisions {
		if req.CountDenied {
			if !d.Allowed {
				v.Decisions[i].Remaining = 0
			}
			continue
		}
		if d.Allowed {
			v.Decisions[i] = decide(i, 0)
			v.Decisions[i].Shadow = d.Shadow
		}
	}
	return v
}

// Spends reports whether limit i of req spends req.Cost under v, the
// verdict [Settle] made: when v admits the request and limit i admits it
// (a shadow limit that would deny spends nothing), or always with
// req.CountDenied.
func Spends(req Request, v Verdict, i int) bool {
	return req.CountDenied || (v.Allowed && v.Decisions[i].Allowed)
}
