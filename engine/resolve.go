package engine

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Credentials are what a request presents to name its tenant. A face
// reads them from its protocol: the tenant header, the API key header,
// the token of an Authorization: Bearer.
type Credentials struct {
	// Header is the tenant header's value (TOLLGATE_TENANT_HEADER): the
	// tenant, when there is no tenants file.
	Header string
	// APIKey and Bearer are the keys presented in X-API-Key and
	// Authorization: Bearer; the first known one names the tenant: a
	// key of the tenants file, else one issued at runtime.
	APIKey, Bearer string
}

// Resolve returns the tenant creds name in the current snapshot (see
// [Engine.Decide]); [domain.Unknown] (with the policy's rules) when they
// name none.
func (e *Engine) Resolve(creds Credentials) Tenant {
	t, _ := e.resolve(e.snap.Load(), creds)
	return t
}

// resolve returns the tenant creds name in snap, and whether they
// name one: by API key, a tenants file's or one issued at runtime (a
// runtime key of a tenant the tenants file does not hold names none),
// else, without a tenants file, by the tenant header.
func (e *Engine) resolve(snap *Snapshot, creds Credentials) (Tenant, bool) {
	if snap.Tenants != nil || e.opts.KeyRing != nil {
		for _, key := range [2]string{creds.APIKey, creds.Bearer} {
			if key == "" {
				continue
			}
			sum := sumKey(key)
			if snap.Tenants != nil {
				if t, ok := snap.Tenants.lookupSum(&sum); ok {
					return *t, true
				}
			}
			if e.opts.KeyRing == nil {
				continue
			}
			id, ok := e.opts.KeyRing.lookup(&sum)
			switch {
			case !ok:
			case snap.Tenants == nil:
				return Tenant{ID: id}, true
			default:
				if t, ok := snap.Tenants.ByID(id); ok {
					return *t, true
				}
			}
		}
	}
	if snap.Tenants == nil {
		id := domain.TenantOrUnknown(creds.Header)
		return Tenant{ID: id}, id != domain.Unknown
	}
	return unknownTenant, false
}

// sumKey returns the SHA-256 of key. It does not allocate for keys up
// to 64 bytes.
func sumKey(key string) [sha256.Size]byte {
	var buf [64]byte // on the stack: keys up to 64 bytes hash without allocating
	return sha256.Sum256(append(buf[:0], key...))
}

// UsesAPIKeys reports whether tenants are named by API key: a tenants
// file, or keys issued at runtime (once there is one), not a header.
func (e *Engine) UsesAPIKeys() bool {
	return e.snap.Load().Tenants != nil || (e.opts.KeyRing != nil && e.opts.KeyRing.Len() > 0)
}

// KnownKey reports whether key is a tenant's API key: of the tenants
// file, or issued at runtime and live.
func (e *Engine) KnownKey(key string) bool {
	if key == "" {
		return false
	}
	sum := sumKey(key)
	if d := e.snap.Load().Tenants; d != nil {
		if _, ok := d.lookupSum(&sum); ok {
			return true
		}
	}
	if e.opts.KeyRing == nil {
		return false
	}
	_, ok := e.opts.KeyRing.lookup(&sum)
	return ok
}

// KeyRing returns the ring of API keys issued at runtime, nil without
// one.
func (e *Engine) KeyRing() *KeyRing { return e.opts.KeyRing }

// IssueKey issues an API key for tenant id, valid for expiresIn (0: no
// expiry), and returns it (the one time it is ever seen) and its
// record. Its errors: [domain.ErrInvalidTenant] for an id that is not
// one (or [domain.Unknown]), [ErrNoTenant] for one a tenants file does
// not hold, [ErrKeyLifetime], [ports.ErrTooManyKeys], [ErrNoKeyRing], or
// the store's.
func (e *Engine) IssueKey(ctx context.Context, id domain.TenantID, expiresIn time.Duration) (string, ports.APIKey, error) {
	if err := e.keyTenant(id); err != nil {
		return "", ports.APIKey{}, err
	}
	return e.opts.KeyRing.issue(ctx, id, expiresIn)
}

// Keys returns tenant id's live API keys issued at runtime, oldest
// first. Its errors are IssueKey's for the tenant, or the store's.
func (e *Engine) Keys(ctx context.Context, id domain.TenantID) ([]ports.APIKey, error) {
	if err := e.keyTenant(id); err != nil {
		return nil, err
	}
	return e.opts.KeyRing.list(ctx, id)
}

// RevokeKey ends tenant id's API key keyID after grace (0: now): every
// replica refuses it within a second of that. It returns the key as it
// stands. Its errors: IssueKey's for the tenant, [ErrKeyGrace],
// [ports.ErrNoAPIKey] for a key the tenant does not have live, or the
// store's.
func (e *Engine) RevokeKey(ctx context.Context, id domain.TenantID, keyID string, grace time.Duration) (ports.APIKey, error) {
	if err := e.keyTenant(id); err != nil {
		return ports.APIKey{}, err
	}
	return e.opts.KeyRing.revoke(ctx, id, keyID, grace)
}

// keyTenant checks that keys may be issued to tenant id: a valid id,
// not [domain.Unknown], and with a tenants file one of its tenants.
func (e *Engine) keyTenant(id domain.TenantID) error {
	if e.opts.KeyRing == nil {
		return ErrNoKeyRing
	}
	if _, err := domain.ParseTenantID(string(id)); err != nil {
		return err
	}
	if id == domain.Unknown {
		return fmt.Errorf("%w: %q is the tenant of unresolved traffic", domain.ErrInvalidTenant, id)
	}
	if d := e.snap.Load().Tenants; d != nil {
		if _, ok := d.ByID(id); !ok {
			return fmt.Errorf("%w: %q", ErrNoTenant, id)
		}
	}
	return nil
}
