package rlsconf

import (
	"slices"
	"strings"
)

// Config is every domain loaded from a directory of envoyproxy/ratelimit
// YAML files. The zero value has no domain. A Config is immutable and safe
// for concurrent use by multiple goroutines.
type Config struct {
	domains map[string]*node
	skipped []string
}

// Skipped returns the names in the directory that [LoadDir] (or a
// [Watcher]) did not read, in name order: files not named *.yaml or
// *.yml, and directories, which envoyproxy/ratelimit would have read.
// Names that start with '.' are not among them. The caller must not
// modify the slice.
func (c *Config) Skipped() []string { return c.skipped }

// Entry is one key/value pair of a request's descriptor.
type Entry struct{ Key, Value string }

// Rule is one rate_limit block of the configuration, with the flags of the
// descriptor that holds it. Rules are shared by every caller: never modify
// one.
type Rule struct {
	// Domain is the domain the rule belongs to.
	Domain string
	// Name is rate_limit.name, reported in a status's current_limit.name and
	// the target of other rules' Replaces; empty when unnamed.
	Name string
	// RequestsPerUnit is the budget per unit; 0 denies every request.
	RequestsPerUnit uint32
	// Unit is the period; UnitUnknown when Unlimited.
	Unit Unit
	// Unlimited rules answer OK without touching a counter.
	Unlimited bool
	// ShadowMode, QuotaMode, DetailedMetric, ValueToMetric and
	// ShareThreshold are the flags of the descriptor that holds the rule.
	ShadowMode, QuotaMode, DetailedMetric, ValueToMetric, ShareThreshold bool
	// Replaces lists the names of the rules this one drops from a request
	// that matches both.
	Replaces []string
	// Key is the rule's path as envoyproxy/ratelimit names its stats and
	// logs it: the domain, then for each level "." and the level's
	// composite key as written in the configuration (key, or key_value,
	// wildcard patterns verbatim), e.g. "test-domain.key1_value1.subkey1" or
	// "test-domain.wild_foo*". It does not depend on the request: see
	// [Rule.StatsKey] for the name detailed_metric and value_to_metric give
	// one request's stats, and [AppendCounterKey] for what is counted.
	Key string
	// Metadata is the descriptor's metadata converted as envoyproxy/ratelimit
	// converts it for a protobuf Struct: nested mappings have string keys
	// (fmt %v of the YAML key), values are string, bool, int, uint64,
	// float64, nil, []any or map[string]any, and every string is valid
	// UTF-8, so structpb.NewStruct always accepts it. Nil when absent or
	// empty. envoyproxy/ratelimit (f2fb157) loses a rule's metadata, and
	// so leaves it out of dynamic_metadata, whenever it renames the stats:
	// with detailed_metric on a leaf descriptor, and whenever
	// [Rule.StatsKey] differs from Key; this field keeps it regardless.
	Metadata map[string]any

	// path holds the tree node of each level, from the top.
	path []*node
}

// node is one descriptor of the tree.
type node struct {
	key       string           // the descriptor's key
	composite string           // key, or key_value when value is set
	parts     [][]byte         // composite split on '*'; nil unless it holds one
	children  map[string]*node // by composite key
	patterns  []*node          // children with '*' in their composite, in load order
	rule      *Rule            // nil: no rate_limit
	share     bool             // share_threshold
	toMetric  bool             // value_to_metric
}

// Domains returns the names of the loaded domains, sorted.
func (c *Config) Domains() []string {
	names := make([]string, 0, len(c.domains))
	for name := range c.domains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// Match returns the rule that applies to one descriptor's entries in
// domain: at each level the exact composite key entry.Key+"_"+entry.Value,
// else the first of the level's wildcard patterns (load order) that matches
// that composite string, else entry.Key alone; a rule applies only at the
// depth of the last entry. It returns nil when nothing applies (no match at
// some level, a rule at another depth, a matched descriptor without
// rate_limit, no entries), and ok=false when the domain is unknown. A
// descriptor's own limit override in a request applies only when ok is true,
// whatever Match returned, as in envoyproxy/ratelimit.
func (c *Config) Match(domain string, entries []Entry) (rule *Rule, ok bool) {
	n, ok := c.domains[domain]
	if !ok {
		return nil, false
	}
	var buf [128]byte
	for i, e := range entries {
		composite := appendComposite(buf[:0], e)
		next := n.children[string(composite)]
		if next == nil {
			for _, p := range n.patterns {
				if matchParts(p.parts, composite) {
					next = p
					break
				}
			}
		}
		if next == nil {
			next = n.children[e.Key]
		}
		if next == nil {
			return nil, true
		}
		if i == len(entries)-1 {
			return next.rule, true
		}
		if len(next.children) == 0 {
			return nil, true
		}
		n = next
	}
	return nil, true
}

// appendComposite appends a request entry's composite key: key, '_',
// value, with the '_' even when the value is empty.
func appendComposite(dst []byte, e Entry) []byte {
	dst = append(dst, e.Key...)
	dst = append(dst, '_')
	return append(dst, e.Value...)
}

// How a level of the tree was reached from a request entry.
const (
	viaKey     = iota // entry.Key alone, the default
	viaExact          // entry.Key+"_"+entry.Value
	viaPattern        // a wildcard pattern
)

// reachedVia tells how level n was reached for entry e. It relies on e
// having led the walk to n: the walk takes an exact match first and the
// first matching pattern next, so if n's own pattern matches a composite
// that is not n's exact key, n was reached through it.
func (n *node) reachedVia(e Entry) int {
	var buf [128]byte
	composite := appendComposite(buf[:0], e)
	switch {
	case string(composite) == n.composite:
		return viaExact
	case n.parts != nil && matchParts(n.parts, composite):
		return viaPattern
	}
	return viaKey
}

// sharedValue returns the value envoyproxy/ratelimit puts in the counter
// key for level n: the wildcard pattern (n's composite key less the
// request's key and '_') when n has share_threshold and was reached through
// its pattern, else the request's value. ok reports the first case.
func (n *node) sharedValue(e Entry) (v string, ok bool) {
	if n.share && n.reachedVia(e) == viaPattern {
		return strings.TrimPrefix(n.composite, e.Key+"_"), true
	}
	return e.Value, false
}

// KeyValues returns, for each of entries, the value that envoyproxy/ratelimit
// puts in the counter key: the request's value, except at a level matched
// through a share_threshold wildcard, where the pattern stands in for it
// (value "files/*" for every files/… value), so all values matching the
// pattern share one counter. entries must be the ones that matched r. A nil
// rule (a descriptor's own limit override) keeps every value.
func (r *Rule) KeyValues(entries []Entry) []string {
	values := make([]string, len(entries))
	for i, e := range entries {
		values[i] = e.Value
		if r != nil && i < len(r.path) {
			values[i], _ = r.path[i].sharedValue(e)
		}
	}
	return values
}

// AppendCounterKey appends to dst what envoyproxy/ratelimit counts a
// descriptor under, without its CACHE_KEY_PREFIX in front and the window
// start behind: domain, '_', then for each entry its key, '_', its value
// (from [Rule.KeyValues]; r is nil for a limit override) and '_'. The full
// envoyproxy/ratelimit key is prefix + this + (unix seconds / unit) * unit.
//
// To count the same things together as envoyproxy/ratelimit, a store key
// must hold this string byte for byte and the window start, and nothing
// about the rule: two descriptors with the same entries in one request add
// to one counter; a limit override and the configured rule of the same
// entries share it, as do a MINUTE and an HOUR limit in the first minute of
// each hour (same window start); and a '_' inside a domain, key or value
// moves a boundary unseen, so entries ("a", "b_c") and ("a_b", "c") are one
// counter there, and must be one here.
func AppendCounterKey(dst []byte, domain string, entries []Entry, r *Rule) []byte {
	dst = append(dst, domain...)
	dst = append(dst, '_')
	for i, e := range entries {
		v := e.Value
		if r != nil && i < len(r.path) {
			v, _ = r.path[i].sharedValue(e)
		}
		dst = append(dst, e.Key...)
		dst = append(dst, '_')
		dst = append(dst, v...)
		dst = append(dst, '_')
	}
	return dst
}

// StatsByValue reports whether a request's values may name r's stats
// ([Rule.StatsKey] may differ from Key): detailed_metric on r's
// descriptor, or value_to_metric on any level of its path.
func (r *Rule) StatsByValue() bool {
	if r.DetailedMetric {
		return true
	}
	for _, n := range r.path {
		if n.toMetric {
			return true
		}
	}
	return false
}

// StatsKey returns the name envoyproxy/ratelimit gives this request's stats
// for r (total_hits, over_limit, … are suffixes of it), for the entries that
// matched r. With detailed_metric on the rule's descriptor it is the domain
// and every level's key_value from the request ("_" even before an empty
// value), with share_threshold levels using their pattern as value. Without
// it, each level contributes: through a wildcard, key_ plus the pattern
// (share_threshold), the request's value (value_to_metric) or the
// configured pattern; exactly, key_value; as the key alone, the key, plus
// _value with value_to_metric. Without either flag anywhere this equals
// r.Key.
func (r *Rule) StatsKey(entries []Entry) string {
	var b strings.Builder
	b.WriteString(r.Domain)
	if r.DetailedMetric {
		shared := false
		for i, e := range entries {
			if i < len(r.path) {
				if _, ok := r.path[i].sharedValue(e); ok {
					shared = true
				}
			}
		}
		for i, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.Key)
			if shared {
				v, _ := r.path[i].sharedValue(e)
				if v != "" {
					b.WriteByte('_')
					b.WriteString(v)
				}
				continue
			}
			b.WriteByte('_')
			b.WriteString(e.Value)
		}
		return b.String()
	}
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.Key)
		if i >= len(r.path) {
			continue
		}
		n := r.path[i]
		var v string
		switch via := n.reachedVia(e); {
		case via == viaPattern && n.share:
			v, _ = n.sharedValue(e)
		case via == viaPattern && !n.toMetric:
			v = strings.TrimPrefix(n.composite, e.Key+"_")
		case via == viaExact || n.toMetric:
			v = e.Value
		}
		if v != "" {
			b.WriteByte('_')
			b.WriteString(v)
		}
	}
	return b.String()
}
