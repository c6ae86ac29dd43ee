package layers_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// fakeStore is a store whose health tests switch: a limiter and a pinger
// that fail while down (a ping then waits for its deadline, as on a
// stalled store), counting their calls. While busy, decisions fail but
// pings answer: a store under load.
type fakeStore struct {
	down  atomic.Bool
	busy  atomic.Bool
	calls atomic.Int64
	pings atomic.Int64
}

func (s *fakeStore) Allow(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
	s.calls.Add(1)
	if s.down.Load() || s.busy.Load() {
		return domain.Verdict{}, errStore
	}
	return domain.Verdict{Allowed: true, Decisions: []domain.Decision{{Allowed: true}}}, nil
}

func (s *fakeStore) Ping(ctx context.Context) error {
	s.pings.Add(1)
	if s.down.Load() {
		<-ctx.Done()
		return errStore
	}
	return nil
}

// states records the breaker's changes of state.
type states struct {
	mu  sync.Mutex
	got []bool
}

func (s *states) change(up bool) {
	s.mu.Lock()
	s.got = append(s.got, up)
	s.mu.Unlock()
}

func (s *states) list() []bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]bool(nil), s.got...)
}

const breakerTimeout = 50 * time.Millisecond

func newBreaker(t *testing.T, store *fakeStore, st *states, probeErrs *atomic.Int64) (*layers.Breaker, ports.Limiter) {
	b := layers.NewBreaker(layers.BreakerOptions{
		Probe:        store,
		Timeout:      breakerTimeout,
		OnChange:     st.change,
		OnProbeError: func(error) { probeErrs.Add(1) },
	})
	t.Cleanup(func() { b.Close() })
	return b, ports.Chain(store, b.Layer())
}

// TestBreakerOpensProbesAndCloses: after the first failures decisions
// fail at once without the store; a probe runs every 50 ms; the first
// probe that succeeds closes the breaker.
func TestBreakerOpensProbesAndCloses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store, st, probeErrs := &fakeStore{}, &states{}, &atomic.Int64{}
		b, l := newBreaker(t, store, st, probeErrs)
		if _, err := l.Allow(t.Context(), request(), nil); err != nil || !b.Up() {
			t.Fatalf("healthy store: %v, up %v", err, b.Up())
		}
		store.down.Store(true)
		time.Sleep(breakerTimeout) // no success for a timeout
		for i := range layers.DefaultBreakerThreshold {
			if _, err := l.Allow(t.Context(), request(), nil); !errors.Is(err, errStore) {
				t.Fatalf("failure %d: %v, want the store's error", i+1, err)
			}
		}
		// A probe confirms the failure: until it fails, decisions go to
		// the store.
		synctest.Wait()
		if !b.Up() || store.pings.Load() != 1 {
			t.Fatalf("before the confirming probe failed: up %v, %d pings; want up, 1 ping", b.Up(), store.pings.Load())
		}
		time.Sleep(layers.MinConfirmTimeout)
		synctest.Wait()
		if b.Up() {
			t.Fatalf("breaker closed after %d failures in a row, no success for %v, and a failed probe", layers.DefaultBreakerThreshold, breakerTimeout)
		}
		store.pings.Store(0)
		probeErrs.Store(0)
		calls := store.calls.Load()
		for range 1000 {
			if _, err := l.Allow(t.Context(), request(), nil); !errors.Is(err, ports.ErrBreakerOpen) {
				t.Fatalf("open breaker answered %v, want ErrBreakerOpen", err)
			}
		}
		if store.calls.Load() != calls {
			t.Errorf("an open breaker called the store %d times", store.calls.Load()-calls)
		}

		time.Sleep(time.Second)
		synctest.Wait()
		if n := store.pings.Load(); n < 19 || n > 21 {
			t.Errorf("probes in a second of outage: %d, want 20 (one per 50 ms)", n)
		}
		if e, p := probeErrs.Load(), store.pings.Load(); e != p && e != p-1 { // one may be in flight
			t.Errorf("failed probes reported: %d, want %d", e, p)
		}

		store.down.Store(false)
		time.Sleep(layers.DefaultProbeInterval)
		synctest.Wait()
		if !b.Up() {
			t.Fatalf("breaker still open %v after the store answered", layers.DefaultProbeInterval)
		}
		if _, err := l.Allow(t.Context(), request(), nil); err != nil {
			t.Errorf("closed breaker: %v", err)
		}
		pings := store.pings.Load()
		time.Sleep(time.Second)
		if store.pings.Load() != pings {
			t.Errorf("a closed breaker kept probing")
		}
		if got := st.list(); len(got) != 2 || got[0] || !got[1] {
			t.Errorf("state changes %v, want [false true]", got)
		}
	})
}

// TestBreakerLoadIsNoFailure: failures while decisions still succeed
// within a timeout never open the breaker, however many in a row; nor
// do callers that went away.
func TestBreakerLoadIsNoFailure(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store, st, probeErrs := &fakeStore{}, &states{}, &atomic.Int64{}
		b, l := newBreaker(t, store, st, probeErrs)
		for range 50 {
			store.busy.Store(false)
			l.Allow(t.Context(), request(), nil)
			store.busy.Store(true)
			for range 20 { // slow decisions timing out, between successes
				time.Sleep(breakerTimeout / 40)
				l.Allow(t.Context(), request(), nil)
			}
		}
		if !b.Up() {
			t.Fatal("breaker opened while decisions succeeded every half timeout")
		}
		// Canceled callers: no failure, however long.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		time.Sleep(time.Second)
		for range 100 {
			l.Allow(ctx, request(), nil)
		}
		if !b.Up() {
			t.Fatal("breaker opened on canceled callers")
		}
		if store.pings.Load() != 0 {
			t.Errorf("%d probes while decisions succeeded", store.pings.Load())
		}
		// Every decision failing for a second, but the store answers the
		// probe: busy, not failing.
		for range 100 {
			time.Sleep(breakerTimeout / 5)
			l.Allow(t.Context(), request(), nil)
			synctest.Wait()
		}
		if !b.Up() || store.pings.Load() == 0 {
			t.Fatalf("busy store (decisions fail, pings answer): up %v after %d probes; want up, probed", b.Up(), store.pings.Load())
		}
		// After a success and a timeout without one, two failures in a
		// row are not yet the store failing; the third and a failed
		// probe are.
		store.busy.Store(false)
		l.Allow(t.Context(), request(), nil)
		store.down.Store(true)
		time.Sleep(breakerTimeout)
		for range layers.DefaultBreakerThreshold - 1 {
			l.Allow(t.Context(), request(), nil)
		}
		synctest.Wait()
		if !b.Up() {
			t.Fatalf("breaker opened after %d failures", layers.DefaultBreakerThreshold-1)
		}
		l.Allow(t.Context(), request(), nil)
		time.Sleep(layers.MinConfirmTimeout)
		synctest.Wait()
		if b.Up() {
			t.Fatal("breaker still closed after the threshold and a failed probe")
		}
		if got := st.list(); len(got) != 1 {
			t.Errorf("state changes %v, want one", got)
		}
	})
}

// TestBreakerStartsAgainstADownStore: a store that never answered opens
// the breaker at the threshold and a failed probe, with no wait for a
// timeout without success.
func TestBreakerStartsAgainstADownStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store, st, probeErrs := &fakeStore{}, &states{}, &atomic.Int64{}
		store.down.Store(true)
		b, l := newBreaker(t, store, st, probeErrs)
		for range layers.DefaultBreakerThreshold {
			l.Allow(t.Context(), request(), nil)
		}
		time.Sleep(layers.MinConfirmTimeout)
		synctest.Wait()
		if b.Up() {
			t.Fatal("breaker closed after the threshold and a failed probe against a store that never answered")
		}
		b.Close()
		b.Close() // idempotent
		pings := store.pings.Load()
		time.Sleep(time.Second)
		if store.pings.Load() != pings {
			t.Error("a closed Breaker kept probing")
		}
	})
}
