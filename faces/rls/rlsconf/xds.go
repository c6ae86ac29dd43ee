package rlsconf

import (
	"cmp"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
)

// FromResources loads the RateLimitConfig resources an xDS server sends
// (envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW), in the order given,
// as [Parse] loads files: each resource is a file named by its name (its
// domain when unnamed), resources naming one domain are merged, and what
// envoyproxy/ratelimit rejects in a file is rejected here with a
// [*FileError] naming the resource. The form is typed already, so there
// are no YAML or key errors; the unit is the enum's name (UNKNOWN is
// rejected unless unlimited), and the proto has no value_to_metric or
// share_threshold, as envoyproxy/ratelimit converts it.
func FromResources(rs []*rlsconfv3.RateLimitConfig) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	for _, r := range rs {
		if err := c.add(yamlRoot{Domain: r.GetDomain(), Descriptors: descriptorsOf(r.GetDescriptors())}); err != nil {
			return nil, &FileError{Path: cmp.Or(r.GetName(), r.GetDomain()), Err: err}
		}
	}
	return c, nil
}

// descriptorsOf converts descriptors into the typed form of a file.
func descriptorsOf(ds []*rlsconfv3.RateLimitDescriptor) []yamlDescriptor {
	if len(ds) == 0 {
		return nil
	}
	out := make([]yamlDescriptor, len(ds))
	for i, d := range ds {
		out[i] = yamlDescriptor{
			Key:            d.GetKey(),
			Value:          d.GetValue(),
			RateLimit:      policyOf(d.GetRateLimit()),
			Descriptors:    descriptorsOf(d.GetDescriptors()),
			ShadowMode:     d.GetShadowMode(),
			QuotaMode:      d.GetQuotaMode(),
			DetailedMetric: d.GetDetailedMetric(),
		}
		if m := d.GetMetadata(); m != nil {
			out[i].Metadata = m.AsMap()
		}
	}
	return out
}

// policyOf converts a rate limit policy (nil: none).
func policyOf(p *rlsconfv3.RateLimitPolicy) *yamlRateLimit {
	if p == nil {
		return nil
	}
	rl := &yamlRateLimit{
		RequestsPerUnit: p.GetRequestsPerUnit(),
		Unit:            p.GetUnit().String(),
		Unlimited:       p.GetUnlimited(),
		Name:            p.GetName(),
	}
	for _, r := range p.GetReplaces() {
		rl.Replaces = append(rl.Replaces, struct {
			Name string `yaml:"name"`
		}{r.GetName()})
	}
	return rl
}
