package redis

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
// leases ([Limiter]'s concurrency limits), and the renewer that keeps
// them. A slot is a member "<replica>:<request>" of a sorted set per
// tenant (and route) and limit, scored with its expiry on Redis's
// clock: taken by the decision's script with an expiry of now + Lease,
// renewed every Interval while its request runs (one pipeline of all
// the slots this replica holds, one round trip per node: never a round
// trip per request), and removed in one round trip when its request
// ends. A replica that vanishes stops renewing: its slots expire Lease
// after their last renewal, and the next decision on their key drops
// them. A request that outlives the lease keeps its slot.
//
// A release that fails (Redis did not answer), and a decision whose
// reply was lost after its script may have run (a timeout, a caller
// gone), leave a slot to remove again: the renewer removes it at once,
// and again at each renewal until Redis says it is gone or its lease
// has passed, so no slot stays taken longer than its lease.
//
// Leases is safe for concurrent use by multiple goroutines. Close stops
// the renewer; it does not own the client.
type Leases struct {
	c       *Client
	opts    LeaseOptions
	leaseMs int64
	seq     atomic.Uint64

	mu      sync.Mutex                     // guards held, n, orphans
	held    map[string]map[string]struct{} // key → the holders of its slots that run here
	n       int                            // slots held: members of held's sets
	orphans []orphan

	kick chan struct{} // orphans to remove
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// orphan is a slot whose removal is not known to have happened.
type orphan struct {
	keys   []string
	holder string
	until  time.Time // its lease has surely passed by then
}

// Scripts of the leases: renewing one key's slots, and releasing one
// request's (lua/lease_renew.lua, lua/lease_release.lua).
var (
	renewScript   = newScript("lease_renew", false)
	releaseScript = newScript("lease_release", false)
)

// NewLeases returns the leases of replica opts.Replica on c and starts
// their renewer. It panics, as wiring does on a programmer's error, on a
// lease outside [domain.MinLease] to [domain.MaxLease] or an empty
// replica name.
func NewLeases(c *Client, opts LeaseOptions) *Leases {
	if opts.Lease < domain.MinLease || opts.Lease > domain.MaxLease || opts.Replica == "" {
		panic("redis: NewLeases needs a lease from 1s to 10m and a replica name")
	}
	if opts.Interval <= 0 {
		opts.Interval = opts.Lease / 3
	}
	ls := &Leases{
		c: c, opts: opts, leaseMs: opts.Lease.Milliseconds(),
		held: make(map[string]map[string]struct{}),
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
	return ls.n
}

// holder returns a new request's name among the slots: unique in the
// fleet, since the replica's name is.
func (ls *Leases) holder() string {
	return ls.opts.Replica + ":" + strconv.FormatUint(ls.seq.Add(1), 36)
}

// hold records that holder took a slot under each of keys.
func (ls *Leases) hold(keys []string, holder string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, k := range keys {
		m := ls.held[k]
		if m == nil {
			m = make(map[string]struct{}, 1)
			ls.held[k] = m
		}
		m[holder] = struct{}{}
		ls.n++
	}
}

// release gives back holder's slots under keys: they are no longer
// renewed, and one round trip removes them. A removal that fails is
// left to the renewer.
func (ls *Leases) release(keys []string, holder string) {
	ls.mu.Lock()
	for _, k := range keys {
		if m := ls.held[k]; m != nil {
			if _, ok := m[holder]; ok {
				delete(m, holder)
				ls.n--
			}
			if len(m) == 0 {
				delete(ls.held, k)
			}
		}
	}
	ls.mu.Unlock()
	// The client's timeout bounds the round trip from its send (the
	// coalescer); a client without one gets a deadline here.
	ctx := context.Background()
	if ls.c.timeout <= 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, hardWait(0))
		defer cancel()
	}
	// One slot (the usual request: one concurrency limit) is one ZREM,
	// cheaper on Redis than a script; more are one script.
	cmd, src := goredis.NewCmd(ctx, "zrem", keys[0], holder), ""
	if len(keys) > 1 {
		cmd, src = goredis.NewCmd(ctx, releaseArgs(keys, holder)...), releaseScript.src
	}
	if err := ls.c.eval(ctx, cmd, src); err != nil {
		ls.orphan(keys, holder)
		if ls.opts.OnError != nil {
			ls.opts.OnError(errors.Join(errRelease, err))
		}
	}
}

// errRelease prefixes a release that failed.
var errRelease = errors.New("redis: release of a concurrency slot")

// releaseArgs are the EVALSHA arguments of releasing holder's slots
// under keys.
func releaseArgs(keys []string, holder string) []any {
	a := releaseScript.cmdArgs(len(keys), 1)
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, holder)
}

// orphan records that holder's slots under keys may still be taken, and
// wakes the renewer to remove them.
func (ls *Leases) orphan(keys []string, holder string) {
	ls.mu.Lock()
	if len(ls.orphans) < maxOrphans {
		ls.orphans = append(ls.orphans, orphan{keys: keys, holder: holder, until: time.Now().Add(ls.opts.Lease)})
	}
	ls.mu.Unlock()
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// run renews every Interval, and removes orphans as they come.
func (ls *Leases) run() {
	defer close(ls.done)
	t := time.NewTicker(ls.opts.Interval)
	defer t.Stop()
	for {
		renew := false
		select {
		case <-ls.stop:
			return
		case <-t.C:
			renew = true
		case <-ls.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ls.opts.Interval)
		err := ls.round(ctx, renew)
		cancel()
		if err != nil && ls.opts.OnError != nil {
			ls.opts.OnError(err)
		}
	}
}

// Renew renews every slot this replica holds now, and removes the
// orphans, in one pipeline (one round trip per node): what the renewer
// does every Interval. It returns the first error.
func (ls *Leases) Renew(ctx context.Context) error { return ls.round(ctx, true) }

// round removes the orphans and, with renew, renews every slot held.
func (ls *Leases) round(ctx context.Context, renew bool) error {
	ls.mu.Lock()
	orphans := ls.orphans
	ls.orphans = nil
	var cmds []*goredis.Cmd
	var srcs []string
	if renew {
		cmds = make([]*goredis.Cmd, 0, len(ls.held)+len(orphans))
		for k, m := range ls.held {
			a := renewScript.cmdArgs(1, 1+len(m))
			a = append(a, k, ls.leaseMs)
			for h := range m {
				a = append(a, h)
			}
			cmds = append(cmds, goredis.NewCmd(ctx, a...))
			srcs = append(srcs, renewScript.src)
		}
	}
	ls.mu.Unlock()
	renewals := len(cmds)
	for _, o := range orphans {
		cmds = append(cmds, goredis.NewCmd(ctx, releaseArgs(o.keys, o.holder)...))
		srcs = append(srcs, releaseScript.src)
	}
	if len(cmds) == 0 {
		return nil
	}
	pipelineScripts(ctx, ls.c.rdb, cmds, srcs)
	var first error
	now := time.Now()
	for i, cmd := range cmds {
		err := cmd.Err()
		if err != nil && first == nil {
			first = err
		}
		if i < renewals {
			continue
		}
		// An orphan is done once Redis removed it, or its lease passed;
		// else it is removed again at the next round.
		if o := orphans[i-renewals]; now.Before(o.until) {
			if n, _ := cmd.Int64(); err != nil || n == 0 {
				ls.mu.Lock()
				ls.orphans = append(ls.orphans, o)
				ls.mu.Unlock()
			}
		}
	}
	if first != nil {
		return errors.Join(errors.New("redis: renewing concurrency slots"), first)
	}
	return nil
}

// Close stops the renewer and waits for it. It is idempotent. The slots
// still held are not released (their requests release them as they end;
// the ones that do not expire with their leases).
func (ls *Leases) Close() error {
	ls.once.Do(func() { close(ls.stop) })
	<-ls.done
	return nil
}

// pipelineScripts runs cmds, EVALSHAs of the scripts srcs, as one
// pipeline (one round trip per node), and those Redis lacked (NOSCRIPT:
// they did not run) once more as EVAL with their source. Errors land on
// each command.
func pipelineScripts(ctx context.Context, rdb goredis.UniversalClient, cmds []*goredis.Cmd, srcs []string) {
	run := func(cs []*goredis.Cmd) {
		pipe := rdb.Pipeline()
		for _, c := range cs {
			_ = pipe.Process(ctx, c)
		}
		_, _ = pipe.Exec(ctx)
	}
	run(cmds)
	var again []*goredis.Cmd
	var of []int
	for i, c := range cmds {
		if isNoScript(c.Err()) {
			again = append(again, evalOf(ctx, c, srcs[i]))
			of = append(of, i)
		}
	}
	if len(again) == 0 {
		return
	}
	run(again)
	for j, r := range again {
		adopt(cmds[of[j]], r)
	}
}
