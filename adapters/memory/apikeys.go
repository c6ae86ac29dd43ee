package memory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// KeyLogLen is how many changes an [APIKeys] keeps for [APIKeys.Changes]:
// a reader further behind reads every key again.
const KeyLogLen = 4096

// APIKeys is a store of API keys issued at runtime, in process memory,
// for one replica: their SHA-256, never the keys. A revoked key is gone
// at once; an expired one when its tenant's keys are next created or
// listed. It is safe for concurrent use by multiple goroutines.
type APIKeys struct {
	epoch string

	mu       sync.Mutex // guards byID, byTenant, log, seq
	byID     map[string]ports.APIKey
	byTenant map[domain.TenantID][]string // ids, oldest first
	log      []ports.APIKey               // a ring of the last KeyLogLen changes: change n (from 1) at (n-1) % KeyLogLen
	seq      uint64                       // the number of changes made
}

var _ ports.APIKeys = (*APIKeys)(nil)

// NewAPIKeys returns an empty store.
func NewAPIKeys() *APIKeys {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &APIKeys{epoch: hex.EncodeToString(b[:]), byID: make(map[string]ports.APIKey), byTenant: make(map[domain.TenantID][]string)}
}

// Create stores k (see [ports.APIKeys]).
func (s *APIKeys) Create(_ context.Context, k ports.APIKey, max int, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.byID[k.ID]; dup {
		return ports.ErrKeyExists
	}
	if len(s.prune(k.Tenant, now)) >= max {
		return ports.ErrTooManyKeys
	}
	k.Removed = false
	s.byID[k.ID] = k
	s.byTenant[k.Tenant] = append(s.byTenant[k.Tenant], k.ID)
	s.record(k)
	return nil
}

// List returns tenant's live keys (see [ports.APIKeys]).
func (s *APIKeys) List(_ context.Context, tenant domain.TenantID, now time.Time) ([]ports.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.prune(tenant, now)
	out := make([]ports.APIKey, len(ids))
	for i, id := range ids {
		out[i] = s.byID[id]
	}
	return out, nil
}

// Revoke ends tenant's key id at at (see [ports.APIKeys]).
func (s *APIKeys) Revoke(_ context.Context, tenant domain.TenantID, id string, at, now time.Time) (ports.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.byID[id]
	if !ok || k.Tenant != tenant || !k.Live(now) {
		return ports.APIKey{}, ports.ErrNoAPIKey
	}
	if k.ExpiresAt.IsZero() || at.Before(k.ExpiresAt) {
		k.ExpiresAt = at
	}
	if !at.After(now) {
		k.Removed = true
		s.remove(k)
	} else {
		s.byID[id] = k
	}
	s.record(k)
	return k, nil
}

// Changes returns the changes after since (see [ports.APIKeys]).
func (s *APIKeys) Changes(_ context.Context, since ports.KeyCursor, max int, _ time.Time) (ports.KeyChanges, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := ports.KeyCursor{Epoch: s.epoch, Seq: s.seq}
	first := s.seq - uint64(len(s.log)) + 1 // the oldest change kept
	if since.Epoch != s.epoch || since.Seq > s.seq || since.Seq+1 < first {
		return ports.KeyChanges{Cursor: cur, Gap: true}, nil
	}
	n := min(s.seq-since.Seq, uint64(max))
	out := make([]ports.APIKey, n)
	for i := range out {
		out[i] = s.log[(since.Seq+uint64(i))%KeyLogLen] // change since.Seq+1+i
	}
	cur.Seq = since.Seq + n
	return ports.KeyChanges{Cursor: cur, Keys: out}, nil
}

// Load calls each with every key (see [ports.APIKeys]).
func (s *APIKeys) Load(_ context.Context, each func(ports.APIKey)) (ports.KeyCursor, error) {
	s.mu.Lock()
	keys := make([]ports.APIKey, 0, len(s.byID))
	for _, k := range s.byID {
		keys = append(keys, k)
	}
	cur := ports.KeyCursor{Epoch: s.epoch, Seq: s.seq}
	s.mu.Unlock()
	for _, k := range keys {
		each(k)
	}
	return cur, nil
}

// prune drops tenant's expired keys and returns the ids of its live
// ones. It requires s.mu held.
func (s *APIKeys) prune(tenant domain.TenantID, now time.Time) []string {
	ids := s.byTenant[tenant]
	live := ids[:0]
	for _, id := range ids {
		if s.byID[id].Live(now) {
			live = append(live, id)
		} else {
			delete(s.byID, id)
		}
	}
	if len(live) == 0 {
		delete(s.byTenant, tenant)
		return nil
	}
	s.byTenant[tenant] = live
	return live
}

// remove takes k out of the store. It requires s.mu held.
func (s *APIKeys) remove(k ports.APIKey) {
	delete(s.byID, k.ID)
	ids := slices.DeleteFunc(s.byTenant[k.Tenant], func(id string) bool { return id == k.ID })
	if len(ids) == 0 {
		delete(s.byTenant, k.Tenant)
		return
	}
	s.byTenant[k.Tenant] = ids
}

// record appends the change k to the log. It requires s.mu held.
func (s *APIKeys) record(k ports.APIKey) {
	s.seq++
	if len(s.log) < KeyLogLen {
		s.log = append(s.log, k)
		return
	}
	s.log[(s.seq-1)%KeyLogLen] = k
}
