// Package app is tollgate's HTTP gateway: configuration from the
// environment, tenant resolution, the rate-limit middleware, the echo
// responder and reverse proxy, the admin listener, and [Run], which wires
// them together and serves until its context ends.
//
// Only backend.go knows the adapters; everything else here sees the ports.
package app
