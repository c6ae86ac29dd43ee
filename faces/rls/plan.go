package rls

import (
	"math"
	"slices"
	"sync"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// What one descriptor of a request came to.
const (
	unmatched = iota // no limit: an unknown domain, no rule, a replaced rule
	unlimited        // an unlimited rule: OK, the largest remaining
	limited          // a limit the engine decides
)

// descriptor is what one descriptor of a request came to.
type descriptor struct {
	state  uint8
	shadow bool          // shadow_mode: an over-limit answer is OK
	rule   *rlsconf.Rule // the configuration's rule; nil for an override
	rpu    uint32        // requests_per_unit
	unit   rlsconf.Unit
	name   string
	limit  int // limited: its index in the request's limits
}

// plan is one request being translated: its descriptors, the limits the
// engine decides and the buffers they are built in. Plans are pooled.
type plan struct {
	domainLabel string // the metrics label of the request's domain
	descs       []descriptor
	entries     []rlsconf.Entry
	replacing   []string
	counter     []byte // rlsconf.AppendCounterKey's output
	key         []byte // a store key being built
	limits      []domain.Limit
	domain      string
	decisions   []domain.Decision
}

var plans = sync.Pool{New: func() any { return new(plan) }}

func getPlan() *plan { return plans.Get().(*plan) }

// putPlan returns p to the pool, dropping what it refers to.
func putPlan(p *plan) {
	clear(p.descs)
	clear(p.entries)
	clear(p.replacing)
	clear(p.limits)
	*p = plan{descs: p.descs[:0], entries: p.entries[:0], replacing: p.replacing[:0], counter: p.counter[:0],
		key: p.key[:0], limits: p.limits[:0], decisions: p.decisions[:0]}
	plans.Put(p)
}

// build translates req under cfg into p: it checks the request, matches
// every descriptor (envoyproxy/ratelimit's precedence and depth rule,
// limit overrides, unlimited rules, replaces) and builds a limit for each
// descriptor that has one, keyed by e. It decides nothing.
func (p *plan) build(cfg *config, e *engine.Engine, req *pb.RateLimitRequest) error {
	p.domain, p.domainLabel = req.Domain, UnknownDomainLabel
	switch {
	case req.Domain == "":
		return invalid("rate limit domain must not be empty")
	case len(req.Descriptors) == 0:
		if _, ok := cfg.rules.Match(req.Domain, nil); ok {
			p.domainLabel = req.Domain
		}
		return invalid("rate limit descriptor list must not be empty")
	case len(req.Domain) > cfg.maxDomain:
		return invalid("rate limit domain is %d bytes, longer than any configured domain", len(req.Domain))
	case len(req.Descriptors) > MaxDescriptors:
		return invalid("%d rate limit descriptors, more than %d", len(req.Descriptors), MaxDescriptors)
	}
	if _, ok := cfg.rules.Match(req.Domain, nil); ok {
		p.domainLabel = req.Domain
	}
	for i, d := range req.Descriptors {
		if err := checkDescriptor(i, d); err != nil {
			return err
		}
	}
	p.descs = slices.Grow(p.descs[:0], len(req.Descriptors))[:len(req.Descriptors)]
	for i, d := range req.Descriptors {
		p.entries = entriesOf(p.entries[:0], d)
		rule, known := cfg.rules.Match(req.Domain, p.entries)
		desc := &p.descs[i]
		switch o := d.GetLimit(); {
		case !known:
		case o != nil:
			// A descriptor's own limit: counted under its entries as they
			// are, never shadow, never quota, named nothing.
			*desc = descriptor{state: limited, rpu: o.GetRequestsPerUnit(), unit: rlsconf.Unit(o.GetUnit())}
			p.addLimit(e, desc, nil, d, hits(req, d))
		case rule == nil:
		default:
			p.replacing = append(p.replacing, rule.Replaces...)
			if rule.Unlimited {
				desc.state = unlimited
				continue
			}
			*desc = descriptor{state: limited, shadow: rule.ShadowMode, rule: rule, rpu: rule.RequestsPerUnit, unit: rule.Unit, name: rule.Name}
			p.addLimit(e, desc, rule, d, hits(req, d))
		}
	}
	p.replace()
	return nil
}

// addLimit adds desc's limit (rule, or its override when rule is nil) to
// p: keyed as envoyproxy/ratelimit counts d, in windows of the unit
// (the planned limiter aligns them to the epoch), spending cost. requests_per_unit 0 (every hit
// denied) is a limit of 1 that a hit costs one more than it spends
// there, so that a hit is always over it, a check (cost 0) never, and a
// check after counted hits (TOLLGATE_RLS_COUNT_DENIED) is over it, as a
// counter above 0 is there.
func (p *plan) addLimit(e *engine.Engine, desc *descriptor, rule *rlsconf.Rule, d *ratelimitv3.RateLimitDescriptor, cost int64) {
	window := time.Duration(desc.unit.Seconds()) * time.Second
	p.counter = rlsconf.AppendCounterKey(p.counter[:0], p.domain, p.entries, rule)
	p.key = e.AppendDescriptorKey(p.key[:0], p.domain, window, p.counter[len(p.domain)+1:])
	limit := int64(desc.rpu)
	if limit == 0 {
		limit = 1
		if cost > 0 {
			cost++
		}
	}
	desc.limit = len(p.limits)
	p.limits = append(p.limits, domain.Limit{
		Name:   desc.name,
		Rule:   domain.Rule{Limit: limit, Window: window},
		Key:    string(p.key),
		Cost:   cost,
		Shadow: desc.shadow,
		Quota:  rule != nil && rule.QuotaMode,
	})
}

// replace drops every limited rule that another matched rule replaces
// (envoyproxy/ratelimit's replaces: by name; overrides are never
// replaced, and unlimited rules replace too).
func (p *plan) replace() {
	if len(p.replacing) == 0 {
		return
	}
	kept := p.limits[:0]
	for i := range p.descs {
		d := &p.descs[i]
		if d.state != limited {
			continue
		}
		lim := p.limits[d.limit]
		if d.rule != nil && d.name != "" && slices.Contains(p.replacing, d.name) {
			*d = descriptor{}
			continue
		}
		d.limit = len(kept)
		kept = append(kept, lim)
	}
	clear(p.limits[len(kept):])
	p.limits = kept
}

// request returns the engine's request for p's limits, and room for its
// verdict's decisions. The face meters a planned request as its first
// limit's counter: its subject is that limit's key (the RLS domain and
// the first descriptor's counter, in windows of its unit), which no
// tenant id or client address is. Layers that remember decisions by
// subject and route (Route is the RLS domain) tell the requests of two
// counters apart.
func (p *plan) request() (domain.Request, []domain.Decision) {
	req := domain.Request{
		Tenant: domain.TenantID(p.limits[0].Key),
		Route:  p.domain,
		Limits: p.limits,
	}
	p.decisions = slices.Grow(p.decisions[:0], len(p.limits))
	return req, p.decisions
}

// response turns v, the engine's verdict on p's limits (the zero Verdict
// when there were none), into envoyproxy/ratelimit's answer.
func (p *plan) response(v domain.Verdict, headers bool) *pb.RateLimitResponse {
	n := len(p.descs)
	var (
		resp      *pb.RateLimitResponse
		statuses  []pb.RateLimitResponse_DescriptorStatus
		limits    []pb.RateLimitResponse_RateLimit
		durations []durationpb.Duration
	)
	if n == 1 {
		// The common request, one descriptor: its answer in one allocation.
		one := new(struct {
			resp     pb.RateLimitResponse
			statuses [1]pb.RateLimitResponse_DescriptorStatus
			ptrs     [1]*pb.RateLimitResponse_DescriptorStatus
			limits   [1]pb.RateLimitResponse_RateLimit
			dur      [1]durationpb.Duration
		})
		resp, statuses, limits, durations = &one.resp, one.statuses[:], one.limits[:], one.dur[:]
		resp.Statuses = one.ptrs[:]
	} else {
		resp = &pb.RateLimitResponse{Statuses: make([]*pb.RateLimitResponse_DescriptorStatus, n)}
		statuses = make([]pb.RateLimitResponse_DescriptorStatus, n)
		if v.Decisions != nil {
			limits = make([]pb.RateLimitResponse_RateLimit, len(p.limits))
			durations = make([]durationpb.Duration, len(p.limits))
		}
	}
	resp.OverallCode = pb.RateLimitResponse_OK
	if len(p.limits) > 0 && !v.Allowed {
		resp.OverallCode = pb.RateLimitResponse_OVER_LIMIT
	}
	tightest, least := -1, uint32(math.MaxUint32)
	for i := range p.descs {
		d, st := &p.descs[i], &statuses[i]
		resp.Statuses[i] = st
		st.Code = pb.RateLimitResponse_OK
		switch {
		case d.state == unlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		case d.state == unmatched, v.Decisions == nil:
			continue // nothing decided (fail open: nothing known)
		}
		dec := v.Decisions[d.limit]
		cl := &limits[d.limit]
		cl.RequestsPerUnit, cl.Unit, cl.Name = min(uint32(dec.Limit), d.rpu), pb.RateLimitResponse_RateLimit_Unit(d.unit), d.name
		st.CurrentLimit = cl
		dur := &durations[d.limit]
		dur.Seconds = domain.CeilSeconds(dec.ResetAfter)
		st.DurationUntilReset = dur
		if dec.Allowed {
			st.LimitRemaining = uint32(min(max(dec.Remaining, 0), int64(cl.RequestsPerUnit)))
		} else if !d.shadow {
			st.Code = pb.RateLimitResponse_OVER_LIMIT
		}
		// envoyproxy/ratelimit's most constrained descriptor: the fewest
		// remaining, else the last one over its limit (not quota).
		if st.LimitRemaining < least {
			tightest, least = i, st.LimitRemaining
		}
		if st.Code == pb.RateLimitResponse_OVER_LIMIT && !p.limits[d.limit].Quota {
			tightest, least = i, 0
		}
	}
	if headers && tightest >= 0 {
		resp.ResponseHeadersToAdd = rateLimitHeaders(resp.Statuses[tightest])
	}
	return resp
}
