package ports

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// APIKey is an API key issued at runtime, as a store keeps it: its
// SHA-256, never the key.
type APIKey struct {
	// ID names the key in the key API and the logs; it is not secret.
	ID string
	// Tenant is the tenant the key resolves to.
	Tenant domain.TenantID
	// Hash is the SHA-256 of the key.
	Hash [sha256.Size]byte
	// Prefix is the key's first characters, to tell keys apart in a list.
	Prefix string
	// CreatedAt is when the key was issued; ExpiresAt when it stops
	// resolving (the zero time: never).
	CreatedAt, ExpiresAt time.Time
	// Removed is set on a change that takes the key out of the store
	// (revoked without grace): it resolves nowhere, whatever the clocks.
	Removed bool
}

// Live reports whether k resolves at now: neither removed nor expired.
func (k APIKey) Live(now time.Time) bool {
	return !k.Removed && (k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt))
}

// KeyCursor is a position in a key store's changes: the store's epoch
// (it changes when the store starts afresh, empty) and the number of
// changes made in it.
type KeyCursor struct {
	Epoch string
	Seq   uint64
}

// KeyChanges is what [APIKeys.Changes] answers.
type KeyChanges struct {
	// Cursor is the store's position after Keys.
	Cursor KeyCursor
	// Keys are the keys changed after the position asked about, in the
	// order of their changes, each as it stands after its change.
	Keys []APIKey
	// Gap reports that the store no longer holds every change since the
	// position asked about (its log is trimmed, or it started afresh):
	// the caller must read every key again ([APIKeys.Load]).
	Gap bool
}

// APIKeys is a store of API keys issued at runtime, shared by the
// replicas that share the store. Implementations are safe for
// concurrent use by multiple goroutines. now is the caller's clock: what
// is live, and when a revocation takes effect.
type APIKeys interface {
	// Create stores k, unless k.Tenant already has max live keys
	// ([ErrTooManyKeys]) or a key with k's id exists ([ErrKeyExists]).
	Create(ctx context.Context, k APIKey, max int, now time.Time) error
	// List returns tenant's live keys, oldest first.
	List(ctx context.Context, tenant domain.TenantID, now time.Time) ([]APIKey, error)
	// Revoke makes tenant's live key id expire at at (before its own
	// expiry), and removes it when at is not after now; it returns the
	// key as it stands. A key id tenant does not have live is
	// [ErrNoAPIKey].
	Revoke(ctx context.Context, tenant domain.TenantID, id string, at, now time.Time) (APIKey, error)
	// Changes returns at most max of the changes made after since. The
	// store may drop keys expired at now meanwhile, which are no change.
	Changes(ctx context.Context, since KeyCursor, max int, now time.Time) (KeyChanges, error)
	// Load calls each with every key the store holds, and returns a
	// position taken before it read the first: the changes after it
	// bring what Load read up to date.
	Load(ctx context.Context, each func(APIKey)) (KeyCursor, error)
}

// Errors of [APIKeys].
var (
	ErrTooManyKeys = errors.New("ports: the tenant has as many keys as it may")
	ErrKeyExists   = errors.New("ports: a key with that id exists")
	ErrNoAPIKey    = errors.New("ports: no such key")
)
