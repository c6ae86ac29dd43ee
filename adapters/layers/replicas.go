package layers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/ports"
)

// The replica count: N, which the local fail mode divides limits by.

// Announcer is how a replica tells the store it is alive, and learns
// which replicas are: the store keeps each announcement for ttl.
type Announcer interface {
	// Announce records replica id as alive for ttl and returns every
	// announcement alive, id's included, each with its expiry on the
	// store's clock, and how many replicas the store vouches are
	// listening (id's listener, which Announce starts and keeps,
	// included; 0 when it cannot vouch). An error wrapping
	// [ports.ErrKeyType] is the store's key holding something else
	// (written by another program).
	Announce(ctx context.Context, id string, ttl time.Duration) (ports.Roll, error)
	// Withdraw removes id's announcement and stops its listener.
	Withdraw(ctx context.Context, id string) error
}

// ReplicaCount defaults.
const (
	// DefaultAnnounceInterval is how often a replica announces itself.
	DefaultAnnounceInterval = time.Second
	// DefaultAnnounceTTL is how long an announcement lasts: a replica
	// that stopped is no longer counted after it.
	DefaultAnnounceTTL = 3 * time.Second
)

// ReplicaCountOptions configure [NewReplicaCount].
type ReplicaCountOptions struct {
	// Announcer is the store the replicas announce themselves in.
	// Required.
	Announcer Announcer
	// ID names this replica, unique in the fleet. Required.
	ID string
	// Interval is the time between two announcements. Zero means
	// DefaultAnnounceInterval.
	Interval time.Duration
	// TTL is how long an announcement lasts. Zero means
	// DefaultAnnounceTTL.
	TTL time.Duration
	// Timeout bounds each call to the Announcer. Zero means Interval.
	Timeout time.Duration
	// OnError, if not nil, is told of every failed announcement (a failed
	// store call).
	OnError func(error)
	// OnCount, if not nil, is told every count. It is called from one
	// goroutine.
	OnCount func(n int)
	// OnOvercount, if not nil, is told when more replicas renew
	// announcements than the store sees listening, so that the count is
	// cut to the listeners (members written by something else), and
	// again when that ends (renewing = listening), or when the store no
	// longer vouches for any listener while cut (listening = 0). It is
	// called from one goroutine, once per change.
	OnOvercount func(renewing, listening int)
	// OnListenError, if not nil, is told when this replica cannot listen
	// on the store (the announcement itself was made), once until it
	// listens again. It is called from one goroutine.
	OnListenError func(error)
}

// ReplicaCount announces this replica every Interval and keeps the last
// count of replicas alive, for [FailLocal]'s N. While the store fails the
// count stays what it was at the last announcement that succeeded (at
// most about Interval before the failure). Close stops announcing and
// withdraws the announcement.
//
// The count believes only what renews: a replica counts (besides this
// one) once its expiry has been seen to move forward on the store's
// clock, as a live replica's does every Interval, and for as long as its
// announcement is alive after that (two replicas' announcements need not
// alternate: one may announce twice while the other is late). A member
// written once by something else (a stale or forged entry) never counts,
// so no one can shrink every replica's local budget by adding members;
// the store drops claims that outlast any announcement. Nor is the count
// above the replicas the store has seen listening over the last TTL
// (the most of the announcements that vouched, so that a listener
// reconnecting does not dip it): members renewed by something else are
// cut off there, and reported through OnOvercount. With no announcement
// that vouched over the last TTL (this replica cannot listen: see
// OnListenError), the count is the renewals'. A key of another type
// (ports.ErrKeyType) is reported once, not every Interval, and the count
// keeps its last good value. Whoever can
// hold connections open to the store, or run its admin commands, can
// still steer the count: the store is trusted (docs/operations.md).
//
// ReplicaCount is safe for concurrent use by multiple goroutines.
type ReplicaCount struct {
	opts ReplicaCountOptions
	n    atomic.Int64      // 0: never counted
	seen map[string]member // each member at the last announcement; the run goroutine's
	bad  bool              // the last announcement met a key of another type; the run goroutine's
	// The listeners the store vouched for over the last TTL, whether the
	// count is cut to them, and whether listening failed at the last
	// announcement: the run goroutine's.
	listens []listens
	cut     bool
	deaf    bool
	// failed: the last announcement failed; lastGood: when the last one
	// that succeeded was made (the run goroutine's).
	failed   bool
	lastGood time.Time
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// listens is the listeners one announcement saw, and when. carried: at
// is the first announcement after an outage, to which what the last one
// before it saw was carried over (once only).
type listens struct {
	at      time.Time
	n       int
	carried bool
}

// member is another replica's announcement, as this one saw it.
type member struct {
	expires int64     // on the store's clock
	renewed bool      // its expiry moved forward between two announcements of this replica's, once at least
	seen    time.Time // when a roll last held it (this process's clock)
	carried bool      // seen is the first announcement after an outage, carried over from the last before it (once only)
}

// NewReplicaCount starts announcing at once.
func NewReplicaCount(opts ReplicaCountOptions) *ReplicaCount {
	if opts.Announcer == nil || opts.ID == "" {
		panic("layers: NewReplicaCount needs an Announcer and an ID")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultAnnounceInterval
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultAnnounceTTL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = opts.Interval
	}
	r := &ReplicaCount{opts: opts, seen: map[string]member{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// N returns the replicas alive at the last count, at least 1 (1 before
// any count succeeded).
func (r *ReplicaCount) N() int { return int(max(r.n.Load(), 1)) }

func (r *ReplicaCount) run() {
	defer close(r.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		r.announce()
		t.Reset(max(r.opts.Interval-time.Since(start), 0))
	}
}

func (r *ReplicaCount) announce() {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	roll, err := r.opts.Announcer.Announce(ctx, r.opts.ID, r.opts.TTL)
	if err != nil {
		wrongType := errors.Is(err, ports.ErrKeyType)
		if r.opts.OnError != nil && !(wrongType && r.bad) {
			r.opts.OnError(err)
		}
		r.bad = wrongType
		r.failed = true
		return
	}
	r.bad = false
	n := 1 // this replica
	now := time.Now()
	if r.failed {
		// The first announcement after an outage: what the last good one
		// saw (the members, the listeners) is remembered for a TTL from
		// now, not from then. An outage longer than the TTL aged it all
		// away, and N fell to 1 while the others announced again and
		// their listeners subscribed again, for two seconds after the
		// store came back. Only what that one saw: what it remembered
		// from before keeps aging, or a store failing every other
		// announcement would have nothing ever forgotten (and the
		// listeners' memory growing by one every other announcement).
		r.failed = false
		for id, m := range r.seen {
			if m.seen.Equal(r.lastGood) && !m.carried {
				m.seen, m.carried = now, true
				r.seen[id] = m
			}
		}
		for i, l := range r.listens {
			if l.at.Equal(r.lastGood) && !l.carried {
				r.listens[i] = listens{at: now, n: l.n, carried: true}
			}
		}
	}
	r.lastGood = now
	seen := make(map[string]member, len(roll.Alive))
	for _, a := range roll.Alive {
		prev, ok := r.seen[a.ID]
		m := member{expires: a.Expires, renewed: ok && (prev.renewed || a.Expires > prev.expires), seen: now}
		seen[a.ID] = m
		if m.renewed && a.ID != r.opts.ID {
			n++ // it renews, and its announcement is alive
		}
	}
	// A member missing from this roll is remembered for a TTL, not
	// counted: when the store lost the key (a restart without its data,
	// a FLUSHALL) the replicas come back one by one, each with a later
	// expiry than the one remembered, and counts again at once instead
	// of after two more announcements.
	for id, m := range r.seen {
		if _, ok := seen[id]; !ok && now.Sub(m.seen) < r.opts.TTL {
			seen[id] = m
		}
	}
	r.seen = seen
	if deaf := roll.ListenErr != nil; deaf != r.deaf {
		r.deaf = deaf
		if deaf && r.opts.OnListenError != nil {
			r.opts.OnListenError(roll.ListenErr)
		}
	}
	if bound := r.listeners(now, roll.Listening); bound >= 1 {
		if cut := n > bound; cut != r.cut {
			r.cut = cut
			if r.opts.OnOvercount != nil {
				r.opts.OnOvercount(n, min(n, bound))
			}
		}
		n = min(n, bound)
	} else if r.cut {
		r.cut = false // nothing vouches: the renewals count; a cut again is told again
		if r.opts.OnOvercount != nil {
			r.opts.OnOvercount(n, 0)
		}
	}
	r.n.Store(int64(n))
	if r.opts.OnCount != nil {
		r.opts.OnCount(n)
	}
}

// listeners records the listeners an announcement made at now vouched
// for (none: 0) and returns the most vouched for over the last TTL, 0 for
// none.
func (r *ReplicaCount) listeners(now time.Time, n int) int {
	keep := r.listens[:0]
	for _, l := range r.listens {
		if now.Sub(l.at) <= r.opts.TTL {
			keep = append(keep, l)
		}
	}
	r.listens = keep
	if n >= 1 {
		r.listens = append(r.listens, listens{at: now, n: n})
	}
	most := 0
	for _, l := range r.listens {
		most = max(most, l.n)
	}
	return most
}

// Close stops announcing and withdraws this replica's announcement
// (within Timeout), so the others stop counting it. It is idempotent and
// returns the withdrawal's error.
func (r *ReplicaCount) Close() error {
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
		defer cancel()
		err = r.opts.Announcer.Withdraw(ctx, r.opts.ID)
	})
	return err
}
