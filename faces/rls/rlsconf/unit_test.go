package rlsconf_test

import (
	"testing"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

func TestUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spelling []string
		unit     rlsconf.Unit
		seconds  int64
		name     string
		proto    int // envoy.service.ratelimit.v3 RateLimit.Unit
	}{
		{[]string{"second", "SECOND", "Second", "sEcOnD", "ſecond"}, rlsconf.Second, 1, "SECOND", 1},
		{[]string{"minute", "MINUTE", "Minute"}, rlsconf.Minute, 60, "MINUTE", 2},
		{[]string{"hour", "HOUR", "hOUR"}, rlsconf.Hour, 3600, "HOUR", 3},
		{[]string{"day", "DAY", "Day"}, rlsconf.Day, 86400, "DAY", 4},
		{[]string{"month", "MONTH"}, rlsconf.Month, 30 * 86400, "MONTH", 5},
		{[]string{"year", "YEAR"}, rlsconf.Year, 365 * 86400, "YEAR", 6},
		{[]string{"week", "WEEK", "Week"}, rlsconf.Week, 7 * 86400, "WEEK", 7},
	} {
		if got := tc.unit.Seconds(); got != tc.seconds {
			t.Errorf("%v.Seconds() = %d, want %d", tc.unit, got, tc.seconds)
		}
		if got := tc.unit.String(); got != tc.name {
			t.Errorf("String() = %q, want %q", got, tc.name)
		}
		if int(tc.unit) != tc.proto {
			t.Errorf("%v = %d, want the proto's %d", tc.unit, tc.unit, tc.proto)
		}
		for _, s := range tc.spelling {
			c, err := rlsconf.Parse([]rlsconf.File{yamlFile("u.yaml",
				"domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unit: "+s+", requests_per_unit: 0}\n")})
			if err != nil {
				t.Errorf("unit %q: %v", s, err)
				continue
			}
			r, _ := c.Match("u", entries("k=v"))
			if r == nil || r.Unit != tc.unit || r.RequestsPerUnit != 0 {
				t.Errorf("unit %q: rule %+v, want 0 per %v", s, r, tc.unit)
			}
		}
	}
	if got, want := rlsconf.UnitUnknown.Seconds(), int64(0); got != want {
		t.Errorf("UnitUnknown.Seconds() = %d", got)
	}
	if got := rlsconf.Unit(42).String(); got != "UNKNOWN" {
		t.Errorf("Unit(42).String() = %q", got)
	}
}

func TestUnlimitedRule(t *testing.T) {
	t.Parallel()
	c, err := rlsconf.Parse([]rlsconf.File{yamlFile("u.yaml",
		"domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: fortnight, requests_per_unit: 5}\n")})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Match("u", entries("k=v"))
	if r == nil || !r.Unlimited || r.Unit != rlsconf.UnitUnknown {
		t.Errorf("rule = %+v, want unlimited with UnitUnknown", r)
	}
}
