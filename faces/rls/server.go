package rls

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/ports"
)

// Bounds of a request, past which it is answered INVALID_ARGUMENT.
const (
	// MaxDescriptors is the most descriptors one request may carry.
	MaxDescriptors = 64
	// MaxDescriptorBytes is the most bytes of keys and values one
	// descriptor may carry: its counters' keys, in Redis and in the deny
	// cache, are built from them.
	MaxDescriptorBytes = 16 << 10
	// MinDomainLen is the longest domain always accepted: a longer one
	// is refused when it is longer than every configured domain too.
	MinDomainLen = 255
)

// Metrics records the face's answers. *metrics.Metrics implements it.
type Metrics interface {
	// RLSRequest counts one answer in domain with code: OK, OVER_LIMIT or
	// a gRPC error's code (INVALID_ARGUMENT, UNAVAILABLE, ...). domain is
	// a configured domain, or [UnknownDomainLabel].
	RLSRequest(domain, code string)
	// RLSDescriptor counts one descriptor decided against a limit: rule
	// is the rule's configuration path (with values only under
	// detailed_metric or value_to_metric, and at most
	// [MaxDetailedLabels] of those), outcome ok, over_limit or
	// shadow_over_limit.
	RLSDescriptor(domain, rule, outcome string)
}

// Labels the face gives metrics for what is not configured.
const (
	// UnknownDomainLabel is the domain label of every request whose
	// domain is not configured (or is empty).
	UnknownDomainLabel = "(unknown)"
	// OverrideRuleLabel is the rule label of a descriptor's own limit
	// override: its entries are the request's, unbounded.
	OverrideRuleLabel = "(override)"
	// OtherRuleLabel stands for the detailed rule labels past
	// [MaxDetailedLabels].
	OtherRuleLabel = "(other)"
	// MaxDetailedLabels bounds the distinct rule labels that
	// detailed_metric and value_to_metric create (they hold request
	// values); past it they count under OtherRuleLabel.
	MaxDetailedLabels = 1000
)

// Options configure [New].
type Options struct {
	// Engine decides. Required.
	Engine *engine.Engine
	// Ready is the store's readiness check, the one /readyz makes:
	// grpc.health.v1.Health answers SERVING exactly when it succeeds
	// within ReadyTimeout. Nil: always SERVING.
	Ready ports.Pinger
	// ReadyTimeout bounds Ready's check. Zero means one second.
	ReadyTimeout time.Duration
	// ResponseHeaders adds RateLimit-Limit, RateLimit-Remaining and
	// RateLimit-Reset of the most constrained descriptor to every answer
	// that has one (TOLLGATE_RLS_RESPONSE_HEADERS), as
	// envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED does.
	ResponseHeaders bool
	// Shadow answers OK overall where the descriptors say OVER_LIMIT
	// (each status keeps its code), as envoyproxy/ratelimit's
	// SHADOW_MODE: limits are counted and reported, never enforced
	// (TOLLGATE_SHADOW).
	Shadow bool
	// Metrics records answers. May be nil.
	Metrics Metrics
	// Log gets one line per call whose handler panicked (answered
	// INTERNAL). Nil: none.
	Log *slog.Logger
	// MaxWatches bounds the grpc.health.v1.Health watches open at once
	// on the server: past it a Watch is refused RESOURCE_EXHAUSTED, as
	// each holds a stream and its buffers until the caller hangs up.
	// Zero means [DefaultMaxWatches].
	MaxWatches int
}

// Server is the face: a RateLimitServiceServer and a HealthServer on the
// engine, deciding with the configuration last given to it. It is safe
// for concurrent use by multiple goroutines.
type Server struct {
	pb.UnimplementedRateLimitServiceServer
	opts     Options
	cfg      atomic.Pointer[config]
	detailed labelCap
	// watch is the readiness check every Health watch shares.
	watch watchProbe
	// draining is closed by [Server.Drain]: Watch streams end.
	draining  chan struct{}
	drainOnce sync.Once
}

// config is one generation of the configuration, and what is derived
// from it once.
type config struct {
	rules     *rlsconf.Config
	maxDomain int // the longest domain a request may name
}

// New returns the face, deciding with cfg until [Server.SetConfig]. A
// nil cfg is no configuration loaded yet (one coming over xDS): until
// the first SetConfig every call is answered the gRPC error UNKNOWN "no
// rate limit configuration loaded", as envoyproxy/ratelimit answers, so
// that Envoy's failure_mode_deny decides.
func New(cfg *rlsconf.Config, opts Options) *Server {
	if opts.Engine == nil {
		panic("rls: New needs an engine")
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = time.Second
	}
	if opts.Metrics == nil {
		opts.Metrics = nopMetrics{}
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	s := &Server{opts: opts, draining: make(chan struct{})}
	s.SetConfig(cfg)
	return s
}

// SetConfig makes c the configuration of every request that starts
// after it (nil: none loaded, as for [New]). Requests in flight finish
// with the old one.
func (s *Server) SetConfig(c *rlsconf.Config) {
	g := &config{rules: c, maxDomain: MinDomainLen}
	if c == nil {
		s.cfg.Store(g)
		return
	}
	for _, d := range c.Domains() {
		g.maxDomain = max(g.maxDomain, len(d))
	}
	s.cfg.Store(g)
}

// Drain prepares the server's stop: every grpc.health.v1.Health Watch,
// open now or later, is told NOT_SERVING and ends, so that the gRPC
// server's GracefulStop, which waits for every open stream, need not wait
// for watchers that never hang up. Calls keep being decided. Call it
// before GracefulStop; more calls do nothing.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

// Config returns the configuration in use, nil when none is loaded.
func (s *Server) Config() *rlsconf.Config { return s.cfg.Load().rules }

// streamWorkers is how many goroutines serve calls: each keeps the stack
// it grew, where a goroutine per call grows one every time (a tenth of
// the CPU under load). More concurrent calls than this get goroutines of
// their own.
const streamWorkers = 256

// NewGRPCServer returns a gRPC server (HTTP/2 without TLS, as Envoy's
// rate limit filter speaks to a cluster without a transport socket, or
// TLS given grpc.Creds in opts) serving s's RateLimitService and Health,
// with opts after its own
// (bounds on streams per connection and keepalive: [MaxStreamsPerConn]). A
// call whose handler panics is answered INTERNAL and logged (Options.Log);
// the other calls go on. The caller serves it on a listener and stops it
// (GracefulStop).
func (s *Server) NewGRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	own := append(serverBounds(), grpc.NumStreamWorkers(streamWorkers), grpc.ChainUnaryInterceptor(recoverer(s.opts.Log)), grpc.ChainStreamInterceptor(recoverStream(s.opts.Log)))
	g := grpc.NewServer(append(own, opts...)...)
	pb.RegisterRateLimitServiceServer(g, s)
	healthpb.RegisterHealthServer(g, &health{s: s})
	return g
}

// ShouldRateLimit implements pb.RateLimitServiceServer: it decides every
// descriptor of req and answers as envoyproxy/ratelimit does. A request
// it cannot decide gets a gRPC error: UNKNOWN before any configuration
// is loaded ([New]), INVALID_ARGUMENT for an empty
// domain or descriptor list (with envoyproxy/ratelimit's messages), a
// descriptor without entries, an entry with an empty key, a limit
// override whose unit is not SECOND to WEEK, more than
// [MaxDescriptors] descriptors, or a domain longer than every
// configured one and than [MinDomainLen]; UNAVAILABLE when the store
// fails with TOLLGATE_FAIL_MODE=closed; RESOURCE_EXHAUSTED when a
// bounded memory store is full. Nothing is spent for any of them.
func (s *Server) ShouldRateLimit(ctx context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	cfg := s.cfg.Load()
	if cfg.rules == nil {
		s.opts.Metrics.RLSRequest(UnknownDomainLabel, codeName(codes.Unknown))
		return nil, errNoConfig
	}
	p := getPlan()
	defer putPlan(p)
	if err := p.build(cfg, s.opts.Engine, req); err != nil {
		s.opts.Metrics.RLSRequest(p.domainLabel, codeName(status.Code(err)))
		return nil, err
	}
	var v domain.Verdict
	if len(p.limits) > 0 {
		var err error
		req, dst := p.request()
		if v, err = s.opts.Engine.DecidePlanned(ctx, req, dst); err != nil {
			err = decideError(ctx, err)
			s.opts.Metrics.RLSRequest(p.domainLabel, codeName(status.Code(err)))
			return nil, err
		}
		if v.Unavailable {
			// The closed fail mode: Envoy's failure_mode_deny decides.
			s.opts.Metrics.RLSRequest(p.domainLabel, codeName(codes.Unavailable))
			return nil, errUnavailable
		}
	}
	resp := p.response(v, s.opts.ResponseHeaders)
	if s.opts.Shadow && resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		resp.OverallCode = pb.RateLimitResponse_OK
	}
	s.count(p, req, v, resp)
	return resp, nil
}

// Errors of a decision.
var (
	errUnavailable = status.Error(codes.Unavailable, "rate limit store unavailable")
	errStoreFull   = status.Error(codes.ResourceExhausted, "rate limit store is full")
	// errNoConfig is envoyproxy/ratelimit's answer before its first
	// configuration, word for word.
	errNoConfig = status.Error(codes.Unknown, "no rate limit configuration loaded")
)

// decideError maps the engine's error to the gRPC error answered.
func decideError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, ports.ErrStoreFull):
		return errStoreFull
	case ctx.Err() != nil:
		return status.FromContextError(ctx.Err()).Err()
	}
	return status.Error(codes.Internal, "rate limit decision failed")
}

// count records one answer and its descriptors' outcomes.
func (s *Server) count(p *plan, req *pb.RateLimitRequest, v domain.Verdict, resp *pb.RateLimitResponse) {
	m := s.opts.Metrics
	m.RLSRequest(p.domainLabel, resp.OverallCode.String())
	if v.Decisions == nil {
		return
	}
	for i := range p.descs {
		d := &p.descs[i]
		if d.state != limited {
			continue
		}
		label := OverrideRuleLabel
		if d.rule != nil {
			label = d.rule.Key
			if d.rule.StatsByValue() {
				label = s.detailed.label(d.rule.StatsKey(entriesOf(p.entries[:0], req.Descriptors[i])))
			}
		}
		dec := v.Decisions[d.limit]
		outcome := "ok"
		switch {
		case dec.Allowed:
		case d.shadow:
			outcome = "shadow_over_limit"
		default:
			outcome = "over_limit"
		}
		m.RLSDescriptor(p.domainLabel, label, outcome)
	}
}

// codeName is the metric label of a gRPC error's code: its proto name.
func codeName(c codes.Code) string {
	switch c {
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.Canceled:
		return "CANCELLED"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.Unknown:
		return "UNKNOWN"
	}
	return "INTERNAL"
}

type nopMetrics struct{}

func (nopMetrics) RLSRequest(string, string)            {}
func (nopMetrics) RLSDescriptor(string, string, string) {}
