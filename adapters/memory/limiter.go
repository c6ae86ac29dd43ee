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

// DefaultMaxKeys is the default [Options].MaxKeys. A key of 19 bytes
// costs about 195 bytes of heap (210 of RSS) under the fixed window or
// the sliding window, 180 (195) under the token bucket, and 290 (310)
// under a sliding log of one entry, 16 bytes more per entry: the default
// bound is about 210 MB of RSS (TestFootprint measures it).
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
	// key to a full store (or past its family's share, see Family) first
	// drops the keys whose budget is whole again, at most once a second
	// whoever asks, so that the sweeper's interval never keeps idle keys
	// in the way. Still without room, a request that holds none of its
	// keys yet fails with [ErrFull], except the shared [domain.Unknown]
	// tenant's, which is always decided: the caller decides a refused
	// request as that tenant (see also [View].PolicyKeys). Zero means
	// DefaultMaxKeys; negative, no bound.
	MaxKeys int
	// Family names the family of a key, whose keys together hold at most
	// half of MaxKeys, so that the keys clients name (the values of one
	// Envoy descriptor) never fill the store for every other family. If
	// nil, or for a key whose family is empty, the key counts against
	// MaxKeys alone.
	Family func(key string) string
	// View is how the Limiter [New] returns counts; [Limiter.View] gives
	// others on the same store.
	View
}

// View is how one limiter of a store decides: its options, set where it
// is built. Views of one store share its keys, its bound and its
// sweeper. The zero value counts all or nothing, in windows that start
// with their first request, with no key of a full store added.
type View struct {
	// Counting is which limits spend ([domain.Counting]).
	// [domain.CountEvery] is the fixed window's alone: another algorithm
	// refuses it.
	Counting domain.Counting
	// Windows is where the fixed window's windows start
	// ([domain.WindowsEpoch]: aligned to the epoch). The sliding window
	// is aligned either way; the sliding log and the token bucket have
	// no windows.
	Windows domain.Windows
	// PolicyKeys says the requests' keys are a policy's, for one tenant:
	// a tenant has at most one key per limit of the policy, so a full
	// store that already holds one of a request's keys may add the
	// others (a tenant held keeps its own budgets on a route new to it).
	// Without it (keys named by the client, as Envoy's descriptors are)
	// a full store adds none.
	PolicyKeys bool
}

// ErrFull is a request that needs a new key while the store holds
// [Options].MaxKeys: it was not decided, and nothing was spent. It wraps
// [ports.ErrStoreFull].
var ErrFull = fmt.Errorf("memory: %w", ports.ErrStoreFull)

var (
	_ ports.Limiter = (*Limiter)(nil)
	_ ports.Usage   = (*Limiter)(nil)
	_ ports.Settler = (*Limiter)(nil)
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
// all. A Reserve limit ([domain.Limit.Reserve]) spends its cost or what
// remains, and its decision's Mark names its window, period or entry;
// [Limiter.Settle] replaces the reservation with what was used, and the
// store counts the reservations in flight (a usage read's
// [domain.Decision.Reserved]), exactly: they are this process's requests.
//
// Limiter is safe for concurrent use by multiple goroutines. Allow of
// keys it already holds, for a request of up to 8 limits, allocates
// nothing but the verdict's decisions when dst has no room for them,
// and lets neither the request nor dst escape: a caller that holds them
// on its stack allocates nothing either. Len counts the keys held (by
// every view of the store); Close stops the sweeper, which drops keys
// whose budget is whole again (dropping them changes no decision), for
// every view.
type Limiter struct {
	store
	algorithm string
}

// store is what a Limiter runs: a limiter of one algorithm's state.
type store interface {
	ports.Limiter
	ports.Usage
	ports.Settler
	Len() int
	Close() error
	view(View) store
}

// algorithms builds each algorithm's limiter, by TOLLGATE_ALGORITHM name.
var algorithms = map[string]func(Options) store{
	domain.AlgorithmFixedWindow:   func(o Options) store { return newLimiter[domain.FixedWindow](o) },
	domain.AlgorithmSlidingLog:    func(o Options) store { return newLimiter[byRule[domain.SlidingLog, *domain.SlidingLog]](o) },
	domain.AlgorithmSlidingWindow: func(o Options) store { return newLimiter[byRule[domain.SlidingWindow, *domain.SlidingWindow]](o) },
	domain.AlgorithmTokenBucket:   func(o Options) store { return newLimiter[byRule[domain.TokenBucket, *domain.TokenBucket]](o) },
}

// New returns the limiter of algorithm ([domain.Algorithms]), deciding
// by opts.View, and starts its sweeper. The error names an algorithm
// this store lacks, or a counting mode the algorithm cannot honour.
func New(algorithm string, opts Options) (*Limiter, error) {
	build, ok := algorithms[algorithm]
	if !ok {
		return nil, fmt.Errorf("memory: no algorithm %q", algorithm)
	}
	if err := honours(algorithm, opts.View); err != nil {
		return nil, err
	}
	return &Limiter{build(opts), algorithm}, nil
}

// The instances of limiter, one per algorithm.
type (
	fixedWindow   = limiter[domain.FixedWindow, *domain.FixedWindow]
	slidingLog    = limiter[byRule[domain.SlidingLog, *domain.SlidingLog], *byRule[domain.SlidingLog, *domain.SlidingLog]]
	slidingWindow = limiter[byRule[domain.SlidingWindow, *domain.SlidingWindow], *byRule[domain.SlidingWindow, *domain.SlidingWindow]]
	tokenBucket   = limiter[byRule[domain.TokenBucket, *domain.TokenBucket], *byRule[domain.TokenBucket, *domain.TokenBucket]]
)

// Allow implements [ports.Limiter]: the algorithm's limiter decides. It
// calls it directly, not through the store interface, so that the
// request and dst do not escape to the heap, and a request of one plain
// limit straight on its path.
func (l *Limiter) Allow(_ context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	one := len(req.Limits) == 1 && plain(&req.Limits[0])
	switch s := l.store.(type) {
	case *fixedWindow:
		if one {
			return s.allowOne(&req, dst)
		}
		return s.allowMany(&req, dst)
	case *slidingLog:
		if one {
			return s.allowOne(&req, dst)
		}
		return s.allowMany(&req, dst)
	case *slidingWindow:
		if one {
			return s.allowOne(&req, dst)
		}
		return s.allowMany(&req, dst)
	case *tokenBucket:
		if one {
			return s.allowOne(&req, dst)
		}
		return s.allowMany(&req, dst)
	}
	panic("memory: a store of no algorithm") // the table builds only these
}

// View returns a limiter of the same store deciding by v: the same keys,
// bound and sweeper. The error names a counting mode the store's
// algorithm cannot honour.
func (l *Limiter) View(v View) (*Limiter, error) {
	if err := honours(l.algorithm, v); err != nil {
		return nil, err
	}
	return &Limiter{l.store.view(v), l.algorithm}, nil
}

// honours checks that algorithm can decide by v.
func honours(algorithm string, v View) error {
	if !v.Counting.HonouredBy(algorithm) {
		return fmt.Errorf("memory: %s cannot count %s (only %s can)", algorithm, v.Counting, domain.AlgorithmFixedWindow)
	}
	return nil
}

// state is one key's state under a domain policy, deciding by a rule in
// windows w: *domain.FixedWindow, or *byRule of domain.SlidingLog,
// domain.SlidingWindow or domain.TokenBucket.
type state[S any] interface {
	*S
	Decide(now time.Time, rule domain.Rule, w domain.Windows, cost int64) domain.Decision
	Spend(now time.Time, rule domain.Rule, w domain.Windows, cost int64)
	Reserve(now time.Time, rule domain.Rule, w domain.Windows, cost int64) int64
	Adjust(now time.Time, rule domain.Rule, w domain.Windows, mark, delta int64)
	Live(now time.Time, rule domain.Rule, w domain.Windows, mark int64) bool
}

// ruleState is a domain policy that decides by a limit's rule alone.
type ruleState[S any] interface {
	*S
	Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision
	Spend(now time.Time, rule domain.Rule, cost int64)
	Reserve(now time.Time, rule domain.Rule, cost int64) int64
	Adjust(now time.Time, rule domain.Rule, mark, delta int64)
	Live(now time.Time, rule domain.Rule, mark int64) bool
}

// byRule is the state of a policy that reads nothing but the rule (the
// fixed window alone reads where its windows start).
type byRule[S any, P ruleState[S]] struct{ s S }

func (b *byRule[S, P]) Decide(now time.Time, rule domain.Rule, _ domain.Windows, cost int64) domain.Decision {
	return P(&b.s).Decide(now, rule, cost)
}

func (b *byRule[S, P]) Spend(now time.Time, rule domain.Rule, _ domain.Windows, cost int64) {
	P(&b.s).Spend(now, rule, cost)
}

func (b *byRule[S, P]) Reserve(now time.Time, rule domain.Rule, _ domain.Windows, cost int64) int64 {
	return P(&b.s).Reserve(now, rule, cost)
}

func (b *byRule[S, P]) Adjust(now time.Time, rule domain.Rule, _ domain.Windows, mark, delta int64) {
	P(&b.s).Adjust(now, rule, mark, delta)
}

func (b *byRule[S, P]) Live(now time.Time, rule domain.Rule, _ domain.Windows, mark int64) bool {
	return P(&b.s).Live(now, rule, mark)
}

// maxLimits is how many limits a request may carry here: a policy has a
// handful, Envoy's rate limit service a few descriptors; the entries of
// one request are locked together. A request of up to inlineLimits is
// decided without allocating.
const (
	maxLimits    = 64
	inlineLimits = 8
)

// errTooManyLimits is a request the limiter cannot decide: a caller's
// bug, reported rather than deciding part of it.
var errTooManyLimits = fmt.Errorf("memory: more than %d limits in one request", maxLimits)

// limiter is one view of the store of one algorithm: the keyspace every
// view shares, and the view's options.
type limiter[S any, P state[S]] struct {
	*keyspace[S]
	View
}

// keyspace is a store's keys: a map of keys, each a domain policy's state
// under its own mutex, and a sweeper.
type keyspace[S any] struct {
	clock       clock
	keys        sync.Map // string → *limiterEntry[S]
	n           atomic.Int64
	maxKeys     int64 // < 0: no bound
	sweeper     *sweeper
	nextReclaim atomic.Int64 // clock nanos before which no reclaim runs
	family      func(string) string
	fmu         sync.Mutex       // guards families
	families    map[string]int64 // keys held per non-empty family
}

// limiterEntry is one key: the algorithm's state, a calendar limit's
// period ([domain.Limit.Calendar]: a fixed window over the period,
// whatever the algorithm), or a concurrency limit's slots
// ([domain.Limit.Concurrency]). The last two are apart, allocated for
// the keys that use them, so that the algorithm's keys (nearly all)
// carry one pointer for them.
type limiterEntry[S any] struct {
	mu     sync.Mutex // guards idleAt, more, state
	idleAt int64      // clock nanos from which state is whole again; neverIdle while a slot is held; swept once removed
	more   *calendarSlots
	state  S
}

// calendarSlots is a calendar limit's period or a concurrency limit's
// slots: one key is only ever one kind, but the kinds share its entry;
// and a Reserve limit's reservations in flight.
type calendarSlots struct {
	period domain.PeriodWindow
	slots  domain.Slots
	// reserved is the units of the reservations in flight (admitted, not
	// yet settled), by mark; pruneAt is the number of marks at which
	// the ones whose window ended are dropped.
	reserved map[int64]int64
	pruneAt  int
}

const (
	// neverIdle is the idleAt of an entry whose slots are held.
	neverIdle = math.MaxInt64
	// swept is the idleAt of an entry removed from the map: Allow
	// retries on a fresh one.
	swept = math.MinInt64
)

// extra returns e's period and slots, allocating them. It requires e.mu
// held.
func (e *limiterEntry[S]) extra() *calendarSlots {
	if e.more == nil {
		e.more = new(calendarSlots)
	}
	return e.more
}

// held returns the slots of e held. It requires e.mu held.
func (e *limiterEntry[S]) held() int64 {
	if e.more == nil {
		return 0
	}
	return e.more.slots.Held()
}

// decide is lim's decision at cost on e, without spending.
func (l *limiter[S, P]) decide(e *limiterEntry[S], now time.Time, lim *domain.Limit, cost int64) domain.Decision {
	if lim.Concurrency {
		return e.extra().slots.Decide(lim.Rule.Limit, cost)
	}
	if cal := lim.Calendar; cal != nil {
		return e.extra().period.Decide(now, *cal, lim.Rule.Limit, cost)
	}
	return P(&e.state).Decide(now, lim.Rule, l.Windows, cost)
}

func newLimiter[S any, P state[S]](opts Options) *limiter[S, P] {
	ks := &keyspace[S]{clock: newClock(opts.Now), maxKeys: int64(opts.MaxKeys), family: opts.Family, families: make(map[string]int64)}
	if ks.maxKeys == 0 {
		ks.maxKeys = DefaultMaxKeys
	}
	ks.sweeper = startSweeper(opts.SweepInterval, ks.sweep)
	return &limiter[S, P]{keyspace: ks, View: opts.View}
}

// view returns the limiter of v on l's keys.
func (l *limiter[S, P]) view(v View) store { return &limiter[S, P]{keyspace: l.keyspace, View: v} }

// Allow implements [ports.Limiter]. It fails only on a malformed request
// (more than 64 limits) and with [ErrFull].
func (l *limiter[S, P]) Allow(_ context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	if len(req.Limits) == 1 && plain(&req.Limits[0]) {
		return l.allowOne(&req, dst)
	}
	return l.allowMany(&req, dst)
}

// allowMany is Allow of any request: its keys locked in key order, every
// limit decided, and spent by [domain.Spends].
func (l *limiter[S, P]) allowMany(req *domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	n := len(req.Limits)
	if n > maxLimits {
		return domain.Verdict{}, errTooManyLimits
	}
	// entries[i] is limit i's entry; order, the indices of req.Limits in
	// key order; held[:m], the distinct entries locked, in key order
	// (limits that share a key share one entry, locked once). A request
	// of up to inlineLimits keeps them on the stack.
	var (
		entriesBuf, heldBuf [inlineLimits]*limiterEntry[S]
		orderBuf            [inlineLimits]uint8
	)
	entries, held, order := entriesBuf[:], heldBuf[:], orderBuf[:]
	if n > inlineLimits {
		entries, held, order = make([]*limiterEntry[S], n), make([]*limiterEntry[S], n), make([]uint8, n)
	}
	for i := range n {
		order[i] = uint8(i)
		for j := i; j > 0 && req.Limits[order[j]].Key < req.Limits[order[j-1]].Key; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	unlock := func(m int) {
		for _, e := range held[:m] {
			e.mu.Unlock()
		}
	}
	for {
		retry, m := false, 0
		for k := range n {
			i := int(order[k])
			if k > 0 && req.Limits[i].Key == req.Limits[order[k-1]].Key {
				entries[i] = entries[order[k-1]]
				continue
			}
			e, err := l.entry(req, i)
			if err != nil {
				unlock(m)
				return domain.Verdict{}, err
			}
			e.mu.Lock()
			entries[i], held[m] = e, e
			m++
			if e.idleAt == swept {
				retry = true
				unlock(m)
				if l.keys.CompareAndDelete(req.Limits[i].Key, e) {
					l.forget(req.Limits[i].Key)
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
		v := domain.Settle(*req, l.Counting, dst, func(i int, cost int64) domain.Decision {
			return l.decide(entries[i], now, &req.Limits[i], cost)
		})
		var r *release[S]
		for i := range n {
			e := entries[i]
			c := req.Limits[i].Cost
			if req.Limits[i].Reserve {
				c = v.Decisions[i].Spent
			}
			switch {
			case c == 0 || !domain.Spends(*req, l.Counting, v, i):
			case req.Limits[i].Reserve:
				l.reserve(e, now, req.Limits[i], &v.Decisions[i])
			case req.Limits[i].Concurrency:
				e.extra().slots.Acquire()
				if r == nil {
					r = &release[S]{clock: l.clock}
				}
				r.entries = append(r.entries, e)
			case req.Limits[i].Calendar != nil:
				e.extra().period.Spend(now, *req.Limits[i].Calendar, c)
			default:
				P(&e.state).Spend(now, req.Limits[i].Rule, l.Windows, c)
			}
			e.idleAt = nanos + int64(max(v.Decisions[i].ResetAfter, v.Decisions[i].RetryAfter))
			if e.held() > 0 {
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

// plain reports whether lim is decided by the algorithm's state alone:
// not a concurrency, calendar or Reserve limit.
func plain(lim *domain.Limit) bool {
	return !lim.Concurrency && lim.Calendar == nil && !lim.Reserve
}

// allowOne is Allow of a request of one plain limit, the common shape:
// one key, locked alone, decided, spent, and the verdict as
// [domain.Settle] makes it. The decision is written once, in place.
func (l *limiter[S, P]) allowOne(req *domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	lim := &req.Limits[0]
	if cap(dst) < 1 {
		dst = make([]domain.Decision, 1)
	}
	dst = dst[:1]
	d := &dst[0]
	for {
		e, err := l.entry(req, 0)
		if err != nil {
			return domain.Verdict{}, err
		}
		e.mu.Lock()
		if e.idleAt == swept {
			e.mu.Unlock()
			if l.keys.CompareAndDelete(lim.Key, e) {
				l.forget(lim.Key)
			}
			continue
		}
		now, nanos := l.clock.read()
		*d = P(&e.state).Decide(now, lim.Rule, l.Windows, lim.Cost)
		e.idleAt = nanos + int64(max(d.ResetAfter, d.RetryAfter))
		v := settleOne(lim, l.Counting, d)
		if lim.Cost > 0 && (l.Counting == domain.CountEvery || (v.Allowed && (l.Counting == domain.CountHits || d.Allowed))) {
			P(&e.state).Spend(now, lim.Rule, l.Windows, lim.Cost) // domain.Spends
		}
		if e.held() > 0 {
			e.idleAt = neverIdle
		}
		e.mu.Unlock()
		v.Decisions = dst
		return v, nil
	}
}

// settleOne makes d, the decision of the one plain limit lim of a
// request counted by c, as [domain.Settle] leaves it, and returns the
// verdict without its decisions: Settle decides such a request once,
// and its decision is the verdict.
func settleOne(lim *domain.Limit, c domain.Counting, d *domain.Decision) domain.Verdict {
	d.Shadow, d.Quota = lim.Shadow, lim.Quota
	v := domain.Verdict{Allowed: d.Allowed || d.Shadow} // domain.Admits of one decision
	switch {
	case !v.Allowed:
		v.Outcome = domain.OutcomeDenied
		if c == domain.CountEvery {
			d.Remaining = 0 // counted: nothing is left
		}
	case !d.Allowed:
		v.Outcome = domain.OutcomeShadowDenied
		if c != domain.CountAdmitted {
			d.Remaining = 0
		}
	}
	return v
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
		e.more.slots.Release()
		if e.more.slots.Held() == 0 {
			e.idleAt = r.clock.nanos()
		}
		e.mu.Unlock()
	}
}
