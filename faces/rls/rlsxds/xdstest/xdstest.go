// Package xdstest runs an xDS server for tests, as Envoy Gateway's
// controller runs one for its rate limit service: go-control-plane's
// snapshot cache and SotW server, registered as ADS, with every
// discovery request recorded.
package xdstest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
)

// Server is an xDS server for one node's rate limit configuration. It is
// safe for concurrent use by multiple goroutines.
type Server struct {
	node  string
	cache cache.SnapshotCache
	addr  string
	opts  []grpc.ServerOption

	mu       sync.Mutex // guards requests, grpc
	requests []*discovery.DiscoveryRequest
	grpc     *grpc.Server
	changed  chan struct{} // closed and replaced on every request
}

// New returns a server for node, with opts for its gRPC server (such as
// grpc.Creds); it serves from Start.
func New(node string, opts ...grpc.ServerOption) *Server {
	return &Server{node: node, cache: cache.NewSnapshotCache(false, cache.IDHash{}, nil), opts: opts, changed: make(chan struct{})}
}

// Start serves on addr ("" or host:0: any free loopback port) until the
// test ends or Stop, and returns the address.
func (s *Server) Start(t testing.TB, addr string) string {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(context.Background(), s.cache, server.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			s.mu.Lock()
			s.requests = append(s.requests, r)
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
			return nil
		},
	})
	g := grpc.NewServer(s.opts...)
	discovery.RegisterAggregatedDiscoveryServiceServer(g, srv)
	s.mu.Lock()
	s.grpc, s.addr = g, ln.Addr().String()
	s.mu.Unlock()
	go g.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// Stop stops serving, cutting every stream.
func (s *Server) Stop() {
	s.mu.Lock()
	g := s.grpc
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// Set makes cfgs the node's snapshot at version.
func (s *Server) Set(t testing.TB, version string, cfgs ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	rs := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		rs[i] = c
	}
	snap, err := cache.NewSnapshot(version, map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cache.SetSnapshot(context.Background(), s.node, snap); err != nil {
		t.Fatal(err)
	}
}

// Requests returns the discovery requests received so far, in order.
func (s *Server) Requests() []*discovery.DiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// WaitRequest waits until a request received satisfies ok, and returns
// it; it fails t after timeout (generous: the wait ends as soon as the
// request arrives).
func (s *Server) WaitRequest(t testing.TB, timeout time.Duration, what string, ok func(*discovery.DiscoveryRequest) bool) *discovery.DiscoveryRequest {
	t.Helper()
	deadline := time.After(timeout)
	seen := 0
	for {
		s.mu.Lock()
		reqs, changed := s.requests[seen:], s.changed
		seen = len(s.requests)
		s.mu.Unlock()
		for _, r := range reqs {
			if ok(r) {
				return r
			}
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s after %s; requests: %v", what, timeout, s.Requests())
			return nil
		}
	}
}

// IsACK reports whether r acknowledges version.
func IsACK(version string) func(*discovery.DiscoveryRequest) bool {
	return func(r *discovery.DiscoveryRequest) bool {
		return r.GetVersionInfo() == version && r.GetErrorDetail() == nil && r.GetResponseNonce() != ""
	}
}

// IsNACK reports whether r refuses a response while keeping kept.
func IsNACK(kept string) func(*discovery.DiscoveryRequest) bool {
	return func(r *discovery.DiscoveryRequest) bool {
		return r.GetVersionInfo() == kept && r.GetErrorDetail() != nil
	}
}
