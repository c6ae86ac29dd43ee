// Package rlsxds subscribes to the rate limit service's configuration
// over xDS, as envoyproxy/ratelimit does with CONFIG_TYPE=GRPC_XDS_SOTW
// (and so as Envoy Gateway and Envoy AI Gateway configure it): state of
// the world over the aggregated stream (ADS), resources of type
// ratelimit.config.ratelimit.v3.RateLimitConfig, one per domain.
//
// Every response is a whole configuration. One that loads is applied
// and acknowledged (ACK: its version and nonce); one that does not is
// refused (NACK: the version last applied, the response's nonce and the
// reason), and the configuration in use stays. A lost or refused
// connection is retried with exponential backoff and jitter, keeping
// the last configuration; decisions never wait for the xDS server.
package rlsxds

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	statuspb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// TypeURL is the type of the resources subscribed to.
const TypeURL = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"

// Defaults of [Options].
const (
	DefaultMinBackoff = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
	// DefaultNackPace is how long a NACK of the response refused last
	// time waits: the SotW server answers a NACK with the snapshot it
	// refuses again at once, and without a pause the two would loop as
	// fast as the network allows until the snapshot changes.
	DefaultNackPace = 500 * time.Millisecond
)

// Options configure [Run].
type Options struct {
	// Addr is the xDS server's host:port. Required.
	Addr string
	// NodeID is the node the subscription presents, the one the server
	// keeps a snapshot for. Required.
	NodeID string
	// Creds secure the connection; nil: none (plain HTTP/2).
	Creds credentials.TransportCredentials
	// Apply is called with every configuration received that loads,
	// before it is acknowledged. Required.
	Apply func(*rlsconf.Config)
	// Reject is called with the reason of every configuration refused,
	// once per refused version and reason. Required.
	Reject func(error)
	// Log gets a line per connection lost and retried. Nil: none.
	Log *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before a new connection
	// attempt: it doubles from MinBackoff after every attempt that
	// received nothing, up to MaxBackoff, each wait jittered down by up
	// to half. Zero: the defaults.
	MinBackoff, MaxBackoff time.Duration
	// NackPace is [DefaultNackPace] when zero.
	NackPace time.Duration
}

// Run subscribes until ctx ends, calling Apply and Reject as
// configurations arrive, and returns nil then. It returns an error at
// once only when Addr is not a target gRPC can dial.
func Run(ctx context.Context, o Options) error {
	if o.Creds == nil {
		o.Creds = insecure.NewCredentials()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(DefaultMaxBackoff, o.MinBackoff)
	}
	if o.NackPace <= 0 {
		o.NackPace = DefaultNackPace
	}
	// A ping every 5 minutes finds a server gone without a word (a
	// half-open connection would hold the stream, and the configuration,
	// forever), and is as often as a gRPC server allows by default.
	conn, err := grpc.NewClient(o.Addr, grpc.WithTransportCredentials(o.Creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 5 * time.Minute, Timeout: 20 * time.Second}))
	if err != nil {
		return fmt.Errorf("rlsxds: %s: %w", o.Addr, err)
	}
	defer conn.Close()
	s := &subscription{o: o, ads: discovery.NewAggregatedDiscoveryServiceClient(conn),
		node: &corev3.Node{Id: o.NodeID, UserAgentName: "tollgate"}}
	backoff := o.MinBackoff
	for {
		received, err := s.stream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if received {
			backoff = o.MinBackoff
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		o.Log.Warn("rate limit service: xDS stream ended; retrying", "xds", o.Addr, "err", err, "retry_in", wait.String(), "version", s.version)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		backoff = min(2*backoff, o.MaxBackoff)
	}
}

// subscription is the state one Run keeps across its streams.
type subscription struct {
	o    Options
	ads  discovery.AggregatedDiscoveryServiceClient
	node *corev3.Node
	// version is the last version applied, sent on every request so
	// that a new stream gets a snapshot only when it differs.
	version string
	// refused and reason are the version and reason of the last NACK
	// ("": the last response was applied).
	refused, reason string
}

// stream runs one ADS stream until it fails or ctx ends; received says
// whether any response came on it.
func (s *subscription) stream(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := s.ads.StreamAggregatedResources(ctx)
	if err != nil {
		return false, err
	}
	if err := st.Send(&discovery.DiscoveryRequest{Node: s.node, TypeUrl: TypeURL, VersionInfo: s.version}); err != nil {
		return false, err
	}
	for {
		resp, err := st.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if resp.GetTypeUrl() != TypeURL {
			continue // another type on a shared stream: not subscribed to
		}
		req := &discovery.DiscoveryRequest{Node: s.node, TypeUrl: TypeURL, ResponseNonce: resp.GetNonce()}
		c, err := Decode(resp.GetResources())
		if err == nil {
			s.o.Apply(c)
			s.version, s.refused, s.reason = resp.GetVersionInfo(), "", ""
			req.VersionInfo = s.version
		} else {
			again := resp.GetVersionInfo() == s.refused && err.Error() == s.reason
			s.refused, s.reason = resp.GetVersionInfo(), err.Error()
			req.VersionInfo = s.version
			req.ErrorDetail = &statuspb.Status{Code: int32(codes.InvalidArgument), Message: err.Error()}
			if again {
				select {
				case <-ctx.Done():
					return received, ctx.Err()
				case <-time.After(s.o.NackPace):
				}
			} else {
				s.o.Reject(fmt.Errorf("xDS version %q: %w", resp.GetVersionInfo(), err))
			}
		}
		if err := st.Send(req); err != nil {
			return received, err
		}
	}
}

// Decode loads a response's resources, each a RateLimitConfig, as
// [rlsconf.FromResources] does.
func Decode(resources []*anypb.Any) (*rlsconf.Config, error) {
	rs := make([]*rlsconfv3.RateLimitConfig, len(resources))
	for i, a := range resources {
		if a.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("resource %d is a %s, not a %s", i, a.GetTypeUrl(), TypeURL)
		}
		rs[i] = new(rlsconfv3.RateLimitConfig)
		if err := a.UnmarshalTo(rs[i]); err != nil {
			return nil, fmt.Errorf("resource %d: %w", i, err)
		}
	}
	return rlsconf.FromResources(rs)
}
