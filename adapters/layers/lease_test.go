package layers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// stepClock is a fake clock that moves step forward at every reading,
// so that requests take time as they are made, and further when told.
type stepClock struct {
	mu   sync.Mutex // guards now
	now  time.Time
	step time.Duration
}

func newStepClock(step time.Duration) *stepClock {
	return &stepClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), step: step}
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// leaseCounts is a LeaseObserver that counts.
type leaseCounts struct {
	taken, slices, returned, decided, ops atomic.Int64
}

func (c *leaseCounts) LeaseTaken(units int64) { c.slices.Add(1); c.taken.Add(units) }
func (c *leaseCounts) LeaseReturned(units int64) {
	c.ops.Add(1)
	c.returned.Add(units)
}
func (c *leaseCounts) LeaseDecided() { c.decided.Add(1) }

// replica is one replica's lease layer over a shared store.
type replica struct {
	leases *layers.Leases
	lim    ports.Limiter
	counts *leaseCounts
}

// newReplica builds a lease layer over st (algorithm's), whose returns
// go to settler (st when nil), on clk. The test closes it.
func newReplica(t *testing.T, st *memory.Limiter, algorithm string, settler ports.Settler, now func() time.Time) *replica {
	t.Helper()
	if settler == nil {
		settler = st
	}
	r := &replica{counts: &leaseCounts{}}
	r.leases = layers.NewLeases(layers.LeaseOptions{Settler: settler, Algorithm: algorithm, Now: now, Sweep: time.Hour, Observer: r.counts,
		OnError: func(err error) { t.Errorf("lease: %v", err) }})
	t.Cleanup(func() { r.leases.Close() })
	r.lim = ports.Chain(st, r.leases.Layer())
	return r
}

func newStore(t *testing.T, algorithm string, now func() time.Time) *memory.Limiter {
	t.Helper()
	st, err := memory.New(algorithm, memory.Options{Now: now, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func hot(limit int64, window time.Duration, key string) domain.Limit {
	return domain.Limit{Name: "default", Rule: domain.Rule{Limit: limit, Window: window}, Key: key, Cost: 1}
}

func one(lims ...domain.Limit) domain.Request {
	return domain.Request{Tenant: "acme", Route: "default", Limits: lims}
}

// used returns what the store counts of lim: its limit less what remains.
func used(t *testing.T, st ports.Usage, lim domain.Limit) int64 {
	t.Helper()
	v, err := st.Peek(context.Background(), one(lim))
	if err != nil {
		t.Fatal(err)
	}
	return lim.Rule.Limit - v.Decisions[0].Remaining
}

// TestLeasesExactUnderConcurrency: goroutines on two replicas' lease
// layers over one store, three times the budget asked: at most the
// limit is admitted, part of it from leases, and once the layers close
// the store counts exactly what was admitted (every unused unit given
// back); asked on, the store admits the rest, no more.
func TestLeasesExactUnderConcurrency(t *testing.T) {
	t.Parallel()
	clk := newStepClock(20 * time.Microsecond)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	const limit, goroutines, each = 20_000, 4, 7500
	lim := hot(limit, time.Hour, "rl:{acme}")
	reps := []*replica{newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now), newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now)}
	var admitted atomic.Int64
	// First each replica's key turns hot, request by request, so that
	// both hold a slice when the goroutines start (else the store may
	// spend the budget before a take is scheduled).
	for _, r := range reps {
		admitted.Add(hotten(t, clk, r, lim, 2000))
	}
	var wg sync.WaitGroup
	for _, r := range reps {
		for range goroutines {
			wg.Go(func() {
				for range each {
					v, err := r.lim.Allow(context.Background(), one(lim), nil)
					if err != nil {
						t.Error(err)
						return
					}
					if v.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if got := admitted.Load(); got > limit {
		t.Fatalf("admitted %d, limit %d", got, limit)
	}
	decided := reps[0].counts.decided.Load() + reps[1].counts.decided.Load()
	if decided == 0 {
		t.Fatalf("no request was decided from a lease: slices %d %d, admitted %d", reps[0].counts.slices.Load(), reps[1].counts.slices.Load(), admitted.Load())
	}
	for _, r := range reps {
		r.leases.Close()
	}
	if got, want := used(t, st, lim), admitted.Load(); got != want {
		t.Errorf("after Close the store counts %d, want what was admitted, %d", got, want)
	}
	for {
		v, err := st.Allow(context.Background(), one(lim), nil)
		if err != nil || !v.Allowed {
			break
		}
		admitted.Add(1)
	}
	if got := admitted.Load(); got != limit {
		t.Errorf("admitted %d in all, want the limit, %d", got, limit)
	}
	t.Logf("%d of %d decisions from leases", decided, (goroutines*each+2000)*len(reps))
}

// windowRun asks lim over reps in turn for span, a request every
// gap(elapsed) (half a millisecond into the first): the takes and the
// returns of ended slices happen as they come (every 10 requests),
// deterministically. It returns the admissions by window of lim,
// counting from the first request (which starts the store's window).
// Replicas in skip stop asking at skipFrom.
func windowRun(t *testing.T, clk *stepClock, reps []*replica, lim domain.Limit, span time.Duration, gap func(time.Duration) time.Duration, skip map[int]bool, skipFrom time.Duration) []int64 {
	t.Helper()
	windows := make([]int64, (span+lim.Rule.Window-1)/lim.Rule.Window)
	clk.Advance(500 * time.Microsecond)
	turn := 0
	for i, at := 0, time.Duration(0); at < span; i++ {
		for {
			turn = (turn + 1) % len(reps)
			if !skip[turn] || at < skipFrom {
				break
			}
		}
		r := reps[turn]
		v, err := r.lim.Allow(context.Background(), one(lim), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed {
			windows[at/lim.Rule.Window]++
		}
		for _, r := range reps {
			r.leases.WaitTakes()
			if i%10 == 9 {
				r.leases.SweepNow()
			}
		}
		d := gap(at)
		clk.Advance(d)
		at += d
	}
	return windows
}

func every(d time.Duration) func(time.Duration) time.Duration {
	return func(time.Duration) time.Duration { return d }
}

// TestLeasesWindowEnd: ten times the budget asked, over four windows of
// 10 s: each window admits at most its limit and at least 98% of it,
// most of it from leases.
func TestLeasesWindowEnd(t *testing.T) {
	t.Parallel()
	for _, algorithm := range []string{domain.AlgorithmFixedWindow, domain.AlgorithmSlidingLog} {
		t.Run(algorithm, func(t *testing.T) {
			t.Parallel()
			clk := newStepClock(0)
			st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
			const limit = 1000
			lim := hot(limit, 10*time.Second, "rl:{acme}")
			if algorithm == domain.AlgorithmSlidingLog {
				// A calendar day on a store of another algorithm: its
				// period is a fixed window.
				lim = hot(limit, domain.NominalWindow(domain.PeriodDay), "rl:{acme}:day")
				lim.Calendar = &domain.Calendar{Unit: domain.PeriodDay}
			}
			reps := []*replica{newReplica(t, st, algorithm, nil, clk.Now), newReplica(t, st, algorithm, nil, clk.Now)}
			span := 40 * time.Second
			if lim.Calendar != nil {
				span = 20 * time.Second // a day: one window
			}
			ws := windowRun(t, clk, reps, lim, span, every(time.Millisecond), nil, 0)
			if lim.Calendar != nil {
				ws = ws[:1]
			}
			for k, got := range ws {
				if got > limit || got < limit*98/100 {
					t.Errorf("window %d admitted %d, want at most %d and at least %d", k, got, limit, limit*98/100)
				}
			}
			if d := reps[0].counts.decided.Load() + reps[1].counts.decided.Load(); d < limit/2 {
				t.Errorf("%d decisions from leases, want most of the %d admitted a window", d, limit)
			}
		})
	}
}

// TestLeasesAcrossWindows: a window asked for less than its budget
// ends with slices out; the next, asked for ten times its budget, still
// admits at most its limit: no slice outlives its window.
func TestLeasesAcrossWindows(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	const limit = 22_000
	lim := hot(limit, 10*time.Second, "rl:{acme}")
	reps := []*replica{newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now), newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now)}
	// 91% of the budget in even windows, nine times it in odd ones; a
	// request at every window's start, so that the store's windows are
	// the test's.
	gap := func(at time.Duration) time.Duration {
		if (at/lim.Rule.Window)%2 == 0 {
			return 500 * time.Microsecond
		}
		return 50 * time.Microsecond
	}
	ws := windowRun(t, clk, reps, lim, 40*time.Second, gap, nil, 0)
	for k, got := range ws {
		if got > limit {
			t.Errorf("window %d admitted %d, limit %d", k, got, limit)
		}
		if k%2 == 1 && got < limit*98/100 {
			t.Errorf("window %d admitted %d, want at least %d", k, got, limit*98/100)
		}
	}
	if d := reps[0].counts.decided.Load() + reps[1].counts.decided.Load(); d < limit {
		t.Errorf("%d decisions from leases, want most", d)
	}
}

// TestLeasesCrash: a replica that vanishes holding slices (its returns
// never reach the store) strands at most them until its window ends:
// never more than the limit is admitted in a window, and the window
// after gives the survivor at least 98% of the budget.
func TestLeasesCrash(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	const limit = 2000
	lim := hot(limit, 10*time.Second, "rl:{acme}")
	lost := ports.Settler(settlerFunc(func(context.Context, domain.Request, []domain.Decision, int64) error { return nil }))
	crashed := newReplica(t, st, domain.AlgorithmFixedWindow, lost, clk.Now)
	survivor := newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now)
	// The crashed replica asks for 2 s, then never again.
	ws := windowRun(t, clk, []*replica{crashed, survivor}, lim, 20*time.Second, every(time.Millisecond), map[int]bool{0: true}, 2*time.Second)
	for k, got := range ws {
		if got > limit {
			t.Errorf("window %d admitted %d, limit %d", k, got, limit)
		}
	}
	if ws[1] < limit*98/100 {
		t.Errorf("the window after the crash admitted %d, want at least %d", ws[1], limit*98/100)
	}
	if crashed.counts.slices.Load() == 0 {
		t.Error("the crashed replica held no slice")
	}
}

type settlerFunc func(context.Context, domain.Request, []domain.Decision, int64) error

func (f settlerFunc) Settle(ctx context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	return f(ctx, req, adm, used)
}

// TestLeasesAllOrNothing: a request whose limits are not all leased goes
// to the store whole: a small limit beside a hot one admits exactly its
// budget, and the hot one counts exactly what was admitted.
func TestLeasesAllOrNothing(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	a := hot(100_000, time.Hour, "rl:{acme}:a")
	b := hot(100, time.Hour, "rl:{acme}:b") // too small to lease
	r := newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now)
	var alone, both int64
	for i := range 6000 {
		req := one(a)
		if i%2 == 1 {
			req = one(a, b)
		}
		v, err := r.lim.Allow(context.Background(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case v.Allowed && len(req.Limits) == 1:
			alone++
		case v.Allowed:
			both++
		}
		r.leases.WaitTakes()
		clk.Advance(100 * time.Microsecond)
	}
	if alone != 3000 || both != 100 {
		t.Errorf("admitted %d requests of a alone and %d of a and b, want 3000 and 100", alone, both)
	}
	if d := r.counts.decided.Load(); d == 0 || d > alone {
		t.Errorf("%d decisions from leases, want some, and only of a alone (%d)", d, alone)
	}
	r.leases.Close()
	if got := used(t, st, a); got != alone+both {
		t.Errorf("the store counts %d of a, want %d", got, alone+both)
	}
	if got := used(t, st, b); got != both {
		t.Errorf("the store counts %d of b, want %d", got, both)
	}
}

// hotten asks lim on r n times, a request every 100 µs, and returns how
// many were admitted.
func hotten(t *testing.T, clk *stepClock, r *replica, lim domain.Limit, n int) int64 {
	t.Helper()
	var admitted int64
	for range n {
		v, err := r.lim.Allow(context.Background(), one(lim), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed {
			admitted++
		}
		r.leases.WaitTakes()
		clk.Advance(100 * time.Microsecond)
	}
	return admitted
}

// TestLeasesExpiryReturns: a slice that lapses gives its unused units
// back into its window: the store then counts exactly what was
// admitted.
func TestLeasesExpiryReturns(t *testing.T) {
	t.Parallel()
	for _, algorithm := range []string{domain.AlgorithmFixedWindow, domain.AlgorithmTokenBucket} {
		t.Run(algorithm, func(t *testing.T) {
			t.Parallel()
			clk := newStepClock(0)
			st := newStore(t, algorithm, clk.Now)
			lim := hot(1_000_000, time.Hour, "rl:{acme}")
			r := newReplica(t, st, algorithm, nil, clk.Now)
			admitted := hotten(t, clk, r, lim, 3000)
			if r.counts.slices.Load() == 0 {
				t.Fatal("no slice taken")
			}
			if got := used(t, st, lim); got <= admitted {
				t.Fatalf("the store counts %d with slices out, want more than the %d admitted", got, admitted)
			}
			clk.Advance(2 * time.Second)
			r.leases.SweepNow()
			got := used(t, st, lim)
			if algorithm == domain.AlgorithmTokenBucket {
				got += 2 * lim.Rule.Limit * int64(2*time.Second+300*time.Millisecond) / int64(time.Hour) // refilled meanwhile, at most
				if got < admitted {
					t.Errorf("the bucket counts %d, want at least the %d admitted", got, admitted)
				}
				if r.counts.returned.Load() == 0 {
					t.Error("nothing was given back")
				}
				return
			}
			if got != admitted {
				t.Errorf("after the slices lapsed the store counts %d, want the %d admitted", got, admitted)
			}
			if r.counts.returned.Load() == 0 {
				t.Error("nothing was given back")
			}
		})
	}
}

// TestLeasesForget: a reset voids the tenant's slices at once: nothing
// of them is spent or given back into the fresh budget, and the next
// request is decided at the store.
func TestLeasesForget(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	lim := hot(1_000_000, time.Hour, "rl:{acme}")
	r := newReplica(t, st, domain.AlgorithmFixedWindow, nil, clk.Now)
	hotten(t, clk, r, lim, 3000)
	if r.counts.slices.Load() == 0 {
		t.Fatal("no slice taken")
	}
	if err := st.Reset(context.Background(), one(lim)); err != nil {
		t.Fatal(err)
	}
	r.leases.Forget("globex") // another tenant's: nothing changes
	before := r.counts.decided.Load()
	if _, err := r.lim.Allow(context.Background(), one(lim), nil); err != nil {
		t.Fatal(err)
	}
	if r.counts.decided.Load() == before {
		t.Fatal("a slice of acme did not decide after forgetting globex")
	}
	r.leases.Forget("acme")
	if got := used(t, st, lim); got != 0 {
		t.Fatalf("after the reset the store counts %d, want 0", got)
	}
	before = r.counts.decided.Load()
	if _, err := r.lim.Allow(context.Background(), one(lim), nil); err != nil {
		t.Fatal(err)
	}
	if r.counts.decided.Load() != before {
		t.Error("a request after Forget was decided from a voided slice")
	}
	r.leases.WaitTakes()
	clk.Advance(2 * time.Second)
	r.leases.SweepNow()
	r.leases.Close()
	if got := used(t, st, lim); got != 1 {
		t.Errorf("the store counts %d after the reset, want the one request since", got)
	}
}

// TestLeasesLeaveAlone: what is not leased is decided at the store, one
// request at a time: other algorithms, small budgets, slow keys, and
// shadow, quota, concurrency and token limits.
func TestLeasesLeaveAlone(t *testing.T) {
	t.Parallel()
	big := hot(1_000_000, time.Hour, "rl:{acme}")
	with := func(f func(*domain.Limit)) domain.Limit {
		l := big
		f(&l)
		return l
	}
	for _, tt := range []struct {
		name      string
		algorithm string
		lim       domain.Limit
		every     time.Duration
	}{
		{"sliding window", domain.AlgorithmSlidingWindow, big, 100 * time.Microsecond},
		{"sliding log", domain.AlgorithmSlidingLog, hot(1000, time.Hour, "rl:{acme}"), 100 * time.Microsecond},
		{"limit of 100", domain.AlgorithmFixedWindow, hot(100, time.Hour, "rl:{acme}"), 100 * time.Microsecond},
		{"slow", domain.AlgorithmFixedWindow, big, 50 * time.Millisecond},
		{"shadow", domain.AlgorithmFixedWindow, with(func(l *domain.Limit) { l.Shadow = true }), 100 * time.Microsecond},
		{"quota", domain.AlgorithmFixedWindow, with(func(l *domain.Limit) { l.Quota = true }), 100 * time.Microsecond},
		{"tokens", domain.AlgorithmFixedWindow, with(func(l *domain.Limit) { l.Reserve = true }), 100 * time.Microsecond},
		{"token bucket of 1 s", domain.AlgorithmTokenBucket, hot(1000, time.Second, "rl:{acme}"), 100 * time.Microsecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := newStepClock(0)
			st := newStore(t, tt.algorithm, clk.Now)
			var calls atomic.Int64
			counted := ports.LimiterFunc(func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
				calls.Add(1)
				return st.Allow(ctx, req, dst)
			})
			counts := &leaseCounts{}
			leases := layers.NewLeases(layers.LeaseOptions{Settler: st, Algorithm: tt.algorithm, Now: clk.Now, Sweep: time.Hour, Observer: counts})
			defer leases.Close()
			lim := ports.Chain(counted, leases.Layer())
			for range 500 {
				if _, err := lim.Allow(context.Background(), one(tt.lim), nil); err != nil {
					t.Fatal(err)
				}
				leases.WaitTakes()
				clk.Advance(tt.every)
			}
			if calls.Load() != 500 || counts.slices.Load() != 0 || counts.decided.Load() != 0 {
				t.Errorf("%d store calls, %d slices, %d decisions from leases; want 500, 0, 0", calls.Load(), counts.slices.Load(), counts.decided.Load())
			}
		})
	}
}

// TestLeasesTokenBucket: the token bucket is leased, and a span of t
// admits at most burst + rate × (t + a lease of a hundredth of the
// window).
func TestLeasesTokenBucket(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmTokenBucket, clk.Now)
	const limit = 2000
	window := 20 * time.Second
	lim := hot(limit, window, "rl:{acme}")
	reps := []*replica{newReplica(t, st, domain.AlgorithmTokenBucket, nil, clk.Now), newReplica(t, st, domain.AlgorithmTokenBucket, nil, clk.Now)}
	const span = 30 * time.Second
	ws := windowRun(t, clk, reps, lim, span, every(time.Millisecond), nil, 0)
	var admitted int64
	for _, w := range ws {
		admitted += w
	}
	bound := limit + int64(float64(limit)*(span+window/100).Seconds()/window.Seconds())
	if admitted > bound {
		t.Errorf("admitted %d in %v, want at most %d", admitted, span, bound)
	}
	if d := reps[0].counts.decided.Load() + reps[1].counts.decided.Load(); d == 0 {
		t.Error("no decision from a lease")
	}
}

// TestLeasesFullTable: a table of keys full of quiet ones still takes a
// key that turns hot once the quiet ones have shown they are.
func TestLeasesFullTable(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	counts := &leaseCounts{}
	leases := layers.NewLeases(layers.LeaseOptions{Settler: st, Algorithm: domain.AlgorithmFixedWindow, Now: clk.Now, Sweep: time.Hour,
		Observer: counts, MaxKeys: 16})
	defer leases.Close()
	lim := ports.Chain(st, leases.Layer())
	for i := range 400 { // more than the table holds in every shard
		if _, err := lim.Allow(context.Background(), one(hot(1_000_000, time.Hour, fmt.Sprintf("rl:{quiet-%d}", i))), nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(300 * time.Millisecond)
	leases.SweepNow()
	for range 3000 {
		if _, err := lim.Allow(context.Background(), one(hot(1_000_000, time.Hour, "rl:{acme}")), nil); err != nil {
			t.Fatal(err)
		}
		leases.WaitTakes()
		clk.Advance(100 * time.Microsecond)
	}
	if counts.decided.Load() == 0 {
		t.Error("the hot key was never leased")
	}
}

// TestLeasesFailingTakes: while the store fails to give slices, a hot
// key asks for one once a second at most, and its requests are decided
// at the store as without leases.
func TestLeasesFailingTakes(t *testing.T) {
	t.Parallel()
	clk := newStepClock(0)
	st := newStore(t, domain.AlgorithmFixedWindow, clk.Now)
	var takes atomic.Int64
	failing := ports.LimiterFunc(func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
		if req.Limits[0].Reserve {
			takes.Add(1)
			return domain.Verdict{}, errors.New("the store is failing")
		}
		return st.Allow(ctx, req, dst)
	})
	var errs atomic.Int64
	leases := layers.NewLeases(layers.LeaseOptions{Settler: st, Algorithm: domain.AlgorithmFixedWindow, Now: clk.Now, Sweep: time.Hour,
		OnError: func(error) { errs.Add(1) }})
	defer leases.Close()
	lim := ports.Chain(failing, leases.Layer())
	var admitted int
	for range 5000 { // 500 ms
		v, err := lim.Allow(context.Background(), one(hot(1_000_000, time.Hour, "rl:{acme}")), nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Allowed {
			admitted++
		}
		leases.WaitTakes()
		clk.Advance(100 * time.Microsecond)
	}
	if admitted != 5000 || takes.Load() != 1 || errs.Load() != 1 {
		t.Errorf("%d admitted, %d takes, %d errors; want 5000, 1, 1", admitted, takes.Load(), errs.Load())
	}
}
