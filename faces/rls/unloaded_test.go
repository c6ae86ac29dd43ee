package rls_test

import (
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/faces/rls"
)

// TestNoConfigLoaded: before its first configuration (one awaited over
// xDS) the face answers every call envoyproxy/ratelimit's error, spends
// nothing, and decides once a configuration is set.
func TestNoConfigLoaded(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	f.SetConfig(nil)
	if f.Config() != nil {
		t.Errorf("Config() = %v after SetConfig(nil), want nil", f.Config())
	}
	for _, req := range []*pb.RateLimitRequest{rq("test-domain", 0, desc("key2=x")), rq("", 0, desc("key2=x")), rq("other", 0)} {
		_, err := f.ShouldRateLimit(t.Context(), req)
		if got := status.Convert(err); got.Code() != codes.Unknown || got.Message() != "no rate limit configuration loaded" {
			t.Errorf("ShouldRateLimit(%v) before a configuration = %v, want UNKNOWN no rate limit configuration loaded", req, err)
		}
	}
	if n := f.calls.count(); n != 0 {
		t.Errorf("%d calls reached the store, want 0", n)
	}
	f.SetConfig(parse(t, basicYAML))
	check(t, "once loaded", f.ask(t, rq("test-domain", 0, desc("key2=x"))), ok, st{ok, lim(20, minute, ""), 19, 50})
}

// TestGlobalShadow: with Options.Shadow a request over its limits is
// answered OK overall, each status keeping its code, and still counted.
func TestGlobalShadow(t *testing.T) {
	t.Parallel()
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{Shadow: true}})
	check(t, "the one hit", f.ask(t, rq("test-domain", 0, desc("key3=x"))), ok, st{ok, lim(1, hourU, ""), 0, 3590})
	check(t, "over the limit", f.ask(t, rq("test-domain", 0, desc("key3=x"))), ok, st{over, lim(1, hourU, ""), 0, 3590})
}
