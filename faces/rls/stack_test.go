package rls_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/rls"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// failing is a store that always fails.
var failing = ports.LimiterFunc(func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
	return domain.Verdict{}, errors.New("store down")
})

// TestFailModes: on a store failure, open answers OK (without limits),
// closed a gRPC UNAVAILABLE (Envoy's failure_mode_deny decides), local
// decides in process with each limit divided by the replicas.
func TestFailModes(t *testing.T) {
	t.Parallel()
	open := newFaceWith(t, basicYAML, faceOptions{store: failing, layers: []ports.Layer{layers.FailOpen(nil)}})
	check(t, "open", open.ask(t, rq("test-domain", 0, desc("key2=x"), desc("key6=u"))), ok,
		none, st{code: ok, remaining: 4294967295, reset: -1})

	closed := newFaceWith(t, basicYAML, faceOptions{store: failing, layers: []ports.Layer{layers.FailClosed(nil)}})
	if _, err := closed.ShouldRateLimit(t.Context(), rq("test-domain", 0, desc("key2=x"))); status.Code(err) != codes.Unavailable {
		t.Errorf("closed: %v, want UNAVAILABLE", err)
	}
	check(t, "closed, nothing to decide", closed.ask(t, rq("test-domain", 0, desc("nothing=x"))), ok, none)

	local, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{SweepInterval: -1, View: rlsView(false)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	f := newFaceWith(t, basicYAML, faceOptions{store: failing, layers: []ports.Layer{
		layers.FailLocal(layers.LocalOptions{Limiter: local, Replicas: func() int { return 2 }}),
	}})
	// key2's 20 per minute, on one replica of two: 10.
	for i := range 10 {
		resp := f.ask(t, rq("test-domain", 0, desc("key2=local")))
		if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 || resp.Statuses[0].LimitRemaining != uint32(9-i) {
			t.Fatalf("local, request %d: %v, want OK, current limit 10, remaining %d", i+1, resp, 9-i)
		}
	}
	if resp := f.ask(t, rq("test-domain", 0, desc("key2=local"))); resp.OverallCode != over {
		t.Errorf("local, request 11: %v, want OVER_LIMIT", resp)
	}
}

// TestDenyCache: a denied request's repeats are answered from memory, the
// same answer, without the store, until its window ends.
func TestDenyCache(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	f := newFaceWith(t, basicYAML, faceOptions{clock: clk, layers: []ports.Layer{layers.NewDenyCache(layers.DenyCacheOptions{Now: clk.Now}).Layer()}})
	req := rq("test-domain", 0, desc("key3=flood"), desc("key2=flood"))
	f.ask(t, req)
	first := f.ask(t, req)
	calls := f.calls.count()
	for range 100 {
		check(t, "cached", f.ask(t, req), over, st{over, lim(1, hourU, ""), 0, 3590}, st{ok, lim(20, minute, ""), 19, 50})
	}
	if n := f.calls.count() - calls; n != 0 {
		t.Errorf("100 repeats of a denial reached the store %d times, want 0", n)
	}
	check(t, "the first denial", first, over, st{over, lim(1, hourU, ""), 0, 3590}, st{ok, lim(20, minute, ""), 19, 50})
	f.clock.Advance(time.Hour)
	if resp := f.ask(t, req); resp.OverallCode != ok || f.calls.count() == calls {
		t.Errorf("after the window: %v (store calls %d), want OK from the store", resp, f.calls.count()-calls)
	}
}

// TestCountDeniedEveryHit: with envoyproxy/ratelimit's counting every
// denied hit is counted in the store (the gateway builds that chain
// without a deny cache): an override that shares the counter sees every
// hit.
func TestCountDeniedEveryHit(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	f := newFaceWith(t, basicYAML, faceOptions{clock: clk, countDenied: true})
	for range 25 {
		f.ask(t, rq("test-domain", 0, desc("key2=flood"))) // 20 a minute: 5 denied, each counted
	}
	if resp := f.ask(t, rq("test-domain", 0, withLimit(desc("key2=flood"), 25, typev3.RateLimitUnit_MINUTE))); resp.OverallCode != over {
		t.Errorf("an override of 25 after 25 counted hits: %v, want OVER_LIMIT (the counter is 26)", resp)
	}
	chk := f.ask(t, rq("test-domain", 0, withHits(withLimit(desc("key2=flood"), 40, typev3.RateLimitUnit_MINUTE), 0)))
	if got := chk.Statuses[0].LimitRemaining; got != 40-26 {
		t.Errorf("a check against 40: remaining %d, want %d", got, 40-26)
	}
}

// TestOtherAlgorithms: every algorithm decides the same configuration,
// the unit as its window, all or nothing.
func TestOtherAlgorithms(t *testing.T) {
	t.Parallel()
	for _, a := range domain.AlgorithmNames() {
		f := newFaceWith(t, basicYAML, faceOptions{algorithm: a})
		for i := range 20 {
			if resp := f.ask(t, rq("test-domain", 0, desc("key2=alg"))); resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != uint32(19-i) {
				t.Fatalf("%s: request %d: %v, want OK, remaining %d", a, i+1, resp, 19-i)
			}
		}
		resp := f.ask(t, rq("test-domain", 0, desc("key2=alg"), desc("key2=value2")))
		if resp.OverallCode != over || resp.Statuses[0].Code != over || resp.Statuses[1].LimitRemaining != 30 {
			t.Errorf("%s: 21st beside another: %v, want OVER_LIMIT, the other unspent (30)", a, resp)
		}
		if d := resp.Statuses[0].DurationUntilReset; d == nil || d.Seconds < 1 || d.Seconds > 120 {
			t.Errorf("%s: duration_until_reset %v, want within two windows", a, d)
		}
	}
}

// upDown is a readiness check that is switched.
type upDown struct {
	mu   sync.Mutex
	down bool
}

func (u *upDown) Ping(context.Context) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.down {
		return errors.New("down")
	}
	return nil
}

func (u *upDown) set(down bool) {
	u.mu.Lock()
	u.down = down
	u.mu.Unlock()
}

// serveGRPC serves f's gRPC server on loopback until the test ends, and
// returns it and a client connection to it.
func serveGRPC(t *testing.T, f *face) (*grpc.Server, *grpc.ClientConn) {
	t.Helper()
	g := f.NewGRPCServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return g, conn
}

// TestGRPC: the gRPC server answers ShouldRateLimit and Health (SERVING
// exactly while the readiness check passes; NOT_FOUND for another
// service).
func TestGRPC(t *testing.T) {
	t.Parallel()
	ready := &upDown{}
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{Ready: ready}})
	g, conn := serveGRPC(t, f)
	resp, err := pb.NewRateLimitServiceClient(conn).ShouldRateLimit(t.Context(), rq("test-domain", 0, desc("key2=grpc")))
	if err != nil || resp.OverallCode != ok || resp.Statuses[0].LimitRemaining != 19 {
		t.Fatalf("ShouldRateLimit over gRPC: %v, %v; want OK, remaining 19", resp, err)
	}
	h := healthpb.NewHealthClient(conn)
	for _, tt := range []struct {
		down bool
		want healthpb.HealthCheckResponse_ServingStatus
	}{{false, healthpb.HealthCheckResponse_SERVING}, {true, healthpb.HealthCheckResponse_NOT_SERVING}, {false, healthpb.HealthCheckResponse_SERVING}} {
		ready.set(tt.down)
		for _, service := range []string{"", rls.ServiceName} {
			r, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
			if err != nil || r.Status != tt.want {
				t.Errorf("Check(%q) with the store down=%v: %v, %v; want %v", service, tt.down, r, err, tt.want)
			}
		}
	}
	if _, err := h.Check(t.Context(), &healthpb.HealthCheckRequest{Service: "other"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(other): %v, want NOT_FOUND", err)
	}
	// (A bound, so that a watch that never ends fails the test.)
	wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w, err := h.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Watch: first %v, %v; want SERVING", r, err)
	}
	ready.set(true)
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Watch after the store went down: %v, %v; want NOT_SERVING", r, err)
	}
	ready.set(false)
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Watch after the store came back: %v, %v; want SERVING", r, err)
	}

	// A stop: the watch is told NOT_SERVING and ends, and GracefulStop,
	// which waits for every open stream, does not wait for the watcher.
	f.Drain()
	if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Watch when the server drains: %v, %v; want NOT_SERVING", r, err)
	}
	if r, err := w.Recv(); err != io.EOF {
		t.Errorf("Watch after NOT_SERVING on drain: %v, %v; want the stream's end", r, err)
	}
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	w2, err := h.Watch(wctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		// A watch that reached the draining server ends at once too.
		for {
			if _, err := w2.Recv(); err != nil {
				break
			}
		}
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Errorf("GracefulStop still waiting 5 s after Drain")
	}
}

// countingReady is a readiness check that always passes and counts its
// calls.
type countingReady struct{ n atomic.Int64 }

func (c *countingReady) Ping(context.Context) error {
	c.n.Add(1)
	return nil
}

// TestWatchesShareOneCheck: however many Health watches are open, the
// store is asked about its readiness at most twice a second, not once a
// second per watch, so that a client's watches cannot multiply the
// store's pings.
func TestWatchesShareOneCheck(t *testing.T) {
	t.Parallel()
	ready := &countingReady{}
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{Ready: ready}})
	_, conn := serveGRPC(t, f)
	h := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	const watches = 200
	start := time.Now()
	for range watches {
		w, err := h.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := w.Recv(); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Watch: first %v, %v; want SERVING", r, err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // every watch checks again at least once
	elapsed := time.Since(start)
	// Two checks a second at most, and one for a partial half second.
	if got, most := ready.n.Load(), int64(2*elapsed/time.Second)+2; got > most {
		t.Errorf("%d watches open for %v made %d readiness checks, want at most %d", watches, elapsed.Round(time.Millisecond), got, most)
	}
}

// recordedMetrics records the face's metrics.
type recordedMetrics struct {
	mu    sync.Mutex
	reqs  map[string]int // domain/code
	descs map[string]int // domain/rule/outcome
}

func (m *recordedMetrics) RLSRequest(domain, code string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reqs[domain+"/"+code]++
}

func (m *recordedMetrics) RLSDescriptor(domain, rule, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.descs[domain+"/"+rule+"/"+outcome]++
}

// TestMetrics: answers by domain and code, descriptors by rule and
// outcome; an unknown domain and an override never become labels, and a
// value becomes one only with detailed_metric, under a cap.
func TestMetrics(t *testing.T) {
	t.Parallel()
	m := &recordedMetrics{reqs: map[string]int{}, descs: map[string]int{}}
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{Metrics: m}})
	f.ask(t, rq("test-domain", 0, desc("key3=m")))
	f.ask(t, rq("test-domain", 0, desc("key3=m"), desc("shadow=m")))
	f.ask(t, rq("test-domain", 5, desc("shadow=m")))
	f.ask(t, rq("elsewhere-1", 0, desc("key3=m")))
	f.ask(t, rq("elsewhere-2", 0, desc("key3=m")))
	f.ask(t, rq("test-domain", 0, withLimit(desc("v=1"), 5, 2)))
	_, _ = f.ShouldRateLimit(t.Context(), rq("", 0, desc("key3=m")))
	_, _ = f.ShouldRateLimit(t.Context(), rq("test-domain", 0))
	// A value too long for a label is (other) even while the cap has room.
	f.ask(t, rq("test-domain", 0, desc("detailed="+strings.Repeat("v", 300))))
	for i := range rls.MaxDetailedLabels + 5 {
		f.ask(t, rq("test-domain", 0, desc(fmt.Sprintf("detailed=v%d", i))))
	}
	for k, n := range map[string]int{
		"test-domain/OK": 4 + rls.MaxDetailedLabels + 5, "test-domain/OVER_LIMIT": 1, "(unknown)/OK": 2,
		"(unknown)/INVALID_ARGUMENT": 1, "test-domain/INVALID_ARGUMENT": 1,
	} {
		if m.reqs[k] != n {
			t.Errorf("requests %s: %d, want %d (all: %v)", k, m.reqs[k], n, m.reqs)
		}
	}
	for k, n := range map[string]int{
		"test-domain/test-domain.key3/ok": 1, "test-domain/test-domain.key3/over_limit": 1,
		"test-domain/test-domain.shadow/ok": 1, "test-domain/test-domain.shadow/shadow_over_limit": 1,
		"test-domain/(override)/ok": 1, "test-domain/test-domain.detailed_v0/ok": 1, "test-domain/(other)/ok": 6,
	} {
		if m.descs[k] != n {
			t.Errorf("descriptors %s: %d, want %d", k, m.descs[k], n)
		}
	}
	if n := len(m.descs); n != 6+rls.MaxDetailedLabels {
		t.Errorf("%d descriptor series, want %d", n, 6+rls.MaxDetailedLabels)
	}
}

// TestMetricsValueToMetricOnAParent: value_to_metric on a level above the
// rule names the rule's stats by the request's values, as
// envoyproxy/ratelimit names them (its README's example 10), though the
// leaf has neither flag.
func TestMetricsValueToMetricOnAParent(t *testing.T) {
	t.Parallel()
	m := &recordedMetrics{reqs: map[string]int{}, descs: map[string]int{}}
	f := newFaceWith(t, `domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
`, faceOptions{opts: rls.Options{Metrics: m}})
	f.ask(t, rq("example10", 0, desc("route=api", "http_method=GET", "subject_id=123")))
	if k := "example10/example10.route_api.http_method_GET.subject_id/ok"; m.descs[k] != 1 {
		t.Errorf("descriptors %v, want %s once", m.descs, k)
	}
}

// panicking is a limiter that panics.
type panicking struct{}

func (panicking) Allow(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
	panic("kaboom")
}

// TestGRPCRecoversFromPanics: a call whose handler panics is answered
// INTERNAL, without the panic's value, and logged once; the server and
// its other calls go on (grpc-go recovers nothing: the process ended).
func TestGRPCRecoversFromPanics(t *testing.T) {
	t.Parallel()
	var logs logtest.Buffer
	f := newFaceWith(t, basicYAML, faceOptions{store: panicking{},
		opts: rls.Options{Log: slog.New(slog.NewJSONHandler(&logs, nil))}})
	_, conn := serveGRPC(t, f)
	client := pb.NewRateLimitServiceClient(conn)
	for i := range 2 {
		_, err := client.ShouldRateLimit(t.Context(), rq("test-domain", 0, desc("key2=grpc")))
		if status.Code(err) != codes.Internal || strings.Contains(err.Error(), "kaboom") {
			t.Fatalf("call %d: %v; want INTERNAL without the panic's value", i, err)
		}
	}
	if r, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health after the panics: %v, %v; want SERVING", r, err)
	}
	if got := logtest.Lines(t, logs.String(), "handler panic"); len(got) != 2 || got[0]["panic"] != "kaboom" ||
		got[0]["method"] != "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" {
		t.Errorf("panic log lines = %v, want two with panic=kaboom and the method", got)
	}
}
