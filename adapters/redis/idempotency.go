package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Idempotency remembers calls made with an Idempotency-Key on Redis, for
// every replica: one string per call under [keys.Idempotency] (a digest
// of the caller's key, in the tenant's slot), empty while the first call
// runs and its answer after, always with a TTL.
type Idempotency struct {
	client *conn.Client
	prefix string
}

var _ ports.Idempotency = (*Idempotency)(nil)

// NewIdempotency returns the calls remembered on client's Redis, under
// prefix (TOLLGATE_KEY_PREFIX).
func NewIdempotency(client *conn.Client, prefix string) *Idempotency {
	return &Idempotency{client: client, prefix: prefix}
}

// Begin implements [ports.Idempotency]: SET NX with the TTL, and the
// value when another call claimed the key first.
func (m *Idempotency) Begin(ctx context.Context, tenant domain.TenantID, key string, ttl time.Duration) (bool, []byte, error) {
	k := keys.Idempotency(m.prefix, tenant, key)
	rdb := m.client.Redis()
	for range 2 { // a claim that expires between SET and GET is claimed afresh, once
		ok, err := rdb.SetNX(ctx, k, "", ttl).Result()
		if err != nil {
			return false, nil, fmt.Errorf("redis: claim an idempotency key: %w", err)
		}
		if ok {
			return true, nil, nil
		}
		answer, err := rdb.Get(ctx, k).Bytes()
		switch {
		case errors.Is(err, goredis.Nil):
			continue
		case err != nil:
			return false, nil, fmt.Errorf("redis: read an idempotency key: %w", err)
		case len(answer) == 0:
			return false, nil, nil // the first call is still being made
		}
		return false, answer, nil
	}
	return false, nil, nil
}

// Done implements [ports.Idempotency]: SET with the TTL.
func (m *Idempotency) Done(ctx context.Context, tenant domain.TenantID, key string, answer []byte, ttl time.Duration) error {
	if err := m.client.Redis().Set(ctx, keys.Idempotency(m.prefix, tenant, key), answer, ttl).Err(); err != nil {
		return fmt.Errorf("redis: record an idempotent answer: %w", err)
	}
	return nil
}

// Abandon implements [ports.Idempotency]: DEL.
func (m *Idempotency) Abandon(ctx context.Context, tenant domain.TenantID, key string) error {
	if err := m.client.Redis().Del(ctx, keys.Idempotency(m.prefix, tenant, key)).Err(); err != nil {
		return fmt.Errorf("redis: drop an idempotency key: %w", err)
	}
	return nil
}
