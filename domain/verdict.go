package domain

import "time"

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
	// OutcomeCachedDenied: denied from a layer's memory of an earlier
	// denial, without the store.
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
	// Allowed reports whether the request is admitted: by the rule of
	// [Admits] (every enforced limit admitted it, and the quota limits
	// did not all deny it), or because the fail mode admits it.
	Allowed bool
	// Outcome says how it was decided.
	Outcome Outcome
	// Unavailable reports that the store could not decide and the fail
	// mode denied the request (closed) for that reason, not because a
	// limit is reached. Allowed is then false and Decisions nil.
	Unavailable bool
	// Decisions holds one Decision per limit of the request, in its
	// order. It is nil when no limit decided: a fail mode that admits or
	// denies without the store. A limit that would have admitted a
	// request that another limit denied reports what it has left with
	// nothing spent.
	Decisions []Decision
	// Release, when not nil, gives back the slots of the concurrency
	// limits ([Limit.Concurrency]) that the admitted request took, on
	// the store that took them. Whoever holds the verdict calls it once
	// the request has ended, however it ended; it is idempotent and safe
	// for concurrent use. It is nil when the request took no slot (it was
	// denied, has no concurrency limit, or the fail mode admitted it
	// without a store).
	Release func()
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

// RetryAfter returns how long until a request that v denied would be
// admitted: until every enforced limit that denied it admits (the
// longest of their RetryAfter) and, when it was denied because every
// quota limit denied it, until one of them admits (the shortest of
// theirs). Shadow limits are left out (they deny nothing). It is zero
// when v is allowed.
func (v Verdict) RetryAfter() time.Duration {
	var r, quota time.Duration
	quotas, quotaDenied := 0, 0
	for _, d := range v.Decisions {
		switch {
		case d.Quota:
			quotas++
			if !d.Allowed && !d.Shadow {
				if quotaDenied == 0 || d.RetryAfter < quota {
					quota = d.RetryAfter
				}
				quotaDenied++
			}
		case !d.Allowed && !d.Shadow:
			r = max(r, d.RetryAfter)
		}
	}
	if quotas > 0 && quotaDenied == quotas {
		r = max(r, quota)
	}
	return r
}

// Admits reports whether decisions, one per limit of a request with
// their limits' Shadow and Quota, admit it: every enforced limit (in
// neither mode) admits it, and if it has quota limits, one of them admits
// it or is in shadow mode (Envoy's quota_mode: the quota limits deny only
// together). Shadow limits never deny. It is [Settle]'s rule, and every
// store's.
func Admits(decisions []Decision) bool {
	quotas, quotaDenied := 0, 0
	for _, d := range decisions {
		if d.Quota {
			quotas++
		}
		switch {
		case d.Allowed, d.Shadow:
		case d.Quota:
			quotaDenied++
		default:
			return false
		}
	}
	return quotas == 0 || quotaDenied < quotas
}

// Settle makes the verdict of req, counted by c, each of whose limits is
// decided by decide(i, cost), cost being what limit i spends
// ([Limit.Cost]) plus what the limits before it with the same key spend
// (one state, counted in order). The request is admitted when every
// enforced limit (not in shadow or quota mode) admits it and, if it has
// quota limits, one of them admits it or is in shadow mode. decide must
// not change state: the caller spends afterwards, by one rule that every
// store follows ([Spends]):
//
//	limit i spends its Cost  ⇔  c == CountEvery || v.Allowed && (v.Decisions[i].Allowed || c == CountHits)
//
// So under [CountAdmitted] and [CountHits] a request that the limits
// deny spends nothing anywhere, and each limit that would have admitted
// it is decided again at cost 0, which reports what it has left
// untouched. A shadow limit that would deny an admitted request does not
// deny it (the verdict's outcome is [OutcomeShadowDenied]) and, under
// CountAdmitted, spends nothing from itself: it keeps exactly the state
// it would have if it were enforced, so its would-be denials are what
// enforcing it would deny; under CountHits or CountEvery it spends (and
// reports nothing left), as a counter does. Every decision carries its
// limit's Shadow and Quota.
//
// A Reserve limit ([Limit.Reserve]) that its Cost would deny while
// something remains (at least its Least) is decided again at what
// remains: it admits, and
// spends less than its Cost, all or nothing with the request's other
// limits as any limit. Its decision's Spent is what it spends, by the
// rule above, at its Cost or at what remained (0 when it spends
// nothing); the caller spends Spent from it, not Cost, and sets Mark
// where it counted. A Reserve limit that spends nothing has Mark
// [NoMark]. The verdict's Decisions are written into dst[:0] when it has
// room for len(req.Limits), and else are Settle's one allocation.
func Settle(req Request, c Counting, dst []Decision, decide func(i int, cost int64) Decision) Verdict {
	n := len(req.Limits)
	if cap(dst) < n {
		dst = make([]Decision, 0, n)
	}
	v := Verdict{Decisions: dst[:0]}
	shadowDenied, reserves := false, false
	for i := range n {
		lim := req.Limits[i]
		ahead := req.ahead(i)
		d := decide(i, ahead+lim.Cost)
		if lim.Reserve {
			reserves = true
			d = reserve(d, i, ahead, lim.Cost, max(lim.Least, 1), decide)
		}
		d.Shadow, d.Quota = lim.Shadow, lim.Quota
		shadowDenied = shadowDenied || (d.Shadow && !d.Allowed)
		v.Decisions = append(v.Decisions, d)
	}
	v.Allowed = Admits(v.Decisions)
	if v.Allowed {
		if shadowDenied {
			v.Outcome = OutcomeShadowDenied
		}
		if c != CountAdmitted {
			for i := range v.Decisions {
				if !v.Decisions[i].Allowed && !req.Limits[i].Concurrency {
					v.Decisions[i].Remaining = 0 // counted: nothing is left
				}
			}
		}
		if reserves {
			spent(req, c, v)
		}
		return v
	}
	v.Outcome = OutcomeDenied
	for i, d := range v.Decisions {
		if c == CountEvery && !req.Limits[i].Concurrency {
			if !d.Allowed {
				v.Decisions[i].Remaining = 0
			}
			continue
		}
		if d.Allowed {
			v.Decisions[i] = decide(i, 0)
			v.Decisions[i].Shadow, v.Decisions[i].Quota = d.Shadow, d.Quota
		}
	}
	if reserves {
		spent(req, c, v)
	}
	return v
}

// NoMark is the [Decision.Mark] of a Reserve limit that spent nothing
// (the request was denied, or the limit in shadow mode would have
// denied it): a settlement leaves it as it is.
const NoMark = -1

// reserve returns d, Reserve limit i's decision at its cost (cost units
// after ahead units of the limits before it on its key), decided again
// at what remains when that denies and at least least remains; Spent
// holds the cost it was decided at (spent () keeps it only when it
// spends).
func reserve(d Decision, i int, ahead, cost, least int64, decide func(int, int64) Decision) Decision {
	if !d.Allowed {
		if left := d.Remaining - ahead; left >= least && left < cost {
			cost = left
			d = decide(i, ahead+cost)
		}
	}
	d.Spent = cost
	return d
}

// spent settles the Spent of v's Reserve limits: what each spends by
// [Spends] (its cost, or what remained), 0 with [NoMark] when it spends
// nothing.
func spent(req Request, c Counting, v Verdict) {
	for i := range v.Decisions {
		switch {
		case !req.Limits[i].Reserve:
		case Spends(req, c, v, i) && v.Decisions[i].Spent > 0:
		default:
			v.Decisions[i].Spent, v.Decisions[i].Mark = 0, NoMark
		}
	}
}

// Spends reports whether limit i of req spends its Cost under v, the
// verdict [Settle] made counting by c: when v admits the request and
// limit i admits it (a shadow limit that would deny spends nothing), or
// c is [CountHits]; always when c is [CountEvery]. A concurrency limit
// spends (takes a slot) only when v admits the request and it admits it,
// whatever c says (and a limit of cost 0, a check, takes none): a
// request holds no slot it would not give back. A Reserve limit that
// spends spends its decision's Spent, not its Cost.
func Spends(req Request, c Counting, v Verdict, i int) bool {
	if req.Limits[i].Concurrency {
		return v.Allowed && v.Decisions[i].Allowed && req.Limits[i].Cost > 0
	}
	return c == CountEvery || (v.Allowed && (c == CountHits || v.Decisions[i].Allowed))
}
