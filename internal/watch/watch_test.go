package watch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/watch"
)

var (
	perMinute = domain.Limit{Name: "per-minute"}
	perDay    = domain.Limit{Name: "per-day"}
	client    = netip.MustParseAddr("192.0.2.7")
)

// denied is a verdict of two limits, per-minute denying and per-day
// admitting.
func denied() domain.Verdict {
	return domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{{Allowed: false}, {Allowed: true}}}
}

func allowed() domain.Verdict {
	return domain.Verdict{Allowed: true, Outcome: domain.OutcomeAllowed, Decisions: []domain.Decision{{Allowed: true}, {Allowed: true}}}
}

var limits = []domain.Limit{perMinute, perDay}

func newWatch(t *testing.T, opts watch.Options) *watch.Watch {
	t.Helper()
	w := watch.New(opts)
	t.Cleanup(func() { w.Close() })
	return w
}

func TestTopCountsDenialsAndAdmissions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWatch(t, watch.Options{Top: 3})
		for range 5 {
			w.Watched("acme", "search", client, limits, denied())
		}
		w.Watched("beta", "search", client, limits, denied())
		w.Watched("acme", "search", client, limits, allowed())
		w.Watched("gamma", "search", client, limits, allowed()) // never denied: not watched
		// Shadow denials and fail modes without decisions count nothing.
		w.Watched("delta", "search", client, limits, domain.Verdict{Allowed: true, Outcome: domain.OutcomeShadowDenied,
			Decisions: []domain.Decision{{Allowed: false, Shadow: true}, {Allowed: true}}})
		w.Watched("delta", "search", client, limits, domain.Verdict{Outcome: domain.OutcomeError, Unavailable: true})
		time.Sleep(time.Second) // a tick: the second's counts
		synctest.Wait()
		top, err := w.Top(t.Context(), 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(top.Limits) != 1 || top.Limits[0].Limit != "per-minute" || top.Limits[0].Denied != 6 {
			t.Fatalf("limits = %+v, want per-minute alone with 6 denials", top.Limits)
		}
		got := fmt.Sprint(top.Limits[0].Tenants)
		if want := "[{acme 5 5 1} {beta 1 1 0}]"; got != want {
			t.Errorf("tenants = %s, want %s", got, want)
		}
		var a, d int64
		for _, s := range top.Series {
			a += s.Allowed
			d += s.Denied
		}
		if a != 3 || d != 7 {
			t.Errorf("series: %d allowed, %d denied, want 3 and 7 (%+v)", a, d, top.Series)
		}
		if top.Replicas != 1 || top.Partial != "" {
			t.Errorf("replicas %d, partial %q: want 1 and none", top.Replicas, top.Partial)
		}
	})
}

// TestTopWindow: denials age out of the window minute by minute.
func TestTopWindow(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWatch(t, watch.Options{Top: 3})
		w.Watched("old", "", client, limits, denied())
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		w.Watched("new", "", client, limits, denied())
		time.Sleep(time.Second)
		synctest.Wait()
		for _, tt := range []struct {
			window time.Duration
			want   string
		}{
			{time.Minute, "[{new 1 1 0}]"},
			{5 * time.Minute, "[{new 1 1 0} {old 1 1 0}]"},
		} {
			top, err := w.Top(t.Context(), tt.window)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(top.Limits[0].Tenants); got != tt.want {
				t.Errorf("window %s: %s, want %s", tt.window, got, tt.want)
			}
		}
		time.Sleep(7 * time.Minute)
		top, _ := w.Top(t.Context(), 5*time.Minute)
		if len(top.Limits) != 0 {
			t.Errorf("after 10 minutes: %+v, want nothing", top.Limits)
		}
	})
}

func TestValidWindow(t *testing.T) {
	t.Parallel()
	for w, want := range map[time.Duration]bool{time.Minute: true, 5 * time.Minute: true, 0: false,
		30 * time.Second: false, 90 * time.Second: false, 6 * time.Minute: false} {
		if got := watch.ValidWindow(w); got != want {
			t.Errorf("ValidWindow(%s) = %v, want %v", w, got, want)
		}
	}
	w := newWatch(t, watch.Options{Top: 1})
	if _, err := w.Top(t.Context(), time.Hour); err == nil {
		t.Errorf("Top(1h): no error")
	}
}

// zipf returns n draws of tenants 0..m-1 with Zipf's law, exponent s.
func zipf(seed uint64, n, m int, s float64) []int {
	r := rand.New(rand.NewPCG(seed, 3))
	z := rand.NewZipf(r, s, 1, uint64(m-1))
	out := make([]int, n)
	for i := range out {
		out[i] = int(z.Uint64())
	}
	return out
}

// TestZipfRecall: of the 20 tenants denied most in a Zipf-distributed
// flood of a million denials over 100 000 tenants, the top finds at
// least 95%.
func TestZipfRecall(t *testing.T) {
	t.Parallel()
	const k = 20
	for _, s := range []float64{1.01, 1.1, 1.3} {
		draws := zipf(uint64(s*100), 1_000_000, 100_000, s)
		names := make([]domain.TenantID, 100_000)
		for i := range names {
			names[i] = domain.TenantID(fmt.Sprintf("tenant-%d", i))
		}
		truth := map[int]int{}
		w := newWatch(t, watch.Options{Top: k})
		v := denied()
		for _, d := range draws {
			truth[d]++
			w.Watched(names[d], "", client, limits, v)
		}
		ids := make([]int, 0, len(truth))
		for id := range truth {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool {
			return truth[ids[i]] > truth[ids[j]] || truth[ids[i]] == truth[ids[j]] && ids[i] < ids[j]
		})
		exact := map[string]bool{}
		for _, id := range ids[:k] {
			exact[string(names[id])] = true
		}
		top, err := w.Top(t.Context(), 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tt := range top.Limits[0].Tenants {
			if exact[tt.Tenant] {
				found++
			}
		}
		recall := float64(found) / k
		t.Logf("zipf s=%.2f: top-%d recall %.2f", s, k, recall)
		if recall < 0.95 {
			t.Errorf("zipf s=%.2f: recall %.2f, want ≥ 0.95", s, recall)
		}
	}
}

// TestHeavyTenantNeverMissed: a tenant with more than 1/K of a limit's
// denials is in its top, whatever the flood of others around it.
func TestHeavyTenantNeverMissed(t *testing.T) {
	t.Parallel()
	const k = 10
	for seed := range uint64(5) {
		r := rand.New(rand.NewPCG(seed, 4))
		w := newWatch(t, watch.Options{Top: k})
		n, heavy := 200_000, 200_000/k+1
		order := make([]bool, n) // true: the heavy tenant
		for i := range heavy {
			order[i] = true
		}
		r.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
		v := denied()
		for i, h := range order {
			tenant := domain.TenantID(fmt.Sprintf("light-%d", i))
			if h {
				tenant = "heavy"
			}
			w.Watched(tenant, "", client, limits, v)
		}
		top, _ := w.Top(t.Context(), 5*time.Minute)
		found := false
		for _, tt := range top.Limits[0].Tenants {
			if tt.Tenant == "heavy" {
				found = true
				if tt.DeniedMin > int64(heavy) || int64(heavy) > tt.Denied {
					t.Errorf("seed %d: heavy counted [%d, %d], true %d", seed, tt.DeniedMin, tt.Denied, heavy)
				}
			}
		}
		if !found {
			t.Errorf("seed %d: the tenant with %d of %d denials (> 1/%d) is missing: %+v", seed, heavy, n, k, top.Limits[0].Tenants)
		}
	}
}

// TestMemoryFixed: a million distinct denied tenants of the longest ids,
// over two limits
// and every minute the sketches keep, leave the heap within the stated
// bound of the sketches, and under 2 MiB.
func TestMemoryFixed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const k = 20
		w := newWatch(t, watch.Options{Top: k})
		both := domain.Verdict{Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{{Allowed: false}, {Allowed: false}}}
		heap := func() int64 {
			runtime.GC()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			return int64(ms.HeapAlloc)
		}
		before := heap()
		const minutes = 7 // more than the sketches keep
		for m := range minutes {
			for i := range 1_000_000 / minutes {
				// The longest tenant ids: 64 bytes.
				w.Watched(domain.TenantID(fmt.Sprintf("t-%d-%061d", m, i)), "", client, limits, both)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		after := heap()
		bound := watch.MemoryBound(k, 2)
		t.Logf("heap grew %d bytes over a million tenants on 2 limits (bound %d)", after-before, bound)
		if grew := after - before; grew > bound || grew > 2<<20 {
			t.Errorf("heap grew %d bytes, more than the bound %d or 2 MiB", grew, bound)
		}
		top, _ := w.Top(t.Context(), 5*time.Minute)
		if len(top.Limits) != 2 || len(top.Limits[0].Tenants) != k {
			t.Errorf("top: %d limits, want 2 of %d tenants", len(top.Limits), k)
		}
	})
}

// TestFeedCapped: the feed carries at most FeedRate denials a second,
// and says how many it dropped.
func TestFeedCapped(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWatch(t, watch.Options{Top: 3})
		r := w.Subscribe()
		defer r.Unsubscribe()
		got := 0
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range r.C {
				if ev.Tenant != "acme" || ev.Limit != "per-minute" || ev.Route != "search" || ev.Client != "192.0.2.7" {
					t.Errorf("event %+v", ev)
				}
				got++
			}
		}()
		for range 500 {
			w.Watched("acme", "search", client, limits, denied())
		}
		synctest.Wait()
		if got != watch.FeedRate || r.Dropped() != 500-watch.FeedRate {
			t.Errorf("first second: %d events, %d dropped; want %d and %d", got, r.Dropped(), watch.FeedRate, 500-watch.FeedRate)
		}
		time.Sleep(time.Second)
		synctest.Wait() // the tick: a new second
		w.Watched("acme", "search", client, limits, denied())
		synctest.Wait()
		if got != watch.FeedRate+1 {
			t.Errorf("next second: %d events in all, want %d", got, watch.FeedRate+1)
		}
		w.Close()
		<-done
	})
}

// TestStalledReader: a reader that never reads slows no decision; what
// it missed is counted, and a reader beside it gets the feed.
func TestStalledReader(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		w := newWatch(t, watch.Options{Top: 3})
		stalled := w.Subscribe()
		defer stalled.Unsubscribe()
		for range 50 {
			for range watch.FeedRate {
				w.Watched("acme", "", client, limits, denied())
			}
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if got, want := stalled.Dropped(), int64(50*watch.FeedRate-256); got != want {
			t.Errorf("stalled reader dropped %d, want %d (all but its buffer)", got, want)
		}
		live := w.Subscribe()
		defer live.Unsubscribe()
		w.Watched("acme", "", client, limits, denied())
		if ev := <-live.C; ev.Tenant != "acme" {
			t.Errorf("live reader got %+v", ev)
		}
	})
}

// board is a ports.Board in memory.
type board struct {
	mu    sync.Mutex
	posts map[string][]byte
	err   error
}

func (b *board) Post(_ context.Context, replica string, data []byte, _ time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.posts == nil {
		b.posts = map[string][]byte{}
	}
	b.posts[replica] = data
	return b.err
}

func (b *board) Posts(context.Context) (map[string][]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return nil, b.err
	}
	out := map[string][]byte{}
	for k, v := range b.posts {
		out[k] = v
	}
	return out, nil
}

// TestFleet: two replicas on one board each answer for both.
func TestFleet(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := &board{}
		one := newWatch(t, watch.Options{Top: 3, Board: b, Replica: "one"})
		two := newWatch(t, watch.Options{Top: 3, Board: b, Replica: "two"})
		for range 4 {
			one.Watched("acme", "", client, limits, denied())
			two.Watched("acme", "", client, limits, denied())
		}
		two.Watched("beta", "", client, limits, denied())
		time.Sleep(time.Second)
		synctest.Wait() // both posted
		for _, w := range []*watch.Watch{one, two} {
			top, err := w.Top(t.Context(), 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if top.Replicas != 2 || len(top.Limits) != 1 || top.Limits[0].Denied != 9 {
				t.Fatalf("top = %+v, want 2 replicas, 9 denials", top)
			}
			if got, want := fmt.Sprint(top.Limits[0].Tenants), "[{acme 8 8 0} {beta 1 1 0}]"; got != want {
				t.Errorf("tenants %s, want %s", got, want)
			}
			var d int64
			for _, s := range top.Series {
				d += s.Denied
			}
			if d != 9 {
				t.Errorf("series: %d denied, want 9", d)
			}
		}
		b.mu.Lock()
		b.err = fmt.Errorf("store down")
		b.mu.Unlock()
		top, err := one.Top(t.Context(), 5*time.Minute)
		if err != nil || top.Partial == "" || top.Replicas != 1 || top.Limits[0].Denied != 4 {
			t.Errorf("board down: %+v, %v; want this replica's answer, partial", top, err)
		}
	})
}
