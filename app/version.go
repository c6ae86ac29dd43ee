package app

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version is the release this binary was built as. Left empty, it is read
// from the build info: the module version when built with `go install
// module@version`, else the VCS revision Go stamps into a build from a
// checkout. Release builds may set it with
// -ldflags "-X github.com/tollgate/tollgate/app.Version=v2.0.0".
var Version string

// BuildVersion is one line naming this build: its version, the VCS
// revision and time when known (with "-dirty" for uncommitted changes),
// and the Go release it was built with. `tollgate -version` prints it and
// the start-up log carries it.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return buildVersion(Version, info, ok)
}

// buildVersion is BuildVersion over given build info, for tests.
func buildVersion(version string, info *debug.BuildInfo, ok bool) string {
	if !ok {
		if version == "" {
			version = "unknown"
		}
		return fmt.Sprintf("tollgate %s (%s)", version, runtime.Version())
	}
	if version == "" {
		version = info.Main.Version
	}
	var rev, at string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if version == "" || version == "(devel)" {
		version = "devel"
	}
	out := "tollgate " + version
	if len(rev) > 12 {
		rev = rev[:12]
	}
	// A pseudo-version Go derived from the checkout already names the
	// revision (and "+dirty").
	if rev != "" && !strings.Contains(version, rev) {
		if dirty {
			rev += "-dirty"
		}
		out += " " + rev
		if at != "" {
			out += " " + at
		}
	}
	goVersion := info.GoVersion
	if goVersion == "" {
		goVersion = runtime.Version()
	}
	return out + " (" + goVersion + ")"
}
