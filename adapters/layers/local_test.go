package layers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

func limitRequest(limit int64) domain.Request {
	r := request()
	r.Limits = []domain.Limit{{Name: "default", Rule: domain.Rule{Limit: limit, Window: time.Minute}, Key: "rl:{acme}", Cost: 1}}
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
			v, err := l.Allow(t.Context(), req, nil)
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
		if v, err := l.Allow(t.Context(), req, nil); err != nil || v.Outcome != domain.OutcomeAllowed {
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
		Key: "rl:{acme}:in_flight:inflight", Cost: 1, Concurrency: true}}
	var held []domain.Verdict
	for i := range 3 {
		v, err := l.Allow(t.Context(), req, nil)
		if err != nil || !v.Allowed || v.Outcome != domain.OutcomeLocalAllowed || v.Release == nil || v.Decisions[0].Limit != 3 {
			t.Fatalf("request %d of concurrency 5 over 2 replicas: %+v, %v; want local_allowed of 3, holding a slot", i+1, v, err)
		}
		held = append(held, v)
	}
	if v, _ := l.Allow(t.Context(), req, nil); v.Allowed || v.Outcome != domain.OutcomeLocalDenied {
		t.Fatalf("a fourth slot: %+v, want local_denied", v)
	}
	held[0].Release()
	if v, _ := l.Allow(t.Context(), req, nil); !v.Allowed {
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
	if _, err := l.Allow(ctx, request(), nil); err == nil || called {
		t.Errorf("canceled caller: err %v, OnError called %v; want the error back and no call", err, called)
	}
	// A local limiter that fails too admits, as fail open does.
	broken := ports.Chain(failing(errStore), layers.FailLocal(layers.LocalOptions{Limiter: failing(errors.New("local"))}))
	if v, err := broken.Allow(t.Context(), request(), nil); err != nil || !v.Allowed || v.Outcome != domain.OutcomeError {
		t.Errorf("local limiter failing: %+v, %v; want admitted with outcome error", v, err)
	}
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
			stack := func(t *testing.T, v portstest.View) (ports.Limiter, error) {
				view := memory.View{Counting: v.Counting, Windows: v.Windows}
				store, err := memory.New(a.Name, memory.Options{Now: clk.Now, SweepInterval: -1, View: view})
				if err != nil {
					return nil, err
				}
				local, _ := memory.New(a.Name, memory.Options{Now: clk.Now, SweepInterval: -1, View: view})
				b := layers.NewBreaker(layers.BreakerOptions{Probe: upPinger{}})
				t.Cleanup(func() { b.Close(); store.Close(); local.Close() })
				return ports.Chain(store,
					layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now, Counting: v.Counting}).Layer(),
					layers.FailLocal(layers.LocalOptions{Limiter: local}),
					b.Layer()), nil
			}
			portstest.TestLimiter(t, portstest.LimiterHarness{
				New: func(t *testing.T) ports.Limiter {
					l, err := stack(t, portstest.View{})
					if err != nil {
						t.Fatal(err)
					}
					return l
				},
				NewView:   stack,
				Now:       clk.Now,
				Clock:     clk,
				Window:    time.Minute,
				Algorithm: a.Name,
				Keys:      keys.Layout{Prefix: portstest.KeyPrefix, Algorithm: a.Name},
			})
		})
	}
}

type upPinger struct{}

func (upPinger) Ping(context.Context) error { return nil }

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
	req.Limits[0].Cost = 5
	for i, want := range []bool{true, false} {
		v, err := l.Allow(t.Context(), req, nil)
		if err != nil || v.Allowed != want || v.Decisions[0].Limit != 5 {
			t.Fatalf("cost 5 of 10 over 3 replicas, request %d: %+v, %v; want allowed=%v against a local limit of 5", i+1, v, err, want)
		}
	}
	req = limitRequest(9)
	req.Limits[0].Key = "rl:{globex}"
	req.Limits = append(req.Limits, domain.Limit{Name: "other", Rule: domain.Rule{Limit: 9, Window: time.Minute}, Key: "rl:{globex}:other", Cost: 7})
	v, err := l.Allow(t.Context(), req, nil)
	if err != nil || !v.Allowed || v.Decisions[0].Limit != 3 || v.Decisions[1].Limit != 7 {
		t.Errorf("costs 1 and 7 of 9 over 3 replicas: %+v, %v; want admitted against local limits of 3 and 7", v, err)
	}
}

// TestFailLocalReserve: a Reserve limit's local share is the limit
// divided, not raised to the reservation: it reserves what the share
// has left, and denies once nothing is.
func TestFailLocalReserve(t *testing.T) {
	t.Parallel()
	local := newMemory(t, memory.Options{SweepInterval: -1})
	store := &fakeStore{}
	store.down.Store(true)
	l := ports.Chain(store, layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 4 }}))
	req := limitRequest(1000)
	req.Limits[0].Cost, req.Limits[0].Reserve = 300, true
	for i, want := range []int64{250, 0} {
		v, err := l.Allow(t.Context(), req, nil)
		if err != nil || v.Allowed != (want > 0) || v.Decisions[0].Limit != 250 || v.Decisions[0].Spent != want {
			t.Fatalf("reserve 300 of 1000 over 4 replicas, request %d: %+v, %v; want spent %d of a local limit of 250", i+1, v, err, want)
		}
	}
}
