package conn

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// liveness is when a client last heard from Redis: a byte read on any of
// its connections, or a round trip back with replies. A decision in
// flight fails only when Redis has been silent for the timeout (see the
// coalescer).
type liveness struct {
	origin time.Time
	last   atomic.Int64 // nanos since origin
	quiet  atomic.Int32 // pings in flight: reads meanwhile are not counted
}

func newLiveness() *liveness {
	l := &liveness{origin: time.Now()}
	return l
}

func (l *liveness) nanos() int64 { return int64(time.Since(l.origin)) }

// heard records that Redis was heard from now.
func (l *liveness) heard() { l.last.Store(l.nanos()) }

// quietly runs f, a ping, with the connections' reads meanwhile not
// counted as Redis heard from: a PONG says Redis answers pings, not that
// it runs the decisions' scripts (CLIENT PAUSE WRITE, as a FAILOVER
// does, answers the one and holds the other), and /readyz probes every
// few hundred milliseconds would keep stalled decisions waiting for
// their hard bound. A decision's reply still counts when its round trip
// ends (the coalescer's noteAnswer).
func (l *liveness) quietly(f func() error) error {
	l.quiet.Add(1)
	defer l.quiet.Add(-1)
	return f()
}

// dialer returns base with every connection's reads recorded as Redis
// being heard from.
func (l *liveness) dialer(base func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if sc, ok := c.(syscall.Conn); ok {
			return &liveRawConn{liveConn{Conn: c, l: l}, sc}, nil
		}
		return &liveConn{Conn: c, l: l}, nil // TLS: go-redis checks no idle TLS connection either
	}
}

// liveConn is a connection to Redis whose reads tell its liveness.
type liveConn struct {
	net.Conn
	l *liveness
}

func (c *liveConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.l.quiet.Load() == 0 {
		c.l.heard()
	}
	return n, err
}

// liveRawConn is a liveConn over a connection with a raw one (TCP, Unix):
// it keeps syscall.Conn, so that go-redis's pool can still check an idle
// connection for a close by Redis (CLIENT KILL, a restart) before it
// hands it out. Without it a dead idle connection failed the next round
// trip on it (TestKilledConnections).
type liveRawConn struct {
	liveConn
	raw syscall.Conn
}

// SyscallConn returns the raw connection.
func (c *liveRawConn) SyscallConn() (syscall.RawConn, error) { return c.raw.SyscallConn() }
