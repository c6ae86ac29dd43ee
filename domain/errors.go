package domain

import "errors"

// ErrInvalidTenant reports a tenant id that is empty, longer than
// [MaxTenantIDLen] bytes, or holds a byte outside A-Z a-z 0-9 . _ -.
var ErrInvalidTenant = errors.New("invalid tenant id")

// ErrInvalidRule reports a rule whose limit is below 1 or whose window is
// shorter than [MinWindow].
var ErrInvalidRule = errors.New("invalid rule")

// ErrInvalidPath reports a request path that [NormalizePath] refuses: one
// that climbs above "/", hides a dot segment behind an encoded slash or
// backslash, holds a malformed percent-escape, or does not start with "/".
var ErrInvalidPath = errors.New("invalid path")
