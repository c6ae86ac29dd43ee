package redis

import (
	"context"
	"fmt"
	"sync"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
)

// Resets carries the usage API's resets between the replicas sharing
// one Redis, so that each forgets what it remembers of a tenant (its
// deny cache) at once: a pub/sub channel, <prefix>resets, whose messages
// are tenant ids. Classic pub/sub reaches every node of a Redis Cluster.
//
// Delivery is at most once: a replica whose subscription is down while
// a reset is announced does not hear it (go-redis subscribes again on
// its own). What it remembers must therefore expire on its own too; the
// deny cache serves a denial for a second at most.
//
// Resets is safe for concurrent use by multiple goroutines. It owns its
// subscription, not the client.
type Resets struct {
	c       *Client
	channel string
	ps      *goredis.PubSub
	done    chan struct{}
	once    sync.Once
}

// ListenResets subscribes to the resets of the gateways whose keys start
// with prefix and calls heard with each tenant announced (its own
// announcements included), one at a time, until Close. A message that is
// not a valid tenant id is ignored. Anyone who can PUBLISH on the channel
// can make replicas forget a tenant's denials (they ask Redis again) and
// its local fail-mode counts (more admitted in an outage): Redis is
// trusted.
func ListenResets(c *Client, prefix string, heard func(domain.TenantID)) *Resets {
	r := &Resets{c: c, channel: prefix + "resets", done: make(chan struct{})}
	r.ps = c.rdb.Subscribe(context.Background(), r.channel)
	msgs := r.ps.Channel()
	go func() {
		defer close(r.done)
		for m := range msgs {
			if domain.ValidTenantID(m.Payload) {
				heard(domain.TenantID(m.Payload))
			}
		}
	}()
	return r
}

// Channel returns the channel resets are announced on.
func (r *Resets) Channel() string { return r.channel }

// Announce tells every replica listening that tenant's budgets were
// reset: one PUBLISH.
func (r *Resets) Announce(ctx context.Context, tenant domain.TenantID) error {
	if err := r.c.rdb.Publish(ctx, r.channel, string(tenant)).Err(); err != nil {
		return fmt.Errorf("redis: announce the reset of %s on %s: %w", tenant, r.channel, err)
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
