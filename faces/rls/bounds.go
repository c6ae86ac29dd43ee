package rls

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// DefaultMaxWatches is [Options.MaxWatches]'s default: each watch holds
// a stream, its buffers and a goroutine until its caller hangs up.
const DefaultMaxWatches = 1024

// MaxStreamsPerConn is the most streams (calls and watches) one client
// connection may have open at once, announced in HTTP/2's
// SETTINGS_MAX_CONCURRENT_STREAMS: a client past it waits for one to end
// or opens another connection, as Envoy's connection pool does.
const MaxStreamsPerConn = 1024

// Keepalive on the gRPC listener.
const (
	// keepaliveTime is how long a connection may be silent before the
	// server pings it, and keepaliveTimeout how long it then waits for
	// the answer before it closes the connection: a peer gone without a
	// word (a crashed host, a dropped NAT mapping) frees its streams
	// within their sum.
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	// keepaliveMinTime is the shortest interval at which a client may
	// ping, with or without calls open (Envoy pings idle connections when
	// its cluster sets connection_keepalive; grpc-go clients ping at most
	// every 10 s): a client that pings more often is sent away with
	// GOAWAY ENHANCE_YOUR_CALM.
	keepaliveMinTime = 10 * time.Second
)

// serverBounds returns the gRPC server options that bound what one client
// can hold: streams per connection and keepalive.
func serverBounds() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(MaxStreamsPerConn),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: true}),
	}
}
