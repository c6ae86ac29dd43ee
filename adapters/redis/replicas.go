package redis

import (
	"context"
	"fmt"
	"time"
)

// MaxAnnounceTTL is the longest an announcement may last: the contract
// bounds the announcements key's TTL to 30 s.
const MaxAnnounceTTL = 30 * time.Second

// Replicas is where the gateway replicas sharing one Redis announce
// themselves and count each other (for the local fail mode's N). It is
// one key, <prefix>replicas, a sorted set of replica ids scored with
// their expiry on Redis's clock, its TTL one announcement's (at most
// [MaxAnnounceTTL]). The key carries no hash tag: it is one key, in one
// slot, on a Redis Cluster too.
//
// Replicas is safe for concurrent use by multiple goroutines. It does
// not own the client.
type Replicas struct {
	c   *Client
	key string
}

// replicasScript announces a replica and counts them (lua/replicas.lua).
var replicasScript = newScript("replicas", false)

// NewReplicas returns the Replicas of the gateways whose keys start with
// prefix. It does no I/O.
func NewReplicas(c *Client, prefix string) *Replicas {
	return &Replicas{c: c, key: prefix + "replicas"}
}

// Key returns the key the announcements live under.
func (r *Replicas) Key() string { return r.key }

// Announce records replica id as alive for ttl (capped at
// MaxAnnounceTTL), drops the announcements that expired, and returns how
// many replicas are alive: one script run (scripts/replicas.lua).
func (r *Replicas) Announce(ctx context.Context, id string, ttl time.Duration) (int, error) {
	ttl = min(ttl, MaxAnnounceTTL)
	v, err := replicasScript.run(ctx, r.c, append(replicasScript.cmdArgs(1, 2), r.key, id, windowMillis(ttl)), 1)
	if err != nil {
		return 0, err
	}
	return int(v[0]), nil
}

// Withdraw removes replica id's announcement (ZREM).
func (r *Replicas) Withdraw(ctx context.Context, id string) error {
	if err := r.c.rdb.ZRem(ctx, r.key, id).Err(); err != nil {
		return fmt.Errorf("redis: withdraw replica from %q: %w", r.key, err)
	}
	return nil
}
