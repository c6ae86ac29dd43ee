package rls

import (
	"context"
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
	if ready := h.s.opts.Ready; ready != nil {
		ctx, cancel := context.WithTimeout(ctx, h.s.opts.ReadyTimeout)
		defer cancel()
		if ready.Ping(ctx) != nil {
			return healthpb.HealthCheckResponse_NOT_SERVING, true
		}
	}
	return healthpb.HealthCheckResponse_SERVING, true
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
// change, checked every second, until the caller goes away or the server
// drains ([Server.Drain]: NOT_SERVING, then the stream ends).
func (h *health) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_ServingStatus(-1)
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		if st, _ := h.status(ctx, req.GetService()); st != last {
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
