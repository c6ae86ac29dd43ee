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
	"github.com/tollgate/tollgate/ports"
)

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

// threeCounted starts three replicas on a, their turns apart, and
// returns them once each counts 3. They close when the test ends. Call it
// in a synctest bubble.
func threeCounted(t *testing.T, a *announcer) []*layers.ReplicaCount {
	t.Helper()
	var rs []*layers.ReplicaCount
	for _, id := range []string{"a", "b", "c"} {
		r := layers.NewReplicaCount(layers.ReplicaCountOptions{Announcer: a, ID: id})
		t.Cleanup(func() { r.Close() })
		rs = append(rs, r)
		time.Sleep(layers.DefaultAnnounceInterval / 3) // their turns apart
	}
	time.Sleep(4 * layers.DefaultAnnounceInterval)
	synctest.Wait()
	for i, r := range rs {
		if r.N() != 3 {
			t.Fatalf("replica %d: N = %d after 4 announcements, want 3", i, r.N())
		}
	}
	return rs
}

// TestReplicaCountAfterTheStoreLostTheKey: when the store loses the
// announcements (a restart without its data, a FLUSHALL), every replica
// is counted again as soon as it has announced once more: a member that
// comes back with a later expiry than the one remembered renews, so a
// second outage right after a restart still divides limits by the
// replicas.
func TestReplicaCountAfterTheStoreLostTheKey(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}}
		rs := threeCounted(t, a)
		a.set(func(a *announcer) { a.alive, a.expires = map[string]bool{}, nil })
		// One interval on, every replica has announced once since the loss.
		time.Sleep(layers.DefaultAnnounceInterval + layers.DefaultAnnounceInterval/2)
		synctest.Wait()
		for i, r := range rs {
			if r.N() != 3 {
				t.Errorf("replica %d: N = %d one announcement after the store lost the key, want 3", i, r.N())
			}
		}
	})
}

// TestReplicaCountAfterALongOutage: after an outage longer than the
// announcements' TTL, and a store back without its data whose listeners
// subscribe again one by one, every replica is counted again once it has
// announced once more, as after a short loss. (The members and the
// listeners seen before the outage had aged past the TTL on this
// process's clock: N stayed at 1 for two seconds after Redis came back,
// and an outage then gave each replica the whole budget.)
func TestReplicaCountAfterALongOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}}
		rs := threeCounted(t, a)
		a.set(func(a *announcer) { a.down = true })
		time.Sleep(25 * time.Second)
		back := time.Now()
		a.set(func(a *announcer) {
			a.down, a.alive, a.expires = false, map[string]bool{}, nil
			// The listeners subscribe again over two seconds.
			a.listening = func() int { return 1 + 2*int(time.Since(back)/(2*time.Second)) }
		})
		time.Sleep(layers.DefaultAnnounceInterval + layers.DefaultAnnounceInterval/2)
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			synctest.Wait()
			for i, r := range rs {
				if r.N() != 3 {
					t.Fatalf("replica %d: N = %d %v after the store came back, want 3", i, r.N(), time.Since(back))
				}
			}
		}
	})
}

// TestReplicaCountOnAFlakyStore: a store that fails every other
// announcement (each one after a failure being the first after an
// outage) still forgets, a TTL on, what the announcements saw: when the
// listeners fall from 3 to 1, N is cut to 1 within a few TTLs: the
// first announcement after a failure must not make all that was seen new
// again, or nothing seen is ever forgotten and N stays at the most
// listeners ever seen.
func TestReplicaCountOnAFlakyStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := &announcer{alive: map[string]bool{}}
		rs := threeCounted(t, a)
		a.set(func(a *announcer) { a.listening = func() int { return 1 } })
		// Down from half an interval on, then up and down every interval:
		// each replica's announcements fail and succeed in turn.
		time.Sleep(layers.DefaultAnnounceInterval / 2)
		for range 20 {
			a.set(func(a *announcer) { a.down = !a.down })
			time.Sleep(layers.DefaultAnnounceInterval)
		}
		synctest.Wait()
		for i, r := range rs {
			if r.N() != 1 {
				t.Errorf("replica %d: N = %d with one replica listening for 20 s on a flaky store, want 1", i, r.N())
			}
		}
	})
}
