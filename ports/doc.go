// Package ports declares the contracts tollgate's core depends on: a
// [Limiter] that decides a request against every limit that applies, the
// [Layer]s that wrap one, and a [Pinger] for readiness. Implementations
// live in adapters/; the conformance tests every implementation must pass
// live in ports/portstest.
package ports
