// Package app is tollgate's composition root: configuration from the
// environment (and its checks, which exit 2 naming the variable), the
// policy, tenants and Envoy rate limit files, the wiring of a store and
// its layers under the engine, the faces (proxy, check, RLS, admin) on
// their listeners, and [Run], which serves until its context ends.
//
// Only backend.go (the store and its layers) imports the adapters;
// everything else here sees the engine and the ports.
package app
