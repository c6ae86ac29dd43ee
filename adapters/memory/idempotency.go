package memory

import (
	"context"
	"crypto/sha256"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// MaxIdempotencyKeys bounds the calls an [Idempotency] remembers at once:
// past it, a new key is refused with [ports.ErrStoreFull] until some
// expire.
const MaxIdempotencyKeys = 1 << 16

// Idempotency remembers calls made with an Idempotency-Key in process
// memory, for one replica: a digest of each tenant's key, its answer and
// its expiry. The zero value is not usable; call [NewIdempotency].
type Idempotency struct {
	mu  sync.Mutex
	m   map[[sha256.Size]byte]remembered
	now func() time.Time
	max int
}

type remembered struct {
	answer  []byte // nil while the first call runs
	expires time.Time
}

var _ ports.Idempotency = (*Idempotency)(nil)

// NewIdempotency returns an empty memory of calls; now is its clock (nil:
// time.Now).
func NewIdempotency(now func() time.Time) *Idempotency {
	if now == nil {
		now = time.Now
	}
	return &Idempotency{m: make(map[[sha256.Size]byte]remembered), now: now, max: MaxIdempotencyKeys}
}

func digest(tenant domain.TenantID, key string) [sha256.Size]byte {
	return sha256.Sum256([]byte(string(tenant) + "\x00" + key))
}

// Begin implements [ports.Idempotency].
func (m *Idempotency) Begin(_ context.Context, tenant domain.TenantID, key string, ttl time.Duration) (bool, []byte, error) {
	d := digest(tenant, key)
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.m[d]; ok && now.Before(r.expires) {
		return false, r.answer, nil
	}
	if len(m.m) >= m.max {
		m.sweep(now)
		if len(m.m) >= m.max {
			return false, nil, ports.ErrStoreFull
		}
	}
	m.m[d] = remembered{expires: now.Add(ttl)}
	return true, nil, nil
}

// Done implements [ports.Idempotency].
func (m *Idempotency) Done(_ context.Context, tenant domain.TenantID, key string, answer []byte, ttl time.Duration) error {
	d := digest(tenant, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[d] = remembered{answer: append([]byte(nil), answer...), expires: m.now().Add(ttl)}
	return nil
}

// Abandon implements [ports.Idempotency].
func (m *Idempotency) Abandon(_ context.Context, tenant domain.TenantID, key string) error {
	d := digest(tenant, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, d)
	return nil
}

// sweep drops the expired calls; m.mu is held.
func (m *Idempotency) sweep(now time.Time) {
	for d, r := range m.m {
		if !now.Before(r.expires) {
			delete(m.m, d)
		}
	}
}
