package redis

import (
	"context"
	"embed"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script is one embedded Lua script, run with EVALSHA through the
// client's coalescer (concurrent decisions share round trips) and a
// transparent EVAL when Redis lacks it (after SCRIPT FLUSH, a restart or
// a failover).
type script struct {
	src  string
	sha  string // SHA-1 of src, in hex: EVALSHA's name for it
	name string // for errors: "sliding_log"
}

// prelude is what every limiter script starts with (lua/prelude.lua).
var prelude = mustRead("prelude.lua")

// newScript returns the script of lua/<name>.lua, after the prelude when
// withPrelude.
func newScript(name string, withPrelude bool) *script {
	src := mustRead(name + ".lua")
	if withPrelude {
		src = prelude + "\n" + src
	}
	return &script{src: src, sha: goredis.NewScript(src).Hash(), name: name}
}

func mustRead(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return string(b)
}

// run runs s on c with args (EVALSHA sha numkeys keys... args...: the
// caller builds them, see cmdArgs) and returns its integer replies, of
// which there must be want.
func (s *script) run(ctx context.Context, c *Client, args []any, want int) ([]int64, error) {
	cmd := goredis.NewCmd(ctx, args...)
	err := c.eval(ctx, cmd, s.src)
	var vals []int64
	if err == nil {
		vals, err = cmd.Int64Slice()
	}
	if err == nil && len(vals) != want {
		err = fmt.Errorf("script returned %d values, want %d", len(vals), want)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %s %v: %w", s.name, args[3], err)
	}
	return vals, nil
}

// cmdArgs returns the arguments of an EVALSHA of s on keys, with room for
// extra more arguments after the keys.
func (s *script) cmdArgs(keys, extra int) []any {
	a := make([]any, 3, 3+keys+extra)
	a[0], a[1], a[2] = "evalsha", s.sha, keys
	return a
}

// allScripts are the scripts the gateway runs, loaded on every server by
// Warm.
func allScripts() []*script {
	out := []*script{replicasScript, renewScript, releaseScript}
	for _, sp := range specs {
		out = append(out, sp.script)
	}
	return out
}
