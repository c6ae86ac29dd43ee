// Package watch answers who is being limited: per limit, the tenants
// denied most over the last minutes, kept in fixed memory by heavy-hitter
// sketches ([topk]); the allowed and denied decisions of each second; and
// a live, rate-capped feed of denials. It is fed by the engine
// ([engine.Watcher]) and read by the admin face; through a [ports.Board]
// its answers cover every replica sharing the store.
package watch

import (
	"context"
	"encoding/json"
	"hash/maphash"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/internal/topk"
	"github.com/tollgate/tollgate/ports"
)

const (
	// MaxTop is the most tenants a limit may keep (TOLLGATE_TOP_TENANTS).
	MaxTop = 1000
	// Slot is the length of one sub-window: denials are counted per
	// minute of the clock, and the minutes of a window merged.
	Slot = time.Minute
	// MaxWindow is the longest window [Watch.Top] answers for.
	MaxWindow = 5 * time.Minute
	// slots is how many minutes each limit keeps: the current one and
	// the MaxWindow before it.
	slots = int(MaxWindow/Slot) + 1
	// Shards split each limit's sketch by tenant, so that concurrent
	// decisions rarely wait for one another. Each holds as many
	// counters as tenants are shown, and a tenant lives in one shard, so
	// each shard keeps the sketch's guarantee: more than 1/Top of the
	// denials is never missed. Together they hold Shards×Top counters,
	// for the ranks near the last shown.
	Shards = 16
	// postKeep is how many counters of each minute a replica posts for
	// the others, per tenant shown.
	postKeep = 4
	// FeedRate is the most denials a second the feed carries from one
	// replica; the rest are dropped and counted.
	FeedRate = 100
	// SeriesLen is how many seconds of allowed and denied counts a
	// replica keeps and posts.
	SeriesLen = 60
	// feedBuffer is the room of the feed's queue and of each reader's.
	feedBuffer = 256
)

// Options configure [New].
type Options struct {
	// Top is how many tenants each limit keeps and shows, 1 to MaxTop.
	Top int
	// Board carries the replicas' posts (the Redis store's); nil: this
	// replica answers alone.
	Board ports.Board
	// Replica is this replica's name on the board. Required with Board.
	Replica string
	// Interval is how often the replica posts its sketches and takes
	// its per-second counts. Zero means a second.
	Interval time.Duration
	// Log gets at most one line a minute about posts the board failed.
	// May be nil.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Watch is one replica's view of who is being limited. It is safe for
// concurrent use by multiple goroutines; [Watch.Watched], on every
// decision, takes one of a few short locks only when a limit denies or
// a denied tenant is admitted, and never blocks on a reader. Its memory
// is fixed per limit ([MemoryBound]) whatever the number of tenants.
type Watch struct {
	opts     Options
	seed     maphash.Seed
	minute   atomic.Int64                           // the current minute since the epoch, as the clock last read
	limits   atomic.Pointer[map[string]*limitWatch] // by limit name; replaced whole, under limitsMu, to add one
	limitsMu sync.Mutex
	counts   [Shards]shardCounts
	// watched has a bit set for every tenant some sketch may count (and
	// some it no longer does): an admission of a tenant whose bit is
	// clear, most of them, costs no lookup. Rebuilt every minute.
	watched atomic.Pointer[filter]

	feed        chan Event   // to the fan-out: at most FeedRate a second
	feedSent    atomic.Int64 // events queued this second
	feedDropped atomic.Int64 // events dropped by the rate cap, ever
	readers     atomic.Int32 // subscribed readers: no event is made without one
	hubMu       sync.Mutex   // guards hub
	hub         map[*Reader]struct{}
	seriesMu    sync.Mutex // guards series, last
	series      []Second   // the last SeriesLen seconds, oldest first
	last        [2]int64   // allowed and denied totals at the last tick
	postFailed  throttle.Log
	stop        chan struct{}
	done        sync.WaitGroup
	closeOnce   sync.Once
}

// shardCounts are one shard's decisions, on a cache line of their own.
type shardCounts struct {
	allowed, denied atomic.Int64
	_               [48]byte
}

// filter is a set of tenants' hashes, one bit each: no false negative
// for a tenant added since it was made, a few false positives.
type filter [filterBits / 64]atomic.Uint64

const filterBits = 1 << 16

func filterBit(h uint64) (word int, mask uint64) {
	b := (h >> 20) % filterBits
	return int(b / 64), 1 << (b % 64)
}

func (f *filter) add(h uint64) {
	i, m := filterBit(h)
	if f[i].Load()&m == 0 {
		f[i].Or(m)
	}
}

func (f *filter) has(h uint64) bool {
	i, m := filterBit(h)
	return f[i].Load()&m != 0
}

// limitWatch is one limit's sketches, made at its first denial: per
// shard, one per minute kept.
type limitWatch struct {
	shards [Shards]shard
}

// shard is one shard of a limit's sketches.
type shard struct {
	mu      sync.Mutex          // guards minutes, sketch
	minutes [slots]int64        // the minute each sketch counts
	sketch  [slots]*topk.Sketch // by minute modulo slots; nil until used
	_       [40]byte
}

// Second is the decisions of one second.
type Second struct {
	Time    int64 `json:"t"` // unix seconds
	Allowed int64 `json:"allowed"`
	Denied  int64 `json:"denied"`
}

// Event is one denial on the feed.
type Event struct {
	Time   time.Time `json:"time"`
	Tenant string    `json:"tenant"`
	Route  string    `json:"route"`
	Limit  string    `json:"limit"`
	Client string    `json:"client,omitempty"`
}

// New returns a Watch and starts its clock, which posts to opts.Board;
// Close stops it. It panics, as wiring does, on a Top outside 1 to
// MaxTop or a Board without a Replica.
func New(opts Options) *Watch {
	if opts.Top < 1 || opts.Top > MaxTop || (opts.Board != nil && opts.Replica == "") {
		panic("watch: New needs a Top from 1 to 1000, and a Replica with a Board")
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	w := &Watch{opts: opts, seed: maphash.MakeSeed(), feed: make(chan Event, feedBuffer),
		hub: map[*Reader]struct{}{}, stop: make(chan struct{})}
	w.postFailed.Interval = time.Minute
	w.minute.Store(minuteOf(opts.Now()))
	w.watched.Store(new(filter))
	w.limits.Store(&map[string]*limitWatch{})
	w.done.Add(2)
	go w.tick()
	go w.fanOut()
	return w
}

// Close stops the clock and the feed, and ends every reader's stream.
// It is idempotent.
func (w *Watch) Close() error {
	w.closeOnce.Do(func() {
		close(w.stop)
		w.done.Wait()
	})
	return nil
}

func minuteOf(t time.Time) int64 { return t.Unix() / int64(Slot/time.Second) }

// Watched records a decision ([engine.Watcher]): the tenant in the
// sketch of each enforced limit that denied it, and in the feed; an
// admitted tenant's admission on each limit that watches it.
func (w *Watch) Watched(subject domain.TenantID, route string, client netip.Addr, limits []domain.Limit, v domain.Verdict) {
	h := maphash.String(w.seed, string(subject))
	sh := int(h >> 60) // the top bits: the sketches' maps use the low ones
	if v.Allowed {
		w.counts[sh].allowed.Add(1)
	} else {
		w.counts[sh].denied.Add(1)
	}
	if len(v.Decisions) != len(limits) {
		return // decided without the limits: a fail mode
	}
	if v.Allowed && !w.watched.Load().has(h) {
		return // a tenant no sketch counts: nothing to record
	}
	minute := w.minute.Load()
	first := -1
	for i, d := range v.Decisions {
		// A shadow limit denies nothing; a limit that admitted a denied
		// request, or a quota limit that denied an admitted one, has
		// nothing to count.
		switch {
		case d.Shadow:
		case v.Allowed && d.Allowed:
			if lw := w.limitOf(limits[i].Name, false); lw != nil {
				lw.shards[sh].touch(minute, h)
			}
		case !v.Allowed && !d.Allowed:
			lw := w.limitOf(limits[i].Name, true)
			w.watched.Load().add(h)
			lw.shards[sh].add(minute, h, string(subject), w.opts.Top)
			if first < 0 {
				first = i
			}
		}
	}
	if first >= 0 && w.readers.Load() > 0 {
		w.send(subject, route, limits[first].Name, client)
	}
}

// limitOf returns the watch of the limit name, made when create is true
// (nil otherwise when there is none yet). Limits come from the policy:
// a new one, rare, copies the map.
func (w *Watch) limitOf(name string, create bool) *limitWatch {
	if lw := (*w.limits.Load())[name]; lw != nil || !create {
		return lw
	}
	w.limitsMu.Lock()
	defer w.limitsMu.Unlock()
	old := *w.limits.Load()
	if lw := old[name]; lw != nil {
		return lw
	}
	m := make(map[string]*limitWatch, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	lw := new(limitWatch)
	m[name] = lw
	w.limits.Store(&m)
	return lw
}

// eachLimit calls f with every limit's watch.
func (w *Watch) eachLimit(f func(name string, lw *limitWatch)) {
	for name, lw := range *w.limits.Load() {
		f(name, lw)
	}
}

// add counts a denial of tenant, of hash h, in minute.
func (s *shard) add(minute int64, h uint64, tenant string, capacity int) {
	i := int(minute % int64(slots))
	s.mu.Lock()
	sk := s.sketch[i]
	if sk == nil {
		sk = topk.New(capacity)
		s.sketch[i] = sk
	}
	if s.minutes[i] != minute {
		sk.Reset()
		s.minutes[i] = minute
	}
	sk.Add(h, tenant, 1)
	s.mu.Unlock()
}

// touch counts an admission of the tenant of hash h in minute, when
// the minute's sketch watches it.
func (s *shard) touch(minute int64, h uint64) {
	i := int(minute % int64(slots))
	s.mu.Lock()
	if sk := s.sketch[i]; sk != nil && s.minutes[i] == minute {
		sk.Touch(h)
	}
	s.mu.Unlock()
}

// send queues a denial on the feed, or counts it dropped beyond
// FeedRate a second or when the queue is full.
func (w *Watch) send(subject domain.TenantID, route, limit string, client netip.Addr) {
	if w.feedSent.Add(1) > FeedRate {
		w.feedDropped.Add(1)
		return
	}
	ev := Event{Time: w.opts.Now().UTC(), Tenant: string(subject), Route: route, Limit: limit}
	if client.IsValid() {
		ev.Client = client.String()
	}
	select {
	case w.feed <- ev:
	default:
		w.feedDropped.Add(1)
	}
}

// tick runs the clock: every interval, the minute, the second's counts
// and, with a board, this replica's post.
func (w *Watch) tick() {
	defer w.done.Done()
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := w.opts.Now()
		if m := minuteOf(now); m != w.minute.Load() {
			w.minute.Store(m)
			w.refilter()
		}
		w.feedSent.Store(0)
		w.takeSecond(now)
		if w.opts.Board != nil {
			w.post(now)
		}
	}
}

// refilter makes the filter of watched tenants anew from the sketches,
// dropping the tenants they no longer count. A tenant added meanwhile
// to the old filter may miss an admission or two: Allowed is a count
// from below.
func (w *Watch) refilter() {
	f := new(filter)
	w.eachLimit(func(_ string, lw *limitWatch) {
		for s := range lw.shards {
			sh := &lw.shards[s]
			sh.mu.Lock()
			for _, sk := range sh.sketch {
				if sk != nil {
					sk.Keys(f.add)
				}
			}
			sh.mu.Unlock()
		}
	})
	w.watched.Store(f)
}

// takeSecond appends the decisions since the last tick to the series.
func (w *Watch) takeSecond(now time.Time) {
	var a, d int64
	for i := range w.counts {
		a += w.counts[i].allowed.Load()
		d += w.counts[i].denied.Load()
	}
	w.seriesMu.Lock()
	defer w.seriesMu.Unlock()
	s := Second{Time: now.Unix(), Allowed: a - w.last[0], Denied: d - w.last[1]}
	w.last = [2]int64{a, d}
	if n := len(w.series); n > 0 && w.series[n-1].Time == s.Time {
		w.series[n-1].Allowed += s.Allowed
		w.series[n-1].Denied += s.Denied
		return
	}
	if len(w.series) == SeriesLen {
		copy(w.series, w.series[1:])
		w.series = w.series[:SeriesLen-1]
	}
	w.series = append(w.series, s)
}

// Series returns this replica's decisions of each of the last seconds,
// oldest first.
func (w *Watch) Series() []Second {
	w.seriesMu.Lock()
	defer w.seriesMu.Unlock()
	return append([]Second(nil), w.series...)
}

// post is what a replica posts on the board.
type post struct {
	Minute int64                     `json:"minute"`
	Limits map[string][]minuteCounts `json:"limits"`
	Series []Second                  `json:"series"`
}

// minuteCounts is one minute of one limit's sketches.
type minuteCounts struct {
	Minute int64 `json:"minute"`
	topk.Summary
}

// postTTL is how long a post lives: a replica that stops posting drops
// out of the fleet's answers within it.
func (w *Watch) postTTL() time.Duration { return 5 * w.opts.Interval }

// post posts this replica's sketches, each minute's postKeep×Top most
// counted tenants (every tenant above 1/(postKeep×Top) of the minute's
// denials), and its series on the board.
func (w *Watch) post(now time.Time) {
	minute := minuteOf(now)
	p := post{Minute: minute, Limits: w.minutes(minute, slots, postKeep*w.opts.Top), Series: w.Series()}
	data, err := json.Marshal(p)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), w.opts.Interval)
		err = w.opts.Board.Post(ctx, w.opts.Replica, data, w.postTTL())
		cancel()
	}
	if err != nil {
		w.postFailed.Do(func(n int64) {
			w.opts.Log.Warn("top tenants: posting this replica's sketches failed; the fleet's answers lack it until a post succeeds", "err", err, "failures_since_last_line", n)
		})
	}
}

// minutes returns, per limit, the summaries of the n minutes up to
// minute that hold denials, each cut to keep counters (0: all).
func (w *Watch) minutes(minute int64, n, keep int) map[string][]minuteCounts {
	out := map[string][]minuteCounts{}
	w.eachLimit(func(name string, lw *limitWatch) {
		var ms []minuteCounts
		for m := minute - int64(n) + 1; m <= minute; m++ {
			i := int(m % int64(slots))
			parts := make([]topk.Summary, 0, Shards)
			for s := range lw.shards {
				sh := &lw.shards[s]
				sh.mu.Lock()
				if sk := sh.sketch[i]; sk != nil && sh.minutes[i] == m && sk.N() > 0 {
					parts = append(parts, sk.Summary())
				}
				sh.mu.Unlock()
			}
			if len(parts) == 0 {
				continue
			}
			u := topk.Union(parts...)
			if keep > 0 {
				u = u.Truncate(keep)
			}
			ms = append(ms, minuteCounts{Minute: m, Summary: u})
		}
		if len(ms) > 0 {
			out[name] = ms
		}
	})
	return out
}
