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
}

// errNoLeases is a concurrency limit on a Limiter without Options.Leases:
// a wiring defect, reported as a store error.
var errNoLeases = errors.New("redis: a concurrency limit needs Options.Leases")

var _ ports.Limiter = (*Limiter)(nil)

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
	client *conn.Client
	spec   *spec
	opts   Options
}

// spec is one algorithm on Redis: its script and the arguments each limit
// gives it.
type spec struct {
	script *conn.Script
	// stride is how many arguments a limit gives; args appends them.
	stride int
	args   func(b *args, lim domain.Limit)
	// countsDenied: the script honours Request.CountDenied.
	countsDenied bool
}

// specs are the algorithms on Redis, by TOLLGATE_ALGORITHM name. Every
// row of domain.Algorithms has one (TestEveryAlgorithm).
var specs = map[string]*spec{
	domain.AlgorithmFixedWindow: {
		script: newScript(domain.AlgorithmFixedWindow), stride: 3, countsDenied: true,
		args: func(b *args, l domain.Limit) {
			b.int(l.Rule.Limit)
			b.int(windowMillis(l.Rule.Window))
			b.a = append(b.a, epochArgs[b2i(l.Epoch)])
		},
	},
	domain.AlgorithmSlidingLog: {
		script: newScript(domain.AlgorithmSlidingLog), stride: 3,
		args: func(b *args, l domain.Limit) {
			b.int(l.Rule.Limit)
			b.int(micros(l.Rule.Window))
			b.int(windowMillis(l.Rule.Window))
		},
	},
	domain.AlgorithmSlidingWindow: {
		script: newScript(domain.AlgorithmSlidingWindow), stride: 2,
		args: func(b *args, l domain.Limit) {
			b.int(l.Rule.Limit)
			b.int(micros(l.Rule.Window))
		},
	},
	domain.AlgorithmTokenBucket: {
		script: newScript(domain.AlgorithmTokenBucket), stride: 3,
		args: func(b *args, l domain.Limit) {
			b.int(l.Rule.Limit)
			b.int(max(micros(l.Rule.Window)/l.Rule.Limit, 1))
			b.int(micros(l.Rule.Window))
		},
	},
}

// New returns algorithm ([domain.Algorithms]) on c. It does no I/O. The
// error names an algorithm this store lacks.
func New(c *conn.Client, algorithm string, opts Options) (*Limiter, error) {
	sp, ok := specs[algorithm]
	if !ok {
		return nil, fmt.Errorf("redis: no algorithm %q", algorithm)
	}
	return &Limiter{client: c, spec: sp, opts: opts}, nil
}

// replyStride is how many values a script replies per limit: ok,
// remaining, reset and retry in µs, and the window in µs (0: the rule's;
// for a concurrency limit, the slots held).
const replyStride = 5

// calendarArgs is how many arguments a calendar limit gives the script:
// its limit, and the previous, current and next periods' starts and the
// next one's end (see lua/prelude.lua).
const calendarArgs = 5

// slotArgs is how many arguments a concurrency limit gives the script:
// its limit, the lease in ms, the request's holder name, and where the
// holders this replica released on its key, not yet confirmed removed,
// are among the script's last arguments (first index, count).
const slotArgs = 5

var _ ports.Usage = (*Limiter)(nil)

// Allow implements [ports.Limiter] in one round trip. A calendar limit
// ([domain.Limit.Calendar]) is counted as a fixed window over its period,
// whatever the algorithm: the replica computes the period around its
// clock and the periods on either side, and Redis's clock picks one. A
// concurrency limit ([domain.Limit.Concurrency]) takes a slot as a lease
// ([fleet.Leases]) in the same script: an admitted verdict's Release gives the
// request's slots back.
func (l *Limiter) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	return l.run(ctx, req, countingArgs[b2i(req.CountDenied && l.spec.countsDenied)+2*b2i(req.CountOver)])
}

// countingArgs are the scripts' ARGV[3] for a decision, by counting
// mode: bit 0 counts denied requests, bit 1 an admitted request's every
// limit.
var countingArgs = [4]any{"0", "1", "2", "3"} // boxed once

// epochArgs are the fixed window's third argument: 1 aligned to the
// epoch, boxed once.
var epochArgs = [2]any{int64(0), int64(1)}

// run runs the algorithm's script on req in mode (ARGV[3]: "0" to "3",
// the counting mode, or "p" to peek), within the per-decision timeout.
func (l *Limiter) run(ctx context.Context, req domain.Request, mode any) (domain.Verdict, error) {
	if l.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	}
	n := len(req.Limits)
	sp := l.spec
	stride, calendars, slotted := sp.stride, 0, 0
	for _, lim := range req.Limits {
		switch {
		case lim.Concurrency:
			slotted++
			stride = max(stride, slotArgs)
		case lim.Calendar != nil:
			calendars++
			stride = max(stride, calendarArgs)
		}
	}
	// A peek takes no slot: it needs no holder, and no lease.
	takes := slotted > 0 && mode != modePeek
	holder, leaseMs := "", any(0)
	if takes {
		if l.opts.Leases == nil {
			return domain.Verdict{}, errNoLeases
		}
		holder, leaseMs = l.opts.Leases.Holder(), l.opts.Leases.Lease().Milliseconds()
	}
	keys := n + 2*calendars
	b := getArgs(3+keys+5+stride*n, 2+stride*n, keys+1)
	b.a = sp.script.AppendCall(b.a, keys)
	for _, lim := range req.Limits {
		b.str(lim.Key)
	}
	var pbuf [4]*periods
	pers := pbuf[:0] // of each calendar limit, in order
	if calendars > 0 {
		now := l.now()
		for i, lim := range req.Limits {
			if lim.Calendar == nil {
				continue
			}
			p := periodsAround(*lim.Calendar, now)
			pers = append(pers, p)
			prev, cur, next := p.keys(lim.Key)
			b.setStr(3+i, cur)
			b.str(prev)
			b.str(next)
		}
	}
	b.cost(req)
	var fbuf [2 * 16]byte
	flags, kinds := fbuf[:0:16], fbuf[16:16]
	for _, lim := range req.Limits {
		flags = append(flags, '0'+b2i(lim.Shadow)+2*b2i(lim.Quota))
		kind := byte('r')
		switch {
		case lim.Concurrency:
			kind = 'n'
		case lim.Calendar != nil:
			kind = 'c'
		}
		kinds = append(kinds, kind)
	}
	b.raw(flags)
	b.a = append(b.a, mode)
	b.raw(kinds)
	b.int(int64(stride))
	c := 0
	var released []any   // after every limit's arguments: the holders to remove first
	argv := 5 + stride*n // ARGV's length before them
	for _, lim := range req.Limits {
		start := len(b.a)
		switch {
		case lim.Concurrency:
			var first, count int
			if takes {
				hs := l.opts.Leases.Released(lim.Key)
				if len(hs) > 0 {
					first, count = argv+len(released)+1, len(hs)
				}
				for _, h := range hs {
					released = append(released, h)
				}
			}
			b.int(lim.Rule.Limit)
			b.a = append(b.a, leaseMs, holder, first, count)
		case lim.Calendar != nil:
			p := pers[c]
			c++
			b.int(lim.Rule.Limit)
			b.a = append(b.a, p.args[0], p.args[1], p.args[2], p.args[3])
		default:
			sp.args(b, lim)
		}
		for len(b.a)-start < stride {
			b.a = append(b.a, 0)
		}
	}
	b.a = append(b.a, released...)
	r, reusable, err := runArgs(ctx, sp.script, l.client, b, 1+replyStride*n)
	if err != nil {
		if reusable {
			putArgs(b)
		}
		if takes {
			// The script may have run, its reply lost: the slots it may
			// have taken are removed again.
			l.opts.Leases.Orphan(slotKeys(req, func(int) bool { return true }), holder)
		}
		return domain.Verdict{}, err
	}
	v, err := verdict(req, r)
	putArgs(b) // r is read
	switch {
	case !takes:
	case err != nil:
		l.opts.Leases.Orphan(slotKeys(req, func(int) bool { return true }), holder)
	case v.Allowed:
		if keys := slotKeys(req, func(i int) bool { return domain.Spends(req, v, i) }); len(keys) > 0 {
			v.Release = l.opts.Leases.Hold(keys, holder)
		}
	}
	return v, err
}

// now reads this replica's clock (Options.Clock).
func (l *Limiter) now() time.Time {
	if l.opts.Clock != nil {
		return l.opts.Clock()
	}
	return time.Now()
}
