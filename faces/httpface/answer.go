package httpface

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/engine"
)

// Answer maps the engine's result for r to HTTP, as every HTTP face does
// (docs/http.md, docs/edge.md), and tells the access log the outcome:
//
//   - rejected (no tenant named, TOLLGATE_ANONYMOUS=reject): 401 with
//     WWW-Authenticate: Bearer;
//   - a route of cost 0, or one without limits: nothing is written, and
//     Answer reports the request admitted;
//   - admitted with decisions (also when a shadow limit would have
//     denied): the rate-limit headers are set, and the request admitted;
//   - admitted without decisions (the fail mode open): nothing is
//     written, and the request admitted;
//   - denied with decisions: the rate-limit headers, Retry-After and the
//     denial's body, with status denyStatus (429 on the proxy);
//   - unavailable (the store failed, the fail mode closed): 503,
//     Retry-After 1.
//
// For an admitted request the face then answers: the proxy forwards,
// the check endpoint says 200. For the others Answer has written the
// whole answer and returns its status. now gives the time of
// X-RateLimit-Reset; nil means time.Now.
func Answer(w http.ResponseWriter, r *http.Request, res engine.Result, denyStatus int, now func() time.Time) (status int, admitted bool) {
	if res.Rejected {
		SetOutcome(r.Context(), res.Tenant, res.Route.Name, OutcomeRejected)
		WriteUnauthorized(w, r)
		return http.StatusUnauthorized, false
	}
	if !res.Metered {
		SetOutcome(r.Context(), res.Tenant, res.Route.Name, OutcomeUnmetered)
		return 0, true
	}
	v := res.Verdict
	SetOutcome(r.Context(), res.Tenant, res.Route.Name, v.Outcome.String())
	if v.Unavailable {
		WriteUnavailable(w, r)
		return http.StatusServiceUnavailable, false
	}
	if v.Allowed && len(v.Decisions) == 0 {
		return 0, true // the fail mode admitted it: no budget to show
	}
	if now == nil {
		now = time.Now
	}
	SetRateLimitHeaders(w.Header(), res.Limits, v, now())
	if !v.Allowed {
		WriteDenied(w, r, denyStatus, v)
		return denyStatus, false
	}
	return 0, true
}
