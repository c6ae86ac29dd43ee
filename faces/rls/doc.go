// Package rls is tollgate's face for Envoy's rate limit service v3
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, and
// grpc.health.v1.Health): a drop-in for envoyproxy/ratelimit in front of
// Envoy, Istio, Envoy Gateway or Contour.
//
// It translates; it decides nothing itself. A RateLimitRequest is matched
// against the envoyproxy/ratelimit configuration ([rlsconf.Config]) into
// one limit per descriptor that has one, keyed as envoyproxy/ratelimit
// counts ([engine.Engine.AppendDescriptorKey]); the engine decides those
// limits with its planned limiter (the same store as every other face's,
// built to count Envoy's hits in windows aligned to the epoch, under its
// own layers); the verdict becomes the RateLimitResponse, field by field
// as envoyproxy/ratelimit (snapshot f2fb157) answers: overall_code, and
// per descriptor code, current_limit (requests_per_unit, unit, name),
// limit_remaining and duration_until_reset.
//
// One difference is deliberate: a request that any descriptor denies
// spends nothing from the others (all or nothing), where
// envoyproxy/ratelimit counts every descriptor's hits whatever the
// verdict; a planned limiter that counts every hit
// (TOLLGATE_RLS_COUNT_DENIED, the fixed window's) restores its counting.
// Every request it admits counts exactly as envoyproxy/ratelimit counts
// it, shadow and quota descriptors over their limits included.
package rls
