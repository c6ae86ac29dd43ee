package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Options configure a Redis limiter. The zero value is usable, and is
// what the gateway runs: the client's timeout bounds each decision from
// its send ([conn.Options.Timeout]).
type Options struct {
	// Timeout, if set, bounds a whole decision, its wait for a lane
	// included, on top of the caller's context (tests and tools).
	Timeout time.Duration
	// Leases hold the slots of concurrency limits ([domain.Limit.Concurrency])
	// that this replica's requests take, and renew them. A request with a
	// concurrency limit fails without it.
	Leases *fleet.Leases
	// Clock is this replica's clock, which picks the calendar periods a
	// decision sends (Redis's clock picks among them). Nil means
	// time.Now; tests skew it.
	Clock func() time.Time
	// Counting is which limits spend ([domain.Counting]);
	// [domain.CountEvery] is the fixed window's alone: New refuses it
	// for another algorithm.
	Counting domain.Counting
	// Windows is where the fixed window's windows start
	// ([domain.WindowsEpoch]: aligned to the epoch). The sliding window
	// is aligned either way; the sliding log and the token bucket have
	// no windows.
	Windows domain.Windows
}

// errNoLeases is a concurrency limit on a Limiter without Options.Leases:
// a wiring defect, reported as a store error.
var errNoLeases = errors.New("redis: a concurrency limit needs Options.Leases")

var (
	_ ports.Limiter = (*Limiter)(nil)
	_ ports.Settler = (*Limiter)(nil)
)

// Limiter is an algorithm on Redis, shared by every gateway replica: a
// [ports.Limiter] whose every decision is one run of the algorithm's Lua
// script (lua/prelude.lua, then lua/<algorithm>.lua) over the request's
// keys, in one round trip at most (concurrent decisions share round
// trips: see [conn.Client]). The script decides every limit, spends all or
// nothing, and returns the verdict; Go only maps the reply. Every key it
// writes has a TTL, and windows run on Redis's clock, never a replica's.
// A concurrency limit's slots are leases in the same script, held and
// renewed by [Options].Leases.
//
// Limiter is safe for concurrent use by multiple goroutines. It does not
// own the client.
type Limiter struct {
	client  *conn.Client
	spec    *spec
	opts    Options
	mode    mode // how its decisions count (Options.Counting)
	aligned bool // its fixed windows start at the epoch (Options.Windows)
}

// spec is one algorithm on Redis: its script and the rule arguments
// each of its limits gives it (see codec.go).
type spec struct {
	script *conn.Script
	// ruleArgs is how many arguments a rule limit has after limLimit;
	// args writes them.
	ruleArgs int
	args     ruleArgs
	// layout names them for the script's body (lua/<algorithm>.lua).
	layout []layoutName
	// alignable: the algorithm's windows may start at the epoch or at
	// their first request (Options.Windows).
	alignable bool
}

// specs are the algorithms on Redis, by TOLLGATE_ALGORITHM name. Every
// row of domain.Algorithms has one (TestEveryAlgorithm).
var specs = map[string]*spec{
	domain.AlgorithmFixedWindow: {
		script: newScript(domain.AlgorithmFixedWindow), alignable: true,
		ruleArgs: 1, layout: []layoutName{{"L_WINDOW_MS", fixedWindowMs}},
		args: func(b *args, base int, r domain.Rule) {
			b.put(base, fixedWindowMs, windowMillis(r.Window))
		},
	},
	domain.AlgorithmSlidingLog: {
		script:   newScript(domain.AlgorithmSlidingLog),
		ruleArgs: 2, layout: []layoutName{{"L_WINDOW_US", logWindowUs}, {"L_TTL_MS", logTTLMs}},
		args: func(b *args, base int, r domain.Rule) {
			b.put(base, logWindowUs, micros(r.Window))
			b.put(base, logTTLMs, windowMillis(r.Window))
		},
	},
	domain.AlgorithmSlidingWindow: {
		script:   newScript(domain.AlgorithmSlidingWindow),
		ruleArgs: 1, layout: []layoutName{{"L_WINDOW_US", slidingWindowUs}},
		args: func(b *args, base int, r domain.Rule) {
			b.put(base, slidingWindowUs, micros(r.Window))
		},
	},
	domain.AlgorithmTokenBucket: {
		script:   newScript(domain.AlgorithmTokenBucket),
		ruleArgs: 2, layout: []layoutName{{"L_INTERVAL_NS", bucketIntervalNs}, {"L_WINDOW_US", bucketWindowUs}},
		args: func(b *args, base int, r domain.Rule) {
			b.put(base, bucketIntervalNs, int64(domain.TokenInterval(r)))
			b.put(base, bucketWindowUs, micros(r.Window))
		},
	},
}

// New returns algorithm ([domain.Algorithms]) on c. It does no I/O. The
// error names an algorithm this store lacks, or a counting mode it
// cannot honour.
func New(c *conn.Client, algorithm string, opts Options) (*Limiter, error) {
	sp, ok := specs[algorithm]
	if !ok {
		return nil, fmt.Errorf("redis: no algorithm %q", algorithm)
	}
	if !opts.Counting.HonouredBy(algorithm) {
		return nil, fmt.Errorf("redis: %s cannot count %s (only %s can)", algorithm, opts.Counting, domain.AlgorithmFixedWindow)
	}
	m := counting(opts.Counting == domain.CountEvery, opts.Counting != domain.CountAdmitted)
	return &Limiter{client: c, spec: sp, opts: opts, mode: m, aligned: sp.alignable && opts.Windows == domain.WindowsEpoch}, nil
}

// replyStride is how many values a script replies per limit: ok,
// remaining, reset and retry in µs, and the window in µs (0: the rule's;
// for a concurrency limit, the slots held). reserveStride is how many
// it replies after them per Reserve limit: what it spent, its mark, and
// in a peek its reservations in flight.
const (
	replyStride   = 5
	reserveStride = 3
)

var _ ports.Usage = (*Limiter)(nil)

// Allow implements [ports.Limiter] in one round trip. A calendar limit
// ([domain.Limit.Calendar]) is counted as a fixed window over its period,
// whatever the algorithm: the replica computes the period around its
// clock and the periods on either side, and Redis's clock picks one. A
// concurrency limit ([domain.Limit.Concurrency]) takes a slot as a lease
// ([fleet.Leases]) in the same script: an admitted verdict's Release gives the
// request's slots back.
func (l *Limiter) Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	return l.run(ctx, req, dst, l.mode)
}

// run runs the algorithm's script on req in mode m, within the
// per-decision timeout, and holds the slots of an admitted request. The
// verdict's decisions are written into dst[:0] when it has room.
func (l *Limiter) run(ctx context.Context, req domain.Request, dst []domain.Decision, m mode) (domain.Verdict, error) {
	if l.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	}
	c := call{req: req, spec: l.spec, shape: shapeOf(req, l.spec), mode: m, aligned: l.aligned, now: l.now()}
	takes := c.shape.slots && m != modePeek // a peek takes no slot
	if takes {
		if l.opts.Leases == nil {
			return domain.Verdict{}, errNoLeases
		}
		c.holder, c.leases = l.opts.Leases.Holder(), l.opts.Leases
	}
	b := c.encode()
	r, reusable, err := runArgs(ctx, l.spec.script, l.client, b, 1+replyStride*len(req.Limits)+reserveStride*c.shape.reserves)
	var v domain.Verdict
	if err == nil {
		v, err = verdict(req, dst, r, m == modePeek)
	}
	if reusable {
		putArgs(b) // r is read
	}
	if takes {
		l.holdSlots(req, &v, err, c.holder)
	}
	return v, err
}

// holdSlots holds the slots that holder took for an admitted verdict v,
// which its Release gives back; after an error the script may have run,
// its reply lost, and the slots it may have taken are removed again.
func (l *Limiter) holdSlots(req domain.Request, v *domain.Verdict, err error, holder string) {
	switch {
	case err != nil:
		l.opts.Leases.Orphan(slotKeys(req, func(int) bool { return true }), holder)
	case v.Allowed:
		if keys := slotKeys(req, func(i int) bool { return domain.Spends(req, l.opts.Counting, *v, i) }); len(keys) > 0 {
			v.Release = l.opts.Leases.Hold(keys, holder)
		}
	}
}

// now reads this replica's clock (Options.Clock).
func (l *Limiter) now() time.Time {
	if l.opts.Clock != nil {
		return l.opts.Clock()
	}
	return time.Now()
}
