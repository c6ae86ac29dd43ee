// Package ports declares the contracts tollgate's core depends on: a
// [Counter] for fixed-window counting and a [Limiter] that decides.
// Implementations live in adapters/; the conformance tests every
// implementation must pass live in ports/portstest.
package ports
