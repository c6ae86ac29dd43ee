package app

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestVariablesTable holds the table of variables, Config and
// docs/configuration.md to one another: every TOLLGATE_* field of Config
// has one row, with what it accepts and a check; every row has its
// field; and the documentation has a row for each variable, with the
// table's default, and none for a variable tollgate does not read.
func TestVariablesTable(t *testing.T) {
	t.Parallel()
	rows := make(map[string]variable, len(variables))
	for _, v := range variables {
		if _, dup := rows[v.name]; dup {
			t.Errorf("%s%s: two rows", EnvPrefix, v.name)
		}
		rows[v.name] = v
		if v.accepts == "" || v.check == nil {
			t.Errorf("%s%s: its row lacks what it accepts or its check", EnvPrefix, v.name)
		}
		if v.unread != nil && (v.unread.holds == nil || v.unread.appliesWith == "") {
			t.Errorf("%s%s: its condition lacks a test or what it applies with", EnvPrefix, v.name)
		}
	}
	fields := make(map[string]bool)
	typ := reflect.TypeFor[Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if name == "" {
			t.Errorf("Config.%s: no env tag", f.Name)
			continue
		}
		fields[name] = true
		if _, ok := rows[name]; !ok {
			t.Errorf("Config.%s (%s%s): no row in the table of variables", f.Name, EnvPrefix, name)
		}
		if d, ok := f.Tag.Lookup("envDefault"); ok {
			t.Errorf("Config.%s: a default in its tag (%q): the table holds it", f.Name, d)
		}
	}
	for name := range rows {
		if !fields[name] {
			t.Errorf("%s%s: a row without a Config field", EnvPrefix, name)
		}
	}

	md, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	// | `TOLLGATE_LIMIT` | `100` | meaning |
	row := regexp.MustCompile("(?m)^\\| `" + EnvPrefix + "([A-Z0-9_]+)` \\| ([^|]+) \\| (.+) \\|$")
	documented := make(map[string]bool)
	for _, m := range row.FindAllStringSubmatch(string(md), -1) {
		name, def, meaning := m[1], strings.TrimSpace(m[2]), strings.TrimSpace(m[3])
		v, ok := rows[name]
		if !ok {
			t.Errorf("docs/configuration.md documents %s%s, which no setting reads", EnvPrefix, name)
			continue
		}
		if documented[name] {
			t.Errorf("docs/configuration.md documents %s%s twice", EnvPrefix, name)
		}
		documented[name] = true
		want := "empty"
		if v.def != "" {
			want = "`" + v.def + "`"
		}
		if def != want || meaning == "" {
			t.Errorf("docs/configuration.md: %s%s's default is %s, want %s (the table's), and a meaning", EnvPrefix, name, def, want)
		}
	}
	for _, v := range variables {
		if !documented[v.name] {
			t.Errorf("%s%s: no row in docs/configuration.md", EnvPrefix, v.name)
		}
	}
}

// TestVariablesDefaultsAreValid: the table's defaults parse and pass
// every check.
func TestVariablesDefaultsAreValid(t *testing.T) {
	t.Parallel()
	if _, err := LoadConfig(nil); err != nil {
		t.Errorf("LoadConfig(nil) = %v, want the defaults valid", err)
	}
}
