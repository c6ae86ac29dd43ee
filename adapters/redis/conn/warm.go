package conn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

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

// loadScripts caches every script on the server behind cn (SCRIPT LOAD),
// so that decisions run as EVALSHA from the first one.
func loadScripts(ctx context.Context, cn *goredis.Conn) error {
	for _, s := range scripts() {
		if err := cn.ScriptLoad(ctx, s.src).Err(); err != nil {
			return fmt.Errorf("script load %s: %w", s.name, err)
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

// Ping implements [ports.Pinger]: the /readyz check. A client that is
// not warm yet warms first (see [Client.Warm]). On a cluster every
// master must answer and report cluster_state:ok.
func (c *Client) Ping(ctx context.Context) error {
	if !c.warm.Load() {
		if err := c.Warm(ctx); err != nil {
			return err
		}
	}
	err := c.live.quietly(func() error {
		if cc, ok := c.rdb.(*goredis.ClusterClient); ok {
			return pingCluster(ctx, cc)
		}
		start := time.Now()
		err := c.rdb.Ping(ctx).Err()
		if err == nil && c.co != nil {
			c.co.observeRTT(time.Since(start)) // a light round trip: the coalescer's floor
		}
		return err
	})
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
