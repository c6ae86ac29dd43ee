package rlsconf

import (
	"cmp"
	"fmt"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
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

// Resources returns the RateLimitConfig resources an xDS server sends
// for files, one per file, named by the file's name: what Envoy
// Gateway's controller would send for the same configuration. Files
// that [Parse] rejects are rejected with its error. value_to_metric and
// share_threshold have no field in the proto and are left out.
func Resources(files []File) ([]*rlsconfv3.RateLimitConfig, error) {
	if _, err := Parse(files); err != nil {
		return nil, err
	}
	out := make([]*rlsconfv3.RateLimitConfig, len(files))
	for i, f := range files {
		var root yamlRoot
		if err := decode(f.Data, &root); err != nil {
			return nil, &FileError{Path: f.Name, Err: err}
		}
		ds, err := protoDescriptors(root.Descriptors)
		if err != nil {
			return nil, &FileError{Path: f.Name, Err: err}
		}
		out[i] = &rlsconfv3.RateLimitConfig{Name: f.Name, Domain: root.Domain, Descriptors: ds}
	}
	return out, nil
}

// protoDescriptors converts descriptors of a file (checked by Parse).
func protoDescriptors(ds []yamlDescriptor) ([]*rlsconfv3.RateLimitDescriptor, error) {
	var out []*rlsconfv3.RateLimitDescriptor
	for _, d := range ds {
		pd := &rlsconfv3.RateLimitDescriptor{Key: d.Key, Value: d.Value, ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode, DetailedMetric: d.DetailedMetric}
		if rl := d.RateLimit; rl != nil {
			unit, _ := parseUnit(rl.Unit) // UnitUnknown when unlimited
			pd.RateLimit = &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit(unit), RequestsPerUnit: rl.RequestsPerUnit, Unlimited: rl.Unlimited, Name: rl.Name}
			for _, r := range rl.Replaces {
				pd.RateLimit.Replaces = append(pd.RateLimit.Replaces, &rlsconfv3.RateLimitReplace{Name: r.Name})
			}
		}
		md, err := convertMetadata(d.Metadata)
		if err != nil {
			return nil, err
		}
		if md != nil {
			if pd.Metadata, err = structpb.NewStruct(md); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrMetadata, err)
			}
		}
		if pd.Descriptors, err = protoDescriptors(d.Descriptors); err != nil {
			return nil, err
		}
		out = append(out, pd)
	}
	return out, nil
}
