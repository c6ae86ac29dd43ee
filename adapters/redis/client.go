package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClientOptions configure [Open]. The zero value is usable: no
// per-decision timeout beyond the caller's context.
type ClientOptions struct {
	// Timeout is the deadline for the store work of one decision
	// (TOLLGATE_REDIS_TIMEOUT). It also bounds each read and write on a
	// connection, so a call without a deadline cannot hang on a stalled
	// Redis.
	Timeout time.Duration
	// Cluster makes the URL a seed list of a Redis Cluster
	// (TOLLGATE_REDIS_MODE=cluster; see [ValidateClusterURL]): the client
	// discovers the masters, sends each decision to the master of its
	// tenant's slot, follows MOVED and ASK, and reloads the slot map when
	// a master fails.
	Cluster bool
}

// Client is a connection pool to one Redis (or a proxy), or to every
// node of a Redis Cluster, tuned for a gateway: it is what every store of
// this package runs on. It owns the
// go-redis client; Close closes it.
//
// Client is safe for concurrent use by multiple goroutines.
type Client struct {
	rdb goredis.UniversalClient
}

// durationParams are the URL query parameters go-redis reads as
// durations. A negative one would mean "no timeout" to go-redis, which a
// gateway must not run with: ValidateURL rejects it.
var durationParams = []string{"dial_timeout", "read_timeout", "write_timeout", "pool_timeout", "conn_max_idle_time", "conn_max_lifetime"}

// ValidateURL reports whether s is a URL [Open] accepts: redis://,
// rediss:// or unix://, a host and a port in range, only options go-redis
// knows, and no negative timeout. The error never holds the URL, which
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

// Open returns a Client for rawURL (see [ValidateURL]; credentials in the
// URL), tuned for a gateway. A setting given in the URL's query
// (pool_size=…, max_retries=…) wins over these defaults:
//
//   - ContextTimeoutEnabled: without it go-redis ignores context
//     deadlines, and the per-decision timeout would not bound a decision.
//   - Read/WriteTimeout = opts.Timeout, so even a call without a deadline
//     cannot hang on a stalled Redis.
//   - MaxRetries: none. A retried INCR whose first attempt reached Redis
//     (reply lost to a timeout) counts the request twice, and within a
//     50 ms budget a retry rarely has time anyway; a failed attempt goes to
//     the fail mode instead.
//   - DialerRetries: one attempt, so a refused connection fails at once
//     instead of retrying with back-off for the whole deadline.
//   - PoolSize: 16 connections per core, at least 64: each in-flight
//     decision holds one for a round trip; MinIdleConns keeps a few warm.
//
// It does no I/O. go-redis's own logger is silenced (once per process):
// it prints a line per failed dial, which during an outage would flood
// the log the gateway limits to one store-error line per second.
//
// With opts.Cluster, rawURL is a seed list and the same defaults apply
// per node, but for Read/WriteTimeout, at least 1 s so that background
// reloads of the slot map succeed on a loaded machine (decisions stay
// bounded by their context; see openCluster).
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
	if !queryHas(rawURL, "max_retries") {
		opt.MaxRetries = -1
	}
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	quietLogs.Do(func() { goredis.SetLogger(discardLogger{}) })
	return &Client{rdb: goredis.NewClient(opt)}, nil
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
	procs := runtime.GOMAXPROCS(0)
	set("pool_size", func() { *t.poolSize = max(64, 16*procs) })
	set("min_idle_conns", func() { *t.minIdleConns = 2 * procs })
	if opts.Timeout > 0 {
		set("read_timeout", func() { *t.readTimeout = opts.Timeout })
		set("write_timeout", func() { *t.writeTimeout = opts.Timeout })
		set("dial_timeout", func() { *t.dialTimeout = max(2*opts.Timeout, time.Second) })
	}
}

// queryHas reports whether rawURL, a URL that parses, sets option name.
func queryHas(rawURL, name string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Query().Has(name)
}

// NewClient returns a Client over rdb, a go-redis client the caller
// configured (tests, benchmarks). Close closes rdb.
func NewClient(rdb goredis.UniversalClient) *Client { return &Client{rdb: rdb} }

// quietLogs silences go-redis's logger once per process.
var quietLogs sync.Once

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// Ping implements [ports.Pinger]: the /readyz check. On a cluster every
// master must answer and report cluster_state:ok.
func (c *Client) Ping(ctx context.Context) error {
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

// Close closes the pool. It is idempotent in effect: a second Close
// returns go-redis's "client is closed".
func (c *Client) Close() error { return c.rdb.Close() }

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
