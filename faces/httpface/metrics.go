package httpface

import (
	"time"

	"github.com/tollgate/tollgate/domain"
)

// Metrics records what an HTTP face answers. Its methods must be cheap
// and safe for concurrent use. No method takes a tenant: labels are
// bounded by the policy, never by tenants.
type Metrics interface {
	// Request counts one answer on route with status code.
	Request(route *domain.Route, code int)
	// Unrouted counts an answer given before a route was matched (a 400
	// for the path), on the route "default".
	Unrouted(code int)
	// Upstream observes how long route's upstream (or the echo
	// responder) took for an admitted request.
	Upstream(route *domain.Route, took time.Duration)
}
