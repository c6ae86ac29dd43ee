// Package domain holds tollgate's rate-limiting policy: tenants, the rules
// that budget them, the decisions the policies return, the pure
// arithmetic of every algorithm, and the normal form of the request
// paths that routes match ([NormalizePath], RFC 3986 syntax only).
//
// It imports the standard library only. Time is always a parameter: nothing
// here reads the clock, talks to a store or knows about HTTP.
package domain
