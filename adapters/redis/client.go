package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// ClientOptions configure [Open] and [NewClientWith]. The zero value is
// usable: no per-decision timeout beyond the caller's context, the
// default lanes, coalescing on.
type ClientOptions struct {
	// Timeout is the deadline for the store work of one decision
	// (TOLLGATE_REDIS_TIMEOUT). It also bounds each read and write on a
	// connection, so a call without a deadline cannot hang on a stalled
	// Redis.
	Timeout time.Duration
	// Lanes is how many round trips of decisions may be in flight at
	// once, each on its own connection; concurrent decisions beyond that
	// queue and share the next round trip (see [Client]). 0 means
	// [DefaultLanes].
	Lanes int
	// Batching picks how concurrent decisions reach Redis. The zero
	// value, [BatchCoalesce], is what the gateway runs; the others exist
	// so that the benchmarks can compare.
	Batching Batching
	// Cluster makes the URL a seed list of a Redis Cluster
	// (TOLLGATE_REDIS_MODE=cluster; see [ValidateClusterURL]): the client
	// discovers the masters, sends each decision to the master of its
	// tenant's slot, follows MOVED and ASK, and reloads the slot map when
	// a master fails.
	Cluster bool
}

// Batching is how concurrent decisions reach Redis.
type Batching int

const (
	// BatchCoalesce shares round trips through tollgate's coalescer
	// (the default): a lone decision goes straight out on a free lane,
	// concurrent ones queue and leave together in one pipeline.
	BatchCoalesce Batching = iota
	// BatchAutoPipeline hands every decision to go-redis's experimental
	// blocking AutoPipeline. For comparison only: it does not honour a
	// caller's deadline once a command is queued.
	BatchAutoPipeline
	// BatchNone sends every decision on its own round trip, holding a
	// pooled connection for it: what tollgate did before coalescing.
	BatchNone
)

// DefaultLanes is the default [ClientOptions.Lanes]: two round trips of
// decisions in flight, each on its own connection; whoever arrives
// meanwhile leaves with the next. Measured on 2 cores against a local
// redis-server (BenchmarkRedis, fixed window, interleaved rounds, three
// runs): on a quiet machine (medians of 5) two lanes were ahead of one
// at 64 goroutines (104 k against 88 k decisions/s) and at 512 (146 k
// against 121 k); at load average 4-6 level at 64 and ahead at 512 (96 k
// against 82 k); only at load 12-15, other processes taking the cores
// Redis needed, was one lane ahead at 512 (57 k against 28 k). Four lanes
// were behind everywhere: more lanes split the same callers into
// shallower batches. Across a network, where a round trip is longer than
// Redis's work on a batch, the second lane overlaps two round trips.
const DefaultLanes = 2

// maxBatch bounds the commands of one pipeline (a soft bound on the
// bytes one write carries: a decision's EVALSHA is about 100 bytes).
const maxBatch = 512

// Client is a connection to one Redis (or a proxy), or to every node of
// a Redis Cluster, tuned for a gateway: it is what every store of this
// package runs on. Concurrent
// decisions share round trips: at most [ClientOptions.Lanes] of them are
// in flight at once, each on a pooled connection; a decision that finds
// every lane busy queues and leaves with the next batch, one pipeline of
// whole scripts. A lone decision goes out at once on its own context.
// It owns the go-redis client; Close closes it.
//
// Client is safe for concurrent use by multiple goroutines.
type Client struct {
	rdb      goredis.UniversalClient
	lanes    int
	batching Batching
	co       *coalescer             // BatchCoalesce
	ap       *goredis.AutoPipeliner // BatchAutoPipeline
	warm     atomic.Bool            // Warm succeeded once
}

// durationParams are the URL query parameters go-redis reads as
// durations. A negative one would mean "no timeout" to go-redis, which a
// gateway must not run with: ValidateURL rejects it.
var durationParams = []string{"dial_timeout", "read_timeout", "write_timeout", "pool_timeout", "conn_max_idle_time", "conn_max_lifetime"}

// ValidateURL reports whether s is a URL [Open] accepts: redis://,
// rediss:// or unix://, a host and a port in range, only options go-redis
// knows, no negative timeout, and no max_retries but -1 (none). The error never holds the URL, which
// may carry a password.
func ValidateURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("redis: the URL does not parse")
	}
	switch u.Scheme {
	case "redis", "rediss":
		if err := validatePort(u.Port()); err != nil {
			return err
		}
		if u.Hostname() == "" {
			return errors.New("redis: no host")
		}
	case "unix":
		if u.Path == "" {
			return errors.New("redis: no socket path")
		}
	default:
		return fmt.Errorf("redis: scheme %q, want redis, rediss or unix", u.Scheme)
	}
	if err := validateDurations(u.Query()); err != nil {
		return err
	}
	if err := validateRetries(u.Query()); err != nil {
		return err
	}
	if _, err := goredis.ParseURL(s); err != nil {
		// go-redis's errors name the option, never the password.
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// validatePort reports whether p, a URL's port, is empty (the default)
// or in 1..65535.
func validatePort(p string) error {
	if p == "" {
		return nil
	}
	if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("redis: port %q out of range", p)
	}
	return nil
}

// validateDurations reports whether every duration option in q parses
// and is at least 0.
func validateDurations(q url.Values) error {
	for _, name := range durationParams {
		if !q.Has(name) {
			continue
		}
		v := q.Get(name)
		d, err := time.ParseDuration(v)
		if err != nil {
			// go-redis also takes whole seconds.
			var n int64
			if n, err = strconv.ParseInt(v, 10, 64); err == nil {
				d = time.Duration(n) * time.Second
			}
		}
		if err != nil || d < 0 {
			return fmt.Errorf("redis: %s=%q, want a duration of at least 0", name, v)
		}
	}
	return nil
}

// validateRetries refuses a max_retries in q that would retry: a retried
// script that had run counts a request twice, a retried batch a whole
// batch twice.
func validateRetries(q url.Values) error {
	if q.Has("max_retries") && q.Get("max_retries") != "-1" {
		return fmt.Errorf("redis: max_retries=%q: tollgate never retries a decision (a retried script that ran counts twice); leave it out", q.Get("max_retries"))
	}
	return nil
}

// Open returns a Client for rawURL (see [ValidateURL]; credentials in the
// URL), tuned for a gateway. A setting given in the URL's query
// (pool_size=…, read_timeout=…) wins over these defaults:
//
//   - ContextTimeoutEnabled: without it go-redis ignores context
//     deadlines, and the per-decision timeout would not bound a decision.
//   - Read/WriteTimeout = 2 × opts.Timeout, so even a call without a
//     deadline cannot hang on a stalled Redis. Every decision has its
//     own deadline (opts.Timeout); a shared pipeline may run up to one
//     timeout past its latest caller's (see the coalescer), so that a
//     reply already on the wire is not lost to a flusher scheduled late.
//   - MaxRetries: none, whatever the URL says (ValidateURL refuses a
//     max_retries that would retry). A retried script whose first attempt
//     ran (reply lost to a timeout) counts the request twice, and a
//     retried batch would count a whole batch twice; a failed attempt
//     goes to the fail mode instead.
//   - DialerRetries: one attempt, so a refused connection fails at once
//     instead of retrying with back-off for the whole deadline.
//   - DialTimeout = 2 × opts.Timeout, at least 100 ms. A dial outside a
//     decision (go-redis's dial probe) has no decision's deadline, and
//     with 1 s a dial started during a stall kept decisions failing for
//     about a second after Redis answered again (TestStallEnds).
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
//     dial during the stall too, and left decisions failing for about a
//     second after Redis came back (measured: TestStallEnds failed 1 run
//     in 2 with MinIdleConns 2, passed 5 of 5 without).
//
// It does no I/O: [Client.Warm] dials. go-redis's own logger is silenced
// (once per process): it prints a line per failed dial, which during an
// outage would flood the log the gateway limits to one store-error line
// per second.
//
// With opts.Cluster, rawURL is a seed list and the same defaults apply
// per node, but for Read/WriteTimeout, at least 1 s so that background
// reloads of the slot map succeed on a loaded machine (decisions stay
// bounded by their context; see openCluster). Decisions share round
// trips there too: a batch's pipeline splits by node.
func Open(rawURL string, opts ClientOptions) (*Client, error) {
	if opts.Cluster {
		return openCluster(rawURL, opts)
	}
	if err := ValidateURL(rawURL); err != nil {
		return nil, err
	}
	opt, err := goredis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	tune(rawURL, opts, tuning{&opt.PoolSize, &opt.MinIdleConns, &opt.ReadTimeout, &opt.WriteTimeout, &opt.DialTimeout})
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	// A new connection says HELLO and nothing more: no CLIENT SETINFO,
	// no maintenance-notification handshake (Redis Enterprise's, which
	// other servers refuse: a wasted round trip per dial, and in go-redis
	// v9.23 a data race between connections that fail it at once).
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietLogs.Do(func() { goredis.SetLogger(discardLogger{}) })
	return NewClientWith(goredis.NewClient(opt), opts)
}

// tuning points at the go-redis options [Open] sets for a gateway, in a
// single node's options or a cluster's (per node).
type tuning struct {
	poolSize, minIdleConns    *int
	readTimeout, writeTimeout *time.Duration
	dialTimeout               *time.Duration
}

// tune applies Open's defaults to t, but for those rawURL's query sets:
// a setting in the URL wins.
func tune(rawURL string, opts ClientOptions, t tuning) {
	set := func(name string, apply func()) {
		if !queryHas(rawURL, name) {
			apply()
		}
	}
	lanes := opts.lanes()
	set("pool_size", func() { *t.poolSize = max(64, 16*lanes) })
	set("min_idle_conns", func() { *t.minIdleConns = 0 })
	if opts.Timeout > 0 {
		set("read_timeout", func() { *t.readTimeout = 2 * opts.Timeout })
		set("write_timeout", func() { *t.writeTimeout = 2 * opts.Timeout })
		set("dial_timeout", func() { *t.dialTimeout = max(2*opts.Timeout, 100*time.Millisecond) })
	}
}

// queryHas reports whether rawURL, a URL that parses, sets option name.
func queryHas(rawURL, name string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has(name)
}

// NewClient returns a Client over rdb, a go-redis client the caller
// configured (tests), with the default [ClientOptions]. Close closes rdb.
// rdb's own retries apply: configure it with MaxRetries -1, as [Open]
// does.
func NewClient(rdb goredis.UniversalClient) *Client {
	c, err := NewClientWith(rdb, ClientOptions{})
	if err != nil {
		panic("redis: NewClient: " + err.Error()) // the default batching cannot fail
	}
	return c
}

// NewClientWith returns a Client over rdb with opts (opts.Timeout is not
// applied to rdb: that is the caller's configuration). Close closes rdb.
// The error is go-redis's when opts asks for its AutoPipeline and rdb
// cannot make one.
func NewClientWith(rdb goredis.UniversalClient, opts ClientOptions) (*Client, error) {
	c := &Client{rdb: rdb, lanes: opts.lanes(), batching: opts.Batching}
	switch opts.Batching {
	case BatchCoalesce:
		c.co = newCoalescer(rdb, c.lanes, maxBatch, opts.Timeout)
	case BatchAutoPipeline:
		p, ok := rdb.(interface {
			AutoPipeline() (*goredis.AutoPipeliner, error)
		})
		if !ok {
			return nil, fmt.Errorf("redis: %T has no AutoPipeline", rdb)
		}
		ap, err := p.AutoPipeline()
		if err != nil {
			return nil, fmt.Errorf("redis: autopipeline: %w", err)
		}
		c.ap = ap
	case BatchNone:
	default:
		return nil, fmt.Errorf("redis: batching %d unknown", opts.Batching)
	}
	return c, nil
}

func (o ClientOptions) lanes() int {
	if o.Lanes > 0 {
		return o.Lanes
	}
	return DefaultLanes
}

// eval runs cmd, an EVALSHA of the script src, as one atomic unit, and
// falls back to EVAL of src when Redis has lost the script (NOSCRIPT).
// The reply is cmd's; the error is cmd.Err(), or ctx's.
func (c *Client) eval(ctx context.Context, cmd *goredis.Cmd, src string) error {
	switch {
	case c.co != nil:
		return c.co.eval(ctx, cmd, src)
	case c.ap != nil:
		return processScript(ctx, c.ap, cmd, src)
	default:
		return processScript(ctx, c.rdb, cmd, src)
	}
}

// Warm dials and verifies the connections the lanes will use (one PING
// on each, at once), and loads every algorithm's script, so that the
// first burst of decisions finds connections open and scripts cached
// instead of dialling and re-sending a script under its deadline. On a
// cluster it does so on every master: a decision goes to its tenant's
// master, and a master left cold would pay the dial on its first
// tenants' decisions. [Client.Ping] warms a client that is not warm yet:
// /readyz says 200 only once the lanes' connections are up.
func (c *Client) Warm(ctx context.Context) error {
	var err error
	if cc, ok := c.rdb.(*goredis.ClusterClient); ok {
		// The cluster client's first command fetches COMMAND (the
		// servers' command table, a large reply) for its routing, on
		// its own 5 s deadline while the caller waits: let a PING pay
		// it, not the first decision.
		if err := cc.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis: warm: %w", err)
		}
		err = forEachMaster(ctx, cc, func(ctx context.Context, node *goredis.Client) error {
			if err := warmNode(ctx, node, c.lanes+1); err != nil {
				return fmt.Errorf("%s: %w", node.Options().Addr, err)
			}
			return nil
		})
	} else {
		err = warmNode(ctx, c.rdb, c.lanes+1)
	}
	if err != nil {
		return fmt.Errorf("redis: warm: %w", err)
	}
	c.warm.Store(true)
	return nil
}

// warmNode holds n connections of one server's pool at once, so that n
// distinct ones are dialled, pings each, loads the scripts on one, and
// gives them back. A client without a Conn method (a ring, a failover
// client) gets n concurrent PINGs instead.
func warmNode(ctx context.Context, rdb goredis.UniversalClient, n int) error {
	p, ok := rdb.(interface{ Conn() *goredis.Conn })
	if !ok {
		errs := make(chan error, n)
		for range n {
			go func() { errs <- rdb.Ping(ctx).Err() }()
		}
		return collect(errs, n)
	}
	conns := make([]*goredis.Conn, n)
	for i := range conns {
		conns[i] = p.Conn()
	}
	defer func() {
		for _, cn := range conns {
			_ = cn.Close()
		}
	}()
	errs := make(chan error, n)
	for _, cn := range conns {
		go func() { errs <- cn.Ping(ctx).Err() }()
	}
	if err := collect(errs, n); err != nil {
		return err
	}
	return loadScripts(ctx, conns[0])
}

// loadScripts caches every embedded script on the server behind cn
// (SCRIPT LOAD), so that decisions run as EVALSHA from the first one.
func loadScripts(ctx context.Context, cn *goredis.Conn) error {
	files, err := scripts.ReadDir("scripts")
	if err != nil {
		return fmt.Errorf("scripts: %w", err) // a build defect
	}
	for _, f := range files {
		src, err := scripts.ReadFile("scripts/" + f.Name())
		if err != nil {
			return fmt.Errorf("scripts: %w", err)
		}
		if err := cn.ScriptLoad(ctx, string(src)).Err(); err != nil {
			return fmt.Errorf("script load %s: %w", f.Name(), err)
		}
	}
	return nil
}

// collect returns the first non-nil of n errors from errs.
func collect(errs <-chan error, n int) error {
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// quietLogs silences go-redis's logger once per process.
var quietLogs sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// Ping implements [ports.Pinger]: the /readyz check. A client that is
// not warm yet warms first (see [Client.Warm]). On a cluster every
// master must answer and report cluster_state:ok.
func (c *Client) Ping(ctx context.Context) error {
	if !c.warm.Load() {
		if err := c.Warm(ctx); err != nil {
			return err
		}
	}
	var err error
	if cc, ok := c.rdb.(*goredis.ClusterClient); ok {
		err = pingCluster(ctx, cc)
	} else {
		err = c.rdb.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("redis: ping: %w", err)
	}
	return nil
}

// Version asks the server for its version (INFO server), such as
// "7.0.15". The gateway logs it at start-up. On a cluster it is the
// version of one master.
func (c *Client) Version(ctx context.Context) (string, error) {
	info, err := c.rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("redis: version: %w", err)
	}
	v, err := serverVersion(info)
	if err != nil {
		return "", fmt.Errorf("redis: version: %w", err)
	}
	return v, nil
}

// Close stops the coalescer and closes the pool. It is idempotent in
// effect: a second Close returns go-redis's "client is closed".
func (c *Client) Close() error {
	if c.co != nil {
		c.co.close()
	}
	if c.ap != nil {
		_ = c.ap.Close()
	}
	return c.rdb.Close()
}

// serverVersion returns redis_version from the text of INFO server.
func serverVersion(info string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no redis_version in INFO server")
}
