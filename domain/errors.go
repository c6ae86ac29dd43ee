package domain

import "errors"

// ErrInvalidTenant reports a tenant id that is empty, longer than
// [MaxTenantIDLen] bytes, or holds a byte outside A-Z a-z 0-9 . _ -.
var ErrInvalidTenant = errors.New("invalid tenant id")

// ErrInvalidRule reports a rule that [Rule.Validate] refuses: a limit
// outside 1 to [MaxLimit], a window outside [MinWindow] to [MaxWindow],
// or more than one request per [MinInterval].
var ErrInvalidRule = errors.New("invalid rule")

// ErrInvalidPath reports a request path that [NormalizePath] or
// [MatchPath] refuses: one that climbs above "/" (also as a lenient
// upstream reads it), hides a dot segment behind an encoded slash or
// backslash, removes with ".." a segment that upstreams split or drop,
// holds an encoded slash in a segment's parameters, holds a malformed
// percent-escape, or does not start with "/". The gateway answers 400
// and spends nothing.
var ErrInvalidPath = errors.New("invalid path")

// ErrAmbiguousMethod reports a request that names another method for
// the upstream to serve it as (a method override: X-HTTP-Method-Override,
// a "_method" parameter) on which it would match another route than on
// its own method: an upstream that honours the override serves the one,
// one that does not the other, and no one route is right. The gateway
// answers 400 and spends nothing.
var ErrAmbiguousMethod = errors.New("ambiguous method")
