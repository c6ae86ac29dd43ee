package main

import (
	"errors"
	"fmt"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"gopkg.in/yaml.v2"
)

// File is a scenario file: a list of scenarios run in order against both
// servers. See README.md for the format.
type File struct {
	Scenarios []Scenario `yaml:"scenarios"`
}

// Scenario is a sequence of steps that must stay inside one window of
// every unit it touches.
type Scenario struct {
	Name string `yaml:"name"`
	// CountDenied marks a scenario whose answers differ between
	// envoyproxy/ratelimit's counting (every hit counted, denied or not) and
	// tollgate's default all-or-nothing; it is compared only against a
	// server run with TOLLGATE_RLS_COUNT_DENIED=true.
	CountDenied bool   `yaml:"count_denied"`
	Steps       []Step `yaml:"steps"`
}

// Step is one ShouldRateLimit request, sent Repeat times (default 1).
type Step struct {
	Domain      string       `yaml:"domain"`
	HitsAddend  uint32       `yaml:"hits_addend"`
	Descriptors []Descriptor `yaml:"descriptors"`
	Repeat      int          `yaml:"repeat"`
	// ErrorText also compares the gRPC error messages, not only whether
	// both failed.
	ErrorText bool    `yaml:"error_text"`
	Expect    *Expect `yaml:"expect"`
}

// Descriptor is one request descriptor: entries as "key=value" (split at
// the first '='; "key=" is an empty value), an optional limit override and
// an optional per-descriptor hits_addend (0 means check without spending).
type Descriptor struct {
	Entries    []string  `yaml:"entries"`
	Limit      *Override `yaml:"limit"`
	HitsAddend *uint64   `yaml:"hits_addend"`
}

// Override is a descriptor's own limit.
type Override struct {
	RequestsPerUnit uint32 `yaml:"requests_per_unit"`
	Unit            string `yaml:"unit"`
}

// Expect is what the reference (-a) must answer to the last repetition of
// a step; it keeps scenarios honest (a sequence meant to go over its limit
// really does). Codes are OK or OVER_LIMIT; Remaining is compared when set.
type Expect struct {
	Error     bool     `yaml:"error"`
	Overall   string   `yaml:"overall"`
	Codes     []string `yaml:"codes"`
	Remaining []uint32 `yaml:"remaining"`
}

// ParseFile reads a scenario file, YAML or JSON, strictly: an unknown
// field, a bad entry, a bad unit or code is an error naming the scenario.
func ParseFile(data []byte) (*File, error) {
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	if len(f.Scenarios) == 0 {
		return nil, errors.New("no scenarios")
	}
	seen := map[string]bool{}
	for i, s := range f.Scenarios {
		if s.Name == "" {
			return nil, fmt.Errorf("scenario %d: no name", i)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("scenario %q: name used twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Steps) == 0 {
			return nil, fmt.Errorf("scenario %q: no steps", s.Name)
		}
		for j, st := range s.Steps {
			if _, err := st.Request(); err != nil {
				return nil, fmt.Errorf("scenario %q step %d: %w", s.Name, j, err)
			}
			if err := st.Expect.check(); err != nil {
				return nil, fmt.Errorf("scenario %q step %d: %w", s.Name, j, err)
			}
		}
	}
	return &f, nil
}

// Times is how many requests the step sends.
func (st Step) Times() int { return max(1, st.Repeat) }

// Request builds the step's RateLimitRequest.
func (st Step) Request() (*rlsv3.RateLimitRequest, error) {
	req := &rlsv3.RateLimitRequest{Domain: st.Domain, HitsAddend: st.HitsAddend}
	for i, d := range st.Descriptors {
		pd, err := d.proto()
		if err != nil {
			return nil, fmt.Errorf("descriptor %d: %w", i, err)
		}
		req.Descriptors = append(req.Descriptors, pd)
	}
	return req, nil
}

// proto builds one descriptor.
func (d Descriptor) proto() (*ratelimitv3.RateLimitDescriptor, error) {
	pd := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range d.Entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q is not key=value", e)
		}
		pd.Entries = append(pd.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	if d.Limit != nil {
		u, ok := typev3.RateLimitUnit_value[strings.ToUpper(d.Limit.Unit)]
		if !ok || u == 0 {
			// UNKNOWN is refused here: envoyproxy/ratelimit f2fb157 panics on
			// it ("should not get here") and the process dies.
			return nil, fmt.Errorf("limit unit %q is not SECOND…YEAR", d.Limit.Unit)
		}
		pd.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{
			RequestsPerUnit: d.Limit.RequestsPerUnit,
			Unit:            typev3.RateLimitUnit(u),
		}
	}
	if d.HitsAddend != nil {
		pd.HitsAddend = wrapperspb.UInt64(*d.HitsAddend)
	}
	return pd, nil
}

// check validates the codes an expectation names.
func (e *Expect) check() error {
	if e == nil {
		return nil
	}
	for _, c := range append([]string{e.Overall}, e.Codes...) {
		if _, ok := rlsv3.RateLimitResponse_Code_value[c]; c != "" && !ok {
			return fmt.Errorf("expect: unknown code %q", c)
		}
	}
	return nil
}

// Selected reports whether a scenario runs in mode: "all", "default"
// (count_denied false) or "count-denied" (count_denied true).
func (s Scenario) Selected(mode string) bool {
	switch mode {
	case "default":
		return !s.CountDenied
	case "count-denied":
		return s.CountDenied
	}
	return true
}
