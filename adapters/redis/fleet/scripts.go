package fleet

import "embed"

// luaFiles are the fleet's scripts: the leases' renewal and release,
// the replicas' announcement.
//
//go:embed lua/*.lua
var luaFiles embed.FS

func mustRead(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return string(b)
}
