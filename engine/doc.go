// Package engine is tollgate's decision engine: it turns a request as a
// face describes it ([Described]: the credentials that name a tenant, a
// method, a path, a client address) into a [Result] — the tenant, the
// route, the limits that apply and the verdict of the store under its
// layers. It knows the domain and the ports, and nothing about HTTP,
// gRPC or a store: every face (the reverse proxy, the check endpoint,
// Envoy's rate limit service, the admin API) is a thin translator over
// it, and the composition root gives it its limiter.
//
// What it decides with is a [Snapshot] (a policy and, with a tenants
// file, the tenants): immutable, swapped whole on a reload, so a request
// sees one generation of the files, never a mix.
package engine
