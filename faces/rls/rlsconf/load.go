package rlsconf

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v2"
)

// File is one configuration file's name (used in errors) and content.
type File struct {
	Name string
	Data []byte
}

// LoadDir reads every *.yaml and *.yml file directly in dir, in name order,
// skipping names that start with '.', subdirectories, and anything that is
// not a regular file after following symbolic links; then it parses them as
// [Parse] does. An empty directory gives a Config with no domain. A file
// that cannot be read or is rejected gives a [*FileError] naming it. The
// names it passed over, but for the '.' ones, are the Config's
// [Config.Skipped].
func LoadDir(dir string) (*Config, error) {
	files, skipped, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	c, err := Parse(files)
	if err != nil {
		return nil, err
	}
	c.skipped = skipped
	return c, nil
}

// readDir reads the files [LoadDir] loads, in name order, and returns
// them and the names it passed over that do not start with '.'.
func readDir(dir string) (files []File, skipped []string, err error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, nil, &FileError{Path: dir, Err: err}
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // a ConfigMap's ..data and its kin
		}
		if !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			skipped = append(skipped, name)
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path) // follows a symbolic link
		if err != nil {
			return nil, nil, &FileError{Path: path, Err: err}
		}
		if !info.Mode().IsRegular() {
			skipped = append(skipped, name)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, &FileError{Path: path, Err: err}
		}
		files = append(files, File{Name: path, Data: data})
	}
	return files, skipped, nil
}

// Parse loads files in the order given, merging files that name the same
// domain (see the package documentation). As in envoyproxy/ratelimit, every
// file's YAML and keys are checked before any file's descriptors are, so a
// key problem in a later file is reported before a descriptor problem in an
// earlier one. The first rejected file stops it with a [*FileError].
func Parse(files []File) (*Config, error) {
	roots := make([]yamlRoot, len(files))
	for i, f := range files {
		if err := decode(f.Data, &roots[i]); err != nil {
			return nil, &FileError{Path: f.Name, Err: err}
		}
	}
	c := &Config{domains: map[string]*node{}}
	for i, f := range files {
		if err := c.add(roots[i]); err != nil {
			return nil, &FileError{Path: f.Name, Err: err}
		}
	}
	return c, nil
}

// The typed form of a file, field for field envoyproxy/ratelimit's.
type (
	yamlRoot struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value"`
		RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
		Descriptors    []yamlDescriptor `yaml:"descriptors"`
		ShadowMode     bool             `yaml:"shadow_mode"`
		QuotaMode      bool             `yaml:"quota_mode"`
		DetailedMetric bool             `yaml:"detailed_metric"`
		ValueToMetric  bool             `yaml:"value_to_metric"`
		ShareThreshold bool             `yaml:"share_threshold"`
		Metadata       map[string]any   `yaml:"metadata"`
	}
	yamlRateLimit struct {
		RequestsPerUnit uint32 `yaml:"requests_per_unit"`
		Unit            string `yaml:"unit"`
		Unlimited       bool   `yaml:"unlimited"`
		Name            string `yaml:"name"`
		Replaces        []struct {
			Name string `yaml:"name"`
		} `yaml:"replaces"`
	}
)

// knownKeys is envoyproxy/ratelimit's flat list of accepted mapping keys:
// any of them is accepted at any depth.
var knownKeys = map[string]bool{
	"domain": true, "key": true, "value": true, "descriptors": true,
	"rate_limit": true, "unit": true, "requests_per_unit": true, "unlimited": true,
	"shadow_mode": true, "quota_mode": true, "name": true, "replaces": true,
	"detailed_metric": true, "value_to_metric": true, "share_threshold": true,
	"metadata": true,
}

// decode parses one file into root after checking its keys.
func decode(data []byte, root *yamlRoot) error {
	generic := map[any]any{}
	if err := yaml.Unmarshal(data, &generic); err != nil {
		return fmt.Errorf("%w: %v", ErrYAML, err)
	}
	if err := checkKeys(generic); err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, root); err != nil {
		return fmt.Errorf("%w: %v", ErrYAML, err)
	}
	return nil
}

// add adds one file's domain to c.
func (c *Config) add(root yamlRoot) error {
	if root.Domain == "" {
		return ErrEmptyDomain
	}
	top, ok := c.domains[root.Domain]
	if !ok {
		top = &node{children: map[string]*node{}}
	}
	if err := top.add(root.Domain, root.Domain, nil, root.Descriptors); err != nil {
		return err
	}
	c.domains[root.Domain] = top
	return nil
}

// checkKeys applies envoyproxy/ratelimit's key check to one mapping of the
// generic parse: string keys from the known list, lists of mappings only,
// and scalars of the types it accepts; metadata is not looked into here.
// Keys are visited in sorted order so that the same problem is always
// reported first.
func checkKeys(m map[any]any) error {
	keys := make([]any, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		name, ok := k.(string)
		if !ok {
			return fmt.Errorf("%w: %v", ErrNonStringKey, k)
		}
		if !knownKeys[name] {
			return fmt.Errorf("%w %q", ErrUnknownKey, name)
		}
		if name == "metadata" {
			continue
		}
		switch v := m[k].(type) {
		case []any:
			for _, e := range v {
				sub, ok := e.(map[any]any)
				if !ok {
					return fmt.Errorf("%w: %q holds %v", ErrNonMapList, name, e)
				}
				if err := checkKeys(sub); err != nil {
					return err
				}
			}
		case map[any]any:
			if err := checkKeys(v); err != nil {
				return err
			}
		case string, int, bool, nil:
		default:
			return fmt.Errorf("%w: %q is %v (%T)", ErrLeafType, name, v, v)
		}
	}
	return nil
}

// add loads descriptors below n, checking each as envoyproxy/ratelimit does
// and in its order. prefix is n's rule key (the domain, then ".composite"
// per level) and chain the nodes from the top level down to n.
func (n *node) add(domain, prefix string, chain []*node, descriptors []yamlDescriptor) error {
	for _, d := range descriptors {
		if d.Key == "" {
			return ErrEmptyKey
		}
		composite := d.Key
		if d.Value != "" {
			composite += "_" + d.Value
		}
		path := prefix + "." + composite
		if _, dup := n.children[composite]; dup {
			return fmt.Errorf("%w %q", ErrDuplicateKey, path)
		}
		child := &node{
			key:       d.Key,
			composite: composite,
			children:  map[string]*node{},
			share:     d.ShareThreshold,
			toMetric:  d.ValueToMetric,
		}
		childChain := append(slices.Clip(chain), child)
		if d.RateLimit != nil {
			rule, err := newRule(domain, path, d)
			if err != nil {
				return err
			}
			rule.path = childChain
			child.rule = rule
		}
		wild := strings.Contains(composite, "*")
		if d.ShareThreshold && !wild {
			return fmt.Errorf("%w: %q", ErrShareThreshold, composite)
		}
		if wild {
			child.parts = bytes.Split([]byte(composite), []byte("*"))
			n.patterns = append(n.patterns, child)
		}
		metadata, err := convertMetadata(d.Metadata)
		if err != nil {
			return err
		}
		if child.rule != nil {
			child.rule.Metadata = metadata
		}
		if err := child.add(domain, path, childChain, d.Descriptors); err != nil {
			return err
		}
		n.children[composite] = child
	}
	return nil
}

// newRule checks and builds the rule of descriptor d, whose path is key.
func newRule(domain, key string, d yamlDescriptor) (*Rule, error) {
	rl := d.RateLimit
	unit, valid := parseUnit(rl.Unit)
	switch {
	case rl.Unlimited && valid:
		return nil, fmt.Errorf("%w: %q", ErrUnlimitedWithUnit, rl.Unit)
	case rl.Unlimited:
		unit = UnitUnknown
	case !valid:
		return nil, fmt.Errorf("%w %q", ErrBadUnit, rl.Unit)
	}
	r := &Rule{
		Domain:          domain,
		Name:            rl.Name,
		RequestsPerUnit: rl.RequestsPerUnit,
		Unit:            unit,
		Unlimited:       rl.Unlimited,
		ShadowMode:      d.ShadowMode,
		QuotaMode:       d.QuotaMode,
		DetailedMetric:  d.DetailedMetric,
		ValueToMetric:   d.ValueToMetric,
		ShareThreshold:  d.ShareThreshold,
		Key:             key,
	}
	for _, rep := range rl.Replaces {
		switch rep.Name {
		case "":
			return nil, ErrEmptyReplaces
		case rl.Name:
			return nil, fmt.Errorf("%w: %q", ErrSelfReplaces, rep.Name)
		}
		r.Replaces = append(r.Replaces, rep.Name)
	}
	return r, nil
}
