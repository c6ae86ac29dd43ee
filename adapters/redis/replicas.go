package redis

import (
	"context"
	"fmt"
	"strconv"
	"sync"
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
// [MaxAnnounceTTL]), and a pub/sub channel of the same name that each
// announcing replica listens on, on the server that holds the key (on a
// Redis Cluster the master of its slot, followed through failovers and
// slot moves): Redis counts the connections subscribed there (PUBSUB
// NUMSUB), which no write to a key can raise. The key carries no hash
// tag: it is one key, in one slot, on a Redis Cluster too.
//
// Replicas is safe for concurrent use by multiple goroutines. It does
// not own the client; it owns its subscription.
type Replicas struct {
	c   *Client
	key string

	mu     sync.Mutex
	ps     *goredis.PubSub // the listener; nil when not listening
	psAddr string          // the server ps subscribed on
	closed bool            // withdrawn: no listening any more
}

// replicasScript announces a replica and counts them (lua/replicas.lua).
var replicasScript = newScript("replicas", false)

// NewReplicas returns the Replicas of the gateways whose keys start with
// prefix. It does no I/O.
func NewReplicas(c *Client, prefix string) *Replicas {
	return &Replicas{c: c, key: prefix + "replicas"}
}

// Key returns the key the announcements live under, and the name of
// the channel the replicas listen on.
func (r *Replicas) Key() string { return r.key }

// Announce records replica id as alive for ttl (capped at
// MaxAnnounceTTL), drops the announcements that expired or outlast any
// announcement (not a replica's), and returns the ones alive with their
// expiry on Redis's clock: one script run (lua/replicas.lua). Then it
// makes sure this replica listens on the channel, where the key is now.
//
// The roll's Listening is the connections subscribed on the server that
// ran the script, and only when this replica's own listener was there
// (0 otherwise: the first call, a listener lost or on another server);
// its ListenErr says why this replica could not listen (a Redis user
// without the channel, say). Neither fails the announcement. A key of
// another type (WRONGTYPE: something else wrote it) is an error
// wrapping ports.ErrKeyType.
func (r *Replicas) Announce(ctx context.Context, id string, ttl time.Duration) (ports.Roll, error) {
	where, _ := r.server(ctx) // where the key is: a listener elsewhere does not count
	r.mu.Lock()
	listened := r.ps != nil && r.psAddr == where
	r.mu.Unlock()
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
		return ports.Roll{}, fmt.Errorf("redis: announce in %q: %w", r.key, err)
	}
	if len(vals)%2 != 1 {
		return ports.Roll{}, fmt.Errorf("redis: announce in %q: %d values in the reply, want an odd number", r.key, len(vals))
	}
	listening, err := strconv.Atoi(vals[0])
	if err != nil {
		return ports.Roll{}, fmt.Errorf("redis: announce in %q: listening %q: %w", r.key, vals[0], err)
	}
	roll := ports.Roll{Alive: make([]ports.Announcement, 0, len(vals)/2)}
	for i := 1; i+1 < len(vals); i += 2 {
		exp, err := strconv.ParseInt(vals[i+1], 10, 64)
		if err != nil {
			return ports.Roll{}, fmt.Errorf("redis: announce in %q: score %q: %w", r.key, vals[i+1], err)
		}
		roll.Alive = append(roll.Alive, ports.Announcement{ID: vals[i], Expires: exp})
	}
	if listened && listening >= 1 {
		roll.Listening = listening
	}
	// No one listening where the script ran, though this replica
	// subscribed there: its listener is lost or elsewhere. Anew.
	roll.ListenErr = r.listen(ctx, where, listened && listening < 1)
	return roll, nil
}

// server returns the address of the server that holds the key: the
// Redis, or the master of the key's slot as the cluster client last
// learnt it (it learns anew from the MOVED answers a failover or a slot
// move brings).
func (r *Replicas) server(ctx context.Context) (string, error) {
	switch rdb := r.c.rdb.(type) {
	case *goredis.ClusterClient:
		node, err := rdb.MasterForKey(ctx, r.key)
		if err != nil {
			return "", fmt.Errorf("redis: the master of %q: %w", r.key, err)
		}
		return node.Options().Addr, nil
	case *goredis.Client:
		return rdb.Options().Addr, nil
	default:
		return "", fmt.Errorf("redis: replicas on a %T", rdb)
	}
}

// listen subscribes to the channel on the server at where (anew when
// stale, or when the listener is elsewhere), waiting within ctx for
// Redis to confirm it, and then drains whatever is published there
// (nothing the gateway sends: draining keeps a publisher from filling
// the connection's buffer until Redis drops it). It subscribes on that
// server's own connection, never on a replica's (a cluster URL with
// read_only would pick one).
func (r *Replicas) listen(ctx context.Context, where string, stale bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || (r.ps != nil && r.psAddr == where && !stale) {
		return nil
	}
	if r.ps != nil {
		_ = r.ps.Close() // ends its drain
		r.ps, r.psAddr = nil, ""
	}
	var node *goredis.Client
	switch rdb := r.c.rdb.(type) {
	case *goredis.ClusterClient:
		n, err := rdb.MasterForKey(ctx, r.key)
		if err != nil {
			return fmt.Errorf("redis: listen on %q: %w", r.key, err)
		}
		node = n
	case *goredis.Client:
		node = rdb
	default:
		return fmt.Errorf("redis: listen on %q: a %T", r.key, rdb)
	}
	ps := node.Subscribe(ctx, r.key)
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return fmt.Errorf("redis: listen on %q: %w", r.key, err)
	}
	msgs := ps.Channel()
	go func() {
		for range msgs {
			// drained, never read
		}
	}()
	r.ps, r.psAddr = ps, node.Options().Addr
	return nil
}

// Withdraw removes replica id's announcement (ZREM) and stops listening
// on the channel.
func (r *Replicas) Withdraw(ctx context.Context, id string) error {
	r.mu.Lock()
	r.closed = true
	if r.ps != nil {
		_ = r.ps.Close() // ends the drain too
		r.ps, r.psAddr = nil, ""
	}
	r.mu.Unlock()
	if err := r.c.rdb.ZRem(ctx, r.key, id).Err(); err != nil {
		return fmt.Errorf("redis: withdraw replica from %q: %w", r.key, err)
	}
	return nil
}
