package layers_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

func limitRequest(limit int64) domain.Request {
	r := request()
	r.Limits = []domain.Limit{{Name: "default", Rule: domain.Rule{Limit: limit, Window: time.Minute}, Key: "rl:{acme}"}}
	return r
}

// TestFailLocalDividesTheBudget: while the store fails, N replicas each
// admit limit/N rounded up, with the local decisions' headers; when it
// answers, decisions are the store's again.
func TestFailLocalDividesTheBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		limit     int64
		replicas  int
		wantLocal int64
	}{
		{10, 2, 5}, {5, 2, 3}, {100, 3, 34}, {7, 1, 7}, {7, 0, 7}, {1, 50, 1},
	} {
		clk := newFakeClock()
		local := newMemory(t, memory.Options{Now: clk.Now, SweepInterval: -1})
		defer local.Close()
		store := &fakeStore{}
		store.down.Store(true)
		var errs atomic.Int64
		l := ports.Chain(store, layers.FailLocal(layers.LocalOptions{
			Limiter:  local,
			Replicas: func() int { return tt.replicas },
			OnError:  func(err error) { errs.Add(1) },
		}))
		req := limitRequest(tt.limit)
		for i := range tt.wantLocal + 2 {
			v, err := l.Allow(t.Context(), req)
			wantAllowed := i < tt.wantLocal
			wantOutcome := domain.OutcomeLocalAllowed
			if !wantAllowed {
				wantOutcome = domain.OutcomeLocalDenied
			}
			if err != nil || v.Allowed != wantAllowed || v.Outcome != wantOutcome || len(v.Decisions) != 1 || v.Decisions[0].Limit != tt.wantLocal {
				t.Fatalf("limit %d over %d replicas, request %d: %+v, %v; want allowed=%v, %v, local limit %d",
					tt.limit, tt.replicas, i+1, v, err, wantAllowed, wantOutcome, tt.wantLocal)
			}
		}
		if req.Limits[0].Rule.Limit != tt.limit {
			t.Errorf("the caller's request was changed: limit %d", req.Limits[0].Rule.Limit)
		}
		if errs.Load() != tt.wantLocal+2 {
			t.Errorf("OnError told of %d failures, want %d", errs.Load(), tt.wantLocal+2)
		}
		store.down.Store(false)
		if v, err := l.Allow(t.Context(), req); err != nil || v.Outcome != domain.OutcomeAllowed {
			t.Errorf("store back: %+v, %v; want the store's decision", v, err)
		}
	}
}

// TestFailLocalSlots: while the store fails, each of N replicas holds
// ceil(concurrency / N) slots in its own memory, and the local verdict's
// Release gives them back there.
func TestFailLocalSlots(t *testing.T) {
	t.Parallel()
	local := newMemory(t, memory.Options{SweepInterval: -1})
	l := ports.Chain(failing(errStore), layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 2 }}))
	req := request()
	req.Limits = []domain.Limit{{Name: "inflight", Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow},
		Key: "rl:{acme}:in_flight:inflight", Concurrency: true}}
	var held []domain.Verdict
	for i := range 3 {
		v, err := l.Allow(t.Context(), req)
		if err != nil || !v.Allowed || v.Outcome != domain.OutcomeLocalAllowed || v.Release == nil || v.Decisions[0].Limit != 3 {
			t.Fatalf("request %d of concurrency 5 over 2 replicas: %+v, %v; want local_allowed of 3, holding a slot", i+1, v, err)
		}
		held = append(held, v)
	}
	if v, _ := l.Allow(t.Context(), req); v.Allowed || v.Outcome != domain.OutcomeLocalDenied {
		t.Fatalf("a fourth slot: %+v, want local_denied", v)
	}
	held[0].Release()
	if v, _ := l.Allow(t.Context(), req); !v.Allowed {
		t.Errorf("after a local request ended: %+v, want its slot", v)
	}
}

func TestFailLocalCanceledCaller(t *testing.T) {
	t.Parallel()
	local := newMemory(t, memory.Options{SweepInterval: -1})
	defer local.Close()
	called := false
	l := ports.Chain(failing(errStore), layers.FailLocal(layers.LocalOptions{Limiter: local, OnError: func(error) { called = true }}))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := l.Allow(ctx, request()); err == nil || called {
		t.Errorf("canceled caller: err %v, OnError called %v; want the error back and no call", err, called)
	}
	// A local limiter that fails too admits, as fail open does.
	broken := ports.Chain(failing(errStore), layers.FailLocal(layers.LocalOptions{Limiter: failing(errors.New("local"))}))
	if v, err := broken.Allow(t.Context(), request()); err != nil || !v.Allowed || v.Outcome != domain.OutcomeError {
		t.Errorf("local limiter failing: %+v, %v; want admitted with outcome error", v, err)
	}
}

// announcer is a fake store of announcements: its clock is the time of
// the synctest bubble, in ms.
type announcer struct {
	mu        sync.Mutex
	alive     map[string]bool
	forged    map[string]int64 // members written by someone else, with their expiry
	expires   map[string]int64 // each announcing member's expiry, set when it announces
	down      bool
	err       error // returned by every Announce when set
	announces int
	// listening, when set, is what the store says of the listeners;
	// otherwise they are the replicas that announced and did not
	// withdraw.
	listening func() int
	// deaf replicas cannot listen: their rolls vouch for nothing.
	deaf map[string]bool
}

func (a *announcer) Announce(_ context.Context, id string, ttl time.Duration) (ports.Roll, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.down {
		return ports.Roll{}, errStore
	}
	if a.err != nil {
		return ports.Roll{}, a.err
	}
	a.announces++
	a.alive[id] = true
	if a.expires == nil {
		a.expires = map[string]int64{}
	}
	a.expires[id] = time.Now().UnixMilli() + ttl.Milliseconds() // each member's own, as the store keeps it
	var out []ports.Announcement
	for m := range a.alive {
		out = append(out, ports.Announcement{ID: m, Expires: a.expires[m]})
	}
	for m, exp := range a.forged {
		out = append(out, ports.Announcement{ID: m, Expires: exp})
	}
	listening := len(a.alive) - len(a.deaf)
	if a.listening != nil {
		listening = a.listening()
	}
	if a.deaf[id] {
		return ports.Roll{Alive: out, ListenErr: errors.New("NOPERM")}, nil
	}
	return ports.Roll{Alive: out, Listening: listening}, nil
}

func (a *announcer) Withdraw(_ context.Context, id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.alive, id)
	return nil
}

func (a *announcer) set(f func(*announcer)) {
	a.mu.Lock()
	f(a)
	a.mu.Unlock()
}

// TestReplicaCount: a replica announces itself at once and every
// interval, counts the others, keeps its last count while the store
// fails, and withdraws on Close.
func TestReplicaCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}}
		var errs atomic.Int64
		var counts []int
		newCount := func(id string) *layers.ReplicaCount {
			return layers.NewReplicaCount(layers.ReplicaCountOptions{
				Announcer: a, ID: id, OnError: func(error) { errs.Add(1) },
				OnCount: func(n int) {
					if id == "a" {
						counts = append(counts, n)
					}
				},
			})
		}
		a.set(func(a *announcer) { a.down = true })
		ra := newCount("a")
		synctest.Wait()
		if ra.N() != 1 {
			t.Errorf("N before any count = %d, want 1", ra.N())
		}
		a.set(func(a *announcer) { a.down = false })
		rb := newCount("b")
		// A replica counts another once it has seen its expiry move
		// between two announcements of its own: both announce every
		// interval, and as their turns fall (the first after the other's
		// first, or before) that takes up to four.
		time.Sleep(4 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 2 || rb.N() != 2 {
			t.Errorf("N = %d and %d with two replicas, want 2", ra.N(), rb.N())
		}
		a.set(func(a *announcer) { a.down = true })
		time.Sleep(5 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 2 {
			t.Errorf("N while the store fails = %d, want the last count, 2", ra.N())
		}
		if errs.Load() < 10 {
			t.Errorf("failed announcements reported: %d, want one per replica per second", errs.Load())
		}
		a.set(func(a *announcer) { a.down = false })
		if err := rb.Close(); err != nil {
			t.Fatal(err)
		}
		rb.Close() // idempotent
		time.Sleep(layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 1 {
			t.Errorf("N after the other replica withdrew = %d, want 1", ra.N())
		}
		ra.Close()
		a.mu.Lock()
		announces := a.announces
		a.mu.Unlock()
		time.Sleep(5 * layers.DefaultAnnounceInterval)
		if a.announces != announces || len(a.alive) != 0 {
			t.Errorf("after Close: %d more announcements, %d alive; want none", a.announces-announces, len(a.alive))
		}
		if len(counts) < 3 {
			t.Errorf("OnCount saw %v", counts)
		}
	})
}

// newMemory returns the memory store's fixed window, closed when tb ends.
func newMemory(tb testing.TB, opts memory.Options) *memory.Limiter {
	tb.Helper()
	l, err := memory.New(domain.AlgorithmFixedWindow, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// TestStackContract runs the Limiter contract through the gateway's
// whole stack of layers (deny cache, local fail mode, breaker) over the
// memory store, for every algorithm: layers that pass a healthy store's
// decisions through must keep every property of the store's.
func TestStackContract(t *testing.T) {
	t.Parallel()
	for _, a := range domain.Algorithms {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			clk := newFakeClock()
			portstest.TestLimiter(t, portstest.LimiterHarness{
				New: func(t *testing.T) ports.Limiter {
					store, err := memory.New(a.Name, memory.Options{Now: clk.Now, SweepInterval: -1})
					if err != nil {
						t.Fatal(err)
					}
					local, _ := memory.New(a.Name, memory.Options{Now: clk.Now, SweepInterval: -1})
					b := layers.NewBreaker(layers.BreakerOptions{Probe: upPinger{}})
					t.Cleanup(func() { b.Close(); store.Close(); local.Close() })
					return ports.Chain(store,
						layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer(),
						layers.FailLocal(layers.LocalOptions{Limiter: local}),
						b.Layer())
				},
				Now:       clk.Now,
				Clock:     clk,
				Window:    time.Minute,
				Algorithm: a.Name,
			})
		})
	}
}

type upPinger struct{}

func (upPinger) Ping(context.Context) error { return nil }

// TestReplicaCountBelievesOnlyRenewals: members that never renew (stale
// or forged) never count, so adding members cannot shrink every
// replica's local budget; a key of another type is reported once, not
// every interval, and the count keeps its last good value.
// TestReplicaCountLateReplica: a replica that announces at half the
// pace (so that another announces twice between two of its own) counts
// all along, once seen renewing.
func TestReplicaCountLateReplica(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}}
		ra := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "a"})
		defer ra.Close()
		rb := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "b", Interval: 2 * layers.DefaultAnnounceInterval, TTL: 5 * layers.DefaultAnnounceInterval})
		defer rb.Close()
		time.Sleep(5 * layers.DefaultAnnounceInterval)
		for i := range 20 {
			time.Sleep(layers.DefaultAnnounceInterval / 2)
			synctest.Wait()
			if ra.N() != 2 {
				t.Fatalf("step %d: N = %d with b renewing every other interval, want 2", i, ra.N())
			}
		}
	})
}

func TestReplicaCountBelievesOnlyRenewals(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		forged := map[string]int64{}
		for i := range 8 {
			forged[fmt.Sprint("fake-", i)] = time.Now().Add(20 * time.Second).UnixMilli()
		}
		a := &announcer{alive: map[string]bool{}, forged: forged}
		var errs atomic.Int64
		ra := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "a", OnError: func(error) { errs.Add(1) }})
		defer ra.Close()
		rb := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "b"})
		time.Sleep(3 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 2 {
			t.Errorf("N with two replicas and 8 forged members = %d, want 2", ra.N())
		}
		rb.Close()
		a.set(func(a *announcer) { a.err = fmt.Errorf("announce: %w", ports.ErrKeyType) })
		time.Sleep(10 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 2 {
			t.Errorf("N while the key has another type = %d, want the last good count, 2", ra.N())
		}
		if got := errs.Load(); got != 1 {
			t.Errorf("a key of another type reported %d times over 10 announcements, want once", got)
		}
		a.set(func(a *announcer) { a.err = nil })
		time.Sleep(3 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 1 {
			t.Errorf("N once the key is repaired, b gone = %d, want 1", ra.N())
		}
	})
}

// TestReplicaCountNeverAboveListeners: members renewed by something
// other than a replica (8 forged ones, renewed every interval) count no
// more than the replicas the store sees listening, and that is
// reported once as it starts and once as it ends; a listener that dips
// for one announcement does not lower N, nor does a store that does not
// see this replica listening; a replica that joins (announcing and
// listening) still counts at once.
func TestReplicaCountNeverAboveListeners(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}, forged: map[string]int64{}}
		dip := -1 // when >= 0, the listeners the store reports instead
		a.listening = func() int {
			if dip >= 0 {
				return dip
			}
			return len(a.alive)
		}
		stop := make(chan struct{})
		go func() { // the forger renews its members every interval
			for {
				a.set(func(a *announcer) {
					for i := range 8 {
						a.forged[fmt.Sprint("fake-", i)] = time.Now().Add(3 * time.Second).UnixMilli()
					}
				})
				select {
				case <-stop:
					return
				case <-time.After(layers.DefaultAnnounceInterval):
				}
			}
		}()
		type change struct{ renewing, listening int }
		var mu sync.Mutex
		var changes []change
		ra := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "a", OnOvercount: func(r, l int) {
			mu.Lock()
			changes = append(changes, change{r, l})
			mu.Unlock()
		}})
		defer ra.Close()
		wait := func(intervals int) {
			time.Sleep(time.Duration(intervals) * layers.DefaultAnnounceInterval)
			synctest.Wait()
		}
		join := func(id string) {
			r := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: id})
			t.Cleanup(func() { r.Close() })
		}
		join("b")
		wait(3)
		if ra.N() != 2 {
			t.Errorf("N with two replicas listening and 8 forged members renewed = %d, want 2", ra.N())
		}
		for _, d := range []int{1, 0} {
			a.set(func(*announcer) { dip = d })
			wait(1)
			a.set(func(*announcer) { dip = -1 })
			if ra.N() != 2 {
				t.Errorf("N after one announcement that saw %d listening = %d, want 2 kept", d, ra.N())
			}
		}
		join("c")
		wait(3)
		if ra.N() != 3 {
			t.Errorf("N once a third replica joined = %d, want 3", ra.N())
		}
		close(stop)
		a.set(func(a *announcer) { clear(a.forged) })
		wait(2)
		mu.Lock()
		defer mu.Unlock()
		if len(changes) != 2 || changes[0].renewing <= 2 || changes[0].listening != 2 || changes[1] != (change{3, 3}) {
			t.Errorf("OnOvercount told %v, want a cut to 2 listening at the start, then {3 3} once the forger stopped", changes)
		}
	})
}

// TestReplicaCountDeafReplica: a replica that cannot listen (the store
// refuses its subscription) counts every member that renews, as before
// listeners were counted, and says so once; the others, which listen,
// count only the listeners.
func TestReplicaCountDeafReplica(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}, deaf: map[string]bool{"a": true}}
		var told atomic.Int64
		ra := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "a", OnListenError: func(error) { told.Add(1) }})
		defer ra.Close()
		rb := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: "b"})
		defer rb.Close()
		time.Sleep(5 * layers.DefaultAnnounceInterval)
		synctest.Wait()
		if ra.N() != 2 || rb.N() != 1 {
			t.Errorf("N of the deaf replica %d, of the listening one %d; want 2 (renewals) and 1 (listeners)", ra.N(), rb.N())
		}
		if n := told.Load(); n != 1 {
			t.Errorf("OnListenError told %d times over 5 announcements, want once", n)
		}
	})
}

// TestFailLocalShareNotBelowCost: a replica's share of a limit is never
// below what the request spends from it: a cost of 5 against a limit of
// 10 over 3 replicas (a share of 4) is admitted once, not denied for the
// whole outage; each limit of per-limit costs gets its own floor; a
// concurrency limit's share is of requests.
func TestFailLocalShareNotBelowCost(t *testing.T) {
	t.Parallel()
	local := newMemory(t, memory.Options{SweepInterval: -1})
	store := &fakeStore{}
	store.down.Store(true)
	l := ports.Chain(store, layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 3 }}))
	req := limitRequest(10)
	req.Cost = 5
	for i, want := range []bool{true, false} {
		v, err := l.Allow(t.Context(), req)
		if err != nil || v.Allowed != want || v.Decisions[0].Limit != 5 {
			t.Fatalf("cost 5 of 10 over 3 replicas, request %d: %+v, %v; want allowed=%v against a local limit of 5", i+1, v, err, want)
		}
	}
	req = limitRequest(9)
	req.Limits[0].Key = "rl:{globex}"
	req.Limits = append(req.Limits, domain.Limit{Name: "other", Rule: domain.Rule{Limit: 9, Window: time.Minute}, Key: "rl:{globex}:other"})
	req.Costs = []int64{1, 7}
	v, err := l.Allow(t.Context(), req)
	if err != nil || !v.Allowed || v.Decisions[0].Limit != 3 || v.Decisions[1].Limit != 7 {
		t.Errorf("costs 1 and 7 of 9 over 3 replicas: %+v, %v; want admitted against local limits of 3 and 7", v, err)
	}
}
