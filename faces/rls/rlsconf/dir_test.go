package rlsconf_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// writeFile writes text to dir/name, creating parents.
func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// limitFile is a one-rule file: key k at rpu per minute in domain.
func limitFile(domain, key string, rpu int) string {
	return "domain: " + domain + "\ndescriptors:\n  - key: " + key + "\n    rate_limit: {unit: minute, requests_per_unit: " + strconv.Itoa(rpu) + "}\n"
}

func TestLoadDirConfigMapLayout(t *testing.T) {
	t.Parallel()
	// A Kubernetes ConfigMap volume: the files are links through ..data to
	// a timestamped directory. Reading ..2026… as well would load the
	// domain twice and reject it as a duplicate.
	dir := t.TempDir()
	writeFile(t, dir, "..2026_12_01_00_00_00.000/rules.yaml", limitFile("cm", "k", 3))
	writeFile(t, dir, "..2026_12_01_00_00_00.000/more.yml", limitFile("cm", "j", 4))
	if err := os.Symlink("..2026_12_01_00_00_00.000", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rules.yaml", "more.yml"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := rlsconf.LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	runMatchesOn(t, c, []matchCase{
		{"cm", "k=1", "cm.k 3/MINUTE"},
		{"cm", "j=1", "cm.j 4/MINUTE"},
	})
}

// runMatchesOn checks cases against a loaded Config.
func runMatchesOn(t *testing.T, c *rlsconf.Config, cases []matchCase) {
	t.Helper()
	for i, tc := range cases {
		r, _ := c.Match(tc.domain, entries(tc.entries))
		if got := describe(r); got != tc.want {
			t.Errorf("case %d: Match(%s, %s) = %s, want %s", i, tc.domain, tc.entries, got, tc.want)
		}
	}
}

func TestLoadDirSelectsFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", limitFile("d", "a", 1))
	writeFile(t, dir, "b.yml", limitFile("d", "b", 2))
	writeFile(t, dir, ".hidden.yaml", "not: [valid")        // dotfile: skipped
	writeFile(t, dir, "README.md", "# not yaml: {")         // other names: skipped
	writeFile(t, dir, "c.yaml.bak", "garbage: [")           // skipped
	writeFile(t, dir, "sub/d.yaml", limitFile("d", "a", 9)) // not recursive
	writeFile(t, dir, "dir.yaml/e.yaml", "x")               // a directory named *.yaml
	writeFile(t, dir, "elsewhere/real.yaml", limitFile("e", "k", 5))
	if err := os.Symlink(filepath.Join(dir, "elsewhere", "real.yaml"), filepath.Join(dir, "linked.yaml")); err != nil {
		t.Fatal(err)
	}
	c, err := rlsconf.LoadDir(dir)
	if err != nil {
		t.Fatalf("LoadDir: %v", err)
	}
	if got := strings.Join(c.Domains(), ","); got != "d,e" {
		t.Errorf("Domains() = %s, want d,e", got)
	}
	// What envoyproxy/ratelimit would have read, named for a warning.
	if got, want := strings.Join(c.Skipped(), ","), "README.md,c.yaml.bak,dir.yaml,elsewhere,sub"; got != want {
		t.Errorf("Skipped() = %s, want %s", got, want)
	}
	runMatchesOn(t, c, []matchCase{
		{"d", "a=1", "d.a 1/MINUTE"},
		{"d", "b=1", "d.b 2/MINUTE"},
		{"e", "k=1", "e.k 5/MINUTE"}, // through the symbolic link
	})
}

func TestLoadDirNameOrder(t *testing.T) {
	t.Parallel()
	// Files load in name order: the duplicate is reported in the later one,
	// and the earlier file's pattern is tried first.
	dir := t.TempDir()
	writeFile(t, dir, "20-second.yaml", "domain: d\ndescriptors:\n  - key: k\n    value: ab*\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")
	writeFile(t, dir, "10-first.yaml", "domain: d\ndescriptors:\n  - key: k\n    value: a*\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	c, err := rlsconf.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	runMatchesOn(t, c, []matchCase{{"d", "k=abc", "d.k_a* 1/HOUR"}})

	writeFile(t, dir, "30-third.yaml", "domain: d\ndescriptors:\n  - key: k\n    value: a*\n")
	_, err = rlsconf.LoadDir(dir)
	assertFileError(t, err, filepath.Join(dir, "30-third.yaml"), rlsconf.ErrDuplicateKey)
}

func TestLoadDirEmpty(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.LoadDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Domains()) != 0 {
		t.Errorf("Domains() = %q", c.Domains())
	}
	if r, ok := c.Match("any", entries("k=v")); r != nil || ok {
		t.Errorf("Match on an empty config = %v, %v", r, ok)
	}
}

func TestLoadDirErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	if _, err := rlsconf.LoadDir(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadDir(missing) = %v, want ErrNotExist", err)
	}
	writeFile(t, dir, "ok.yaml", limitFile("d", "a", 1))
	if err := os.Symlink(filepath.Join(dir, "nowhere.yaml"), filepath.Join(dir, "dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err := rlsconf.LoadDir(dir)
	var fe *rlsconf.FileError
	if !errors.As(err, &fe) || fe.Path != filepath.Join(dir, "dangling.yaml") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadDir with a dangling link = %v", err)
	}
}
