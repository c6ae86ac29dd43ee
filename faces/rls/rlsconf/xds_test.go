package rlsconf_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// xdsYAML and xdsProto are one configuration in its two forms.
const xdsYAML = `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5, name: k}
  - key: k
    value: v
    rate_limit: {unit: hour, requests_per_unit: 7, replaces: [{name: k}], name: kv}
    metadata: {team: a}
  - key: path
    value: "/api/*"
    shadow_mode: true
    quota_mode: true
    detailed_metric: true
    rate_limit: {unit: week, requests_per_unit: 1}
  - key: free
    rate_limit: {unlimited: true}
  - key: outer
    descriptors:
      - key: inner
        rate_limit: {unit: second, requests_per_unit: 2}
`

func xdsProto(t *testing.T) *rlsconfv3.RateLimitConfig {
	t.Helper()
	md, err := structpb.NewStruct(map[string]any{"team": "a"})
	if err != nil {
		t.Fatal(err)
	}
	return &rlsconfv3.RateLimitConfig{Name: "d", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: 5, Name: "k"}},
		{Key: "k", Value: "v", Metadata: md, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 7, Name: "kv",
			Replaces: []*rlsconfv3.RateLimitReplace{{Name: "k"}}}},
		{Key: "path", Value: "/api/*", ShadowMode: true, QuotaMode: true, DetailedMetric: true,
			RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_WEEK, RequestsPerUnit: 1}},
		{Key: "free", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
		{Key: "outer", Descriptors: []*rlsconfv3.RateLimitDescriptor{
			{Key: "inner", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 2}},
		}},
	}}
}

// TestFromResourcesMatchesYAML: a configuration over xDS answers every
// descriptor with the rule its YAML form answers.
func TestFromResourcesMatchesYAML(t *testing.T) {
	t.Parallel()
	fromYAML, err := rlsconf.Parse([]rlsconf.File{{Name: "d.yaml", Data: []byte(xdsYAML)}})
	if err != nil {
		t.Fatal(err)
	}
	fromXDS, err := rlsconf.FromResources([]*rlsconfv3.RateLimitConfig{xdsProto(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := fromXDS.Domains(); !reflect.DeepEqual(got, []string{"d"}) {
		t.Errorf("Domains() = %v, want [d]", got)
	}
	for _, entries := range [][]rlsconf.Entry{
		{{Key: "k", Value: "x"}},
		{{Key: "k", Value: "v"}},
		{{Key: "path", Value: "/api/users"}},
		{{Key: "free", Value: "x"}},
		{{Key: "outer", Value: "o"}, {Key: "inner", Value: "i"}},
		{{Key: "outer", Value: "o"}},
		{{Key: "none", Value: "x"}},
	} {
		want, wantOK := fromYAML.Match("d", entries)
		got, gotOK := fromXDS.Match("d", entries)
		if gotOK != wantOK || (got == nil) != (want == nil) {
			t.Errorf("Match(%v) = %v, %v over xDS; %v, %v from YAML", entries, got, gotOK, want, wantOK)
			continue
		}
		if got == nil {
			continue
		}
		g, w := *got, *want
		if g.Key != w.Key || g.Name != w.Name || g.RequestsPerUnit != w.RequestsPerUnit || g.Unit != w.Unit || g.Unlimited != w.Unlimited ||
			g.ShadowMode != w.ShadowMode || g.QuotaMode != w.QuotaMode || g.DetailedMetric != w.DetailedMetric ||
			!reflect.DeepEqual(g.Replaces, w.Replaces) || !reflect.DeepEqual(g.Metadata, w.Metadata) {
			t.Errorf("Match(%v) over xDS = %+v, from YAML %+v", entries, g, w)
		}
	}
}

// TestFromResourcesRejects: what envoyproxy/ratelimit rejects in a file
// is rejected in a resource, naming it.
func TestFromResourcesRejects(t *testing.T) {
	t.Parallel()
	minute := func(rpu uint32) *rlsconfv3.RateLimitPolicy {
		return &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: rpu}
	}
	for _, tc := range []struct {
		name string
		rs   []*rlsconfv3.RateLimitConfig
		want error
		path string
	}{
		{"empty domain", []*rlsconfv3.RateLimitConfig{{Name: "r"}}, rlsconf.ErrEmptyDomain, "r"},
		{"empty key", []*rlsconfv3.RateLimitConfig{{Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{RateLimit: minute(1)}}}}, rlsconf.ErrEmptyKey, "d"},
		{"duplicate key", []*rlsconfv3.RateLimitConfig{{Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: minute(1)}, {Key: "k"}}}}, rlsconf.ErrDuplicateKey, "r"},
		{"duplicate key across resources of one domain", []*rlsconfv3.RateLimitConfig{
			{Name: "a", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k"}}},
			{Name: "b", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k"}}},
		}, rlsconf.ErrDuplicateKey, "b"},
		{"unit UNKNOWN", []*rlsconfv3.RateLimitConfig{{Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}}}, rlsconf.ErrBadUnit, "d"},
		{"unit out of the enum", []*rlsconfv3.RateLimitConfig{{Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: 42, RequestsPerUnit: 1}}}}}, rlsconf.ErrBadUnit, "d"},
		{"unlimited with a unit", []*rlsconfv3.RateLimitConfig{{Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_DAY, Unlimited: true}}}}}, rlsconf.ErrUnlimitedWithUnit, "d"},
		{"replaces itself", []*rlsconfv3.RateLimitConfig{{Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_DAY, Name: "n", Replaces: []*rlsconfv3.RateLimitReplace{{Name: "n"}}}}}}}, rlsconf.ErrSelfReplaces, "d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rlsconf.FromResources(tc.rs)
			var fe *rlsconf.FileError
			if !errors.Is(err, tc.want) || !errors.As(err, &fe) || fe.Path != tc.path || !strings.HasPrefix(err.Error(), tc.path+": ") {
				t.Errorf("FromResources = %v, want %v naming %q", err, tc.want, tc.path)
			}
		})
	}
}

// TestResources: files become the resources an xDS server sends for
// them, field for field; a file Parse rejects is rejected.
func TestResources(t *testing.T) {
	t.Parallel()
	got, err := rlsconf.Resources([]rlsconf.File{{Name: "d.yaml", Data: []byte(xdsYAML)}})
	if err != nil {
		t.Fatal(err)
	}
	want := xdsProto(t)
	want.Name = "d.yaml"
	if len(got) != 1 || !proto.Equal(got[0], want) {
		t.Errorf("Resources = %v, want %v", got, want)
	}
	_, err = rlsconf.Resources([]rlsconf.File{{Name: "bad.yaml", Data: []byte("domain: d\nbogus: 1\n")}})
	if !errors.Is(err, rlsconf.ErrUnknownKey) {
		t.Errorf("Resources of a file with an unknown key = %v, want %v", err, rlsconf.ErrUnknownKey)
	}
}
