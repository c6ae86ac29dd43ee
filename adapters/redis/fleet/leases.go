package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
)

// maxOrphans bounds the slots waiting to be removed again (see
// [Leases]): past it a slot is left to its lease, which frees it all the
// same, later.
const maxOrphans = 1 << 16

// LeaseOptions configure [NewLeases].
type LeaseOptions struct {
	// Lease is how long a slot stays taken after its last renewal
	// (TOLLGATE_LEASE): a replica that vanishes frees its slots that
	// long after it last renewed them. Required, [domain.MinLease] to
	// [domain.MaxLease].
	Lease time.Duration
	// Replica names this replica among those sharing the Redis, unique
	// in the fleet: every slot it holds is "<Replica>:<request>".
	// Required.
	Replica string
	// Interval is the time between two renewals. Zero means a third of
	// Lease, so that a renewal may fail twice before a slot expires.
	Interval time.Duration
	// OnError, if not nil, is told of every failed renewal, and of every
	// release that failed (its slot is then removed again at the next
	// renewal, or freed by its lease). It must be cheap and safe for
	// concurrent use.
	OnError func(error)
}

// Leases are the concurrency slots this replica holds on Redis, as
// leases (the limiter's concurrency limits), and the renewer that keeps
// them. A slot is a member
// "<replica>:<request>" of a sorted set per tenant (and route) and
// limit, scored with its expiry on Redis's clock: taken by the
// decision's script with an expiry of now + Lease, renewed every
// Interval while its request runs (one pipeline of all the slots this
// replica holds, one round trip per node: never a round trip per
// request), and removed when its request ends. A replica that vanishes
// stops renewing: its slots expire Lease after their last renewal, and
// stop counting at once. A request that outlives the lease keeps its
// slot.
//
// A release does not wait for Redis: the slot stops being renewed, and
// its removal (a ZREM) leaves with the next batch of decisions, one
// round trip, through the client's coalescer, since a release that
// waits for a round trip of its own makes the caller wait twice
// (docs/benchmarks.md). So a slot is free for every
// replica within a round trip of its request's end, and for this replica
// at once: until Redis confirms the removal, this replica's decisions on
// the key remove the slot first, in their own script, so a client that
// sends its next request when the last one ended never finds its own
// slot still taken.
//
// A release that fails (Redis did not answer), and a decision whose
// reply was lost after its script may have run (a timeout, a caller
// gone), leave a slot to remove again: the renewer removes it at once,
// and again at each renewal until Redis says it is gone or its lease
// has passed, so no slot stays taken longer than its lease.
//
// Leases is safe for concurrent use by multiple goroutines. Close waits
// (a moment) for the releases in flight and stops the renewer; it does
// not own the client.
type Leases struct {
	c       *conn.Client
	opts    LeaseOptions
	leaseMs int64
	seq     atomic.Uint64

	mu        sync.Mutex          // guards held, releasing, orphans
	held      map[slot]struct{}   // the slots this replica's running requests hold
	releasing map[string][]string // key → holders released here whose removal Redis has not confirmed
	orphans   []orphan

	kick chan struct{} // orphans to remove
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// slot is one slot held: its key and its holder.
type slot struct{ key, holder string }

// orphan is a slot whose removal is not known to have happened.
type orphan struct {
	keys   []string
	holder string
	until  time.Time // its lease has surely passed by then
}

// Scripts of the leases: renewing one key's slots, and releasing one
// request's (lua/lease_renew.lua, lua/lease_release.lua).
var (
	renewScript   = conn.NewScript("lease_renew", mustRead("lease_renew.lua"))
	releaseScript = conn.NewScript("lease_release", mustRead("lease_release.lua"))
)

// NewLeases returns the leases of replica opts.Replica on c and starts
// their renewer. It panics, as wiring does on a programmer's error, on a
// lease outside [domain.MinLease] to [domain.MaxLease] or an empty
// replica name.
func NewLeases(c *conn.Client, opts LeaseOptions) *Leases {
	if opts.Lease < domain.MinLease || opts.Lease > domain.MaxLease || opts.Replica == "" {
		panic("redis: NewLeases needs a lease from 1s to 10m and a replica name")
	}
	if opts.Interval <= 0 {
		opts.Interval = opts.Lease / 3
	}
	ls := &Leases{
		c: c, opts: opts, leaseMs: opts.Lease.Milliseconds(),
		held: make(map[slot]struct{}), releasing: make(map[string][]string),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go ls.run()
	return ls
}

// Lease returns how long a slot stays taken after its last renewal.
func (ls *Leases) Lease() time.Duration { return ls.opts.Lease }

// Held returns how many slots this replica holds: one per concurrency
// limit of each running request.
func (ls *Leases) Held() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return len(ls.held)
}

// Holder returns a new request's name among the slots: unique in the
// fleet, since the replica's name is.
func (ls *Leases) Holder() string {
	return ls.opts.Replica + ":" + strconv.FormatUint(ls.seq.Add(1), 36)
}

// Hold records that holder took a slot under each of keys, and returns
// the function that gives them back (a verdict's Release): once, however
// often it is called, and without waiting for Redis (see [Leases]).
func (ls *Leases) Hold(keys []string, holder string) (release func()) {
	ls.mu.Lock()
	for _, k := range keys {
		ls.held[slot{k, holder}] = struct{}{}
	}
	ls.mu.Unlock()
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			ls.release(keys, holder)
		}
	}
}

// release gives back holder's slots under keys: they are no longer
// renewed, this replica's decisions stop counting them, and their
// removal leaves with the next batch. A removal that fails, or finds no
// room in the client's queue, is left to the renewer.
func (ls *Leases) release(keys []string, holder string) {
	ls.mu.Lock()
	for _, k := range keys {
		delete(ls.held, slot{k, holder})
		ls.releasing[k] = append(ls.releasing[k], holder)
	}
	ls.mu.Unlock()
	for _, k := range keys {
		if !ls.c.Post(goredis.NewCmd(context.Background(), "zrem", k, holder), func(err error) { ls.removed(k, holder, err) }) {
			ls.removed(k, holder, errQueueFull)
		}
	}
}

// errQueueFull is a release that found the client's queue full.
var errQueueFull = errors.New("the client's queue is full")

// removed records the outcome of removing holder's slot under key: done
// (err nil), or left to the renewer.
func (ls *Leases) removed(key, holder string, err error) {
	ls.mu.Lock()
	hs := ls.releasing[key]
	for i, h := range hs {
		if h == holder {
			hs = append(hs[:i], hs[i+1:]...)
			break
		}
	}
	if len(hs) == 0 {
		delete(ls.releasing, key)
	} else {
		ls.releasing[key] = hs
	}
	if err != nil {
		ls.orphanLocked([]string{key}, holder)
	}
	ls.mu.Unlock()
	if err != nil {
		ls.kickRenewer()
		if ls.opts.OnError != nil {
			ls.opts.OnError(errors.Join(errRelease, err))
		}
	}
}

// Released returns the holders released here under key whose removal
// Redis has not confirmed: a decision on key removes them first. It is
// nil for almost every key.
func (ls *Leases) Released(key string) []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if hs := ls.releasing[key]; len(hs) > 0 {
		return append([]string(nil), hs...)
	}
	return nil
}

// errRelease prefixes a release that failed.
var errRelease = errors.New("redis: release of a concurrency slot")

// releaseArgs are the EVALSHA arguments of releasing holder's slots
// under keys.
func releaseArgs(keys []string, holder string) []any {
	a := releaseScript.Args(len(keys), 1)
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, holder)
}

// Orphan records that holder's slots under keys may still be taken (a
// decision whose reply was lost after its script may have run), and
// wakes the renewer to remove them.
func (ls *Leases) Orphan(keys []string, holder string) {
	ls.mu.Lock()
	ls.orphanLocked(keys, holder)
	ls.mu.Unlock()
	ls.kickRenewer()
}

// orphanLocked records an orphan. It requires ls.mu held.
func (ls *Leases) orphanLocked(keys []string, holder string) {
	if len(ls.orphans) < maxOrphans {
		ls.orphans = append(ls.orphans, orphan{keys: keys, holder: holder, until: time.Now().Add(ls.opts.Lease)})
	}
}

// Close waits up to a second for the releases in flight (before the
// client closes), then stops the renewer and waits for it. It is
// idempotent. The slots still held are not released (their requests
// release them as they end; the ones that do not expire with their
// leases).
func (ls *Leases) Close() error {
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		ls.mu.Lock()
		n := len(ls.releasing)
		ls.mu.Unlock()
		if n == 0 {
			break
		}
	}
	ls.once.Do(func() { close(ls.stop) })
	<-ls.done
	return nil
}
