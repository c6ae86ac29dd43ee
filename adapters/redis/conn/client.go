package conn

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Options configure [Open]. The zero value is usable: no
// per-decision timeout beyond the caller's context, the default lanes,
// one Redis.
type Options struct {
	// Timeout is the deadline for the store work of one decision
	// (TOLLGATE_REDIS_TIMEOUT). It also bounds each read and write on a
	// connection, so a call without a deadline cannot hang on a stalled
	// Redis.
	Timeout time.Duration
	// Lanes is how many round trips of decisions are always open, each
	// on its own connection; concurrent decisions beyond that queue and
	// share the next round trip, and more lanes open while every lane
	// stays busy (see [Client]). 0 means [DefaultLanes].
	Lanes int
	// Cluster makes the URL a seed list of a Redis Cluster
	// (TOLLGATE_REDIS_MODE=cluster; see [ValidateClusterURL]): the client
	// discovers the masters, sends each decision to the master of its
	// tenant's slot, follows MOVED and ASK, and reloads the slot map when
	// a master fails.
	Cluster bool
	// Send, if not nil, replaces the coalescer: each command goes to
	// Redis on its caller's goroutine as Send(ctx, rdb, cmd), rdb being
	// the client's go-redis client and ctx bounded by Timeout. Benchmarks
	// set it to compare ways of batching; the gateway leaves it nil.
	Send func(ctx context.Context, rdb goredis.UniversalClient, cmd goredis.Cmder) error
}

// DefaultLanes is the default [Options.Lanes]: two round trips of
// decisions in flight, each on its own connection; whoever arrives
// meanwhile leaves with the next. Two is ahead of one and of four
// unless other processes take the cores Redis needs (docs/benchmarks.md,
// "Lanes"): more lanes split the same callers into shallower batches, and
// across a network, where a round trip is longer than Redis's work on a
// batch, the second lane overlaps two round trips.
const DefaultLanes = 2

// maxBatch bounds the commands of one pipeline (a soft bound on the
// bytes one write carries: a decision's EVALSHA is about 100 bytes).
const maxBatch = 512

// Client is a connection to one Redis (or a proxy), or to every node of
// a Redis Cluster, tuned for a gateway: what the limiter and the fleet's
// coordination run on. Concurrent decisions share round trips: a decision
// that finds every lane busy queues and leaves with the next batch, one
// pipeline of whole scripts; [Options.Lanes] lanes are always open,
// and more open (up to a quarter of the pool) while every lane stays
// busy for longer than a loopback round trip, as across a network. A
// lone decision goes out at once on its own context. A decision's
// timeout ([Options.Timeout]) runs from its send: time spent
// waiting in this process for a lane is not Redis's (that wait is
// bounded apart, by a second or 20 timeouts). It owns the go-redis
// client; Close closes it.
//
// Client is safe for concurrent use by multiple goroutines.
type Client struct {
	rdb     goredis.UniversalClient
	lanes   int
	timeout time.Duration // per decision (Options.Timeout)
	co      *coalescer    // nil with Options.Send
	send    processor     // Options.Send, or nil
	live    *liveness     // when Redis was last heard from
	warm    atomic.Bool   // Warm succeeded once
}

// Open returns a Client for rawURL (see [ValidateURL] and, with
// opts.Cluster, [ValidateClusterURL]; credentials in the URL), tuned for
// a gateway. A setting given in the URL's query (pool_size=…,
// read_timeout=…) wins over these defaults:
//
//   - ContextTimeoutEnabled: without it go-redis ignores context
//     deadlines, and the per-decision timeout would not bound a decision.
//   - Read/WriteTimeout = the coalescer's hard bound, max(1 s, 20 ×
//     opts.Timeout), so even a call without a deadline cannot hang on a
//     stalled Redis. A decision's own limit is opts.Timeout without an
//     answer from Redis (see the coalescer); a round trip runs on while
//     Redis answers, so that a reply already on the wire is not lost to
//     a flusher scheduled late. The bound also covers background reloads
//     of a cluster's slot map, which have no deadline of their own, on a
//     loaded machine.
//   - No retries, whatever the URL says (ValidateURL refuses a
//     max_retries that would retry). A retried script whose first attempt
//     ran (reply lost to a timeout) counts the request twice, and a
//     retried batch would count a whole batch twice; a failed attempt
//     goes to the fail mode instead. A cluster follows MOVED and ASK
//     (go-redis's default of 3 redirects), bounded by the deadline; its
//     client's own re-sends after a network error ignore max_retries,
//     so every script goes out marked never to be sent again ([once]).
//   - DialerRetries: one attempt, so a refused connection fails at once
//     instead of retrying with back-off for the whole deadline.
//   - DialTimeout = 2 × opts.Timeout, at least 100 ms. A dial outside a
//     decision (go-redis's dial probe) has no decision's deadline, and
//     a longer one, started during a stall, keeps decisions failing after
//     Redis answers again (TestStallEnds).
//   - PoolSize: 16 per lane, at least 64. Decisions use one connection
//     per lane, plus the /readyz pings and the start-up check; the rest
//     are never opened, but go-redis stops dialling for a second once
//     PoolSize dials in a row have failed (its dial breaker probes once a
//     second), and during a stall each failed round trip costs a
//     connection and a dial: a small pool would trip that breaker.
//   - MinIdleConns: none. Warm opens the lanes' connections once; after
//     that a connection a stall or a CLIENT KILL closed is replaced by
//     the next round trip on its lane, one dial for the whole batch, not
//     one per decision. go-redis's background refills (MinIdleConns)
//     would dial during the stall too and keep decisions failing after
//     Redis comes back (TestStallEnds).
//   - A new connection says HELLO and nothing more: no CLIENT SETINFO,
//     no maintenance-notification handshake (Redis Enterprise's, which
//     other servers refuse: a wasted round trip per dial, and in go-redis
//     v9.23 a data race between connections that fail it at once).
//
// It does no I/O: [Client.Warm] dials. go-redis's own logger is silenced
// (once per process): it prints a line per failed dial, which during an
// outage would flood the log the gateway limits to one store-error line
// per second.
func Open(rawURL string, opts Options) (*Client, error) {
	var rdb goredis.UniversalClient
	live := newLiveness()
	if opts.Cluster {
		if err := ValidateClusterURL(rawURL); err != nil {
			return nil, err
		}
		o, err := goredis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		tune(rawURL, opts, tuning{&o.PoolSize, &o.MinIdleConns, &o.ReadTimeout, &o.WriteTimeout, &o.DialTimeout,
			&o.ContextTimeoutEnabled, &o.DialerRetries, &o.DisableIdentity, &o.MaintNotificationsConfig, &o.Protocol})
		o.Dialer = live.dialer(goredis.NewDialer(&goredis.Options{DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig}))
		rdb = newClusterClient(rawURL, o)
	} else {
		if err := ValidateURL(rawURL); err != nil {
			return nil, err
		}
		o, err := goredis.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("redis: %w", err)
		}
		tune(rawURL, opts, tuning{&o.PoolSize, &o.MinIdleConns, &o.ReadTimeout, &o.WriteTimeout, &o.DialTimeout,
			&o.ContextTimeoutEnabled, &o.DialerRetries, &o.DisableIdentity, &o.MaintNotificationsConfig, &o.Protocol})
		o.MaxRetries = -1
		o.Dialer = live.dialer(goredis.NewDialer(o))
		rdb = goredis.NewClient(o)
	}
	quietLogs.Do(func() { goredis.SetLogger(discardLogger{}) })
	return newClient(rdb, opts, live), nil
}

// NewClient returns a Client over rdb, a go-redis client the caller
// configured (tests), with opts (opts.Timeout bounds the coalescer's
// waits; it is not applied to rdb). Close closes rdb. rdb's own retries
// apply: configure it with MaxRetries -1, as [Open] does.
func NewClient(rdb goredis.UniversalClient, opts Options) *Client {
	return newClient(rdb, opts, newLiveness())
}

// newClient returns a Client over rdb with opts (opts.Timeout is not
// applied to rdb: that is the caller's configuration). Close closes rdb.
func newClient(rdb goredis.UniversalClient, opts Options, live *liveness) *Client {
	c := &Client{rdb: rdb, lanes: opts.lanes(), timeout: opts.Timeout, live: live}
	if opts.Send != nil {
		c.send = sendFunc(func(ctx context.Context, cmd goredis.Cmder) error { return opts.Send(ctx, rdb, cmd) })
		return c
	}
	c.co = newCoalescer(rdb, live, coalescerOptions{
		lanes:      c.lanes,
		maxLanes:   max(c.lanes, opts.maxLanes()),
		maxBatch:   maxBatch,
		timeout:    opts.Timeout,
		hardWait:   hardWait(opts.Timeout),
		spawnAfter: spawnAfter,
		connBound:  connBound(rdb, hardWait(opts.Timeout)),
	})
	return c
}

// sendFunc is a [processor] of a function.
type sendFunc func(ctx context.Context, cmd goredis.Cmder) error

// Process implements processor.
func (f sendFunc) Process(ctx context.Context, cmd goredis.Cmder) error { return f(ctx, cmd) }

func (o Options) lanes() int {
	if o.Lanes > 0 {
		return o.Lanes
	}
	return DefaultLanes
}

// maxLanes is how many round trips may be in flight when the base lanes
// are all busy long enough (see the coalescer): a quarter of the pool,
// which leaves connections for the readiness pings and the announcements.
func (o Options) maxLanes() int { return o.poolSize() / 4 }

// poolSize is the pool Open gives each node: 16 per lane, at least 64.
func (o Options) poolSize() int { return max(64, 16*o.lanes()) }

// spawnAfter is how long a decision waits, every lane busy, before
// another lane opens: longer than a round trip on loopback (so the base
// lanes carry deep batches there), a fraction of one across a network
// (so a queued decision waits about this long for a round trip, never a
// whole one it is not on).
const spawnAfter = 200 * time.Microsecond

// hardWait is the longest a decision waits to be sent, and then for its
// reply while Redis answers others (see the coalescer): a process so
// starved of CPU that its decisions cannot leave, or be read, in a
// second fails them to its fail mode rather than pile up requests.
func hardWait(timeout time.Duration) time.Duration { return max(time.Second, 20*timeout) }

// eval runs cmd, an EVALSHA of the script src, as one atomic unit, and
// falls back to EVAL of src when Redis has lost the script (NOSCRIPT).
// The reply is cmd's; the error is cmd.Err(), or ctx's. The decision's
// timeout runs from its send (the coalescer), or from now without one.
func (c *Client) eval(ctx context.Context, cmd *goredis.Cmd, src string) error {
	if c.co != nil {
		return c.co.eval(ctx, cmd, src)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return processScript(ctx, c.send, cmd, src)
}

// Post sends cmd, a command (not a script), without waiting for it:
// with the next batch of decisions, or on a goroutine of its own without
// a coalescer. then is told its error; it must be cheap. It reports
// false, and sends nothing, when the coalescer's queue is full.
func (c *Client) Post(cmd *goredis.Cmd, then func(err error)) bool {
	if c.co != nil {
		return c.co.post(cmd, then)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), hardWait(c.timeout))
		defer cancel()
		then(c.eval(ctx, cmd, ""))
	}()
	return true
}

// Redis returns the go-redis client c owns, for what is not a script
// run: pub/sub, a DEL, a ZREM.
func (c *Client) Redis() goredis.UniversalClient { return c.rdb }

// Timeout returns the deadline of one decision's store work
// ([Options.Timeout]; 0: none beyond the caller's context).
func (c *Client) Timeout() time.Duration { return c.timeout }

// TLSUnverified reports whether c speaks TLS to Redis without verifying
// its certificate: skip_verify=true in a rediss:// URL, which go-redis
// honours without a word.
func (c *Client) TLSUnverified() bool {
	var cfg *tls.Config
	switch rdb := c.rdb.(type) {
	case *goredis.Client:
		cfg = rdb.Options().TLSConfig
	case *goredis.ClusterClient:
		cfg = rdb.Options().TLSConfig
	}
	return cfg != nil && cfg.InsecureSkipVerify
}

// Close stops the coalescer and closes the pool. A second Close returns
// go-redis's "client is closed".
func (c *Client) Close() error {
	if c.co != nil {
		c.co.close()
	}
	return c.rdb.Close()
}
