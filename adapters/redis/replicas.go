package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/ports"
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
// MaxAnnounceTTL), drops the announcements that expired or outlast any
// announcement (not a replica's), and returns the ones alive with their
// expiry on Redis's clock: one script run (lua/replicas.lua). A key of
// another type (WRONGTYPE: something else wrote it) is an error wrapping
// ports.ErrKeyType.
func (r *Replicas) Announce(ctx context.Context, id string, ttl time.Duration) ([]ports.Announcement, error) {
	ttl = min(ttl, MaxAnnounceTTL)
	args := append(replicasScript.cmdArgs(1, 3), r.key, id, windowMillis(ttl), windowMillis(MaxAnnounceTTL))
	cmd := goredis.NewCmd(ctx, args...)
	err := r.c.eval(ctx, cmd, replicasScript.src)
	var vals []string
	if err == nil {
		vals, err = cmd.StringSlice()
	}
	if err != nil {
		if goredis.HasErrorPrefix(err, "WRONGTYPE") {
			err = fmt.Errorf("%w: %w", ports.ErrKeyType, err)
		}
		return nil, fmt.Errorf("redis: announce in %q: %w", r.key, err)
	}
	out := make([]ports.Announcement, 0, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		exp, err := strconv.ParseInt(vals[i+1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("redis: announce in %q: score %q: %w", r.key, vals[i+1], err)
		}
		out = append(out, ports.Announcement{ID: vals[i], Expires: exp})
	}
	return out, nil
}

// Withdraw removes replica id's announcement (ZREM).
func (r *Replicas) Withdraw(ctx context.Context, id string) error {
	if err := r.c.rdb.ZRem(ctx, r.key, id).Err(); err != nil {
		return fmt.Errorf("redis: withdraw replica from %q: %w", r.key, err)
	}
	return nil
}
