package app

import (
	"runtime/debug"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name    string
		version string
		info    *debug.BuildInfo
		ok      bool
		want    string
	}{
		{"installed at a version", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v2.1.0"}}, true,
			"tollgate v2.1.0 (go1.26.8)"},
		{"built from a clean checkout", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "5e39baf0123456789abc", "vcs.time", "2026-12-01T13:00:00Z", "vcs.modified", "false")}, true,
			"tollgate devel 5e39baf01234 2026-12-01T13:00:00Z (go1.26.8)"},
		{"built from a dirty checkout", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: settings("vcs.revision", "5e39baf", "vcs.modified", "true")}, true,
			"tollgate devel 5e39baf-dirty (go1.26.8)"},
		{"a pseudo-version from the checkout", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261201133710-5e39baf8ec9b+dirty"},
			Settings: settings("vcs.revision", "5e39baf8ec9b0123", "vcs.time", "2026-12-01T13:37:10Z", "vcs.modified", "true")}, true,
			"tollgate v0.0.0-20261201133710-5e39baf8ec9b+dirty (go1.26.8)"},
		{"set by the linker", "v2.0.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, true,
			"tollgate v2.0.0 (go1.26.8)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := buildVersion(tt.version, tt.info, tt.ok); got != tt.want {
				t.Errorf("buildVersion = %q, want %q", got, tt.want)
			}
		})
	}
	if got := buildVersion("", nil, false); got == "" || got[:9] != "tollgate " {
		t.Errorf("without build info: %q", got)
	}
}
