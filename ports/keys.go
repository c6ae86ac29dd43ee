package ports

import (
	"time"

	"github.com/tollgate/tollgate/domain"
)

// Keys is the layout of a store's keys, as the engine needs it: where the
// state of each limit lives. The store side builds it (the keys a live
// store holds must not change); the engine names limits through it and
// never spells a key. Implementations are safe for concurrent use.
type Keys interface {
	// Limit returns the key of subject's limit named limit, of kind, on
	// route (empty for a global limit). Distinct arguments give distinct
	// keys.
	Limit(subject domain.TenantID, route, limit string, kind KeyKind) string
	// AppendDescriptor appends to dst the key of a counter of Envoy's
	// rate limit service: counter (what envoyproxy/ratelimit counts a
	// descriptor under, less its domain) of rlsDomain, in windows of
	// window. No tenant's key is ever one of these. It does not
	// allocate when dst has room.
	AppendDescriptor(dst []byte, rlsDomain string, window time.Duration, counter []byte) []byte
	// Tenant returns what every key of tenant t starts with and no other
	// tenant's key does (for the resets other replicas hear).
	Tenant(t domain.TenantID) string
	// Period returns the key of the period that starts at start of a
	// calendar limit whose key is base: each period counts under a key
	// of its own.
	Period(base string, start time.Time) string
}

// KeyKind is the kind of state a limit's key holds.
type KeyKind uint8

// Kinds of keys.
const (
	// KeyRate is a rate limit's: the store's algorithm's state.
	KeyRate KeyKind = iota
	// KeyCalendar is a calendar quota's ([domain.Limit].Calendar): a
	// fixed window over the period, whatever the algorithm.
	KeyCalendar
	// KeyConcurrency is a concurrency limit's
	// ([domain.Limit].Concurrency): the slots held, whatever the
	// algorithm.
	KeyConcurrency
)
