package rls

import (
	"strconv"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The headers of envoyproxy/ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED
// (its default names), which [Options].ResponseHeaders adds.
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
)

// rateLimitHeaders returns the headers that describe st: its
// requests_per_unit, what is left, and the seconds until its window ends
// (not an instant).
func rateLimitHeaders(st *pb.RateLimitResponse_DescriptorStatus) []*core.HeaderValue {
	return []*core.HeaderValue{
		{Key: HeaderLimit, Value: strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10)},
		{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(st.LimitRemaining), 10)},
		{Key: HeaderReset, Value: strconv.FormatInt(st.DurationUntilReset.GetSeconds(), 10)},
	}
}
