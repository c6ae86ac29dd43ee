// Package portstest holds the conformance suites of the ports: what every
// [ports.Limiter] (each algorithm on each store, with or without the
// decision's layers), its usage reads and resets, its concurrency limits
// and its Envoy descriptors must do, run by each store's tests against
// an injected clock or real time. It imports no store.
package portstest
