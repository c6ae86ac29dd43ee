package engine

import (
	"crypto/sha256"

	"github.com/tollgate/tollgate/domain"
)

// Tenant is a tenant the engine meters: its id and its own rules for
// named limits of the policy (a tenants file's overrides).
type Tenant struct {
	// ID is the tenant's id, [domain.Unknown] for unresolved traffic.
	ID domain.TenantID
	// Rules are the tenant's own rules by limit name; nil for most
	// tenants, who have the policy's.
	Rules map[string]domain.Rule
	// Calendars are the tenant's own calendars of calendar limits, by
	// name (its zone and billing date); nil: the policy's.
	Calendars map[string]*domain.Calendar
}

// rule returns t's rule for l: its own, else the policy's.
func (t Tenant) rule(l domain.PolicyLimit) domain.Rule {
	if r, ok := t.Rules[l.Name]; ok {
		return r
	}
	return l.Rule
}

// calendar returns t's calendar for l, a calendar limit: its own, else
// the policy's; nil for a limit with a window.
func (t Tenant) calendar(l domain.PolicyLimit) *domain.Calendar {
	if l.Calendar == nil {
		return nil
	}
	if c, ok := t.Calendars[l.Name]; ok {
		return c
	}
	return l.Calendar
}

// Directory is a set of tenants by API key: a tenants file, validated.
// It is immutable, and safe for concurrent use by multiple goroutines.
//
// It is keyed by the SHA-256 of each API key, and a request is looked up
// by the SHA-256 of the key it presents. A plain map[string]Tenant would
// compare the presented key with stored keys byte by byte, and how long a
// lookup takes would tell an attacker how many leading bytes they guessed
// right. Hashing first removes that signal: hashing takes time that
// depends on the key's length only, and what the map compares is a digest.
// The timing of that comparison can at most reveal a prefix of the digest
// of some valid key, and finding an input with a chosen digest prefix,
// let alone the key itself, is what SHA-256's preimage resistance rules
// out. The key never appears in memory as a map key, either.
type Directory struct {
	byKey map[[sha256.Size]byte]*Tenant
	byID  map[domain.TenantID]*Tenant
}

// NewDirectory returns the directory of tenants, each with its API keys.
// The caller has validated them: ids unique and valid, keys unique.
func NewDirectory(tenants []Tenant, keys [][]string) *Directory {
	sums := make([][][sha256.Size]byte, len(keys))
	for i, ks := range keys {
		for _, k := range ks {
			sums[i] = append(sums[i], sha256.Sum256([]byte(k)))
		}
	}
	return NewHashedDirectory(tenants, sums)
}

// NewHashedDirectory returns the directory of tenants, each with the
// SHA-256 of its API keys. The caller has validated them: ids unique and
// valid, digests unique.
func NewHashedDirectory(tenants []Tenant, sums [][][sha256.Size]byte) *Directory {
	d := &Directory{byKey: make(map[[sha256.Size]byte]*Tenant), byID: make(map[domain.TenantID]*Tenant, len(tenants))}
	for i := range tenants {
		t := &tenants[i]
		d.byID[t.ID] = t
		for _, sum := range sums[i] {
			d.byKey[sum] = t
		}
	}
	return d
}

// Len returns the number of tenants.
func (d *Directory) Len() int { return len(d.byID) }

// ByID returns the tenant whose id is id.
func (d *Directory) ByID(id domain.TenantID) (*Tenant, bool) {
	t, ok := d.byID[id]
	return t, ok
}

// Lookup returns the tenant whose API key is key. It does not allocate
// for keys up to 64 bytes.
func (d *Directory) Lookup(key string) (*Tenant, bool) {
	if key == "" {
		return nil, false
	}
	sum := sumKey(key)
	return d.lookupSum(&sum)
}

// lookupSum returns the tenant whose API key's SHA-256 is sum.
func (d *Directory) lookupSum(sum *[sha256.Size]byte) (*Tenant, bool) {
	t, ok := d.byKey[*sum]
	return t, ok
}
