package domain

import "fmt"

// MaxTenantIDLen is the longest valid tenant id, in bytes.
const MaxTenantIDLen = 64

// Unknown is the tenant that unresolved traffic is metered as. All such
// requests share its one budget; they never skip the limiter.
const Unknown TenantID = "unknown"

// TenantID names a tenant. A valid id is 1 to [MaxTenantIDLen] bytes of
// A-Z a-z 0-9 . _ -, so it is safe inside a storage key and an HTTP header.
// Build one with [ParseTenantID]; the zero value is not valid.
type TenantID string

// ParseTenantID returns s as a TenantID, or an error wrapping
// [ErrInvalidTenant] if s is not a valid id. The error never repeats s,
// which may be attacker-controlled and arbitrarily long.
func ParseTenantID(s string) (TenantID, error) {
	switch i := invalidAt(s); {
	case i == -1:
		return TenantID(s), nil
	case i == len(s):
		return "", fmt.Errorf("%w: length %d, want 1 to %d", ErrInvalidTenant, len(s), MaxTenantIDLen)
	default:
		return "", fmt.Errorf("%w: byte %#x at offset %d, want A-Z a-z 0-9 . _ -", ErrInvalidTenant, s[i], i)
	}
}

// ValidTenantID reports whether s is a valid tenant id. It does not
// allocate.
func ValidTenantID(s string) bool { return invalidAt(s) == -1 }

// TenantOrUnknown returns s as a TenantID when it is valid, and [Unknown]
// otherwise: an invalid id is metered as unknown and never becomes a key
// of its own. It does not allocate.
func TenantOrUnknown(s string) TenantID {
	if !ValidTenantID(s) {
		return Unknown
	}
	return TenantID(s)
}

// invalidAt returns -1 if s is a valid tenant id, len(s) if its length is
// out of range, and otherwise the offset of its first invalid byte.
func invalidAt(s string) int {
	if len(s) == 0 || len(s) > MaxTenantIDLen {
		return len(s)
	}
	for i := 0; i < len(s); i++ {
		if !tenantByte[s[i]] {
			return i
		}
	}
	return -1
}

// tenantByte reports, per byte value, whether it may appear in a tenant id.
var tenantByte = func() (ok [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		ok[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		ok[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		ok[c] = true
	}
	ok['.'], ok['_'], ok['-'] = true, true, true
	return ok
}()
