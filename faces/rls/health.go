package rls

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// ServiceName is the RateLimitService's full name, one of the services
// grpc.health.v1.Health knows (with "", the server's overall health).
const ServiceName = "envoy.service.ratelimit.v3.RateLimitService"

// watchInterval is how often a Watch checks readiness again.
const watchInterval = time.Second

// watchFresh is how long one readiness check answers every Watch: the
// watches share it ([watchProbe]), so a change reaches each within
// watchInterval and watchFresh.
const watchFresh = watchInterval / 2

// watchProbe is the readiness every Watch reads: one check of the store
// at a time, its answer shared for watchFresh, so that the store is
// asked at most twice a second however many watches are open: a check
// per watch would let a client multiply the store's pings by the streams
// it opens. It also counts the watches open, which Options.MaxWatches
// bounds.
type watchProbe struct {
	open    atomic.Int64 // watches open, at most Options.MaxWatches
	mu      sync.Mutex
	at      time.Time // when the last check ended; zero before any
	st      healthpb.HealthCheckResponse_ServingStatus
	running chan struct{} // closed when the check under way ends; nil if none
}

// health is grpc.health.v1.Health on the store's readiness: SERVING
// exactly when /readyz would answer 200.
type health struct {
	healthpb.UnimplementedHealthServer
	s *Server
}

// status returns the serving status of service, or ok=false for a
// service the server does not know.
func (h *health) status(ctx context.Context, service string) (st healthpb.HealthCheckResponse_ServingStatus, ok bool) {
	if service != "" && service != ServiceName {
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, false
	}
	return h.check(ctx), true
}

// check asks the store whether it is ready.
func (h *health) check(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	if ready := h.s.opts.Ready; ready != nil {
		ctx, cancel := context.WithTimeout(ctx, h.s.opts.ReadyTimeout)
		defer cancel()
		if ready.Ping(ctx) != nil {
			return healthpb.HealthCheckResponse_NOT_SERVING
		}
	}
	return healthpb.HealthCheckResponse_SERVING
}

// watched returns the serving status of service for a Watch: the shared
// check's ([watchProbe]), made now when it is older than watchFresh and
// none is under way, or ok=false for a service the server does not know.
// The check is the server's, not the caller's: it runs on to its end
// when the watch that started it goes away, as the others wait for it.
func (h *health) watched(ctx context.Context, service string) (st healthpb.HealthCheckResponse_ServingStatus, ok bool) {
	if service != "" && service != ServiceName {
		return healthpb.HealthCheckResponse_SERVICE_UNKNOWN, false
	}
	p := &h.s.watch
	p.mu.Lock()
	for p.running != nil || (!p.at.IsZero() && time.Since(p.at) < watchFresh) {
		if p.running == nil {
			st := p.st
			p.mu.Unlock()
			return st, true
		}
		running := p.running
		p.mu.Unlock()
		select {
		case <-running:
		case <-ctx.Done():
			return healthpb.HealthCheckResponse_NOT_SERVING, true
		}
		p.mu.Lock()
	}
	running := make(chan struct{})
	p.running = running
	p.mu.Unlock()
	st = h.check(context.WithoutCancel(ctx))
	p.mu.Lock()
	p.st, p.at, p.running = st, time.Now(), nil
	p.mu.Unlock()
	close(running)
	return st, true
}

// Check implements healthpb.HealthServer: NOT_FOUND for an unknown
// service, else SERVING when the store answers its readiness check.
func (h *health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	st, ok := h.status(ctx, req.GetService())
	if !ok {
		return nil, status.Errorf(codes.NotFound, "unknown service %q", req.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: st}, nil
}

// List implements healthpb.HealthServer: the overall health and the
// RateLimitService's.
func (h *health) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st, _ := h.status(ctx, "")
	return &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{
		"": {Status: st}, ServiceName: {Status: st},
	}}, nil
}

// Watch implements healthpb.HealthServer: the status now, then every
// change, checked every second (one check shared by every watch:
// [watchProbe]), until the caller goes away or the server
// drains ([Server.Drain]: NOT_SERVING, then the stream ends). Past
// Options.MaxWatches watches open, it answers RESOURCE_EXHAUSTED.
func (h *health) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	open := &h.s.watch.open
	if n := open.Add(1); n > int64(h.s.opts.MaxWatches) {
		open.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "more than %d health watches open; use Check", h.s.opts.MaxWatches)
	}
	defer open.Add(-1)
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		if st, _ := h.watched(ctx, req.GetService()); st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-h.s.draining:
			if last == healthpb.HealthCheckResponse_SERVING {
				if err := stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}); err != nil {
					return err
				}
			}
			return nil
		case <-tick.C:
		}
	}
}
