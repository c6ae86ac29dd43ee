package rls_test

import (
	"strconv"
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// BenchmarkShouldRateLimit is the face's own cost per call on the memory
// store: one descriptor of 1000 values, within its limit.
func BenchmarkShouldRateLimit(b *testing.B) {
	f := newFace(b, benchYAML)
	reqs := make([]*pb.RateLimitRequest, 1000)
	for i := range reqs {
		reqs[i] = rq("test-domain", 0, desc("key2=v"+strconv.Itoa(i)))
	}
	ctx := b.Context()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := f.ShouldRateLimit(ctx, reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

const benchYAML = `
domain: test-domain
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
`
