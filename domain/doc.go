// Package domain holds tollgate's rate-limiting policy: tenants, the rules
// that budget them, the decisions the policies return, and the pure
// arithmetic of every algorithm.
//
// It imports the standard library only. Time is always a parameter: nothing
// here reads the clock, talks to a store or knows about HTTP.
package domain
