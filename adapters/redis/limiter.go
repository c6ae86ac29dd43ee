package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Options configure a Redis limiter. The zero value is usable, and is
// what the gateway runs: the client's timeout bounds each decision from
// its send ([ClientOptions.Timeout]).
type Options struct {
	// Timeout, if set, bounds a whole decision, its wait for a lane
	// included, on top of the caller's context (tests and tools).
	Timeout time.Duration
}

var _ ports.Limiter = (*Limiter)(nil)

// Limiter is an algorithm on Redis, shared by every gateway replica: a
// [ports.Limiter] whose every decision is one run of the algorithm's Lua
// script (lua/prelude.lua, then lua/<algorithm>.lua) over the request's
// keys, in one round trip at most (concurrent decisions share round
// trips: see [Client]). The script decides every limit, spends all or
// nothing, and returns the verdict; Go only maps the reply. Every key it
// writes has a TTL, and windows run on Redis's clock, never a replica's.
//
// Limiter is safe for concurrent use by multiple goroutines. It does not
// own the client.
type Limiter struct {
	client *Client
	spec   *spec
	opts   Options
}

// spec is one algorithm on Redis: its script and the arguments each limit
// gives it.
type spec struct {
	script *script
	// stride is how many arguments a limit gives; args appends them.
	stride int
	args   func(a []any, lim domain.Limit) []any
	// countsDenied: the script honours Request.CountDenied.
	countsDenied bool
}

// specs are the algorithms on Redis, by TOLLGATE_ALGORITHM name. Every
// row of domain.Algorithms has one (TestEveryAlgorithm).
var specs = map[string]*spec{
	domain.AlgorithmFixedWindow: {
		script: newScript(domain.AlgorithmFixedWindow, true), stride: 3, countsDenied: true,
		args: func(a []any, l domain.Limit) []any {
			return append(a, l.Rule.Limit, windowMillis(l.Rule.Window), int64(b2i(l.Epoch)))
		},
	},
	domain.AlgorithmSlidingLog: {
		script: newScript(domain.AlgorithmSlidingLog, true), stride: 3,
		args: func(a []any, l domain.Limit) []any {
			return append(a, l.Rule.Limit, micros(l.Rule.Window), windowMillis(l.Rule.Window))
		},
	},
	domain.AlgorithmSlidingWindow: {
		script: newScript(domain.AlgorithmSlidingWindow, true), stride: 2,
		args: func(a []any, l domain.Limit) []any { return append(a, l.Rule.Limit, micros(l.Rule.Window)) },
	},
	domain.AlgorithmTokenBucket: {
		script: newScript(domain.AlgorithmTokenBucket, true), stride: 3,
		args: func(a []any, l domain.Limit) []any {
			return append(a, l.Rule.Limit, max(micros(l.Rule.Window)/l.Rule.Limit, 1), micros(l.Rule.Window))
		},
	},
}

// New returns algorithm ([domain.Algorithms]) on c. It does no I/O. The
// error names an algorithm this store lacks.
func New(c *Client, algorithm string, opts Options) (*Limiter, error) {
	sp, ok := specs[algorithm]
	if !ok {
		return nil, fmt.Errorf("redis: no algorithm %q", algorithm)
	}
	return &Limiter{client: c, spec: sp, opts: opts}, nil
}

// replyStride is how many values a script replies per limit: ok,
// remaining, reset and retry in µs.
const replyStride = 4

// Allow implements [ports.Limiter] in one round trip, bounded by the
// per-decision timeout.
func (l *Limiter) Allow(ctx context.Context, req domain.Request) (domain.Verdict, error) {
	if l.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	}
	n := len(req.Limits)
	sp := l.spec
	a := sp.script.cmdArgs(n, 3+sp.stride*n)
	for _, lim := range req.Limits {
		a = append(a, lim.Key)
	}
	var buf [16]byte
	flags := buf[:0]
	for _, lim := range req.Limits {
		flags = append(flags, '0'+b2i(lim.Shadow)+2*b2i(lim.Quota))
	}
	counting := b2i(req.CountDenied && sp.countsDenied) + 2*b2i(req.CountOver)
	a = append(a, costArg(req), string(flags), countingArgs[counting])
	for _, lim := range req.Limits {
		a = sp.args(a, lim)
	}
	r, err := sp.script.run(ctx, l.client, a, 1+replyStride*n)
	if err != nil {
		return domain.Verdict{}, err
	}
	return verdict(req, r)
}

// verdict maps a script's reply to the Verdict of req: r[0] is 1 when the
// request was admitted, then per limit ok, remaining, reset and retry
// (µs). A reply whose verdict disagrees with its own decisions is a
// defect, reported rather than guessed at.
func verdict(req domain.Request, r []int64) (domain.Verdict, error) {
	n := len(req.Limits)
	dst := req.Decisions
	if cap(dst) < n {
		dst = make([]domain.Decision, 0, n)
	}
	v := domain.Verdict{Allowed: r[0] == 1, Decisions: dst[:0]}
	shadowDenied := false
	for i, lim := range req.Limits {
		x := r[1+replyStride*i:]
		d := domain.Decision{
			Allowed:    x[0] == 1,
			Limit:      lim.Rule.Limit,
			Remaining:  x[1],
			ResetAfter: usDur(x[2]),
			RetryAfter: usDur(x[3]),
			Shadow:     lim.Shadow,
			Quota:      lim.Quota,
		}
		shadowDenied = shadowDenied || (d.Shadow && !d.Allowed)
		v.Decisions = append(v.Decisions, d)
	}
	switch {
	case v.Allowed != domain.Admits(v.Decisions):
		return domain.Verdict{}, fmt.Errorf("redis: %q: the script's verdict %v disagrees with its decisions %v", req.Limits[0].Key, v.Allowed, r)
	case !v.Allowed:
		v.Outcome = domain.OutcomeDenied
	case shadowDenied:
		v.Outcome = domain.OutcomeShadowDenied
	}
	return v, nil
}

// countingArgs are the scripts' ARGV[3], by counting mode: bit 0 counts
// denied requests, bit 1 an admitted request's every limit.
var countingArgs = [4]string{"0", "1", "2", "3"}

// costArg is the scripts' ARGV[1]: the request's cost, or with
// per-limit costs each limit's, comma-separated.
func costArg(req domain.Request) any {
	if req.Costs == nil {
		return req.Cost
	}
	b := make([]byte, 0, 4*len(req.Costs))
	for i, c := range req.Costs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, c, 10)
	}
	return string(b)
}

func b2i(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// micros returns d in whole µs, at least 1: the scripts' resolution.
func micros(d time.Duration) int64 { return max(int64(d/time.Microsecond), 1) }

// usDur returns n µs as a Duration.
func usDur(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// windowMillis returns window in whole milliseconds, rounded up, at least 1.
func windowMillis(window time.Duration) int64 {
	return max(int64((window+time.Millisecond-1)/time.Millisecond), 1)
}
