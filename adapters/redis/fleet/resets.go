package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// Resets carries the usage API's resets between the replicas sharing
// one Redis, so that each forgets what it remembers of a tenant (its
// deny cache, its local fail mode's counts) at once: a pub/sub channel,
// <prefix>resets, whose messages are a tenant id, then a line for each
// key reset, less the start every key of the tenant shares
// (keys.TenantKeys). Classic pub/sub reaches every node of a Redis
// Cluster.
//
// Delivery is at most once: a replica whose subscription is down while
// a reset is announced does not hear it (go-redis subscribes again on
// its own). What it remembers must therefore expire on its own too; the
// deny cache serves a denial for a second at most.
//
// Resets is safe for concurrent use by multiple goroutines. It owns its
// subscription, not the client.
type Resets struct {
	c       *conn.Client
	channel string
	ps      *goredis.PubSub
	done    chan struct{}
	once    sync.Once
}

// maxResetKeys bounds the keys one message may name.
const maxResetKeys = 256

// ListenResets subscribes to the resets of the gateways whose keys start
// with prefix and calls heard with each reset announced (its own
// announcements included), one at a time, until Close: the tenant, and
// the keys reset less their start (nil for a message of a tenant id
// alone). A message that is not one is ignored. Anyone who can PUBLISH
// on the channel can make replicas forget a tenant's denials (they ask
// Redis again) and its local fail-mode counts (more admitted in an
// outage), never another's: Redis is trusted.
func ListenResets(c *conn.Client, prefix string, heard func(tenant domain.TenantID, keys []string)) *Resets {
	r := &Resets{c: c, channel: prefix + "resets", done: make(chan struct{})}
	r.ps = c.Redis().Subscribe(context.Background(), r.channel)
	msgs := r.ps.Channel()
	go func() {
		defer close(r.done)
		for m := range msgs {
			if t, keys, ok := parseReset(m.Payload); ok {
				heard(t, keys)
			}
		}
	}()
	return r
}

// parseReset reads a reset's message: a tenant id, then a line per key
// suffix, each empty or of the characters keys are built of past the
// tenant (a-z 0-9 _ - : @).
func parseReset(msg string) (domain.TenantID, []string, bool) {
	id, rest, more := strings.Cut(msg, "\n")
	if !domain.ValidTenantID(id) {
		return "", nil, false
	}
	if !more {
		return domain.TenantID(id), nil, true
	}
	keys := strings.SplitN(rest, "\n", maxResetKeys+1)
	if len(keys) > maxResetKeys {
		return "", nil, false
	}
	for _, k := range keys {
		if len(k) > 4*domain.MaxNameLen || strings.TrimLeft(k, "abcdefghijklmnopqrstuvwxyz0123456789_-:@") != "" {
			return "", nil, false
		}
	}
	return domain.TenantID(id), keys, true
}

// Channel returns the channel resets are announced on.
func (r *Resets) Channel() string { return r.channel }

// Announce tells every replica listening that tenant's budgets were
// reset, and which: keys are the keys reset less the start every key of
// the tenant shares (keys.TenantKeys; "" for a key that is just
// that). One PUBLISH for every 256 keys.
func (r *Resets) Announce(ctx context.Context, tenant domain.TenantID, keys []string) error {
	for first := true; first || len(keys) > 0; first = false {
		part := keys[:min(len(keys), maxResetKeys)]
		keys = keys[len(part):]
		msg := string(tenant)
		if len(part) > 0 {
			msg += "\n" + strings.Join(part, "\n")
		}
		if err := r.c.Redis().Publish(ctx, r.channel, msg).Err(); err != nil {
			return fmt.Errorf("redis: announce the reset of %s on %s: %w", tenant, r.channel, err)
		}
	}
	return nil
}

// Close ends the subscription and waits until heard is no longer
// called. It is idempotent.
func (r *Resets) Close() error {
	var err error
	r.once.Do(func() {
		err = r.ps.Close()
		<-r.done
	})
	return err
}
