package fleet

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/ports"
)

// MaxAnnounceTTL is the longest an announcement may last, so that the
// announcements key's TTL stays within the 30 s docs/redis.md states.
const MaxAnnounceTTL = 30 * time.Second

// Replicas is where the gateway replicas sharing one Redis announce
// themselves and count each other (for the local fail mode's N). It is
// one key, <prefix>replicas, a sorted set of replica ids scored with
// their expiry on Redis's clock, its TTL one announcement's (at most
// [MaxAnnounceTTL]), and a pub/sub channel of the same name that each
// announcing replica listens on, on the server that holds the key (on a
// Redis Cluster the master of its slot, followed through failovers and
// slot moves): Redis counts the connections subscribed there (PUBSUB
// NUMSUB), which no write to a key can raise. Each listener also
// subscribes to a channel of its own, <prefix>replicas:<id>, so that the
// script can tell whether this replica's listener is on the server it
// runs on. The key carries no hash tag: it is one key, in one slot, on a
// Redis Cluster too.
//
// Replicas is safe for concurrent use by multiple goroutines. It does
// not own the client; it owns its subscription.
type Replicas struct {
	c   *conn.Client
	key string

	mu      sync.Mutex
	ps      *goredis.PubSub // the listener; nil when none
	psAddr  string          // the server ps subscribed on
	dead    bool            // ps's connection is gone for good (its node client closed)
	pending bool            // a subscription is being made
	retryAt time.Time       // after a failed subscription, none before
	backoff time.Duration   // the wait after the last failure
	err     error           // the last subscription's failure; nil once listening
	misses  int             // announcements in a row the script did not find ps where it is
	closed  bool            // withdrawn: no listening any more
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the subscription being made
}

// maxMisses is how many announcements in a row may miss a listener
// where it subscribed before it is made anew: one connected but no
// longer subscribed (go-redis's own resubscription refused) answers
// PINGs, and would never be replaced.
const maxMisses = 3

// listenTimeout bounds making a subscription (a dial, TLS, AUTH, the
// SUBSCRIBE), which runs beside the announcements, never in one.
const listenTimeout = 5 * time.Second

// replicasScript announces a replica and counts them (lua/replicas.lua).
var replicasScript = conn.NewScript("replicas", mustRead("replicas.lua"))

// NewReplicas returns the Replicas of the gateways whose keys start with
// prefix. It does no I/O.
func NewReplicas(c *conn.Client, prefix string) *Replicas {
	return &Replicas{c: c, key: prefix + "replicas"}
}

// Key returns the key the announcements live under, and the name of
// the channel the replicas listen on.
func (r *Replicas) Key() string { return r.key }

// Announce records replica id as alive for ttl (capped at
// MaxAnnounceTTL), drops the announcements that expired or outlast any
// announcement (not a replica's), and returns the ones alive with their
// expiry on Redis's clock: one script run (lua/replicas.lua). Then it
// makes sure this replica listens on the channel, where the key is now:
// a subscription made in the background (retried with a growing wait,
// up to 30 s, after a failure).
//
// A Replicas announces one replica: its listener's own channel takes
// the id of the first call.
//
// The roll's Listening is the connections subscribed on the server that
// ran the script, when this replica's own listener is among them (0
// otherwise: the first call, a listener lost, or one elsewhere); its
// ListenErr is why the last subscription failed (a Redis user without
// the channel, say). Neither fails the announcement. A key of another
// type (WRONGTYPE: something else wrote it) is an error wrapping
// ports.ErrKeyType.
func (r *Replicas) Announce(ctx context.Context, id string, ttl time.Duration) (ports.Roll, error) {
	ttl = min(ttl, MaxAnnounceTTL)
	args := append(replicasScript.Args(1, 3), r.key, id, millisUp(ttl), millisUp(MaxAnnounceTTL))
	cmd := goredis.NewCmd(ctx, args...)
	err := r.c.Eval(ctx, cmd, replicasScript)
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
	roll := ports.Roll{Listening: listening, Alive: make([]ports.Announcement, 0, len(vals)/2)}
	for i := 1; i+1 < len(vals); i += 2 {
		exp, err := strconv.ParseInt(vals[i+1], 10, 64)
		if err != nil {
			return ports.Roll{}, fmt.Errorf("redis: announce in %q: score %q: %w", r.key, vals[i+1], err)
		}
		roll.Alive = append(roll.Alive, ports.Announcement{ID: vals[i], Expires: exp})
	}
	roll.ListenErr = r.keepListening(ctx, id, listening >= 1)
	return roll, nil
}

// keepListening starts a subscription, in the background, when this
// replica has none that works on the server that holds the key, and
// returns the last subscription's failure (or, without a listener, why
// the server could not be found). A listener on that server
// that the script did not find (found) is kept a few announcements (the
// script ran elsewhere, following a MOVED or an ASK: the client learns
// where the key went, and the next call follows it), then made anew.
func (r *Replicas) keepListening(ctx context.Context, id string, found bool) error {
	node, err := r.server(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.ps == nil { // not listening, and cannot start to
			return fmt.Errorf("redis: the server of %q: %w", r.key, err)
		}
		return r.err // the listener stays
	}
	addr := node.Options().Addr
	if found {
		r.misses = 0
	} else if r.ps != nil && r.psAddr == addr {
		r.misses++
	}
	working := r.ps != nil && !r.dead && r.psAddr == addr && r.misses < maxMisses
	if r.closed || r.pending || working || time.Now().Before(r.retryAt) {
		return r.err
	}
	r.pending, r.misses = true, 0
	sctx, cancel := context.WithTimeout(context.Background(), listenTimeout)
	r.cancel = cancel
	r.wg.Add(1)
	go r.subscribe(sctx, cancel, node, id)
	return r.err
}

// subscribe subscribes on node to the channel and this replica's own,
// waiting for Redis to confirm it, replaces the listener with it, and
// drains whatever is published there (nothing the gateway sends:
// draining keeps a publisher from filling the connection's buffer until
// Redis drops it). go-redis subscribes again by itself after a lost
// connection; a connection gone for good (its node client closed) marks
// the listener dead.
func (r *Replicas) subscribe(ctx context.Context, cancel context.CancelFunc, node *goredis.Client, id string) {
	defer r.wg.Done()
	defer cancel()
	ps := node.Subscribe(ctx, r.key, r.key+":"+id)
	_, err := ps.Receive(ctx)
	r.mu.Lock()
	r.pending = false
	if err != nil || r.closed {
		if err != nil && !r.closed {
			r.err = fmt.Errorf("redis: listen on %q at %s: %w", r.key, node.Options().Addr, err)
			r.backoff = min(max(2*r.backoff, time.Second), 30*time.Second)
			r.retryAt = time.Now().Add(r.backoff)
		}
		r.mu.Unlock()
		_ = ps.Close()
		return
	}
	old := r.ps
	r.ps, r.psAddr, r.dead, r.err, r.backoff = ps, node.Options().Addr, false, nil, 0
	r.mu.Unlock()
	if old != nil {
		_ = old.Close() // ends its drain; outside the lock: a reconnect in go-redis holds Close up
	}
	msgs := ps.Channel()
	go func() {
		for range msgs {
			// drained, never read
		}
		r.mu.Lock()
		if r.ps == ps {
			r.dead = true
		}
		r.mu.Unlock()
	}()
}

// server returns the client of the server that holds the key: the
// Redis, or the master of the key's slot as the cluster client last
// learnt it (it learns anew from the MOVED answers a failover or a slot
// move brings). A subscription made on it is the master's, never a
// replica's (a cluster URL with read_only would pick one).
func (r *Replicas) server(ctx context.Context) (*goredis.Client, error) {
	switch rdb := r.c.Redis().(type) {
	case *goredis.ClusterClient:
		node, err := rdb.MasterForKey(ctx, r.key)
		if err != nil {
			return nil, fmt.Errorf("redis: the master of %q: %w", r.key, err)
		}
		return node, nil
	case *goredis.Client:
		return rdb, nil
	default:
		return nil, fmt.Errorf("redis: replicas on a %T", rdb)
	}
}

// Withdraw removes replica id's announcement (ZREM) and stops listening
// on the channel, for good.
func (r *Replicas) Withdraw(ctx context.Context, id string) error {
	r.mu.Lock()
	r.closed = true
	ps, cancel := r.ps, r.cancel
	r.ps, r.psAddr = nil, ""
	r.mu.Unlock()
	if cancel != nil {
		cancel() // a subscription being made gives up, and closes itself
	}
	if ps != nil {
		_ = ps.Close() // ends the drain too
	}
	err := r.c.Redis().ZRem(ctx, r.key, id).Err()
	r.wg.Wait()
	if err != nil {
		return fmt.Errorf("redis: withdraw replica from %q: %w", r.key, err)
	}
	return nil
}

// millisUp returns d in whole milliseconds, rounded up, at least 1.
func millisUp(d time.Duration) int64 {
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
}
