package rls

import (
	"math"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// Reading a request's descriptors: what is refused, and what each spends.

// invalid is a request refused before anything is decided.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// checkDescriptor refuses descriptor i when Envoy's own validation would
// (entries min_items 1, key min_len 1), when envoyproxy/ratelimit would
// crash on it (a unit it cannot divide time by), or when its keys and
// values are over [MaxDescriptorBytes] (keys of that size in Redis and in
// memory are a client's, not a configuration's).
func checkDescriptor(i int, d *ratelimitv3.RateLimitDescriptor) error {
	if len(d.GetEntries()) == 0 {
		return invalid("rate limit descriptor %d has no entries", i)
	}
	size := 0
	for j, e := range d.GetEntries() {
		if e.GetKey() == "" {
			return invalid("rate limit descriptor %d: entry %d has an empty key", i, j)
		}
		size += len(e.GetKey()) + len(e.GetValue())
	}
	if size > MaxDescriptorBytes {
		return invalid("rate limit descriptor %d: %d bytes of keys and values, more than %d", i, size, MaxDescriptorBytes)
	}
	if o := d.GetLimit(); o != nil {
		if u := o.GetUnit(); u < 0 || u > math.MaxUint8 || rlsconf.Unit(u).Seconds() == 0 {
			return invalid("rate limit descriptor %d: limit override unit %s, want SECOND to WEEK", i, o.GetUnit())
		}
	}
	return nil
}

// entriesOf appends d's entries to dst as rlsconf reads them.
func entriesOf(dst []rlsconf.Entry, d *ratelimitv3.RateLimitDescriptor) []rlsconf.Entry {
	for _, e := range d.GetEntries() {
		dst = append(dst, rlsconf.Entry{Key: e.GetKey(), Value: e.GetValue()})
	}
	return dst
}

// hits returns what descriptor d of req spends, as envoyproxy/ratelimit
// counts it: its own hits_addend when set (0: a check), else the
// request's, 0 counting as 1. It is bounded by [domain.MaxCostUnits],
// above any requests_per_unit, so a larger one is denied all the same.
func hits(req *pb.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	h := uint64(max(req.GetHitsAddend(), 1))
	if a := d.GetHitsAddend(); a != nil {
		h = a.GetValue()
	}
	return int64(min(h, domain.MaxCostUnits))
}
