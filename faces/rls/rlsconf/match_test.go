package rlsconf_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// entries parses "k1=v1,k2=v2" (a value may be empty: "k=").
func entries(s string) []rlsconf.Entry {
	if s == "" {
		return nil
	}
	var es []rlsconf.Entry
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		es = append(es, rlsconf.Entry{Key: k, Value: v})
	}
	return es
}

// describe renders a matched rule for comparison: "key rpu/unit [name]", or
// "unlimited key", or "none".
func describe(r *rlsconf.Rule) string {
	switch {
	case r == nil:
		return "none"
	case r.Unlimited:
		return "unlimited " + r.Key
	case r.Name != "":
		return fmt.Sprintf("%s %d/%s %s", r.Key, r.RequestsPerUnit, r.Unit, r.Name)
	}
	return fmt.Sprintf("%s %d/%s", r.Key, r.RequestsPerUnit, r.Unit)
}

// matchCase is one descriptor and the rule it must meet.
type matchCase struct {
	domain, entries, want string
}

// runMatches loads files and checks every case; a case in an unknown
// domain must also report ok=false.
func runMatches(t *testing.T, files []rlsconf.File, cases []matchCase) *rlsconf.Config {
	t.Helper()
	c, err := rlsconf.Parse(files)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	known := map[string]bool{}
	for _, d := range c.Domains() {
		known[d] = true
	}
	for i, tc := range cases {
		r, ok := c.Match(tc.domain, entries(tc.entries))
		if got := describe(r); got != tc.want {
			t.Errorf("case %d: Match(%s, %s) = %s, want %s", i, tc.domain, tc.entries, got, tc.want)
		}
		if ok != known[tc.domain] {
			t.Errorf("case %d: Match(%s, %s) ok = %v, want %v", i, tc.domain, tc.entries, ok, known[tc.domain])
		}
	}
	return c
}

func TestMatchBasicConfig(t *testing.T) {
	t.Parallel()
	runMatches(t, fixture(t, "basic_config.yaml"), []matchCase{
		{"foo_domain", "", "none"},
		{"foo_domain", "key2=x", "none"},
		{"test-domain", "", "none"},
		{"test-domain", "key1=something", "none"},
		{"test-domain", "key1=value1", "none"}, // a placeholder level has no limit
		{"test-domain", "key2=value2,subkey=subvalue", "none"},
		{"test-domain", "key5=value5,subkey5=subvalue", "none"},
		{"test-domain", "key1=value1,subkey1=something", "test-domain.key1_value1.subkey1 5/SECOND"},
		{"test-domain", "key1=value1,subkey1=subvalue1", "test-domain.key1_value1.subkey1_subvalue1 10/SECOND"},
		{"test-domain", "key2=something", "test-domain.key2 20/MINUTE"},
		{"test-domain", "key2=value2", "test-domain.key2_value2 30/MINUTE"},
		{"test-domain", "key2=value3", "none"}, // whitelisted
		{"test-domain", "key3=foo", "test-domain.key3 1/HOUR"},
		{"test-domain", "key4=foo", "test-domain.key4 1/DAY key4_rate_limit"},
		{"test-domain", "key5=value5", "test-domain.key5_value5 15/DAY"},
		{"test-domain", "key5=value5,subkey5=subvalue5", "test-domain.key5_value5.subkey5_subvalue5 25/DAY"},
		{"test-domain", "key6=foo", "unlimited test-domain.key6"},
		{"test-domain", "key7=unspecified_value", "test-domain.key7 70/MINUTE"},
		{"test-domain", "Key2=something", "none"}, // keys are case-sensitive
		{"test-domain", "key2=", "test-domain.key2 20/MINUTE"},
	})
}

func TestMatchMergedDomain(t *testing.T) {
	t.Parallel()
	runMatches(t, fixture(t, "merge_domain_key1.yaml", "merge_domain_key2.yaml"), []matchCase{
		{"test-domain", "key1=value1", "test-domain.key1_value1 10/MINUTE"},
		{"test-domain", "key2=value2", "test-domain.key2_value2 20/MINUTE"},
		{"test-domain", "key1=value2", "none"},
	})
}

func TestMatchShadowModeConfig(t *testing.T) {
	t.Parallel()
	c := runMatches(t, fixture(t, "shadowmode_config.yaml"), []matchCase{
		{"test-domain", "key1=value1,subkey1=x", "test-domain.key1_value1.subkey1 5/SECOND"},
		{"test-domain", "key1=value1,subkey1=subvalue1", "test-domain.key1_value1.subkey1_subvalue1 10/SECOND"},
		{"test-domain", "key2=x", "test-domain.key2 20/MINUTE"},
		{"test-domain", "key2=value2", "test-domain.key2_value2 30/MINUTE"},
	})
	for _, tc := range []struct {
		entries string
		shadow  bool
	}{
		{"key1=value1,subkey1=x", false},
		{"key1=value1,subkey1=subvalue1", true},
		{"key2=x", true},
		{"key2=value2", false}, // the flag belongs to the descriptor, not the key
	} {
		r, _ := c.Match("test-domain", entries(tc.entries))
		if r.ShadowMode != tc.shadow {
			t.Errorf("%s: ShadowMode = %v, want %v", tc.entries, r.ShadowMode, tc.shadow)
		}
	}
}

func TestMatchMetadata(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse(fixture(t, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Match("test-domain", entries("key1=value1,subkey1=x"))
	if got := fmt.Sprint(r.Metadata); got != "map[name:service_1]" {
		t.Errorf("metadata of subkey1 = %s", got)
	}
	r, _ = c.Match("test-domain", entries("key2=x"))
	if got := fmt.Sprint(r.Metadata); got != "map[service_with_quota:map[name:service_2]]" {
		t.Errorf("metadata of key2 = %s", got)
	}
	r, _ = c.Match("test-domain", entries("key1=value1,subkey1=subvalue1"))
	if r.Metadata != nil {
		t.Errorf("metadata of subvalue1 = %v, want nil", r.Metadata)
	}
}

func TestMatchWildcardConfig(t *testing.T) {
	t.Parallel()
	runMatches(t, fixture(t, "wildcard.yaml"), []matchCase{
		{"test-domain", "noVal=foo1", "test-domain.noVal 20/MINUTE"},
		{"test-domain", "wild=foo1", "test-domain.wild_foo* 20/MINUTE"},
		{"test-domain", "wild=foo", "test-domain.wild_foo* 20/MINUTE"}, // '*' may be empty
		{"test-domain", "wild=bar", "none"},
		{"test-domain", "wild=xfoo", "none"},
		{"test-domain", "nestedWild=val1,wild=goo2", "test-domain.nestedWild_val1.wild_goo* 20/MINUTE"},
		{"test-domain", "nestedWild=val1,wild=foo2", "none"}, // patterns belong to their level
		{"test-domain", "noWild=foo1", "none"},               // no eager prefix match
		{"test-domain", "noWild=foo", "test-domain.noWild_foo 20/MINUTE"},
		{"test-domain", "midWild=barab", "test-domain.midWild_bar*b 20/MINUTE"},
		{"test-domain", "midWild=bar123b", "test-domain.midWild_bar*b 20/MINUTE"},
		{"test-domain", "midWild=barb", "test-domain.midWild_bar*b 20/MINUTE"},
		{"test-domain", "midWild=bar", "none"}, // prefix and suffix may not overlap
		{"test-domain", "midWild=bara", "none"},
		{"test-domain", "midWild=xbarb", "none"},
		{"test-domain", "multiWild=foo123bar456baz", "test-domain.multiWild_foo*bar*baz 10/MINUTE"},
		{"test-domain", "multiWild=foobarbaz", "test-domain.multiWild_foo*bar*baz 10/MINUTE"},
		{"test-domain", "multiWild=foo123baz", "none"},
		{"test-domain", "multiWild=bar456baz", "none"},
		{"test-domain", "multiWild=foobazbar", "none"}, // out of order
		// The pattern is matched against "key_value" as a whole.
		{"test-domain", "wild_foo=x", "test-domain.wild_foo* 20/MINUTE"},
		{"test-domain", "wild_f=oo", "none"},
	})
}

func TestMatchPrecedence(t *testing.T) {
	t.Parallel()
	// At one level: the exact value, then patterns in load order, then the
	// key alone; whatever order the file lists them in.
	runMatches(t, []rlsconf.File{yamlFile("p.yaml", `domain: p
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: ab*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: a*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: k
    value: '*c'
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: k
    value: whitelisted
  - key: k
    value: w*
`)}, []matchCase{
		{"p", "k=abc", "p.k_abc 4/SECOND"},  // exact beats every pattern
		{"p", "k=abd", "p.k_ab* 2/SECOND"},  // first pattern in load order
		{"p", "k=abxc", "p.k_ab* 2/SECOND"}, // before *c, listed later
		{"p", "k=axc", "p.k_a* 3/SECOND"},   // before *c
		{"p", "k=zc", "p.k_*c 5/SECOND"},    // the only pattern that fits
		{"p", "k=zz", "p.k 1/SECOND"},       // the key alone last
		{"p", "k=", "p.k 1/SECOND"},         // an empty value is a value
		{"p", "k=whitelisted", "none"},      // exact, without rate_limit
		{"p", "k=wow", "none"},              // a pattern without rate_limit
		{"p", "k=*c", "p.k_*c 5/SECOND"},    // a literal '*' matches exactly
		{"p", "other=abc", "none"},          // another key
		{"p", "k=abc,k=abc", "none"},        // too deep
	})
}

func TestMatchDepth(t *testing.T) {
	t.Parallel()
	// A rule applies only at the depth of the descriptor's last entry.
	runMatches(t, []rlsconf.File{yamlFile("d.yaml", `domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: {unit: minute, requests_per_unit: 3}
      - key: b
        value: limited
        rate_limit: {unit: minute, requests_per_unit: 2}
  - key: leaf
    rate_limit: {unit: minute, requests_per_unit: 9}
`)}, []matchCase{
		{"d", "a=1", "d.a 1/MINUTE"},
		{"d", "a=1,b=2", "none"}, // b has children but no limit
		{"d", "a=1,b=limited", "d.a.b_limited 2/MINUTE"},
		{"d", "a=1,b=2,c=3", "d.a.b.c 3/MINUTE"},
		{"d", "a=1,b=2,c=3,e=4", "none"},   // deeper than the tree
		{"d", "a=1,b=limited,c=3", "none"}, // b_limited has no children
		{"d", "a=1,x=2", "none"},
		{"d", "leaf=1", "d.leaf 9/MINUTE"},
		{"d", "leaf=1,more=2", "none"}, // the leaf's limit is at depth 1
		{"d", "b=2", "none"},
		{"d", "", "none"},
	})
}

func TestMatchCompositeKeyQuirks(t *testing.T) {
	t.Parallel()
	// Lookups use key+"_"+value, so a key holding '_' can meet another
	// key's value, exactly as in envoyproxy/ratelimit.
	runMatches(t, []rlsconf.File{yamlFile("q.yaml", `domain: q
descriptors:
  - key: a
    value: b_c
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: x*
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: k_
    rate_limit: {unit: minute, requests_per_unit: 3}
`)}, []matchCase{
		{"q", "a=b_c", "q.a_b_c 1/MINUTE"},
		{"q", "a_b=c", "q.a_b_c 1/MINUTE"},     // same composite string
		{"q", "xyz=anything", "q.x* 2/MINUTE"}, // a '*' in a key is a pattern too
		{"q", "k=", "q.k_ 3/MINUTE"},           // "k" + "_" + "" is "k_"
		{"q", "k_=v", "q.k_ 3/MINUTE"},         // the key alone
	})
}

func TestMatchWildcards(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"*", []string{"", "a", "anything at all"}, nil},
		{"a*", []string{"a", "ab", "a*"}, []string{"", "b", "ba"}},
		{"*a", []string{"a", "ba", "aa"}, []string{"ab", ""}},
		{"a*b", []string{"ab", "axb", "abab"}, []string{"a", "b", "ba", "aba"}},
		{"a*b*c", []string{"abc", "a1b2c", "abbc", "acbc"}, []string{"acb", "ab", "bc", "abcd"}},
		{"**", []string{"", "x"}, nil},
		{"a**b", []string{"ab", "a-b"}, []string{"a", "ba"}},
		{"*b*", []string{"b", "abc", "bbb"}, []string{"", "ac"}},
		{"aba*aba", []string{"abaaba", "aba-aba"}, []string{"aba", "ababa"}},
		{"/api/*/resource/*/action", []string{"/api/v1/resource/123/action", "/api//resource//action"}, []string{"/api/v1/resource/123/other", "/api/v1/action"}},
		{"é*ü", []string{"éü", "é-ü"}, []string{"e-u"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			t.Parallel()
			c, err := rlsconf.Parse([]rlsconf.File{yamlFile("w.yaml",
				fmt.Sprintf("domain: w\ndescriptors:\n  - key: k\n    value: %q\n    rate_limit: {unit: minute, requests_per_unit: 1}\n", tc.pattern))})
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tc.match {
				if r, _ := c.Match("w", []rlsconf.Entry{{Key: "k", Value: v}}); r == nil {
					t.Errorf("%q does not match %q", v, tc.pattern)
				}
			}
			for _, v := range tc.miss {
				if r, _ := c.Match("w", []rlsconf.Entry{{Key: "k", Value: v}}); r != nil {
					t.Errorf("%q matches %q", v, tc.pattern)
				}
			}
		})
	}
}

func TestMatchLongEntries(t *testing.T) {
	t.Parallel()
	// Composite keys longer than Match's stack buffer.
	long := strings.Repeat("v", 300)
	runMatches(t, []rlsconf.File{yamlFile("l.yaml", "domain: l\ndescriptors:\n  - key: k\n    value: "+long+"\n    rate_limit: {unit: day, requests_per_unit: 1}\n  - key: p\n    value: v*v\n    rate_limit: {unit: day, requests_per_unit: 2}\n")}, []matchCase{
		{"l", "k=" + long, "l.k_" + long + " 1/DAY"},
		{"l", "p=" + long, "l.p_v*v 2/DAY"},
	})
}

func TestMatchAcrossFiles(t *testing.T) {
	t.Parallel()
	// Merged files add their top-level patterns in file order.
	c := runMatches(t, []rlsconf.File{
		yamlFile("1.yaml", "domain: m\ndescriptors:\n  - key: k\n    value: a*\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"),
		yamlFile("2.yaml", "domain: m\ndescriptors:\n  - key: k\n    value: ab*\n    rate_limit: {unit: hour, requests_per_unit: 2}\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n"),
		yamlFile("3.yaml", "domain: other\n"),
	}, []matchCase{
		{"m", "k=abc", "m.k_a* 1/HOUR"},
		{"m", "k=b", "m.k 3/HOUR"},
		{"other", "k=abc", "none"},
		{"nope", "k=abc", "none"},
	})
	if got := strings.Join(c.Domains(), ","); got != "m,other" {
		t.Errorf("Domains() = %s", got)
	}
}

func TestRuleFields(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse([]rlsconf.File{yamlFile("r.yaml", `domain: r
descriptors:
  - key: k
    shadow_mode: true
    quota_mode: true
    detailed_metric: true
    value_to_metric: true
    rate_limit:
      name: mine
      unit: Week
      requests_per_unit: 0
      replaces: [{name: a}, {name: b}]
`)})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Match("r", entries("k=v"))
	got := fmt.Sprintf("%s %s %q %d %v %v%v%v%v%v %q %v", r.Domain, r.Key, r.Name, r.RequestsPerUnit, r.Unit,
		r.ShadowMode, r.QuotaMode, r.DetailedMetric, r.ValueToMetric, r.ShareThreshold, r.Replaces, r.Unlimited)
	if want := `r r.k "mine" 0 WEEK truetruetruetruefalse ["a" "b"] false`; got != want {
		t.Errorf("rule = %s\nwant   %s", got, want)
	}
}

func BenchmarkMatch(b *testing.B) {
	c, err := rlsconf.Parse(testFiles(b, "envoy", "share_threshold.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, entries string }{
		{"exact", "file=test1"},
		{"pattern", "files=files/a.pdf"},
		{"three levels", "user=user/alice,resource=res/file1,action=read"},
		{"no match", "nothing=here"},
	} {
		es := entries(bc.entries)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Match("test-domain", es)
			}
		})
	}
}
