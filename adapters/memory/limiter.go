package memory

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// DefaultMaxKeys is the default [Options].MaxKeys: about 200 MB of the
// largest states (a sliding log of a few hundred instants is more; a
// fixed window is about 150 bytes a key).
const DefaultMaxKeys = 1_000_000

// Options configure a memory store. The zero value is ready to use.
type Options struct {
	// Now returns the current time. If nil, the process's monotonic clock
	// is used. Tests inject a fake clock here.
	Now func() time.Time
	// SweepInterval is how often keys whose budget is whole again are
	// dropped. If zero, the store sweeps every shortest window it has
	// seen, between MinSweepInterval and DefaultSweepInterval; if
	// negative, no sweeper runs and keys are never dropped (for tests;
	// MaxKeys still bounds them).
	SweepInterval time.Duration
	// MaxKeys bounds the keys the store holds, so that clients who invent
	// tenants cannot grow it without bound. A request that would add a
	// key to a full store, and holds none of its keys yet, fails with
	// [ErrFull], except the shared [domain.Unknown] tenant's, which is
	// always decided: the caller decides a refused request as that
	// tenant. (A request of a policy's keys, [domain.Request].PolicyKeys,
	// that holds one of them adds the others: a tenant held keeps its own
	// budgets on a route new to it.) Zero means DefaultMaxKeys; negative,
	// no bound.
	MaxKeys int
}

// ErrFull is a request that needs a new key while the store holds
// [Options].MaxKeys: it was not decided, and nothing was spent. It wraps
// [ports.ErrStoreFull].
var ErrFull = fmt.Errorf("memory: %w", ports.ErrStoreFull)

var (
	_ ports.Limiter = (*Limiter)(nil)
	_ ports.Usage   = (*Limiter)(nil)
)

// Limiter is an algorithm in process memory: a [ports.Limiter] for one
// gateway replica (several replicas need a shared store, or each hands
// out the whole budget). Each key is one domain policy's state under its
// own mutex: a request of several limits locks their keys in key order
// (so two requests never wait on each other in a cycle; limits that share
// a key share its lock and state, decided one after the other), decides
// every limit, and spends by [domain.Spends]: all or nothing. A
// concurrency limit ([domain.Limit.Concurrency]) is a count of the slots
// its admitted requests hold in this process ([domain.Slots]), given back
// by the verdict's Release; no lease is needed, since a crash frees them
// all.
//
// Limiter is safe for concurrent use by multiple goroutines. Allow of
// keys it already holds allocates nothing but the verdict's decisions
// when the request has no room for them. Len counts the keys held; Close
// stops the sweeper, which drops keys whose budget is whole again
// (dropping them changes no decision).
type Limiter struct {
	store
}

// store is what a Limiter runs: a limiter of one algorithm's state.
type store interface {
	ports.Limiter
	ports.Usage
	Len() int
	Close() error
}

// algorithms builds each algorithm's limiter, by TOLLGATE_ALGORITHM name.
var algorithms = map[string]func(Options) store{
	domain.AlgorithmFixedWindow: func(o Options) store {
		l := newLimiter[domain.FixedWindow](o)
		l.countsDenied = true
		return l
	},
	domain.AlgorithmSlidingLog:    func(o Options) store { return newLimiter[byRule[domain.SlidingLog, *domain.SlidingLog]](o) },
	domain.AlgorithmSlidingWindow: func(o Options) store { return newLimiter[byRule[domain.SlidingWindow, *domain.SlidingWindow]](o) },
	domain.AlgorithmTokenBucket:   func(o Options) store { return newLimiter[byRule[domain.TokenBucket, *domain.TokenBucket]](o) },
}

// New returns the limiter of algorithm ([domain.Algorithms]) and starts
// its sweeper. The error names an algorithm this store lacks.
func New(algorithm string, opts Options) (*Limiter, error) {
	build, ok := algorithms[algorithm]
	if !ok {
		return nil, fmt.Errorf("memory: no algorithm %q", algorithm)
	}
	return &Limiter{build(opts)}, nil
}

// state is one key's state under a domain policy, deciding the limit
// the limiter passes it: *domain.FixedWindow, or *byRule of
// domain.SlidingLog, domain.SlidingWindow or domain.TokenBucket.
type state[S any] interface {
	*S
	Decide(now time.Time, lim domain.Limit, cost int64) domain.Decision
	Spend(now time.Time, lim domain.Limit, cost int64)
}

// ruleState is a domain policy that decides by a limit's rule alone.
type ruleState[S any] interface {
	*S
	Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision
	Spend(now time.Time, rule domain.Rule, cost int64)
}

// byRule is the state of a policy that reads nothing of a limit but its
// rule (the fixed window alone reads more: [domain.Limit].Epoch).
type byRule[S any, P ruleState[S]] struct{ s S }

func (b *byRule[S, P]) Decide(now time.Time, lim domain.Limit, cost int64) domain.Decision {
	return P(&b.s).Decide(now, lim.Rule, cost)
}

func (b *byRule[S, P]) Spend(now time.Time, lim domain.Limit, cost int64) {
	P(&b.s).Spend(now, lim.Rule, cost)
}

// maxLimits is how many limits a request may carry here: a policy has a
// handful, Envoy's rate limit service a few descriptors; the entries of
// one request are locked together.
const maxLimits = 64

// errTooManyLimits is a request the limiter cannot decide: a caller's
// bug, reported rather than deciding part of it.
var errTooManyLimits = fmt.Errorf("memory: more than %d limits in one request", maxLimits)

// limiter is the Limiter of one algorithm: a map of keys, each a domain
// policy's state under its own mutex, and a sweeper.
type limiter[S any, P state[S]] struct {
	clock        clock
	keys         sync.Map // string → *limiterEntry[S]
	n            atomic.Int64
	maxKeys      int64 // < 0: no bound
	countsDenied bool  // honours Request.CountDenied (the fixed window)
	sweeper      *sweeper
}

// limiterEntry is one key: the algorithm's state, a calendar limit's
// period ([domain.Limit.Calendar]: a fixed window over the period,
// whatever the algorithm), or a concurrency limit's slots
// ([domain.Limit.Concurrency]).
type limiterEntry[S any] struct {
	mu     sync.Mutex // guards state, period, slots, idleAt, swept
	state  S
	period domain.PeriodWindow
	slots  domain.Slots
	idleAt int64 // clock nanos from which state is whole again; never while a slot is held
	swept  bool  // removed from the map: Allow retries on a fresh entry
}

// neverIdle is the idleAt of an entry whose slots are held.
const neverIdle = math.MaxInt64

// decide is lim's decision at cost on e, without spending.
func (*limiter[S, P]) decide(e *limiterEntry[S], now time.Time, lim domain.Limit, cost int64) domain.Decision {
	if lim.Concurrency {
		return e.slots.Decide(lim.Rule.Limit, cost)
	}
	if cal := lim.Calendar; cal != nil {
		return e.period.Decide(now, *cal, lim.Rule.Limit, cost)
	}
	return P(&e.state).Decide(now, lim, cost)
}

func newLimiter[S any, P state[S]](opts Options) *limiter[S, P] {
	l := &limiter[S, P]{clock: newClock(opts.Now), maxKeys: int64(opts.MaxKeys)}
	if l.maxKeys == 0 {
		l.maxKeys = DefaultMaxKeys
	}
	l.sweeper = startSweeper(opts.SweepInterval, l.sweep)
	return l
}

// Allow implements [ports.Limiter]. It fails only on a malformed request
// (more than 64 limits) and with [ErrFull].
func (l *limiter[S, P]) Allow(_ context.Context, req domain.Request) (domain.Verdict, error) {
	n := len(req.Limits)
	if n > maxLimits {
		return domain.Verdict{}, errTooManyLimits
	}
	if !l.countsDenied {
		req.CountDenied = false
	}
	var (
		entries [maxLimits]*limiterEntry[S]
		order   [maxLimits]int // indices of req.Limits in key order
	)
	for i := range n {
		order[i] = i
		for j := i; j > 0 && req.Limits[order[j]].Key < req.Limits[order[j-1]].Key; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	// held[:m] are the distinct entries locked, in key order; limits that
	// share a key share one entry, locked once.
	var held [maxLimits]*limiterEntry[S]
	unlock := func(m int) {
		for _, e := range held[:m] {
			e.mu.Unlock()
		}
	}
	for {
		retry, m := false, 0
		for k := range n {
			i := order[k]
			if k > 0 && req.Limits[i].Key == req.Limits[order[k-1]].Key {
				entries[i] = entries[order[k-1]]
				continue
			}
			e, err := l.entry(&req, i)
			if err != nil {
				unlock(m)
				return domain.Verdict{}, err
			}
			e.mu.Lock()
			entries[i], held[m] = e, e
			m++
			if e.swept {
				retry = true
				unlock(m)
				if l.keys.CompareAndDelete(req.Limits[i].Key, e) {
					l.n.Add(-1)
				}
				break
			}
		}
		if retry {
			continue
		}
		// The clock is read under the locks, so one key's decisions see
		// time in the order they are made.
		now, nanos := l.clock.read()
		v := domain.Settle(req, func(i int, cost int64) domain.Decision {
			return l.decide(entries[i], now, req.Limits[i], cost)
		})
		var r *release[S]
		for i := range n {
			e := entries[i]
			c := req.CostOf(i)
			switch {
			case c == 0 || !domain.Spends(req, v, i):
			case req.Limits[i].Concurrency:
				e.slots.Acquire()
				if r == nil {
					r = &release[S]{clock: l.clock}
				}
				r.entries = append(r.entries, e)
			case req.Limits[i].Calendar != nil:
				e.period.Spend(now, *req.Limits[i].Calendar, c)
			default:
				P(&e.state).Spend(now, req.Limits[i], c)
			}
			e.idleAt = nanos + int64(max(v.Decisions[i].ResetAfter, v.Decisions[i].RetryAfter))
			if e.slots.Held() > 0 {
				e.idleAt = neverIdle
			}
		}
		unlock(m)
		if r != nil {
			v.Release = r.release
		}
		return v, nil
	}
}

// release gives back the slots one admitted request took: one per
// entry, of its concurrency limits.
type release[S any] struct {
	done    atomic.Bool
	clock   clock
	entries []*limiterEntry[S]
}

// release implements [domain.Verdict.Release]: it gives the slots back
// once, however often it is called. An entry whose last slot comes back
// is idle from now (the sweeper may drop it); none is dropped while a
// slot is held, so entries are still the ones in the map.
func (r *release[S]) release() {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	for _, e := range r.entries {
		e.mu.Lock()
		e.slots.Release()
		if e.slots.Held() == 0 {
			e.idleAt = r.clock.nanos()
		}
		e.mu.Unlock()
	}
}
