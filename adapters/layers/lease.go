package layers

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Lease defaults.
const (
	// DefaultLeaseMinLimit is the largest limit that is never leased: a
	// small budget is decided at the store one request at a time.
	DefaultLeaseMinLimit = 100
	// DefaultMaxLease is how long a slice lives at most.
	DefaultMaxLease = time.Second
	// DefaultLeaseAhead is how much of a key's recent rate on this
	// replica one slice holds.
	DefaultLeaseAhead = 150 * time.Millisecond
	// DefaultLeaseLowWater is the fraction of a limit below which what
	// remains at the store is no longer leased: the rest of the window
	// is decided at the store, one request at a time.
	DefaultLeaseLowWater = 0.005
	// DefaultLeaseMaxKeys bounds the keys whose rate a lease layer
	// follows.
	DefaultLeaseMaxKeys = 4096
)

const (
	// minSlice is the smallest slice worth a store operation: a key whose
	// slice would be smaller is not hot.
	minSlice = 16
	// minLeaseLife is the shortest lease worth taking: a token bucket's
	// lease is a hundredth of its window at most, and one shorter than
	// this is not taken.
	minLeaseLife = 20 * time.Millisecond
	// windowMargin is taken off the end of a window a store reports: its
	// time left may be rounded up (by a millisecond on Redis), and a
	// slice must die before its window does.
	windowMargin = 2 * time.Millisecond
	// rateBin is the span over which a key's rate is counted before it
	// is folded into its estimate; a bin that counts rateBinHits units
	// closes after minRateBin already, so that a burst turns a key hot
	// within milliseconds.
	rateBin     = 100 * time.Millisecond
	minRateBin  = 10 * time.Millisecond
	rateBinHits = 64
	// maxLeasedLimits bounds the limits of a request decided from leases.
	maxLeasedLimits = 4
	// leaseShards is the number of independently locked parts of the
	// table of keys. A power of two.
	leaseShards = 16
	// leaseTakeTimeout bounds a slice's store operations (its take and
	// its return).
	leaseTakeTimeout = time.Second
)

// LeaseObserver is told what a lease layer does, for metrics. Its
// methods must be cheap and safe for concurrent use.
type LeaseObserver interface {
	// LeaseTaken counts a slice of units taken from the store: one
	// store operation.
	LeaseTaken(units int64)
	// LeaseReturned counts a slice's return, one store operation, which
	// gave back units (0 when it used them all, or its store failed).
	LeaseReturned(units int64)
	// LeaseDecided counts a request decided from leases, without the
	// store.
	LeaseDecided()
}

// LeaseOptions configure [NewLeases].
type LeaseOptions struct {
	// Settler gives the unused part of a slice back, on the store of the
	// limiter the layer wraps. Required.
	Settler ports.Settler
	// Algorithm is the store's algorithm (TOLLGATE_ALGORITHM): the fixed
	// window and the token bucket are leased, with calendar limits of
	// any algorithm; the others are decided at the store.
	Algorithm string
	// MinLimit: a limit of at most this is never leased. Zero means
	// DefaultLeaseMinLimit.
	MinLimit int64
	// MaxLease bounds a slice's life. Zero means DefaultMaxLease.
	MaxLease time.Duration
	// Ahead is how much of a key's recent rate a slice holds. Zero means
	// DefaultLeaseAhead.
	Ahead time.Duration
	// LowWater is the fraction of a limit under which what remains is
	// not leased. Zero means DefaultLeaseLowWater.
	LowWater float64
	// MaxKeys bounds the keys followed. Zero means DefaultLeaseMaxKeys.
	MaxKeys int
	// Sweep is how often ended slices are given back. Zero means 50 ms.
	Sweep time.Duration
	// Now returns the current time. If nil, the process's monotonic
	// clock. Tests inject a fake clock here.
	Now func() time.Time
	// Observer, if not nil, is told what the layer does.
	Observer LeaseObserver
	// OnError, if not nil, is told of a slice's store operation that
	// failed (no request waited on it).
	OnError func(error)
}

// Leases takes slices of hot keys' budgets from the store and decides
// requests from them in memory ([Leases.Layer]).
//
// A slice is a Reserve spend ([domain.Limit.Reserve]) of one limit's
// key: the store counts it at once as spent, and admits it while
// anything remains, so that whatever this replica admits from it is
// already counted. It is taken in the background, one at a time per
// key, when a key is hot: a limit above MinLimit, of the fixed window,
// a calendar period or the token bucket, neither shadow, quota,
// concurrency nor token (Reserve), whose requests on this replica come
// fast enough that Ahead of them fill a slice of 16 or more. A slice
// holds Ahead of the key's rate, at most a quarter of what the store
// last said remains, and, near the window's end, what the rate spends
// before it. None is taken while what remains is below LowWater of the
// limit: the rest of the window is decided at the store.
//
// A request is decided from leases only when every one of its limits
// has a live slice with room for its cost: then each slice gives its
// cost, all or none, and the request is admitted (a lease never
// denies). Otherwise the whole request goes to the limiter under the
// layer, as without leases. A slice dies at MaxLease (a hundredth of
// its window for the token bucket) or its window's end, whichever is
// first, timed from before its take was sent; then (or once spent) its
// unused part is given back through Settler into the window it was
// counted in, or nowhere once that window has ended. So on the fixed
// window and calendar periods, more than the limit is never admitted
// in a window, across replicas; a replica that vanishes strands its
// unused slices until their window ends. On the token bucket, tokens
// taken at once and spent within a lease may meet a bucket that has
// refilled meanwhile: a span of length t admits at most burst + rate ×
// (t + lease), against burst + rate × t at the store.
//
// Leases is safe for concurrent use by multiple goroutines. Close stops
// its sweeper and gives every slice back.
type Leases struct {
	opts    LeaseOptions
	origin  time.Time
	perKeys int // each shard's bound
	shards  [leaseShards]leaseShard

	retMu   sync.Mutex // guards retired
	retired []ended

	mu     sync.Mutex // guards closed and the goroutines' start
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup // the sweeper
	takes  sync.WaitGroup // the takes in flight
}

// NewLeases returns a lease layer's state and starts its sweeper.
func NewLeases(opts LeaseOptions) *Leases {
	if opts.Settler == nil {
		panic("layers: NewLeases needs a Settler")
	}
	if opts.MinLimit <= 0 {
		opts.MinLimit = DefaultLeaseMinLimit
	}
	if opts.MaxLease <= 0 {
		opts.MaxLease = DefaultMaxLease
	}
	if opts.Ahead <= 0 {
		opts.Ahead = DefaultLeaseAhead
	}
	if opts.LowWater <= 0 {
		opts.LowWater = DefaultLeaseLowWater
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = DefaultLeaseMaxKeys
	}
	if opts.Sweep <= 0 {
		opts.Sweep = 50 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Leases{opts: opts, origin: opts.Now(), perKeys: max(1, opts.MaxKeys/leaseShards), stop: make(chan struct{})}
	for i := range l.shards {
		l.shards[i].m = make(map[string]*leaseEntry)
	}
	l.wg.Go(l.sweep)
	return l
}

// nanos is the time since l's origin.
func (l *Leases) nanos() int64 { return int64(l.opts.Now().Sub(l.origin)) }

// Layer returns the layer that decides from l's leases. It is meant for
// one chain: l takes its slices through the limiter it wraps.
func (l *Leases) Layer() ports.Layer {
	return func(next ports.Limiter) ports.Limiter { return &leaseLimiter{l, next} }
}

// leaseLimiter is the limiter [Leases.Layer] builds.
type leaseLimiter struct {
	*Leases
	next ports.Limiter
}

// leasable reports whether lim may be decided from a lease.
func (l *Leases) leasable(lim domain.Limit) bool {
	if lim.Shadow || lim.Quota || lim.Concurrency || lim.Reserve || lim.Cost <= 0 || lim.Rule.Limit <= l.opts.MinLimit {
		return false
	}
	if lim.Calendar == nil && l.opts.Algorithm != domain.AlgorithmFixedWindow && l.opts.Algorithm != domain.AlgorithmTokenBucket {
		return false
	}
	return l.life(lim) >= minLeaseLife
}

// life is how long a slice of lim lives at most: MaxLease, and for a
// token bucket's a hundredth of its window (what it may let a bucket
// exceed its burst by).
func (l *Leases) life(lim domain.Limit) time.Duration {
	if lim.Calendar == nil && l.opts.Algorithm == domain.AlgorithmTokenBucket {
		return min(l.opts.MaxLease, lim.Rule.Window/100)
	}
	return l.opts.MaxLease
}

// windowed reports whether lim's slices end with a window the store
// reports (its ResetAfter): the fixed window's and a calendar period's.
func (l *Leases) windowed(lim domain.Limit) bool {
	return lim.Calendar != nil || l.opts.Algorithm == domain.AlgorithmFixedWindow
}

// same reports whether a and b are one budget: the same rule and period.
func same(a, b domain.Limit) bool {
	if a.Rule != b.Rule || (a.Calendar == nil) != (b.Calendar == nil) {
		return false
	}
	return a.Calendar == nil || *a.Calendar == *b.Calendar
}

// Allow implements [ports.Limiter].
func (c *leaseLimiter) Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	n := len(req.Limits)
	if n == 0 || n > maxLeasedLimits {
		return c.next.Allow(ctx, req, dst)
	}
	for i, lim := range req.Limits {
		if !c.leasable(lim) {
			return c.next.Allow(ctx, req, dst)
		}
		for j := range i {
			if req.Limits[j].Key == lim.Key {
				return c.next.Allow(ctx, req, dst)
			}
		}
	}
	now := c.nanos()
	var ebuf [maxLeasedLimits]*leaseEntry
	es := ebuf[:n]
	for i, lim := range req.Limits {
		if es[i] = c.entry(req.Tenant, lim, now); es[i] == nil {
			return c.next.Allow(ctx, req, dst) // the table is full
		}
	}
	order := lockOrder(req, n)
	for _, i := range order[:n] {
		es[i].mu.Lock()
	}
	// The time of the decision is read under the locks, as the slices
	// are spent: a request delayed on its way here never spends from a
	// slice past its end.
	now = c.nanos()
	ok := true
	for i, e := range es {
		e.hit(req.Tenant, req.Limits[i], now)
		if ok && e.room(now, req.Limits[i].Cost) == nil {
			ok = false
		}
	}
	var v domain.Verdict
	if ok {
		if cap(dst) < n {
			dst = make([]domain.Decision, 0, n)
		}
		v = domain.Verdict{Allowed: true, Decisions: dst[:n]}
		for i, e := range es {
			v.Decisions[i] = e.spend(now, req.Limits[i], c.Leases)
		}
	}
	var tbuf [maxLeasedLimits]take
	takes := tbuf[:0]
	for i, e := range es {
		if units := c.wants(e, now, req.Limits[i]); units > 0 {
			e.taking = true
			takes = append(takes, take{next: c.next, e: e, gen: e.gen, tenant: req.Tenant, limit: e.limit, units: units})
		}
	}
	for _, i := range order[:n] {
		es[i].mu.Unlock()
	}
	c.start(takes)
	if ok {
		if c.opts.Observer != nil {
			c.opts.Observer.LeaseDecided()
		}
		return v, nil
	}
	sent := now
	v, err := c.next.Allow(ctx, req, dst)
	if err == nil && len(v.Decisions) == n {
		for i, e := range es {
			e.mu.Lock()
			e.heard(c.Leases, req.Limits[i], v.Decisions[i], sent, c.nanos())
			e.mu.Unlock()
		}
	}
	return v, err
}

// lockOrder returns the indexes of req's first n limits in the order of
// their keys: entries are locked in one order, so that two requests
// never wait on each other.
func lockOrder(req domain.Request, n int) [maxLeasedLimits]int {
	var o [maxLeasedLimits]int
	for i := range n {
		o[i] = i
		for j := i; j > 0 && req.Limits[o[j]].Key < req.Limits[o[j-1]].Key; j-- {
			o[j], o[j-1] = o[j-1], o[j]
		}
	}
	return o
}

// take is a slice to take: units of limit's key for tenant, into e as
// it was at gen.
type take struct {
	next   ports.Limiter
	e      *leaseEntry
	gen    uint64
	tenant domain.TenantID
	limit  domain.Limit
	units  int64
}

// start takes each of takes in the background; a closed l takes none.
func (l *Leases) start(takes []take) {
	if len(takes) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range takes {
		if l.closed {
			t.e.mu.Lock()
			t.e.taking = false
			t.e.mu.Unlock()
			continue
		}
		l.takes.Go(func() { l.takeSlice(t) })
	}
}

// takeSlice takes t's slice from the store: a Reserve spend of t.units
// of its limit alone. Its life runs from before the call.
func (l *Leases) takeSlice(t take) {
	ctx, cancel := context.WithTimeout(context.Background(), leaseTakeTimeout)
	defer cancel()
	lim := t.limit
	lim.Cost, lim.Reserve = t.units, true
	req := domain.Request{Tenant: t.tenant, Route: "lease", Limits: []domain.Limit{lim}}
	var dbuf [1]domain.Decision
	sent := l.nanos()
	v, err := t.next.Allow(ctx, req, dbuf[:0])
	now := l.nanos()
	e := t.e
	e.mu.Lock()
	e.taking = false
	if err != nil || len(v.Decisions) != 1 {
		// A failing store is asked for a slice of this key once per
		// slice's life at most.
		e.lowUntil = now + int64(l.life(t.limit))
		e.mu.Unlock()
		if err == nil {
			err = fmt.Errorf("%d decisions for one limit", len(v.Decisions))
		}
		if l.opts.OnError != nil {
			l.opts.OnError(fmt.Errorf("layers: taking a lease: %w", err))
		}
		return
	}
	d := v.Decisions[0]
	if d.Spent <= 0 || d.Mark == domain.NoMark {
		e.heard(l, t.limit, d, sent, now)
		e.mu.Unlock()
		return
	}
	s := &slice{units: d.Spent, adm: domain.Decision{Spent: d.Spent, Mark: d.Mark}}
	life := min(int64(l.life(lim)), int64(d.ResetAfter)-int64(windowMargin))
	if !l.windowed(lim) {
		life = int64(l.life(lim))
	}
	s.until = sent + life
	if !v.Allowed || e.gen != t.gen || !same(e.limit, t.limit) || life <= 0 {
		// Denied, though counted (a limiter that counts every request),
		// or voided by a reset or a reload meanwhile: given back whole,
		// unless a reset voided it (the store forgot it already).
		if e.gen == t.gen {
			l.retMu.Lock()
			l.retired = append(l.retired, ended{e: e, s: s, limit: t.limit, tenant: t.tenant})
			l.retMu.Unlock()
		}
		e.mu.Unlock()
		return
	}
	e.heard(l, t.limit, d, sent, now)
	// What remains at the store excludes this slice: it is spent there.
	e.slices = append(e.slices, s)
	e.mu.Unlock()
	if l.opts.Observer != nil {
		l.opts.Observer.LeaseTaken(d.Spent)
	}
}

// sweep gives back ended slices every Sweep, and drops keys idle for a
// second, until Close.
func (l *Leases) sweep() {
	t := time.NewTicker(l.opts.Sweep)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.collect(l.nanos(), false)
		l.giveBack()
	}
}

// collect retires every slice ended at now (all of them when all), and
// drops the keys without slices or a take that are idle for a second,
// or cold.
func (l *Leases) collect(now int64, all bool) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		for k, e := range sh.m {
			e.mu.Lock()
			for j := 0; j < len(e.slices); {
				if s := e.slices[j]; all || now >= s.until {
					e.retire(s, l)
					continue
				}
				j++
			}
			if len(e.slices) == 0 && !e.taking && (now-e.lastHit > int64(time.Second) || l.cold(e, now)) {
				e.dead = true
				delete(sh.m, k)
			}
			e.mu.Unlock()
		}
		sh.mu.Unlock()
	}
}

// cold reports whether e has been followed for two rate bins and is not
// hot: it leaves the table, so that a table full of quiet keys still
// takes a key that turns hot. Requires e.mu held.
func (l *Leases) cold(e *leaseEntry, now int64) bool {
	return now-e.born > 2*int64(rateBin) && e.rate*l.opts.Ahead.Seconds() < minSlice
}

// giveBack settles the retired slices: each replaces its units with
// what it used, in its window (the store drops it once that ended).
func (l *Leases) giveBack() {
	l.retMu.Lock()
	rs := l.retired
	l.retired = nil
	l.retMu.Unlock()
	for _, r := range rs {
		lim := r.limit
		lim.Cost, lim.Reserve = r.s.units, true
		req := domain.Request{Tenant: r.tenant, Route: "lease", Limits: []domain.Limit{lim}}
		ctx, cancel := context.WithTimeout(context.Background(), leaseTakeTimeout)
		err := l.opts.Settler.Settle(ctx, req, []domain.Decision{r.s.adm}, r.used)
		cancel()
		if err != nil && l.opts.OnError != nil {
			l.opts.OnError(fmt.Errorf("layers: giving a lease back: %w", err))
		}
		if l.opts.Observer != nil {
			returned := r.s.units - r.used
			if err != nil {
				returned = 0
			}
			l.opts.Observer.LeaseReturned(returned)
		}
	}
}

// Forget voids every slice of tenant's keys, unused units included, at
// once: the usage API's reset made its budget whole at the store, which
// counts them no more. Its keys' rates are kept.
func (l *Leases) Forget(tenant domain.TenantID) {
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.RLock()
		for _, e := range sh.m {
			e.mu.Lock()
			if e.tenant == tenant {
				e.slices = e.slices[:0]
				e.gen++
				e.remaining, e.resetAt, e.lowUntil = -1, 0, 0
			}
			e.mu.Unlock()
		}
		sh.mu.RUnlock()
	}
}

// Close stops the sweeper, waits for the takes in flight, and gives
// every slice back. It is idempotent and returns nil.
func (l *Leases) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.stop)
	l.mu.Unlock()
	l.wg.Wait()
	l.takes.Wait()
	l.collect(l.nanos(), true)
	l.giveBack()
	return nil
}
