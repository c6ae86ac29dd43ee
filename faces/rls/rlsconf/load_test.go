package rlsconf_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// testFiles reads files of testdata/dir: envoy mirrors envoyproxy/ratelimit's
// test/config corpus, readme and readme4b hold its README's examples.
func testFiles(t testing.TB, dir string, names ...string) []rlsconf.File {
	t.Helper()
	var files []rlsconf.File
	for _, name := range names {
		path := filepath.Join("testdata", dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rlsconf.File{Name: path, Data: data})
	}
	return files
}

// fixture reads files of testdata/envoy.
func fixture(t *testing.T, names ...string) []rlsconf.File {
	t.Helper()
	return testFiles(t, "envoy", names...)
}

// yamlFile is one inline file for table tests.
func yamlFile(name, text string) rlsconf.File {
	return rlsconf.File{Name: name, Data: []byte(text)}
}

func TestParseAcceptsFixtures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files   []string
		domains string
	}{
		{[]string{"basic_config.yaml"}, "test-domain"},
		{[]string{"metadata.yaml"}, "test-domain"},
		{[]string{"shadowmode_config.yaml"}, "test-domain"},
		{[]string{"share_threshold.yaml"}, "test-domain"},
		{[]string{"wildcard.yaml"}, "test-domain"},
		{[]string{"duplicate_domain.yaml"}, "test-domain"},
		{[]string{"merge_domain_key1.yaml", "merge_domain_key2.yaml"}, "test-domain"},
		// envoyproxy/ratelimit rejects this pair unless MERGE_DOMAIN_CONFIG
		// is on; merged, the empty second file adds nothing.
		{[]string{"basic_config.yaml", "duplicate_domain.yaml"}, "test-domain"},
	} {
		t.Run(strings.Join(tc.files, "+"), func(t *testing.T) {
			t.Parallel()
			c, err := rlsconf.Parse(fixture(t, tc.files...))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := strings.Join(c.Domains(), ","); got != tc.domains {
				t.Errorf("Domains() = %q, want %q", got, tc.domains)
			}
		})
	}
}

func TestParseRejectsFixtures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		files []string
		want  error
		file  string // the file the error names
	}{
		{[]string{"bad_limit_unit.yaml"}, rlsconf.ErrBadUnit, "bad_limit_unit.yaml"},
		{[]string{"bad_yaml.yaml"}, rlsconf.ErrYAML, "bad_yaml.yaml"},
		{[]string{"duplicate_key.yaml"}, rlsconf.ErrDuplicateKey, "duplicate_key.yaml"},
		{[]string{"empty_domain.yaml"}, rlsconf.ErrEmptyDomain, "empty_domain.yaml"},
		{[]string{"empty_key.yaml"}, rlsconf.ErrEmptyKey, "empty_key.yaml"},
		{[]string{"misspelled_key.yaml"}, rlsconf.ErrUnknownKey, "misspelled_key.yaml"},
		{[]string{"misspelled_key2.yaml"}, rlsconf.ErrUnknownKey, "misspelled_key2.yaml"},
		{[]string{"non_map_list.yaml"}, rlsconf.ErrNonMapList, "non_map_list.yaml"},
		{[]string{"non_string_key.yaml"}, rlsconf.ErrNonStringKey, "non_string_key.yaml"},
		{[]string{"replaces_empty.yaml"}, rlsconf.ErrEmptyReplaces, "replaces_empty.yaml"},
		{[]string{"replaces_self.yaml"}, rlsconf.ErrSelfReplaces, "replaces_self.yaml"},
		{[]string{"unlimited_with_unit.yaml"}, rlsconf.ErrUnlimitedWithUnit, "unlimited_with_unit.yaml"},
		// Merging is shallow: the second copy's top-level key is a duplicate.
		{[]string{"merge_domain_key1.yaml", "merge_domain_key1.yaml"}, rlsconf.ErrDuplicateKey, "merge_domain_key1.yaml"},
		// A good file before a bad one: the bad one is named.
		{[]string{"basic_config.yaml", "misspelled_key.yaml"}, rlsconf.ErrUnknownKey, "misspelled_key.yaml"},
		// Every file's keys are checked before any file's descriptors.
		{[]string{"duplicate_key.yaml", "misspelled_key.yaml"}, rlsconf.ErrUnknownKey, "misspelled_key.yaml"},
		{[]string{"duplicate_key.yaml", "bad_yaml.yaml"}, rlsconf.ErrYAML, "bad_yaml.yaml"},
		{[]string{"duplicate_key.yaml", "bad_limit_unit.yaml"}, rlsconf.ErrDuplicateKey, "duplicate_key.yaml"},
	} {
		t.Run(strings.Join(tc.files, "+"), func(t *testing.T) {
			t.Parallel()
			_, err := rlsconf.Parse(fixture(t, tc.files...))
			assertFileError(t, err, filepath.Join("testdata", "envoy", tc.file), tc.want)
		})
	}
}

// assertFileError checks that err is a *FileError naming file and wrapping
// want.
func assertFileError(t *testing.T, err error, file string, want error) {
	t.Helper()
	var fe *rlsconf.FileError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v, want a *FileError", err)
	}
	if fe.Path != file {
		t.Errorf("FileError.Path = %q, want %q", fe.Path, file)
	}
	if !errors.Is(err, want) {
		t.Errorf("error = %v, want %v", err, want)
	}
	if !strings.HasPrefix(err.Error(), file+": ") {
		t.Errorf("error text %q does not start with the file name", err.Error())
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       error
	}{
		{"float value", "domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n", rlsconf.ErrLeafType},
		{"infinite value", "domain: d\ndescriptors:\n  - key: k\n    value: .inf\n", rlsconf.ErrLeafType},
		{"exponent value", "domain: d\ndescriptors:\n  - key: k\n    value: 1e3\n", rlsconf.ErrLeafType},
		{"value above int64", "domain: d\ndescriptors:\n  - key: k\n    value: 18446744073709551615\n", rlsconf.ErrLeafType},
		{"float rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2.5}\n", rlsconf.ErrLeafType},
		{"sequence value", "domain: d\ndescriptors:\n  - key: k\n    value: [a]\n", rlsconf.ErrNonMapList},
		{"mapping value", "domain: d\ndescriptors:\n  - key: k\n    value: {key: a}\n", rlsconf.ErrYAML},
		{"unknown key in a mapping value", "domain: d\ndescriptors:\n  - key: k\n    value: {a: b}\n", rlsconf.ErrUnknownKey},
		{"negative rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", rlsconf.ErrYAML},
		{"rpu above uint32", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", rlsconf.ErrYAML},
		{"quoted rpu", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: \"5\"}\n", rlsconf.ErrYAML},
		{"quoted bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: \"true\"\n", rlsconf.ErrYAML},
		{"top-level list", "- domain: d\n", rlsconf.ErrYAML},
		{"top-level scalar", "domain\n", rlsconf.ErrYAML},
		{"empty file", "", rlsconf.ErrEmptyDomain},
		{"comment only", "# nothing\n", rlsconf.ErrEmptyDomain},
		{"empty domain", "domain: \"\"\n", rlsconf.ErrEmptyDomain},
		{"null key", "domain: d\ndescriptors:\n  - key: ~\n", rlsconf.ErrEmptyKey},
		{"boolean key n", "domain: d\nn: 1\n", rlsconf.ErrNonStringKey},
		{"integer key", "domain: d\ndescriptors:\n  - 1: k\n", rlsconf.ErrNonStringKey},
		{"unknown top-level key", "domain: d\nlimits: []\n", rlsconf.ErrUnknownKey},
		{"case of a key", "domain: d\ndescriptors:\n  - Key: k\n", rlsconf.ErrUnknownKey},
		{"unknown key in replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{nam: x}]}\n", rlsconf.ErrUnknownKey},
		{"bare replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [x]}\n", rlsconf.ErrNonMapList},
		{"duplicate key only", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n", rlsconf.ErrDuplicateKey},
		{"duplicate nested", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: k\n        value: v\n      - key: k\n        value: v\n", rlsconf.ErrDuplicateKey},
		// The composite key is key_value, so these two collide.
		{"duplicate composite", "domain: d\ndescriptors:\n  - key: a\n    value: b_c\n  - key: a_b\n    value: c\n", rlsconf.ErrDuplicateKey},
		{"missing unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", rlsconf.ErrBadUnit},
		{"unit unknown", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 1}\n", rlsconf.ErrBadUnit},
		{"plural unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: seconds, requests_per_unit: 1}\n", rlsconf.ErrBadUnit},
		{"empty rate_limit mapping", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {}\n", rlsconf.ErrBadUnit},
		{"unlimited with a unit in capitals", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: HOUR}\n", rlsconf.ErrUnlimitedWithUnit},
		{"replaces without a name", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n", rlsconf.ErrEmptyReplaces},
		{"unnamed rule with an empty replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: \"\"}]}\n", rlsconf.ErrEmptyReplaces},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", rlsconf.ErrShareThreshold},
		{"share_threshold on a key alone", "domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n", rlsconf.ErrShareThreshold},
		{"metadata not a mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: 5\n", rlsconf.ErrYAML},
		{"binary metadata", "domain: d\ndescriptors:\n  - key: k\n    metadata: {a: !!binary /w==}\n", rlsconf.ErrMetadata},
		{"binary metadata deep", "domain: d\ndescriptors:\n  - key: k\n    metadata: {a: {b: [x, !!binary /w==]}}\n", rlsconf.ErrMetadata},
		{"binary metadata key", "domain: d\ndescriptors:\n  - key: k\n    metadata: {a: {!!binary /w==: x}}\n", rlsconf.ErrMetadata},
		// The order of the checks: a bad unit is found before a bad replaces,
		// and a parent's problem before its child's.
		{"unit before replaces", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: x, replaces: [{}]}\n", rlsconf.ErrBadUnit},
		{"parent before child", "domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n    descriptors:\n      - value: v\n", rlsconf.ErrShareThreshold},
		{"child before later sibling", "domain: d\ndescriptors:\n  - key: k\n    descriptors:\n      - value: v\n  - key: k\n", rlsconf.ErrEmptyKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml", tc.yaml)})
			assertFileError(t, err, "f.yaml", tc.want)
		})
	}
}

func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, yaml string }{
		// Keys from the flat list are accepted anywhere, and ignored where
		// the typed form has no such field.
		{"unit at the top", "domain: d\nunit: second\n"},
		{"domain in a descriptor", "domain: d\ndescriptors:\n  - key: k\n    domain: other\n"},
		{"metadata keys are free", "domain: d\ndescriptors:\n  - key: k\n    metadata: {anything: {1: 2.5, ~: [x]}}\n"},
		// An unlimited rule may carry an invalid or empty unit.
		{"unlimited with a bogus unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: fortnight}\n"},
		{"unlimited with unit unknown", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: unknown}\n"},
		{"null rate_limit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n"},
		{"null descriptors", "domain: d\ndescriptors:\n"},
		{"no descriptors", "domain: d\n"},
		{"share_threshold on a wildcard key", "domain: d\ndescriptors:\n  - key: k*\n    share_threshold: true\n"},
		{"repeated yaml key keeps the last", "domain: d\ndescriptors:\n  - key: k\n    key: k2\n"},
		{"a name replacing another", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {name: a, unit: second, requests_per_unit: 1, replaces: [{name: b}]}\n"},
		{"empty replaces list", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: []}\n"},
		{"utf-8 metadata", "domain: d\ndescriptors:\n  - key: k\n    metadata: {é: \"\\xff\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml", tc.yaml)}); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
}

func TestParseMergesYAMLAnchors(t *testing.T) {
	t.Parallel()
	// A merge key is resolved by the YAML library before the key check.
	c, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml", `domain: d
descriptors:
  - key: a
    rate_limit: &lim {unit: minute, requests_per_unit: 7}
  - key: b
    rate_limit:
      <<: *lim
      requests_per_unit: 8
`)})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]uint32{"a": 7, "b": 8} {
		r, _ := c.Match("d", []rlsconf.Entry{{Key: key, Value: "x"}})
		if r == nil || r.RequestsPerUnit != want || r.Unit != rlsconf.Minute {
			t.Errorf("Match(%s) = %+v, want %d per minute", key, r, want)
		}
	}
}

func TestParseScalarsLikeYAMLv2(t *testing.T) {
	t.Parallel()
	// String fields keep the raw text of a plain scalar, whatever YAML 1.1
	// would resolve it to; ~ is null, the empty string.
	for _, tc := range []struct{ yaml, value string }{
		{"0123", "0123"},
		{"yes", "yes"},
		{"no", "no"},
		{"on", "on"},
		{"0x1F", "0x1F"},
		{"1_000", "1_000"},
		{"2001-12-14", "2001-12-14"},
		{"'1.5'", "1.5"},
		{"\"007\"", "007"},
		{"-0", "-0"},
		{"9223372036854775807", "9223372036854775807"},
	} {
		t.Run(tc.yaml, func(t *testing.T) {
			t.Parallel()
			c, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml",
				"domain: d\ndescriptors:\n  - key: k\n    value: "+tc.yaml+"\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := c.Match("d", []rlsconf.Entry{{Key: "k", Value: tc.value}})
			if r == nil || r.Key != "d.k_"+tc.value {
				t.Errorf("value %s: Match(k=%q) = %+v, want rule d.k_%s", tc.yaml, tc.value, r, tc.value)
			}
		})
	}
	t.Run("~", func(t *testing.T) {
		t.Parallel()
		c, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml",
			"domain: d\ndescriptors:\n  - key: k\n    value: ~\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := c.Match("d", []rlsconf.Entry{{Key: "k", Value: "anything"}})
		if r == nil || r.Key != "d.k" {
			t.Errorf("value ~ is the key alone: Match = %+v", r)
		}
	})
	t.Run("booleans and integers in typed fields", func(t *testing.T) {
		t.Parallel()
		c, err := rlsconf.Parse([]rlsconf.File{yamlFile("f.yaml",
			"domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    quota_mode: on\n    rate_limit: {unit: minute, requests_per_unit: 0x10}\n")})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := c.Match("d", []rlsconf.Entry{{Key: "k", Value: "v"}})
		if r == nil || !r.ShadowMode || !r.QuotaMode || r.RequestsPerUnit != 16 {
			t.Errorf("Match = %+v, want shadow, quota, 16 per minute", r)
		}
	})
}
